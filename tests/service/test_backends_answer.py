"""The same answering tests for both generation backends: llama.cpp in process (embedded default) and
the OpenAI-compatible HTTP backend (vLLM in production), here against a real llama.cpp server; and the
answerer's stop sequences against a scripted HTTP server, which can ignore `stop` as some servers do."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import pytest

from assistant.answering.citations import cited_numbers
from assistant.answering.events import Replace
from assistant.answering.prompt import NO_ANSWER
from assistant.answering.stops import STOP_SEQUENCES
from assistant.composition import Assistant
from assistant.core.llm.base import LLM, ChatMessage, StreamResult
from assistant.core.llm.llama_cpp import LlamaCppLLM
from assistant.core.llm.model_files import smollm2_gguf_path
from assistant.core.llm.openai_compat import OpenAICompatLLM
from assistant.core.principals import ANONYMOUS
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer

FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/application_access_request.md",
]
QUESTION = "How long should my passwords be?"
# SmolLM2-135M answers this greedily with "1. Bananas\n2. Apples\n3. ..." past 24 tokens.
FRUITS = [{"role": "user", "content": "List ten fruits as a numbered list, one per line."}]
# Five stop sequences, the one that matters last: OpenAI's own API takes at most 4, vLLM and
# llama_cpp.server take more, and the backend must pass them all on.
STOPS = ["<never-1>", "<never-2>", "<never-3>", "<never-4>", "2."]


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


def test_answer_is_grounded_in_the_sources_given(assistant):
    # SmolLM2-135M mostly writes what its sources do not say, which grounding declines; what it keeps
    # must cite the sources it was given, each marker a listed citation (a citing model's answer is
    # tested in tests/api/test_chat_and_search.py, the shipped model's in test_builtin_chat_model.py).
    answer = asyncio.run(assistant.answerer.answer(QUESTION, principal=ANONYMOUS))
    assert any(c.source.endswith("passwords.md") for c in answer.chunks)
    assert answer.grounding is not None and 0.0 <= answer.grounding["supported_share"] <= 1.0
    if answer.abstained:
        assert answer.answer == NO_ANSWER["en"] and answer.citations == []
    else:
        assert answer.citations and {c.source for c in answer.citations} <= set(FILES), answer.to_dict()
        assert set(cited_numbers(answer.answer)) == {c.n for c in answer.citations}


def test_stream_is_tokens_then_citations_then_done(assistant):
    async def collect():
        return [e async for e in assistant.answerer.stream(QUESTION, principal=ANONYMOUS)]

    events = asyncio.run(collect())
    kinds = [e.name for e in events]
    # Tokens come a grounded sentence at a time; `replace` when the answer was declined afterwards.
    assert kinds[-2:] == ["citations", "done"] and set(kinds[:-2]) <= {"token", "replace"} and len(kinds) >= 3
    shown = ""  # what a client shows: the tokens, or a `replace` event's text instead of those before it
    for e in events[:-2]:
        shown = e.text if isinstance(e, Replace) else shown + e.text
    assert shown.strip() == events[-1].answer
    done = events[-1]
    assert done.finish_reason == "stop", done  # the model (or a stop sequence) ended it
    assert_usage(done.usage.to_dict(), max_completion=assistant.answerer.defaults.max_tokens)


def test_an_answer_cut_at_max_tokens_says_length_and_counts_its_tokens(assistant):
    """Both backends report why generation ended and its tokens; a cached answer keeps its finish
    reason and counts no tokens (none were generated)."""
    assistant.answerer.defaults = dataclasses.replace(assistant.answerer.defaults, max_tokens=3)
    cut = asyncio.run(assistant.answerer.answer(QUESTION, principal=ANONYMOUS))
    assert cut.answer and cut.finish_reason == "length", cut.to_dict()
    assert_usage(cut.usage.to_dict(), max_completion=3)
    again = asyncio.run(assistant.answerer.answer(QUESTION, principal=ANONYMOUS))
    assert (again.answer, again.finish_reason) == (cut.answer, "length")
    assert again.usage.to_dict() == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, (cut.answer, cut.grounding, cut.abstained)


def assert_usage(usage: dict, *, max_completion: int) -> None:
    """`usage` counts a real prompt, 1..max_completion generated tokens, and adds up."""
    assert usage["prompt_tokens"] > 0
    assert 1 <= usage["completion_tokens"] <= max_completion
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize("backend", ["llama_cpp", "openai"])
def test_a_stop_sequence_ends_the_generation_before_it(backend, request):
    """The backend itself stops at a stop sequence (llama.cpp in process, or the server through the
    request's `stop`): the text ends exactly before it, and the model says finish_reason "stop"."""

    def open_llm() -> LLM:
        if backend == "llama_cpp":
            return LlamaCppLLM(smollm2_gguf_path(), context_tokens=1024)
        return OpenAICompatLLM(request.getfixturevalue("llm_server").base_url, "assistant", read_timeout_s=120)

    async def generate(llm: LLM, stop: list[str]) -> tuple[str, StreamResult]:
        result = StreamResult()
        deltas = [d async for d in llm.stream(FRUITS, max_tokens=24, temperature=0.0, result=result, stop=stop)]
        return "".join(deltas), result

    async def scenario() -> tuple[tuple[str, StreamResult], tuple[str, StreamResult]]:
        llm = open_llm()
        try:
            return await generate(llm, []), await generate(llm, STOPS)
        finally:
            await llm.aclose()

    (whole, whole_result), (cut, cut_result) = asyncio.run(scenario())
    assert "2." in whole and whole_result.finish_reason == "length", whole  # the list goes on
    # Greedy, so the same text up to the stop sequence, which is not yielded; nothing after it either.
    assert cut.strip() and cut == whole[: whole.index("2.")], (cut, whole)
    assert cut_result.finish_reason == "stop"
    assert 1 <= cut_result.usage.completion_tokens < whole_result.usage.completion_tokens


# A small model's habit: it echoes the prompt's next source block after its answer.
ECHOING = "Create a password that is ideally 15 characters or longer [1].\n\n[2] departments/tech-ops/process/application_access_request.md"


@pytest.mark.parametrize("honour_stop", [True, False], ids=["server-stops", "server-ignores-stop"])
def test_the_answerer_sends_its_stop_sequences_and_still_cuts_where_they_are_ignored(folder, tmp_path, honour_stop):
    """The answerer passes `STOP_SEQUENCES` to the backend, which sends them as the request's `stop`.
    A server that honours them (vLLM) ends the answer itself and sends its own usage; where one ignores
    them, the answerer still cuts the answer at the stop sequence (its usage is then counted here)."""
    with ScriptedOpenAIServer(ECHOING, honour_stop=honour_stop, usage=(321, 9)) as server:
        settings = make_settings(
            tmp_path / "var", llm_backend="openai", llm_context_tokens=2048,
            openai_base_url=server.base_url, openai_model="assistant",
        )
        res = open_resources(settings)
        try:
            Ingestor(res).sync(folder)
            answer = asyncio.run(Assistant.build(res).answerer.answer(QUESTION, principal=ANONYMOUS))
        finally:
            asyncio.run(res.llm.aclose())
            res.close()

    assert len(server.requests) == 1 and server.requests[0]["stop"] == list(STOP_SEQUENCES)
    assert (answer.answer, answer.finish_reason) == ("Create a password that is ideally 15 characters or longer [1].", "stop")
    served = (answer.usage.prompt_tokens, answer.usage.completion_tokens)
    if honour_stop:
        assert served == (321, 9), "the server's own usage: it reached its last chunk"
    else:
        assert served != (321, 9) and answer.usage.completion_tokens >= 1, "closed at the stop: counted"


def test_a_request_closed_while_waiting_for_the_model_is_never_generated():
    """One generation at a time in process: a chat whose client left while it waited for the model
    must not spend the model's time (its prompt would otherwise be evaluated for nobody)."""
    import threading

    llm = LlamaCppLLM(smollm2_gguf_path(), context_tokens=1024)
    generated: list[int] = []
    real = llm._llama.create_chat_completion
    llm._llama.create_chat_completion = lambda *a, **k: (generated.append(1), real(*a, **k))[1]
    messages = [ChatMessage(role="user", content="Say hello.")]

    async def scenario() -> None:
        stream = llm.stream(messages, max_tokens=8, temperature=0.0)
        first = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.5)  # the worker is now blocked on the model, held below
        first.cancel()  # the client disconnects: the pending read is cancelled, the stream closed
        with contextlib.suppress(asyncio.CancelledError):
            await first
        await stream.aclose()

    llm._lock.acquire()  # another chat is generating
    try:
        asyncio.run(scenario())
    finally:
        llm._lock.release()
    for worker in [t for t in threading.enumerate() if t.name == "llama-cpp-generate"]:
        worker.join(timeout=60)
    assert generated == []

    async def normal() -> str:
        return "".join([d async for d in llm.stream(messages, max_tokens=8, temperature=0.0)])

    assert asyncio.run(normal()).strip() and generated == [1]  # the model still serves the next chat
