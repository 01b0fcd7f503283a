"""The same answering tests for both generation backends: llama.cpp in process (embedded default) and
the OpenAI-compatible HTTP backend (vLLM in production), here against a real llama.cpp server."""

from __future__ import annotations

import asyncio

import pytest

from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/application_access_request.md",
]
QUESTION = "How long should my passwords be?"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return copy_subset(HANDBOOK, tmp_path_factory.mktemp("backends") / "docs", FILES)


@pytest.fixture(params=["llama_cpp", "openai"])
def assistant(request, folder, tmp_path):
    overrides = {"llm_backend": request.param, "llm_context_tokens": 2048}
    if request.param == "openai":
        server = request.getfixturevalue("llm_server")
        overrides.update(openai_base_url=server.base_url, openai_model="assistant")
    res = open_resources(make_settings(tmp_path / "var", **overrides))
    Ingestor(res).sync(folder)
    yield Assistant.build(res)
    asyncio.run(res.llm.aclose()) if res._llm is not None else None
    res.close()


def test_answer_cites_the_answering_file(assistant):
    answer = asyncio.run(assistant.answerer.answer(QUESTION, principal=ANONYMOUS))
    assert not answer.abstained and answer.answer.strip()
    assert any(c.source.endswith("passwords.md") for c in answer.citations)


def test_stream_is_tokens_then_citations_then_done(assistant):
    async def collect():
        return [e async for e in assistant.answerer.stream(QUESTION, principal=ANONYMOUS)]

    events = asyncio.run(collect())
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["citations", "done"] and set(kinds[:-2]) == {"token"} and len(kinds) > 3
    assert "".join(e["text"] for e in events if e["type"] == "token").strip() == events[-1]["answer"]
    done = events[-1]
    assert done["finish_reason"] == "stop", done  # the model (or a stop sequence) ended it
    assert_usage(done["usage"], max_completion=assistant.answerer.max_tokens)


def test_an_answer_cut_at_max_tokens_says_length_and_counts_its_tokens(assistant):
    """Both backends report why generation ended and its tokens; a cached answer keeps its finish
    reason and counts no tokens (none were generated)."""
    assistant.answerer.max_tokens = 3
    cut = asyncio.run(assistant.answerer.answer(QUESTION, principal=ANONYMOUS))
    assert cut.answer and cut.finish_reason == "length"
    assert_usage(cut.usage.to_dict(), max_completion=3)
    again = asyncio.run(assistant.answerer.answer(QUESTION, principal=ANONYMOUS))
    assert (again.answer, again.finish_reason) == (cut.answer, "length")
    assert again.usage.to_dict() == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def assert_usage(usage: dict, *, max_completion: int) -> None:
    """`usage` counts a real prompt, 1..max_completion generated tokens, and adds up."""
    assert usage["prompt_tokens"] > 0
    assert 1 <= usage["completion_tokens"] <= max_completion
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
