"""Markdown link targets stay out of chunks; one unknown word among many does not force abstention."""

import pytest

from assistant.retrieval import RetrievedChunk
from assistant.retrieval.abstention import CALIBRATED
from assistant.retrieval.retriever import Retrieval
from assistant.core.embedder import BUILTIN_MINILM
from ingest.formats.text import strip_link_targets


@pytest.mark.parametrize(
    "markdown, expected",
    [
        ("See [password requirements.](../passwords.md).", "See password requirements.."),
        ('![logo](img.png "Logo") text', "logo text"),
        ("[Enabling Firewall](https://support.example.com/a-b?c=d#e)", "Enabling Firewall"),
        ("plain [brackets] and (parens)", "plain [brackets] and (parens)"),
    ],
)
def test_link_targets_are_dropped(markdown, expected):
    assert strip_link_targets(markdown) == expected


def _chunk(relevance: float, coverage: float) -> RetrievedChunk:
    return RetrievedChunk("c", "d", 0, "t", "f.md", "file:///f.md", "", "", None, "en", 0.03, relevance, coverage)


def test_a_spelling_variant_does_not_force_abstention():
    rule = CALIBRATED[BUILTIN_MINILM]
    chunks = [_chunk(0.68, 0.6)]
    # "autofill" where the page says "auto-fill": 1 unknown term of 5.
    assert not rule.abstains(Retrieval(chunks=chunks, unknown_terms=["autofil"], query_terms=5))
    # "cafeteria hours": the unknown term is the subject (1 of 3).
    assert rule.abstains(Retrieval(chunks=[_chunk(0.28, 0.67)], unknown_terms=["cafeteria"], query_terms=3))
