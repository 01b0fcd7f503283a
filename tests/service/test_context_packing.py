"""The prompt's sources hold the answer when a page's chunks tie (issue 42): "How long should my passwords
be?" was declined because the handbook's passwords page has two chunks that the ranking cannot tell apart,
and only one chunk a document reached the prompt, often the one without the length. With the default
settings, the answerer's own retrieval and packing (`Answerer.prepare`, the llama.cpp window and focused
sources) put the length ("15 characters or longer") in the prompt."""

from __future__ import annotations

import pytest

from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

SECURITY = "departments/tech-ops/process/internal-security"
PAGES = [
    f"{SECURITY}/passwords.md",
    f"{SECURITY}/computer-standards.md",
    f"{SECURITY}/phishing-spoofing.md",
    f"{SECURITY}/traveling.md",
    "departments/security/secret-sharing-policy.md",
    "departments/security/cryptography-policy.md",
]


@pytest.fixture(scope="module")
def assistant(tmp_path_factory):
    root = tmp_path_factory.mktemp("context-packing")
    copy_subset(HANDBOOK, root / "docs", PAGES)
    res = open_resources(make_settings(root / "var"))
    Ingestor(res).sync(root / "docs")
    yield Assistant.build(res)
    res.close()


def test_both_chunks_of_the_passwords_page_are_retrieved_when_they_tie(assistant):
    chunks = assistant.retriever.retrieve("How long should my passwords be?", principal=ANONYMOUS, top_k=5)
    passwords = [c for c in chunks if c.source.endswith("passwords.md")]
    assert len(passwords) >= 2, [(c.source, c.chunk_index, c.score) for c in chunks]
    assert chunks[0].source.endswith("passwords.md")


def test_the_packed_context_holds_the_password_length(assistant):
    answerer = assistant.answerer
    sources, messages = answerer.prepare("How long should my passwords be?", principal=ANONYMOUS)
    assert messages is not None
    packed = [s for s in sources if s.source.endswith("passwords.md")]
    assert any("15 characters" in s.text for s in packed), [(s.source, s.text) for s in sources]
    assert "15 characters" in messages[-1]["content"]
