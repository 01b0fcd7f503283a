"""Uploads, the admin API, the extended quality view and the helpdesk hand-over over HTTP, signed in as
real accounts, on the browser tests' server (tests/e2e/conftest.py: one server for the package): an
upload is searchable by its audience only once its job is done and its chunks go with it; a failed file says why; admins manage accounts, keys
and sources through /api/admin (and the OpenAPI schema lists it all); unserved questions come back
grouped as knowledge gaps."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from assistant.answering.store import add_answer, create_conversation, start_exchange
from assistant.auth.accounts import create_user
from assistant.core.db.identity import load_principal
from assistant.helpdesk.store import list_tickets
from tests.conftest import CORPUS_MODEL
from tests.e2e.conftest import MAX_FILE_SIZE_BYTES, PASSWORD

# A made-up policy no indexed page states: found only through the upload.
SECRET_PAGE = "# Aquarium policy\n\nThe office aquarium is fed by the zebrafish rota every Tuesday at noon.\n"
SECRET_QUERY = "who feeds the office aquarium zebrafish"


@pytest.fixture
def env(served):
    """`(url, resources)` of the package's server."""
    url, res, _ = served
    return url, res


def signed_in(env, name: str | None = None, *groups: str, password: str = PASSWORD, admin: bool = False) -> httpx.Client:
    url, res = env
    if name is None:
        name = f"reader-{uuid.uuid4().hex[:8]}"
        create_user(res.db, name, password=password, groups=list(groups), is_admin=admin)
    client = httpx.Client(base_url=url, timeout=60.0)
    me = client.post("/api/auth/login", json={"username": name, "password": password})
    assert me.status_code == 200, me.text
    client.headers["X-CSRF-Token"] = me.json()["csrf_token"]
    client.name = name
    return client


