"""Conversations and feedback through the HTTP app, signed in as real accounts: each reader's own
conversations (404 for anyone else), questions and cited answers stored by the chat endpoint, follow-ups
asked with the stored history, ratings, and the admins' quality view.

The model is a real HTTP server speaking OpenAI's protocol with a scripted answer (copied from the
indexed page, so that grounding keeps it and cites it), which also records what the app sent it."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from assistant.answering.store import add_answer, conversation_messages, start_exchange
from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from assistant.core.db.identity import load_principal
from assistant.core.db.session import Database
from ingest.pipeline import Ingestor
from tests.api.conftest import parse_sse
from tests.conftest import CORPUS_MODEL, copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer

PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
FILES = [PASSWORDS, "departments/tech-ops/process/application_access_request.md"]
ANSWER = "Create a password that is ideally 15 characters or longer [1]."
PASSWORD = "conversation-test-password"


@pytest.fixture(scope="module")
def app_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("conversations")
    docs = copy_subset(HANDBOOK, root / "docs", FILES)
    with ScriptedOpenAIServer(ANSWER) as llm:
        settings = make_settings(
            root / "var", embedding_model=CORPUS_MODEL, llm_backend="openai", openai_base_url=llm.base_url,
            openai_model="assistant", llm_context_tokens=4096, answer_cache_entries=0, query_rewrite="rules",
        )
        res = open_resources(settings)
        Ingestor(res).sync(docs)
        create_user(res.db, "quality-admin", password=PASSWORD, is_admin=True)
        app = create_app(settings, resources=res)
        with TestClient(app) as lifespan:  # runs the lifespan once; the readers' clients share its state
            yield app, llm, res, lifespan
        asyncio.run(res.llm.aclose())
        res.close()


def signed_in(app_env, name: str | None = None) -> TestClient:
    """A browser-like client signed in as account `name` (created when missing), sending its CSRF token."""
    app, _, res, _ = app_env
    if name is None:
        name = f"reader-{uuid.uuid4().hex[:8]}"
        create_user(res.db, name, password=PASSWORD)
    client = TestClient(app)
    me = client.post("/api/auth/login", json={"username": name, "password": PASSWORD})
    assert me.status_code == 200, me.text
    client.headers["X-CSRF-Token"] = me.json()["csrf_token"]
    return client


def ask(client: TestClient, question: str, **fields) -> list[tuple[str, dict]]:
    with client.stream("POST", "/api/chat", json={"question": question, **fields}) as r:
        assert r.status_code == 200, r.read()
        return parse_sse("".join(r.iter_text()))


def test_conversations_are_listed_newest_first_renamed_searched_and_deleted(app_env):
    alice = signed_in(app_env)
    older = alice.post("/api/conversations", json={"title": "Laptop order"}).json()
    newer = alice.post("/api/conversations", json={}).json()
    assert newer["title"] == "" and alice.post("/api/conversations", json={"title": "x" * 513}).status_code == 422
    assert [c["id"] for c in alice.get("/api/conversations").json()] == [newer["id"], older["id"]]
    renamed = alice.patch(f"/api/conversations/{older['id']}", json={"title": "Laptop for the new hire"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Laptop for the new hire"
    assert [c["id"] for c in alice.get("/api/conversations", params={"q": "new HIRE"}).json()] == [older["id"]]
    assert alice.delete(f"/api/conversations/{newer['id']}").status_code == 204
    assert [c["id"] for c in alice.get("/api/conversations").json()] == [older["id"]]
    assert alice.get(f"/api/conversations/{newer['id']}").status_code == 404


def test_chat_stores_the_question_and_cited_answer_and_follow_ups_use_the_stored_history(app_env):
    _, llm, res, _ = app_env
    alice = signed_in(app_env)
    conv = alice.post("/api/conversations", json={}).json()
    events = ask(alice, "How long should my passwords be?", conversation_id=conv["id"])
    done = events[-1][1]
    assert events[-1][0] == "done" and not done["abstained"], events
    assert done["conversation_id"] == conv["id"] and isinstance(done["message_id"], int)
    citations = next(d for k, d in events if k == "citations")["citations"]
    assert [c["source"] for c in citations] == [PASSWORDS]

    messages = alice.get(f"/api/conversations/{conv['id']}/messages").json()
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "How long should my passwords be?"), ("assistant", done["answer"])]
    assert messages[1]["id"] == done["message_id"] and messages[1]["citations"] == citations
    assert messages[1]["rating"] is None and not messages[1]["abstained"]
    listed = alice.get("/api/conversations").json()
    assert listed[0]["id"] == conv["id"] and listed[0]["title"] == "How long should my passwords be?"
    assert [c["id"] for c in alice.get("/api/conversations", params={"q": "15 characters"}).json()] == [conv["id"]]

    # The follow-up is sent with the stored turns, whatever history the request carries.
    ask(alice, "And should they use special characters?", conversation_id=conv["id"],
        history=[{"role": "user", "content": "an invented earlier turn"}])
    sent = llm.requests[-1]["messages"]
    contents = [m["content"] for m in sent]
    assert {"role": "user", "content": "How long should my passwords be?"} in sent, sent
    assert {"role": "assistant", "content": done["answer"]} in sent, sent
    assert not any("an invented earlier turn" in c for c in contents)
    assert len(alice.get(f"/api/conversations/{conv['id']}/messages").json()) == 4

    # Regenerate: the last question and its answer are replaced, not appended.
    ask(alice, "And should they use special characters?", conversation_id=conv["id"], regenerate=True)
    roles = [m["role"] for m in alice.get(f"/api/conversations/{conv['id']}/messages").json()]
    assert roles == ["user", "assistant", "user", "assistant"]

    # SQL is the store: a new engine on the same database (as a restarted server opens) reads it back.
    fresh = Database(res.settings.resolved_database_url)
    try:
        owner = load_principal(fresh, alice.get("/api/auth/me").json()["name"])
        assert [m.content for m in conversation_messages(fresh, conv["id"], user_id=owner.user_id)][:2] == [
            "How long should my passwords be?", done["answer"]]
    finally:
        fresh.dispose()


def test_citations_of_documents_the_reader_may_no_longer_open_are_not_shown_again(app_env):
    _, _, res, _ = app_env
    alice = signed_in(app_env)
    conv = alice.post("/api/conversations", json={}).json()
    events = ask(alice, "How long should my passwords be?", conversation_id=conv["id"])
    citations = next(d for k, d in events if k == "citations")["citations"]
    # As a removed (or since restricted) document's citation would be stored: its snippet must not come back.
    gone = {**citations[0], "source": "departments/removed/secret-plans.md", "snippet": "the secret plan"}
    owner = load_principal(res.db, alice.get("/api/auth/me").json()["name"])
    start_exchange(res.db, conv["id"], user_id=owner.user_id, question="What are the plans?")
    add_answer(res.db, conv["id"], user_id=owner.user_id, answer="From a removed page [1].", citations=[gone], abstained=False)
    shown = alice.get(f"/api/conversations/{conv['id']}/messages").json()
    assert shown[-1]["content"] == "From a removed page [1]." and shown[-1]["citations"] == []
    assert shown[1]["citations"] == citations and citations


def test_another_reader_gets_not_found_for_everything_of_a_conversation(app_env):
    alice, bob = signed_in(app_env), signed_in(app_env)
    conv = alice.post("/api/conversations", json={"title": "alice's private thread"}).json()
    done = ask(alice, "How long should my passwords be?", conversation_id=conv["id"])[-1][1]
    path = f"/api/conversations/{conv['id']}"
    for response in (
        bob.get(path), bob.get(f"{path}/messages"), bob.patch(path, json={"title": "bob's now"}), bob.delete(path),
        bob.post("/api/chat", json={"question": "How long should my passwords be?", "conversation_id": conv["id"]}),
        bob.put(f"/api/messages/{done['message_id']}/feedback", json={"rating": -1}),
    ):
        assert response.status_code == 404, (response.request.method, response.request.url, response.text)
        assert response.json()["error"]["code"] == "not_found"
    assert conv["id"] not in [c["id"] for c in bob.get("/api/conversations").json()]
    assert bob.get("/api/conversations", params={"q": "private"}).json() == []
    kept = alice.get(f"{path}/messages").json()
    assert len(kept) == 2 and kept[1]["rating"] is None and alice.get(path).json()["title"] == "alice's private thread"


def test_feedback_is_stored_with_question_answer_chunks_and_principal_for_admins_only(app_env):
    _, _, res, _ = app_env
    admin, alice = signed_in(app_env, "quality-admin"), signed_in(app_env)
    before = admin.get("/api/admin/quality", params={"days": 2}).json()
    conv = alice.post("/api/conversations", json={}).json()
    answered = ask(alice, "How long should my passwords be?", conversation_id=conv["id"])
    not_found = ask(alice, "xyzzy plugh frobnicate quux", conversation_id=conv["id"])
    assert not_found[-1][1]["abstained"] and not answered[-1][1]["abstained"]
    message_id = answered[-1][1]["message_id"]
    chunk_ids = [c["chunk_id"] for c in next(d for k, d in answered if k == "citations")["citations"]]

    assert alice.put(f"/api/messages/{message_id}/feedback", json={"rating": 1}).status_code == 200
    r = alice.put(f"/api/messages/{message_id}/feedback", json={"rating": -1, "comment": "Too short."})
    assert r.status_code == 200 and r.json()["rating"] == -1
    assert alice.put(f"/api/messages/{message_id}/feedback", json={"rating": 0}).status_code == 400
    assert alice.put(f"/api/messages/{not_found[-1][1]['message_id']}/feedback", json={"rating": 1}).status_code == 200
    shown = alice.get(f"/api/conversations/{conv['id']}/messages").json()
    assert (shown[1]["rating"], shown[1]["comment"], shown[1]["corrected_answer"]) == (-1, "Too short.", None)
    # A corrected answer comes with a rating; rating again replaces the earlier one.
    fixed = "At least 15 characters, and a passphrase is best."
    r = alice.put(f"/api/messages/{message_id}/feedback", json={"rating": -1, "comment": "Too short.", "corrected_answer": fixed})
    assert r.status_code == 200 and r.json()["corrected_answer"] == fixed
    assert alice.get(f"/api/conversations/{conv['id']}/messages").json()[1]["corrected_answer"] == fixed

    assert alice.get("/api/admin/feedback").status_code == 403
    assert alice.get("/api/admin/quality").status_code == 403
    rows = [f for f in admin.get("/api/admin/feedback").json() if f["message_id"] == message_id]
    assert len(rows) == 1, rows
    row = rows[0]
    me = alice.get("/api/auth/me").json()["name"]
    assert (row["principal"], row["rating"], row["comment"], row["question"], row["chunk_ids"]) == (
        me, -1, "Too short.", "How long should my passwords be?", chunk_ids)
    assert row["corrected_answer"] == fixed
    assert row["answer"] == answered[-1][1]["answer"] and chunk_ids
    assert [f["rating"] for f in admin.get("/api/admin/feedback", params={"rating": 1}).json()].count(-1) == 0

    after = admin.get("/api/admin/quality", params={"days": 2}).json()
    assert len(after["days"]) == 2 and after["days"][-1]["questions"] == before["days"][-1]["questions"] + 2
    delta = {k: after[k] - before[k] for k in ("questions", "answered", "not_found", "thumbs_up", "thumbs_down")}
    assert delta == {"questions": 2, "answered": 1, "not_found": 1, "thumbs_up": 1, "thumbs_down": 1}
    assert 0 < after["positive_ratio"] < 1


def test_an_answer_rated_down_leaves_the_answer_cache(app_env):
    # Fresh-user trial: a wrong answer, rated down, was served again from the cache in 0.05 s.
    app, llm, res, _ = app_env
    settings = res.settings.model_copy(update={"answer_cache_entries": 64})
    cached_app = create_app(settings, resources=dataclasses.replace(res, settings=settings, _llm=None))
    with TestClient(cached_app):  # runs the lifespan
        def signed_in_here() -> TestClient:
            name = f"reader-{uuid.uuid4().hex[:8]}"
            create_user(res.db, name, password=PASSWORD)
            client = TestClient(cached_app)
            me = client.post("/api/auth/login", json={"username": name, "password": PASSWORD})
            client.headers["X-CSRF-Token"] = me.json()["csrf_token"]
            return client

        alice = signed_in_here()
        question = "How long should a password be?"

        def asked(client):
            conversation = client.post("/api/conversations", json={}).json()["id"]
            return next(d for n, d in ask(client, question, conversation_id=conversation) if n == "done")

        first = asked(alice)
        assert not first["cached"] and asked(alice)["cached"]  # asked again: served from the cache
        assert alice.put(f"/api/messages/{first['message_id']}/feedback", json={"rating": -1}).status_code == 200
        assert not asked(alice)["cached"]  # generated again after the rating down
        assert asked(alice)["cached"]  # and the new answer is cached in its turn

        # Regenerate (fresh-user trial, 6 December: it served the cached answer in 0.0 s) writes anew.
        conversation = alice.post("/api/conversations", json={}).json()["id"]
        assert next(d for n, d in ask(alice, question, conversation_id=conversation) if n == "done")["cached"]
        again = ask(alice, question, conversation_id=conversation, regenerate=True)
        assert not next(d for n, d in again if n == "done")["cached"]


def test_one_question_sent_twice_into_a_conversation_is_stored_once(app_env):
    _, llm, _, _ = app_env
    alice = signed_in(app_env)
    conv = alice.post("/api/conversations", json={}).json()
    question = {"question": "How long should a password be?", "conversation_id": conv["id"]}
    llm.delay_s = 0.2  # the first answer takes a few seconds: the copy arrives while it is being written
    try:
        with ThreadPoolExecutor(2) as pool:
            answering = pool.submit(ask_with_key, alice, question, "key-1")
            time.sleep(1.0)
            second = alice.post("/api/chat", json=question, headers={"Idempotency-Key": "key-2"})  # a double click
            first = answering.result()
    finally:
        llm.delay_s = 0.0
    assert second.status_code == 409 and second.json()["error"]["code"] == "question_in_progress", second.text
    done = dict(first)["done"]
    assert done["answer"] == ANSWER and done["message_id"]
    # A network retry with the same key, and the same text again at once without one: the stored answer.
    for headers in ({"Idempotency-Key": "key-1"}, {}):
        with alice.stream("POST", "/api/chat", json=question, headers=headers) as r:
            assert r.status_code == 200
            again = dict(parse_sse("".join(r.iter_text())))
        assert again["done"]["replayed"] is True and again["done"]["message_id"] == done["message_id"]
        assert again["replace"]["text"] == ANSWER and again["citations"]["citations"] == dict(first)["citations"]["citations"]
    messages = alice.get(f"/api/conversations/{conv['id']}/messages").json()
    assert [(m["role"], m["content"]) for m in messages] == [("user", question["question"]), ("assistant", ANSWER)]
    # The same key for another question is a client's mistake, said as such.
    other = alice.post("/api/chat", json={**question, "question": "Who approves access?"}, headers={"Idempotency-Key": "key-1"})
    assert other.status_code == 400 and "Idempotency-Key" in other.json()["error"]["message"]


def ask_with_key(client: TestClient, body: dict, key: str) -> list[tuple[str, dict]]:
    with client.stream("POST", "/api/chat", json=body, headers={"Idempotency-Key": key}) as r:
        assert r.status_code == 200, r.read()
        return parse_sse("".join(r.iter_text()))
