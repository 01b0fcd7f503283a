"""Markdown link targets stay out of chunks, markup out of titles; when an unknown word forces abstention."""

import pytest

from assistant.core.embedding.embedder import BUILTIN_MINILM
from assistant.retrieval import RetrievedChunk
from assistant.retrieval.abstention import CALIBRATED
from assistant.retrieval.retriever import Retrieval
from ingest.formats.text import read_markdown, strip_link_targets


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


@pytest.mark.parametrize(
    "h1, title",
    [("# **Jamf**", "Jamf"), ("# Using `kubectl` with [Okta](https://x.example/okta)", "Using kubectl with Okta"),
     ("# C++ style guide", "C++ style guide"), ("# **", "**")],
)
def test_a_title_taken_from_the_first_heading_loses_its_markup(tmp_path, h1, title):
    page = tmp_path / "page.md"
    page.write_text(f"{h1}\n\nSome text about the tool.\n", encoding="utf-8")
    assert read_markdown(page).title == title


def _chunk(relevance: float, coverage: float) -> RetrievedChunk:
    return RetrievedChunk("c", "d", 0, "t", "f.md", "file:///f.md", "", "", None, "en", 0.03, relevance, coverage)


def test_an_unknown_subject_forces_abstention_and_a_stray_word_in_a_long_question_does_not():
    rule = CALIBRATED[BUILTIN_MINILM]
    chunks = [_chunk(0.68, 0.6)]
    # "How do I shard a MongoDB collection in our production cluster": 1 unknown term of 5.
    assert rule.abstains(Retrieval(chunks=chunks, unknown_terms=["mongodb"], query_terms=5))
    # "cafeteria hours": the unknown term is the subject (1 of 3).
    assert rule.abstains(Retrieval(chunks=[_chunk(0.28, 0.67)], unknown_terms=["cafeteria"], query_terms=3))
    # One odd word among twelve terms leaves the ordinary rule in charge.
    assert not rule.abstains(Retrieval(chunks=chunks, unknown_terms=["freelanc"], query_terms=12))
    # A chunk holding nearly every other term still answers.
    assert not rule.abstains(Retrieval(chunks=[_chunk(0.5, 0.8)], unknown_terms=["mongodb"], query_terms=5))
