"""Contract of `/v1` with the official `openai` client against the real app under uvicorn (vLLM's
`RemoteOpenAIServer` pattern): models, completions with citations (plain and streamed), `finish_reason`
and `usage`, errors in OpenAI's shape, API-key auth, answers under the caller's ACL.

The app's model is llama_cpp.server (vLLM's stand-in; `serving` caps answers at 24 tokens), which
reports no usage when streaming: the counts checked here are the backend's own."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from assistant.answering.citations import cited_numbers
from assistant.api.routes.openai_compat import WITHDRAWN
from tests.api.conftest import parse_sse
from tests.api.live_server import LiveServer, new_key, serving  # noqa: F401
from tests.standin_openai import ScriptedOpenAIServer

MODEL = "assistant-rag"
QUESTION = "How long should my password be?"
ANSWER_LIMIT = 64  # llm_max_tokens of the `serving` fixture


def assert_usage(usage, *, max_completion: int) -> None:
    """`usage` counts a real prompt, 1..max_completion generated tokens, and adds up."""
    assert usage.prompt_tokens > 0
    assert 1 <= usage.completion_tokens <= max_completion
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def client_for(server, headers: dict) -> openai.OpenAI:
    """An `openai` client for the app with the key in `headers` (no retries: a 429 must surface)."""
    key = headers["Authorization"].removeprefix("Bearer ")
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=300)


def test_models_lists_and_retrieves_the_rag_model(serving):
    server, res, *_ = serving
    _, headers = new_key(res)
    client = client_for(server, headers)
    assert [m.id for m in client.models.list()] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("gpt-4o")
    assert info.value.code == "model_not_found"


def test_completion_answers_with_citations_under_the_callers_acl(serving):
    server, res, *_ = serving
    _, secops = new_key(res, "secops")
    _, plain = new_key(res)
    inside = client_for(server, secops).chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": QUESTION}]
    )
    assert inside.object == "chat.completion" and inside.choices[0].message.content
    assert inside.choices[0].finish_reason == "stop"
    assert_usage(inside.usage, max_completion=ANSWER_LIMIT)
    assert any(c["source"].endswith("passwords.md") for c in inside.model_extra["citations"])
    outside = client_for(server, plain).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}]
    )
    assert not any(c["source"].endswith("passwords.md") for c in outside.model_extra["citations"])


def test_a_completion_cut_at_max_tokens_says_length_and_counts_its_tokens(serving):
    server, res, *_ = serving
    _, headers = new_key(res, "secops")
    cut = client_for(server, headers).chat.completions.create(
        model=MODEL, max_tokens=3, messages=[{"role": "user", "content": QUESTION}]
    )
    assert cut.choices[0].message.content.strip()
    assert cut.choices[0].finish_reason == "length"
    assert_usage(cut.usage, max_completion=3)
    # The cut answer was not cached for this caller's later requests made with the server's settings.
    full = client_for(server, headers).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}]
    )
    assert full.choices[0].finish_reason == "stop" and full.usage.completion_tokens > 0


def test_streamed_completion_ends_with_a_citations_chunk(serving):
    server, res, *_ = serving
    _, secops = new_key(res, "secops")
    stream = client_for(server, secops).chat.completions.create(
        model=MODEL, stream=True, max_tokens=3,
        messages=[
            {"role": "user", "content": "What are the password requirements?"},
            {"role": "assistant", "content": "Use a password manager [1]."},
            {"role": "user", "content": [{"type": "text", "text": "And how long should it be?"}]},
        ],
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    last = chunks[-1]
    assert last.choices[0].finish_reason == "length"  # cut at max_tokens=3
    # Three tokens state no fact yet: the citations are those of the markers in the text (none, or
    # passwords.md), never every source listed as if cited.
    cited = {c["n"] for c in last.model_extra["citations"]}
    assert cited == set(cited_numbers(text)) and all(c["source"].endswith("passwords.md") for c in last.model_extra["citations"])
    assert all(c.object == "chat.completion.chunk" and c.model == MODEL for c in chunks)
    assert all(c.choices and c.usage is None for c in chunks), "usage only when stream_options asks for it"


def test_streamed_completion_sends_a_usage_chunk_when_asked(serving):
    server, res, *_ = serving
    _, secops = new_key(res, "secops")
    chunks = list(
        client_for(server, secops).chat.completions.create(
            model=MODEL, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": QUESTION}],
        )
    )
    *answer, finish, usage = chunks
    assert "".join(c.choices[0].delta.content or "" for c in answer).strip()
    assert all(c.choices[0].finish_reason is None for c in answer)
    assert finish.choices[0].finish_reason == "stop" and finish.usage is None
    assert usage.choices == [] and usage.object == "chat.completion.chunk"
    assert_usage(usage.usage, max_completion=ANSWER_LIMIT)


@pytest.mark.parametrize(
    "kwargs, error, code",
    [
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, openai.NotFoundError, "model_not_found"),
        ({"model": MODEL, "messages": [{"role": "assistant", "content": "hi"}]}, openai.BadRequestError, "invalid_request"),
        ({"model": MODEL, "messages": []}, openai.BadRequestError, "invalid_request"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "x" * 4001}]}, openai.BadRequestError, "invalid_request"),
        ({"model": MODEL, "n": 2, "messages": [{"role": "user", "content": "hi"}]}, openai.BadRequestError, "unsupported_parameter"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
             "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]},
            openai.BadRequestError, "unsupported_parameter",
        ),
        ({"model": MODEL, "stop": ["a", "b", "c", "d", "e"], "messages": [{"role": "user", "content": "hi"}]},
         openai.BadRequestError, "invalid_request"),
        ({"model": MODEL, "stop": [""], "messages": [{"role": "user", "content": "hi"}]}, openai.BadRequestError, "invalid_request"),
    ],
)
def test_errors_come_in_the_openai_shape(serving, kwargs, error, code):
    server, res, *_ = serving
    _, headers = new_key(res)
    with pytest.raises(error) as caught:
        client_for(server, headers).chat.completions.create(**kwargs)
    body = caught.value.body
    assert body["code"] == code and body["type"] and body["message"]


def test_a_callers_stop_sequence_ends_the_answer(serving):
    # Generation is not repeatable across requests here (llama.cpp reuses a cached prompt prefix,
    # which moves the logits slightly), so the stop is one every answer of several words contains:
    # a space. The answer must end before the first one, with finish_reason "stop".
    server, res, *_ = serving
    _, headers = new_key(res, "secops")
    client = client_for(server, headers)
    ask = dict(model=MODEL, messages=[{"role": "user", "content": "What are the password requirements?"}])
    full = client.chat.completions.create(**ask).choices[0].message.content
    assert len(full.strip().split()) > 1, full
    cut = client.chat.completions.create(**ask, stop=[" ", "\n"])
    assert cut.choices[0].finish_reason == "stop", cut
    assert " " not in cut.choices[0].message.content.strip() and len(cut.choices[0].message.content) < len(full)
    # tool_choice "none" offers tools the model must not call: nothing to refuse.
    offered = client.chat.completions.create(
        **ask, tool_choice="none", tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    )
    assert offered.choices[0].message.content.strip()


def test_stream_must_be_a_boolean(serving):
    server, res, *_ = serving
    _, headers = new_key(res)
    r = httpx.post(
        f"{server.url}/v1/chat/completions", headers=headers,
        json={"model": MODEL, "stream": "yes", "messages": [{"role": "user", "content": QUESTION}]},
    )
    assert r.status_code in (400, 422) and "stream" in r.json()["error"]["message"]


def test_v1_needs_an_api_key(serving):
    server, *_ = serving
    with pytest.raises(openai.AuthenticationError) as caught:
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="ak_nope_nope", max_retries=0).models.list()
    assert caught.value.body["code"] == "unauthenticated"
    r = httpx.post(f"{server.url}/v1/chat/completions", json={"model": MODEL, "messages": []})
    assert r.status_code == 401
    assert set(r.json()["error"]) == {"message", "type", "code"}
    assert r.json()["error"]["type"] == "authentication_error"


# The first sentence is supported (passwords.md, read by `secops`); the rest is invented.
HALF_INVENTED = (
    "Create a new password for every system [1]. "
    "The finance team reviews every password each quarter and rejects passwords shorter than twenty letters. "
    "Employees who forget their passwords three times must attend a security training in the Berlin office."
)


@contextlib.contextmanager
def scripted_app(res, script: str) -> Iterator[LiveServer]:
    """The app over `res`'s index whose model writes `script` (answer cache off)."""
    with ScriptedOpenAIServer(script, usage=None) as model:
        settings = res.settings.model_copy(update={"openai_base_url": model.base_url, "answer_cache_entries": 0})
        app = LiveServer(settings, dataclasses.replace(res, settings=settings, _llm=None)).start()
        try:
            yield app
        finally:
            app.stop()


