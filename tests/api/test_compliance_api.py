"""What a compliance review asks, over HTTP: the audit trail and who may read it, sign-in throttling that
cannot lock the owner out, personal data masked per source, and a user's export and erasure."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, select, text

from assistant.api.app import create_app
from assistant.auth.accounts import create_user, set_flags
from assistant.auth.acl_manifest import AclManifest
from assistant.auth.api_keys import create_api_key
from assistant.core.db.models import AuditEvent, Conversation, Feedback, Message, User
from assistant.core.index.payload import document_id
from ingest.pipeline import Ingestor
from tests.api.conftest import parse_sse
from tests.conftest import make_settings, open_resources

PASSWORD = "a-long-enough-password"
PHONE, EMAIL = "138 1234 5678", "zhang.wei@example.com"
DOCS = {
    "public/cafeteria.md": "# Cafeteria\n\nThe cafeteria opens at 8 am and serves lunch until 2 pm on weekdays.\n",
    "restricted/salaries.md": "# Salary bands\n\nSalary bands for 2026 are reviewed by the finance committee in March.\n",
}
PII_DOC = (
    "# VPN support\n\nFor VPN problems call Zhang Wei at " + PHONE + " or write to " + EMAIL + ".\n\n"
    "The VPN gateway uses WireGuard; install the client from the software portal first.\n"
)


@pytest.fixture(scope="module")
def comp(tmp_path_factory, citing_model):
    root = tmp_path_factory.mktemp("compliance")
    docs, pii = root / "docs", root / "pii"
    for rel, body in DOCS.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(body, encoding="utf-8")
    pii.mkdir()
    (pii / "vpn-support.md").write_text(PII_DOC, encoding="utf-8")
    res = open_resources(make_settings(root / "var", **citing_model))
    ingestor = Ingestor(res)
    ingestor.sync(docs, acl=AclManifest.from_dict({"default": ["everyone"], "rules": [{"path": "restricted", "allow": ["group:finance"]}]}))
    ingestor.sync(pii, acl=AclManifest.from_dict({"default": ["everyone"], "mask_pii": True}))
    names = {role: f"{role}-{uuid.uuid4().hex[:6]}" for role in ("admin", "auditor", "alice", "bob")}
    create_user(res.db, names["admin"], password=PASSWORD, is_admin=True)
    for role in ("auditor", "alice", "bob"):
        create_user(res.db, names[role], password=PASSWORD)
    set_flags(res.db, names["auditor"], is_auditor=True)
    app = create_app(res.settings, resources=res)
    yield {"res": res, "app": app, "names": names, "ingestor": ingestor, "root": root,
           "restricted": document_id((docs / "restricted/salaries.md").resolve().as_uri()),
           "pii_doc": document_id((pii / "vpn-support.md").resolve().as_uri())}
    ingestor.close()
    res.close()


def signed_in(comp, role: str, address: str) -> TestClient:
    """A client at `address` signed in as `role`, sending its CSRF token."""
    client = TestClient(comp["app"], client=(address, 40000))
    client.__enter__()
    r = client.post("/api/auth/login", json={"username": comp["names"][role], "password": PASSWORD})
    assert r.status_code == 200, r.text
    client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return client


@pytest.fixture(scope="module")
def admin(comp) -> Iterator[TestClient]:
    client = signed_in(comp, "admin", "10.0.0.5")
    yield client
    client.__exit__(None, None, None)


def _trail(client: TestClient, **filters) -> list[dict]:
    r = client.get("/api/audit", params={"limit": 1000, **filters})
    assert r.status_code == 200, r.text
    return r.json()


def test_wrong_passwords_from_one_address_do_not_stop_the_owner_elsewhere(comp, admin):
    name = comp["names"]["alice"]
    with TestClient(comp["app"], client=("203.0.113.7", 5555)) as guesser:
        codes = [guesser.post("/api/auth/login", json={"username": name, "password": "wrong-guess-123"}).status_code
                 for _ in range(12)]
        assert codes == [401] * 10 + [429] * 2  # the 10th failure starts a 2 s back-off for this pair
        r = guesser.post("/api/auth/login", json={"username": name, "password": PASSWORD})
        assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= comp["res"].settings.auth.login_failure_window_s
        with TestClient(comp["app"], client=("10.0.0.8", 5555)) as owner:
            assert owner.post("/api/auth/login", json={"username": name, "password": PASSWORD}).status_code == 200
        assert admin.post(f"/api/users/{name}/unlock").json()["addresses_cleared"] == 1
        assert guesser.post("/api/auth/login", json={"username": name, "password": PASSWORD}).status_code == 200
    failures = _trail(admin, user=name, action="auth.login_failed")
    assert len(failures) == 10 and {f["address"] for f in failures} == {"203.0.113.7"}
    assert [f["details"]["backoff_s"] for f in failures][-2:] == [0, 2.0]
    assert len(_trail(admin, user=name, action="auth.login_throttled")) == 3
    assert _trail(admin, action="auth.unlock")[-1]["details"]["target"] == name


def test_the_trail_records_chat_search_download_and_admin_changes(comp, admin):
    since = datetime.now(UTC).isoformat()
    hits = admin.post("/api/search", json={"query": "When does the cafeteria open?", "top_k": 3}).json()
    cafeteria = next(h for h in hits if h["source"] == "public/cafeteria.md")
    chat = admin.post("/api/chat", json={"question": "When does the cafeteria open for lunch?"})
    assert chat.status_code == 200 and any(e == "done" for e, _ in parse_sse(chat.text))
    assert admin.get(cafeteria["route"]).status_code == 200
    bob = comp["names"]["bob"]
    assert admin.patch(f"/api/users/{bob}", json={"legal_hold": True}).json()["legal_hold"] is True
    admin.patch(f"/api/users/{bob}", json={"legal_hold": False})
    rows = _trail(admin, user=comp["names"]["admin"], since=since)
    by_action = {}
    for row in rows:
        by_action.setdefault(row["action"], []).append(row)
    assert set(by_action) >= {"search", "chat", "document.read", "admin.user"}
    assert cafeteria["doc_id"] in by_action["search"][0]["doc_ids"] and cafeteria["chunk_id"] in by_action["search"][0]["chunk_ids"]
    assert cafeteria["doc_id"] in by_action["chat"][0]["doc_ids"] and by_action["chat"][0]["query"].startswith("When does")
    assert by_action["document.read"][0]["doc_ids"] == [cafeteria["doc_id"]]
    assert by_action["admin.user"][0]["details"] == {"target": bob, "change": {"legal_hold": True}}
    assert all(r["auth_method"] == "session" and r["address"] == "10.0.0.5" for r in rows if r["action"] != "audit.read")
    assert _trail(admin, user=comp["names"]["admin"], action="auth.login")[0]["auth_method"] == "password"
    doc_rows = _trail(admin, doc_id=cafeteria["doc_id"], since=since)
    assert {r["action"] for r in doc_rows} == {"search", "chat", "document.read"}
    assert admin.get("/api/audit/verify").json()["ok"] is True
    r = admin.get("/api/audit", params={"action": "downlaod"})
    assert r.status_code == 400 and "'downlaod' is not one of" in r.json()["error"]["message"]


def test_only_admins_and_auditors_read_the_trail_and_auditors_read_no_more_documents(comp):
    key = create_api_key(comp["res"].db, f"svc-{uuid.uuid4().hex[:6]}")
    with TestClient(comp["app"], headers={"Authorization": f"Bearer {key.key}"}) as service:
        r = service.get("/api/audit")
        assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"
    alice = signed_in(comp, "alice", "10.0.0.9")
    assert alice.get("/api/audit").status_code == 403
    assert alice.post(f"/api/users/{comp['names']['bob']}/erase").status_code == 403
    alice.__exit__(None, None, None)
    auditor = signed_in(comp, "auditor", "10.0.0.10")
    assert len(_trail(auditor)) > 0
    assert auditor.get(f"/api/documents/{comp['restricted']}/content").status_code == 404
    assert auditor.get(f"/api/users/{comp['names']['bob']}/export").status_code == 403
    assert _trail(auditor, action="audit.read")[-1]["principal"] == comp["names"]["auditor"]
    auditor.__exit__(None, None, None)


def test_masked_personal_data_is_neither_found_nor_cited_and_the_rest_is(comp, admin):
    for query in (PHONE, "13812345678", EMAIL, "Zhang Wei phone number e-mail"):
        for hit in admin.post("/api/search", json={"query": query, "top_k": 10}).json():
            assert "1234 5678" not in hit["text"] and "zhang.wei@" not in hit["text"], (query, hit["text"])
    hits = admin.post("/api/search", json={"query": "VPN gateway WireGuard client", "top_k": 3}).json()
    vpn = next(h for h in hits if h["doc_id"] == comp["pii_doc"])
    assert "WireGuard" in vpn["text"] and "[PHONE]" in vpn["text"] and "[EMAIL]" in vpn["text"]
    events = parse_sse(admin.post("/api/chat", json={"question": "Whom do I call for VPN problems?"}).text)
    body = json.dumps([data for _, data in events])
    assert "1234 5678" not in body and "zhang.wei@" not in body
    original = admin.get(f"/api/documents/{comp['pii_doc']}/content")  # the file itself, by its ACL
    assert original.status_code == 200 and PHONE in original.text
    jobs = admin.get("/api/jobs").json()
    totals = next(j["totals"] for j in jobs if j["totals"].get("pii_masked_phone") is not None)
    assert totals["pii_masked_phone"] == 1 and totals["pii_masked_email"] == 1


def test_turning_masking_on_masks_what_is_already_indexed(comp, admin):
    folder = comp["root"] / "rota"
    folder.mkdir()
    (folder / "team.md").write_text("# Team\n\nThe backup rota is kept by li.na@example.com every Friday.\n", encoding="utf-8")
    comp["ingestor"].sync(folder)  # no manifest: open to everyone, nothing masked

    def texts() -> list[str]:
        hits = admin.post("/api/search", json={"query": "backup rota every Friday", "top_k": 5}).json()
        return [h["text"] for h in hits if h["source"] == "team.md"]

    assert any("li.na@example.com" in t for t in texts())
    outcomes = comp["ingestor"].sync(folder, acl=AclManifest.from_dict({"default": ["everyone"], "mask_pii": ["email"]}))
    assert [o.status for o in outcomes] == ["done"]  # the same bytes are parsed again, not skipped
    assert texts() and all("li.na@" not in t and "[EMAIL]" in t for t in texts())


def _add_upload(comp, user: str) -> tuple[str, str]:
    """An uploaded file of `user` shared with everyone (so that an admin's search finds it), ingested as a
    file source of its own, with its row in the `uploads` table (issue 16's schema; created here when
    this database lacks it)."""
    res = comp["res"]
    upload_id = str(uuid.uuid4())
    folder = comp["root"] / "uploads" / upload_id  # the layout of POST /api/uploads
    folder.mkdir(parents=True)
    path = folder / "expenses.md"
    path.write_text("# Travel expenses\n\nMy taxi receipts from the Shenzhen trip total 420 yuan.\n", encoding="utf-8")
    comp["ingestor"].sync(path, acl=AclManifest.from_dict({"default": ["everyone"]}))
    with res.db.session() as session:
        if not inspect(session.get_bind()).has_table("uploads"):
            session.execute(text(
                "CREATE TABLE uploads (id VARCHAR(36) PRIMARY KEY, user_id INTEGER NOT NULL, filename VARCHAR(512), "
                "path VARCHAR(2048), audience VARCHAR(320), size_bytes INTEGER, job_id INTEGER, created_at TIMESTAMP)"
            ))
        user_id = session.scalar(select(User.id).where(User.name == user))
        session.execute(
            text("INSERT INTO uploads (id, user_id, filename, path, audience, size_bytes, created_at) "
                 "VALUES (:id, :u, 'expenses.md', :p, :a, 10, :t)"),
            {"id": upload_id, "u": user_id, "p": str(path), "a": "everyone", "t": datetime.now(UTC)},
        )
    return upload_id, document_id(path.resolve().as_uri())


def test_export_holds_everything_and_erasure_leaves_nothing_of_the_user(comp, admin):
    res, bob = comp["res"], comp["names"]["bob"]
    client = signed_in(comp, "bob", "10.0.0.11")
    conv = client.post("/api/conversations", json={"title": "lunch"}).json()["id"]
    events = parse_sse(client.post("/api/chat", json={"question": "When does the cafeteria open?", "conversation_id": conv}).text)
    message_id = next(d for e, d in events if e == "done")["message_id"]
    assert client.put(f"/api/messages/{message_id}/feedback", json={"rating": 1, "comment": "helpful"}).status_code == 200
    client.post("/api/search", json={"query": "taxi receipts Shenzhen"})
    client.__exit__(None, None, None)
    upload_id, upload_doc = _add_upload(comp, bob)
    assert res.store.scroll_ids(doc_id=upload_doc)
    query = {"query": "taxi receipts Shenzhen trip", "top_k": 20}
    assert any(h["doc_id"] == upload_doc for h in admin.post("/api/search", json=query).json())

    exported = admin.get(f"/api/users/{bob}/export")
    assert exported.status_code == 200 and exported.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(exported.content))
    conversations = json.loads(archive.read("conversations.json"))
    assert [c["id"] for c in conversations] == [conv] and len(conversations[0]["messages"]) == 2
    assert json.loads(archive.read("feedback.json"))[0]["comment"] == "helpful"
    assert json.loads(archive.read("uploads.json"))[0]["id"] == upload_id
    assert b"taxi receipts" in archive.read(f"uploads/{upload_id}/expenses.md")
    assert json.loads(archive.read("account.json"))["name"] == bob

    report = admin.post(f"/api/users/{bob}/erase").json()
    assert report["deleted"]["conversations"] == 1 and report["deleted"]["chunks"] >= 1
    assert not res.store.scroll_ids(doc_id=upload_doc)
    assert not (comp["root"] / "uploads" / upload_id).exists()  # the file and its folder
    hits = admin.post("/api/search", json=query).json()
    assert all(h["doc_id"] != upload_doc and "taxi" not in h["text"] for h in hits)
    with res.db.session() as session:
        assert session.scalar(select(User).where(User.name == bob)) is None
        assert session.scalars(select(Conversation.id).where(Conversation.id == conv)).all() == []
        assert session.scalars(select(Message.id).where(Message.conversation_id == conv)).all() == []
        assert session.scalars(select(Feedback.id).where(Feedback.principal == bob)).all() == []
        assert session.execute(text("SELECT COUNT(*) FROM uploads WHERE id = :id"), {"id": upload_id}).scalar() == 0
        queries = session.scalars(select(AuditEvent.query).where(AuditEvent.principal == bob, AuditEvent.query != "")).all()
    assert queries and set(queries) == {"[erased]"}
    assert admin.get("/api/audit/verify").json()["ok"] is True
    assert _trail(admin, action="admin.erasure")[-1]["details"]["target"] == bob
