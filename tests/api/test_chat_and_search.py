"""The HTTP app: health, search, the streaming chat endpoint, and errors as JSON with stable codes."""

from __future__ import annotations

from tests.api.conftest import parse_sse, shown_answer


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_search_returns_chunks_best_first(client):
    r = client.post("/api/search", json={"query": "How long must passwords be?", "top_k": 3})
    assert r.status_code == 200
    hits = r.json()
    assert hits[0]["source"].endswith("passwords.md")
    assert {"source", "route", "chunk_id", "score", "text"} <= set(hits[0])
    assert "uri" not in hits[0] and all(h["route"] == f"/api/documents/{h['doc_id']}/content" for h in hits)
    assert hits == sorted(hits, key=lambda h: -h["score"])


def test_chat_streams_tokens_then_citations_then_done(client):
    with client.stream("POST", "/api/chat", json={"question": "How long should my passwords be?"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-accel-buffering"] == "no"
        body = "".join(r.iter_text())
    events = parse_sse(body)
    kinds = [k for k, _ in events]
    # The contract of docs/architecture.md ("Chat events"): the sources and a status before any text,
    # then the draft (tokens, completed sentences, their checked revisions or one replacement), last the
    # citations and `done`.
    assert kinds[0] == "sources" and kinds.index("status") < kinds.index("token"), kinds
    assert kinds.count("token") >= 1, kinds
    assert kinds[-2:] == ["citations", "done"]
    assert set(kinds[:-2]) <= {"sources", "status", "token", "sentence", "revise", "replace"}, kinds
    shown = shown_answer(events[:-2])
    assert " ".join(shown.split()) == " ".join(events[-1][1]["answer"].split())
    citations = events[-2][1]["citations"]
    assert any(c["source"].endswith("passwords.md") for c in citations)


def test_errors_are_json_with_a_stable_code(client):
    r = client.post("/api/search", json={"top_k": 5})  # no query: a validation error (an empty one is a 400)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"
    r = client.get("/api/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = client.post("/api/search", content=b'{"query": oops}', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert r.json()["error"]["message"].startswith("the request body is not valid JSON"), r.text
    r = client.post("/api/search", content=b'{"query": "pass\xffword"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    assert "UTF-8" in r.json()["error"]["message"], r.text
    r = client.post("/api/search", content=b'{"query": "password"}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
    assert "Content-Type: application/json" in r.json()["error"]["message"], r.text


def test_a_body_over_the_limit_is_refused_with_413(client):
    limit = client.app.state.settings.server.max_request_bytes
    big = {"query": "password", "padding": "x" * limit}
    r = client.post("/api/search", json=big)  # declared Content-Length over the cap
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
    assert r.headers["x-content-type-options"] == "nosniff"

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"query": "password", "padding": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    r = client.post("/api/search", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
    r = client.post("/v1/chat/completions", json={"model": "assistant-rag", "messages": [{"role": "user", "content": "x" * limit}]})
    assert r.status_code == 413 and r.json()["error"]["type"] == "invalid_request_error", r.text
    assert client.post("/api/search", json={"query": "password"}).status_code == 200  # still serving


def test_a_blank_or_empty_question_or_query_is_refused_before_any_work(client):
    for path, body in (("/api/chat", {"question": "   "}), ("/api/search", {"query": " \t "}),
                       ("/api/chat", {"question": ""}), ("/api/search", {"query": ""}),
                       ("/v1/chat/completions", {"model": "assistant-rag", "stream": True, "messages": [{"role": "user", "content": " \n "}]})):
        r = client.post(path, json=body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", (path, r.text)
        assert "empty" in r.json()["error"]["message"]


def test_a_long_earlier_turn_does_not_make_a_short_follow_up_too_long(client):
    history = [{"role": "user", "content": "password policy " * 250}, {"role": "assistant", "content": "See [1]."}]
    r = client.post("/api/chat", json={"question": "and how long must they be?", "history": history})
    assert r.status_code == 200
    assert "event: error" not in r.text and "event: done" in r.text


def test_a_row_id_beyond_64_bits_is_a_422_naming_it_not_a_500(client):
    # Fresh-user trial (6 December): the database driver overflowed on such IDs (a plain-text 500).
    huge = "9" * 23
    r = client.put(f"/api/messages/{huge}/feedback", json={"rating": 1})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
    assert "message_id" in r.text, r.text
    r = client.put("/api/messages/1/feedback", json={"rating": 1})
    assert r.status_code != 422, r.text  # an ID in range passes validation
