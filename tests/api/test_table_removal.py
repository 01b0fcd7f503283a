"""A document's queryable tables (issue 40) leave with it: deleting an upload, removing a source or
erasing a user deletes the document's duckdb file, and a stale table card can no longer query it; a
restore that moves an upload to a new ID renames its file with it."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import duckdb
from fastapi.testclient import TestClient

from assistant.answering.table_answers import answer_from_tables
from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS, Principal
from assistant.operations.backup import restore_backup, take_backup
from assistant.operations.sources import remove_source
from assistant.tables.files import tables_file
from ingest.pipeline import Ingestor, document_id
from tests.conftest import make_settings, open_resources
from tests.workbooks import write_sheet

PASSWORD = "a-long-enough-password"
QUESTION = "price of the hex bolts in the price list"


def _prices(path: Path, n: int = 250) -> Path:
    """A price list of `n` rows (above `ASSISTANT_TABLE_MIN_ROWS`, so kept as a table)."""
    return write_sheet(path, "Price list", ["Part number", "Description", "Unit price (EUR)"],
                       ([f"P-{i:04d}", f"Hex bolt M{4 + i % 9}", 0.5 + i] for i in range(n)))


def _card(assistant: Assistant, doc_id: str, principal: Principal):
    """The document's table card as retrieval returns it to `principal`, or None."""
    hits = assistant.retriever.retrieve(QUESTION, principal=principal, top_k=10)
    return next((h for h in hits if h.doc_id == doc_id and "— table " in h.heading), None)


def _gone(assistant: Assistant, doc_id: str, card, principal: Principal) -> None:
    """The tables file of `doc_id` is deleted, its card no longer retrieved, and the card seen before
    (a stale copy) cannot reach the table: the query path answers "not found", naming the missing file."""
    settings = assistant.resources.settings
    assert not tables_file(settings.tables_dir, doc_id).exists()
    assert not list(settings.tables_dir.glob(f"{doc_id}.duckdb*"))
    assert _card(assistant, doc_id, principal) is None
    stale = asyncio.run(answer_from_tables(QUESTION, {"price_list": card}, tables_dir=settings.tables_dir,
                                           llm=assistant.answerer.llm))
    assert stale.abstained and stale.result is None and "table file is missing" in stale.text, stale


def _signed_in(app, name: str) -> TestClient:
    client = TestClient(app)
    client.__enter__()
    r = client.post("/api/auth/login", json={"username": name, "password": PASSWORD})
    assert r.status_code == 200, r.text
    client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return client


def _upload(client: TestClient, name: str, path: Path) -> dict:
    """Upload `path` for `name` alone and wait for the in-process worker to ingest it."""
    sent = client.post("/api/uploads", data={"audience": f"user:{name}"},
                       files=[("files", (path.name, path.read_bytes()))])
    assert sent.status_code == 202, sent.text
    upload = sent.json()[0]
    deadline = time.monotonic() + 300
    while upload["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        upload = client.get(f"/api/uploads/{upload['id']}").json()
    assert upload["status"] == "done", upload
    return upload


def test_removing_a_source_removes_its_tables(tmp_path):
    docs = tmp_path / "share"
    path = _prices(docs / "prices.xlsx")
    res = open_resources(make_settings(tmp_path / "var"))
    ingestor = Ingestor(res)
    try:
        assert [o.status for o in ingestor.sync(docs)] == ["done"]
        doc_id = document_id(path.resolve().as_uri())
        assert tables_file(res.settings.tables_dir, doc_id).exists()
        assistant = Assistant.build(res)
        card = _card(assistant, doc_id, ANONYMOUS)
        assert card is not None

        removed = remove_source(res, docs)
        assert removed.documents == 1 and removed.chunks >= 1
        _gone(assistant, doc_id, card, ANONYMOUS)
    finally:
        ingestor.close()
        res.close()


def test_deleting_an_upload_or_erasing_its_owner_removes_its_tables(tmp_path):
    res = open_resources(make_settings(tmp_path / "var"))
    names = {role: f"{role}-{uuid.uuid4().hex[:6]}" for role in ("admin", "ann", "bob")}
    create_user(res.db, names["admin"], password=PASSWORD, is_admin=True)
    create_user(res.db, names["ann"], password=PASSWORD)
    create_user(res.db, names["bob"], password=PASSWORD)
    app = create_app(res.settings, resources=res)
    assistant = Assistant.build(res)
    clients = []
    try:
        # The owner deletes the upload (DELETE /api/uploads/{id}).
        ann = _signed_in(app, names["ann"])
        clients.append(ann)
        upload = _upload(ann, names["ann"], _prices(tmp_path / "ann" / "prices.xlsx"))
        doc_id, reader = upload["document_id"], Principal(name=names["ann"])
        assert tables_file(res.settings.tables_dir, doc_id).exists()
        card = _card(assistant, doc_id, reader)
        assert card is not None
        assert ann.delete(f"/api/uploads/{upload['id']}").status_code == 204
        _gone(assistant, doc_id, card, reader)

        # An admin erases the owner (POST /api/users/{name}/erase): the uploads' tables go too.
        bob = _signed_in(app, names["bob"])
        clients.append(bob)
        upload = _upload(bob, names["bob"], _prices(tmp_path / "bob" / "parts.xlsx", 300))
        doc_id, reader = upload["document_id"], Principal(name=names["bob"])
        assert tables_file(res.settings.tables_dir, doc_id).exists()
        card = _card(assistant, doc_id, reader)
        assert card is not None
        admin = _signed_in(app, names["admin"])
        clients.append(admin)
        erased = admin.post(f"/api/users/{names['bob']}/erase")
        assert erased.status_code == 200 and erased.json()["deleted"]["documents"] == 1, erased.text
        _gone(assistant, doc_id, card, reader)
    finally:
        for client in clients:
            client.__exit__(None, None, None)
        res.close()


def test_a_restore_into_another_data_folder_renames_an_uploads_tables_to_its_new_id(tmp_path):
    res = open_resources(make_settings(tmp_path / "var"))
    name = f"cy-{uuid.uuid4().hex[:6]}"
    create_user(res.db, name, password=PASSWORD)
    app = create_app(res.settings, resources=res)
    client = _signed_in(app, name)
    try:
        upload = _upload(client, name, _prices(tmp_path / "cy" / "prices.xlsx"))
        old_id = upload["document_id"]
        assert tables_file(res.settings.tables_dir, old_id).exists()
        take_backup(res, tmp_path / "backup")
    finally:
        client.__exit__(None, None, None)
        res.close()

    restored_settings = make_settings(tmp_path / "restored" / "var")  # the uploads folder moves with it
    assert restore_backup(tmp_path / "backup", restored_settings)["relocated"]["documents"] == 1
    restored = open_resources(restored_settings)
    try:
        reader = Principal(name=name)
        doc_id = _card_doc(restored, reader)  # the card, under the upload's new ID, opens the renamed file
        assert doc_id != old_id
        with duckdb.connect(str(tables_file(restored_settings.tables_dir, doc_id)), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM price_list").fetchone()[0] == 250
        assert not tables_file(restored_settings.tables_dir, old_id).exists()
    finally:
        restored.close()


def _card_doc(res, principal: Principal) -> str:
    """The document ID of the one table card `principal` retrieves in `res`."""
    hits = Assistant.build(res).retriever.retrieve(QUESTION, principal=principal, top_k=10)
    return next(h.doc_id for h in hits if "— table " in h.heading)