def finished(client: httpx.Client, upload_id: str, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        upload = client.get(f"/api/uploads/{upload_id}").json()
        if upload["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return upload
        time.sleep(0.1)


def found(client: httpx.Client, filename: str) -> bool:
    hits = client.post("/api/search", json={"query": SECRET_QUERY, "top_k": 5})
    assert hits.status_code == 200, hits.text
    return any(filename in str(h.get("source", "")) for h in hits.json())


def test_an_upload_is_searchable_by_its_audience_only_and_leaves_with_its_chunks(env):
    _, res = env
    owner, teammate, outsider = signed_in(env, None, "aquarium"), signed_in(env, None, "aquarium"), signed_in(env)
    options = owner.get("/api/uploads/audiences").json()
    assert [o["value"] for o in options] == [f"user:{owner.name}", "group:aquarium"]  # no "everyone": not an admin
    refused = owner.post("/api/uploads", data={"audience": "everyone"}, files=[("files", ("a.md", b"x"))])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "audience_forbidden"
    foreign = owner.post("/api/uploads", data={"audience": "group:finance"}, files=[("files", ("a.md", b"x"))])
    assert foreign.status_code == 400 and foreign.json()["error"]["code"] == "audience_invalid"

    mine = f"aquarium-{uuid.uuid4().hex[:6]}.md"
    ours = f"aquarium-team-{uuid.uuid4().hex[:6]}.md"
    sent = owner.post("/api/uploads", data={"audience": f"user:{owner.name}"},
                      files=[("files", (f"../../{mine}", SECRET_PAGE.encode()))])
    assert sent.status_code == 202, sent.text
    [upload] = sent.json()
    assert upload["filename"] == mine and upload["status"] in ("queued", "running", "done")
    shared = owner.post("/api/uploads", data={"audience": "group:aquarium"}, files=[("files", (ours, SECRET_PAGE.encode()))]).json()[0]
    done = finished(owner, upload["id"])
    assert (done["status"], done["progress"], done["chunks"] > 0) == ("done", 1.0, True), done
    assert finished(owner, shared["id"])["status"] == "done"
    assert found(owner, mine) and not found(teammate, mine) and not found(outsider, mine)
    assert found(teammate, ours) and not found(outsider, ours)
    assert outsider.get(f"/api/uploads/{upload['id']}").status_code == 404
    assert outsider.delete(f"/api/uploads/{upload['id']}").status_code == 404
    assert [u["id"] for u in owner.get("/api/uploads").json()] == [shared["id"], upload["id"]]
    doc = owner.get(f"/api/documents/{done['document_id']}")
    assert doc.status_code == 200 and outsider.get(f"/api/documents/{done['document_id']}").status_code == 404

    assert owner.delete(f"/api/uploads/{upload['id']}").status_code == 204
    assert not found(owner, mine) and found(owner, ours)
    assert list(res.store.scroll_ids(doc_id=done["document_id"])) == []
    assert owner.get(f"/api/uploads/{upload['id']}").status_code == 404


def test_a_file_that_fails_says_why(env):
    owner = signed_in(env)
    audience = f"user:{owner.name}"
    sent = owner.post("/api/uploads", data={"audience": audience}, files=[
        ("files", ("big.md", b"# Big\n\n" + b"word " * (MAX_FILE_SIZE_BYTES // 4))),  # over the server's limit
        ("files", ("program.exe", b"MZ\x90\x00" + bytes(range(256)) * 4)),
    ])
    assert sent.status_code == 202, sent.text
    big, program = (finished(owner, u["id"]) for u in sent.json())
    assert big["status"] == "too_large" and "MAX_FILE_SIZE_BYTES" in big["reason"], big
    assert program["status"] == "unsupported" and program["reason"], program
    assert owner.post("/api/uploads", data={"audience": audience}).status_code == 422  # no files at all


def test_admins_manage_accounts_keys_and_sources_through_the_api(env):
    admin, reader = signed_in(env, admin=True), signed_in(env)
    assert reader.get("/api/admin/users").status_code == 403
    assert reader.post("/api/admin/users", json={"name": "x", "password": "y" * 16}).status_code == 403
    suffix = uuid.uuid4().hex[:6]
    name, legal, finance = f"new-{suffix}", f"legal-{suffix}", f"finance-{suffix}"
    created = admin.post("/api/admin/users", json={"name": name, "password": "first-password-123", "groups": [legal]})
    assert created.status_code == 201 and created.json()["groups"] == [legal], created.text
    assert admin.post("/api/admin/users", json={"name": name, "password": "first-password-123"}).status_code == 409
    assert admin.put(f"/api/admin/users/{name}/groups/{finance}").json()["groups"] == [finance, legal]
    assert admin.delete(f"/api/admin/users/{name}/groups/{legal}").json()["groups"] == [finance]
    assert {"name": finance, "members": [name]} in admin.get("/api/admin/groups").json()
    assert admin.put(f"/api/admin/users/{name}/password", json={"password": "second-password-456"}).status_code == 204
    user = signed_in(env, name, password="second-password-456")
    assert user.get("/api/auth/me").status_code == 200
    assert admin.patch(f"/api/admin/users/{name}", json={"disabled": True}).json()["disabled"] is True
    assert user.get("/api/auth/me").status_code == 401  # disabling ended the session

    key_name = f"bot-{uuid.uuid4().hex[:6]}"
    key = admin.post("/api/admin/keys", json={"name": key_name, "groups": ["it"]})
    assert key.status_code == 201 and key.json()["key"].startswith("ak_"), key.text
    bearer = {"Authorization": f"Bearer {key.json()['key']}"}
    assert httpx.get(env[0] + "/api/uploads/audiences", headers=bearer).status_code == 200
    listed = [k for k in admin.get("/api/admin/keys").json() if k["name"] == key_name]
    assert len(listed) == 1 and "key" not in listed[0] and listed[0]["revoked_at"] is None
    assert admin.delete(f"/api/admin/keys/{key_name}").status_code == 204
    assert httpx.get(env[0] + "/api/uploads/audiences", headers=bearer).status_code == 401

    sources = admin.get("/api/admin/sources").json()
    folder = next(s for s in sources if s["kind"] == "folder")
    assert folder["documents"] >= 1 and folder["last_synced_at"] and folder["errors"] == []
    job = admin.post(f"/api/admin/sources/{folder['id']}/sync")
    assert job.status_code == 202 and job.json()["status"] == "queued"
    assert admin.post("/api/admin/sources/999999/sync").status_code == 404
    model = admin.get("/api/admin/model").json()
    assert model == {"llm_backend": "openai", "llm_model": "assistant", "embedding_model": CORPUS_MODEL, "adapter": "none"}

    paths = admin.get("/api/openapi.json").json()["paths"]
    for path in ("/api/uploads", "/api/uploads/{upload_id}", "/api/admin/users", "/api/admin/users/{name}/password",
                 "/api/admin/users/{name}/groups/{group}", "/api/admin/keys", "/api/admin/keys/{name}",
                 "/api/admin/sources", "/api/admin/sources/{source_id}/sync", "/api/admin/model", "/api/admin/quality",
                 "/api/handoff", "/api/conversations/{conversation_id}/handoff"):
        assert path in paths, path


def test_quality_lists_slowest_answers_and_groups_unserved_questions_as_gaps(env):
    _, res = env
    admin, reader = signed_in(env, admin=True), signed_in(env)
    principal = load_principal(res.db, reader.name)
    unserved = ["How do I book the rooftop terrace?", "How can I book the rooftop terrace for a party?",
                "What is the dress code for the gala?"]
    for question in unserved:
        conv = create_conversation(res.db, user_id=principal.user_id, title=question)
        start_exchange(res.db, conv.id, user_id=principal.user_id, question=question)
        add_answer(res.db, conv.id, user_id=principal.user_id, answer="Not found.", citations=[], abstained=True)
    report = admin.get("/api/admin/quality", params={"days": 1, "similarity": 0.7})
    assert report.status_code == 200, report.text
    body = report.json()
    assert body["not_found"] >= 3 and body["slowest"] and body["slowest"][0]["seconds"] >= body["slowest"][-1]["seconds"]
    groups = [sorted(g["questions"]) for g in body["gaps"]]
    assert sorted(unserved[:2]) in groups and [unserved[2]] in groups, body["gaps"]
    terrace = next(g for g in body["gaps"] if unserved[0] in g["questions"])
    assert terrace["not_found"] == 2 and terrace["topic"] in unserved[:2]
    assert reader.get("/api/admin/quality").status_code == 403


def test_an_unanswered_conversation_is_handed_to_the_helpdesk(env):
    _, res = env
    reader, other = signed_in(env), signed_in(env)
    assert reader.get("/api/handoff").json() == {"enabled": True}
    principal = load_principal(res.db, reader.name)
    conv = create_conversation(res.db, user_id=principal.user_id, title="terrace")
    start_exchange(res.db, conv.id, user_id=principal.user_id, question="Can I book the rooftop terrace?")
    add_answer(res.db, conv.id, user_id=principal.user_id, answer="Not found.", citations=[], abstained=True)
    assert other.post(f"/api/conversations/{conv.id}/handoff").status_code == 404
    ticket = reader.post(f"/api/conversations/{conv.id}/handoff")
    assert ticket.status_code == 201 and ticket.json()["decision"] == "needs_agent", ticket.text
    assert reader.post(f"/api/conversations/{conv.id}/handoff").json() == ticket.json()  # once per conversation state
    [stored] = [t for t in list_tickets(res.db, client="web-app") if t.id == ticket.json()["ticket_id"]]
    assert stored.requester == reader.name and "rooftop terrace" in stored.body and stored.subject