def test_a_streamed_answer_is_only_checked_text_so_a_standard_client_never_shows_a_withdrawn_sentence(serving):
    # The official client appends every delta and ignores non-standard fields (fresh-user trial: "可以。"
    # stayed): /v1 streams the answer only once it is checked, and the invented sentences never go out.
    _server, res, *_ = serving
    _, headers = new_key(res, "secops")
    with scripted_app(res, HALF_INVENTED) as app:
        chunks = list(client_for(app, headers).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "How do I choose passwords?"}], stream=True,
        ))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content and "finance team" not in content and "Berlin" not in content, content
    assert WITHDRAWN["en"] not in content, content
    last = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert "replace" not in (last.model_extra or {}), last


def test_sentences_that_grounding_removed_never_reach_the_chat_client(serving):
    # Fresh-user trial: `done.grounding.unsupported` carried the model's invented sentences to /api/chat.
    _server, res, *_ = serving
    _, headers = new_key(res, "secops")
    with scripted_app(res, HALF_INVENTED) as app:
        r = httpx.post(f"{app.url}/api/chat", json={"question": "How do I choose passwords?"}, headers=headers, timeout=300)
    # The draft is shown as it is written (issue 42: "tokens are shown as they come"), then each invented
    # sentence is withdrawn by name; the checked answer and its grounding figures never hold them.
    events = [(block.split("\n")[0][7:], json.loads(block.split("\n")[1][6:])) for block in r.text.strip().split("\n\n")
              if block.startswith("event: ")]
    done = next(data for name, data in events if name == "done")
    assert r.status_code == 200 and "finance team" not in done["answer"] and "Berlin" not in done["answer"], done
    assert "unsupported" not in done["grounding"] and done["grounding"]["removed"] >= 1, done
    revised = [data for name, data in events if name in ("revise", "replace")]
    assert revised and not any("finance team" in d["text"] or "Berlin" in d["text"] for d in revised), revised
    done = next(data for name, data in parse_sse(r.text) if name == "done")
    assert done["grounding"]["removed"] == 2 and "unsupported" not in done["grounding"], done
