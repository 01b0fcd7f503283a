"""Serving under load over real HTTP: admission (429), answer cache per ACL scope, follow-ups, SSE pacing,
the helpdesk API. The app runs under uvicorn against a real llama.cpp server standing in for vLLM."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator

import httpx

from assistant.auth.acl_manifest import AclManifest
from assistant.compliance.audit import recent_events
from ingest.pipeline import Ingestor
from tests.api.conftest import parse_sse, shown_answer
from tests.api.live_server import RESTRICTED, LiveServer, new_key, serving  # noqa: F401
from tests.standin_openai import ScriptedOpenAIServer, extractive_answer

QUESTION = "How long should my password be?"


def chat(url: str, headers: dict, question: str, history: list | None = None) -> tuple[str, list[tuple[str, dict]]]:
    """POST /api/chat; returns the raw body and its events."""
    r = httpx.post(f"{url}/api/chat", json={"question": question, "history": history or []}, headers=headers, timeout=300)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"].startswith("no-cache") and r.headers["x-accel-buffering"] == "no"
    return r.text, parse_sse(r.text)


def done_of(events: list[tuple[str, dict]]) -> dict:
    """The `done` event's data (fails on an `error` event)."""
    assert not [e for e in events if e[0] == "error"], events
    return next(data for name, data in events if name == "done")


def cited_sources(events: list[tuple[str, dict]]) -> list[str]:
    """Sources of the `citations` event."""
    return [c["source"] for name, data in events if name == "citations" for c in data["citations"]]


def test_cached_answers_are_never_shared_across_acl_scopes(serving):
    server, res, _docs, _manifest = serving
    _, secops = new_key(res, "secops")
    _, twin = new_key(res, "secops")  # same groups, another principal: its own scope
    plain_name, plain = new_key(res)
    question = QUESTION  # each principal is new: its scope's cache starts empty

    _, first = chat(server.url, secops, question)
    assert done_of(first)["cached"] is False
    assert done_of(first)["usage"]["prompt_tokens"] > 0 and done_of(first)["finish_reason"] in ("stop", "length")
    assert any(s.endswith("passwords.md") for s in cited_sources(first)), first
    _, again = chat(server.url, secops, question.upper() + "  ")  # normalised: case and spaces
    assert done_of(again)["cached"] is True
    assert cited_sources(again) == cited_sources(first)
    assert done_of(again)["finish_reason"] == done_of(first)["finish_reason"]
    assert done_of(again)["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}  # no model call

    for headers in (plain, twin):
        _, other = chat(server.url, headers, question)
        assert done_of(other)["cached"] is False
        if headers is plain:
            assert not any(s.endswith("passwords.md") for s in cited_sources(other))
    # The outsider gets an entry of its own for a question it can answer (the password question has
    # no answer in what it may read: an abstention, which is not cached), asked first by secops too.
    own = "What computer standards apply?"
    chat(server.url, secops, own)
    _, other = chat(server.url, plain, own)
    assert done_of(other)["cached"] is False and done_of(other)["abstained"] is False, other
    # The outsider's second ask hits its own entry, still without the restricted document.
    _, other_again = chat(server.url, plain, own)
    assert done_of(other_again)["cached"] is True
    assert done_of(other_again)["answer"] == done_of(other)["answer"]
    assert cited_sources(other_again) == cited_sources(other)
    assert not any(s.endswith("passwords.md") for s in cited_sources(other_again))
    # A cache hit is audited like an answer.
    assert any(e["details"].get("cached") for e in recent_events(res.db, principal=plain_name))


def test_a_cited_document_that_changes_invalidates_the_cached_answer(serving):
    server, res, docs, manifest = serving
    _, secops = new_key(res, "secops")
    question = QUESTION
    chat(server.url, secops, question)
    assert done_of(chat(server.url, secops, question)[1])["cached"] is True
    path = docs / RESTRICTED
    path.write_text(path.read_text() + "\n\nPasswords are rotated once a year.\n")
    Ingestor(res).sync(docs, acl=AclManifest.load(manifest))
    assert done_of(chat(server.url, secops, question)[1])["cached"] is False


def test_follow_ups_are_rewritten_for_retrieval_and_long_history_is_trimmed(serving):
    server, res, _docs, _manifest = serving
    name, headers = new_key(res, "secops")
    history = [
        {"role": "user", "content": "What are the password requirements?"},
        {"role": "assistant", "content": "Use a password manager and long passwords [1]."},
    ]
    chat(server.url, headers, "And how long?", history)
    query = next(e["query"] for e in recent_events(res.db, principal=name) if e["action"] == "chat")
    assert query == "What are the password requirements? And how long?"
    # 40 turns of ~2,000 characters each: far beyond the 2,048-token window; still answered.
    long_history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "lorem ipsum dolor " * 110}
        for i in range(40)
    ]
    _, events = chat(server.url, headers, "What are the password requirements?", long_history)
    assert done_of(events)["answer"]


@contextlib.contextmanager
def slow_model_app(res, **updates) -> Iterator[LiveServer]:
    """The app over `res`'s SQL and index with `updates` to its settings, whose model takes its time
    (a word every 0.2 s): waits and queues can be watched. Its own LLM client, bound to its event loop."""
    with ScriptedOpenAIServer(extractive_answer, usage=None, delay_s=0.2) as slow:
        settings = res.settings.model_copy(update={"openai_base_url": slow.base_url, **updates})
        app = LiveServer(settings, dataclasses.replace(res, settings=settings, _llm=None)).start()
        try:
            yield app
        finally:
            app.stop()


def test_heartbeats_while_waiting_and_tokens_coalesced(serving):
    _server, res, _docs, _manifest = serving
    _, headers = new_key(res)
    with slow_model_app(res, answer_cache_entries=0) as server:
        body, events = chat(server.url, headers, "What computer standards apply?")
    first_token = body.index("event: token")
    assert ": ping\n\n" in body[:first_token]
    assert " ".join(shown_answer(events).split()) == " ".join(done_of(events)["answer"].split())


@contextlib.contextmanager
def slot_held(url: str, headers: dict) -> Iterator[dict]:
    """A chat streaming in a thread (it holds a model slot) from its first token until the block ends,
    then its HTTP status in the yielded dict's "status"."""
    started = threading.Event()
    outcome: dict = {}

    def long_chat() -> None:
        with httpx.stream(
            "POST", f"{url}/api/chat", json={"question": "What are the password requirements?"},
            headers=headers, timeout=300,
        ) as r:
            for line in r.iter_lines():
                if line.startswith("event: token"):
                    started.set()
            outcome["status"] = r.status_code

    worker = threading.Thread(target=long_chat)
    worker.start()
    try:
        assert started.wait(120)
        yield outcome
    finally:
        worker.join(300)


def test_beyond_the_queue_requests_get_429_overloaded_with_retry_after(serving):
    _server, res, _docs, _manifest = serving
    # The first answer holds the one slot while the other requests arrive.
    with slow_model_app(res, llm_max_concurrency=1, llm_queue_max=0, answer_cache_entries=0) as tight:
        _, headers = new_key(res, "secops")  # passwords.md: a two-sentence answer, the first sent early
        with slot_held(tight.url, headers) as outcome:
            refused = httpx.post(f"{tight.url}/api/chat", json={"question": "What about laptops?"}, headers=headers)
            helpdesk = httpx.post(
                f"{tight.url}/api/helpdesk/answer", json={"ticket_id": "T-1", "subject": "laptop", "body": "which one?"},
                headers=headers,
            )
    assert outcome["status"] == 200
    for r in (refused, helpdesk):
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "overloaded"
        assert int(r.headers["retry-after"]) >= 1


def test_a_predicted_wait_beyond_the_queue_timeout_gets_429_before_the_stream(serving):
    _server, res, _docs, _manifest = serving
    # One slot, room in the queue, but a slot is held ~5 s on average (the limiter's first estimate) and
    # the queue waits at most 1 s: the second request is refused at once, not after the wait in the stream.
    with slow_model_app(res, llm_max_concurrency=1, llm_queue_max=4, llm_queue_timeout_s=1.0,
                        answer_cache_entries=0) as tight:
        _, headers = new_key(res, "secops")
        with slot_held(tight.url, headers) as outcome:
            refused = httpx.post(f"{tight.url}/api/chat", json={"question": "What about laptops?"}, headers=headers,
                                 timeout=60)
    assert outcome["status"] == 200
    assert refused.status_code == 429, refused.text[:500]
    assert refused.json()["error"]["code"] == "overloaded"
    assert "llm_queue_timeout_s" in refused.json()["error"]["message"]
    assert int(refused.headers["retry-after"]) >= 1


def test_helpdesk_answers_a_ticket_with_citations_or_abstains(serving):
    server, res, _docs, _manifest = serving
    name, headers = new_key(res)
    ticket = {"ticket_id": "HD-1", "subject": "Requesting access", "body": "How do I request access to an application?"}
    r = httpx.post(f"{server.url}/api/helpdesk/answer", json=ticket, headers=headers, timeout=300)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ticket_id"] == "HD-1" and body["abstained"] is False and body["answer"]
    assert body["finish_reason"] in ("stop", "length") and body["usage"]["completion_tokens"] > 0
    assert any(c["source"].endswith("application_access_request.md") for c in body["citations"])
    # The same ticket again is served from the cache, and audited as such.
    again = httpx.post(f"{server.url}/api/helpdesk/answer", json=ticket, headers=headers, timeout=300).json()
    assert again["answer"] == body["answer"] and again["citations"] == body["citations"]
    assert again["finish_reason"] == body["finish_reason"] and again["usage"]["total_tokens"] == 0
    audited = recent_events(res.db, principal=name)
    assert any(e["details"].get("cached") and e["details"].get("endpoint") == "helpdesk" for e in audited)
    r = httpx.post(
        f"{server.url}/api/helpdesk/answer",
        json={"ticket_id": "HD-2", "subject": "Cafeteria", "body": "What is on the canteen menu on Friday?"},
        headers=headers, timeout=300,
    )
    assert r.status_code == 200 and r.json()["abstained"] is True and r.json()["citations"] == []
    empty = httpx.post(f"{server.url}/api/helpdesk/answer", json={"ticket_id": "HD-3"}, headers=headers)
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "invalid_request"
