"""Operating the running app: /metrics, request IDs (header, audit rows, JSON logs), and a backup taken
while it serves (the CLI asks the server, which owns the embedded store) restored into an empty folder,
uploaded documents and helpdesk resolutions included."""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select, update

from assistant.auth.access import read_original
from assistant.auth.api_keys import create_api_key
from assistant.auth.operator_token import operator_token
from assistant.compliance.audit import recent_events
from assistant.composition import Assistant
from assistant.core.db.identity import load_principal
from assistant.core.db.models import HelpdeskTicket, User
from assistant.core.db.uploads import get_upload
from assistant.core.errors import ConfigError
from assistant.core.log_config import logging_dict
from assistant.core.principals import ANONYMOUS
from assistant.operations.backup import restore_backup
from tests.api.conftest import parse_sse
from tests.api.live_server import LiveServer
from tests.conftest import make_settings, open_resources

QUESTION = "How long should my passwords be?"


@pytest.fixture(scope="module")
def live(api_resources):
    server = LiveServer(api_resources.settings, api_resources).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keys(api_resources) -> dict[str, str]:
    """An admin's and a reader's API keys."""
    admin = create_api_key(api_resources.db, "ops-admin")
    reader = create_api_key(api_resources.db, "ops-reader")
    with api_resources.db.session() as session:
        session.execute(update(User).where(User.name == "ops-admin").values(is_admin=True))
    return {"admin": admin.key, "reader": reader.key}


def _scrape(url: str, token: str) -> dict[tuple, float]:
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def _value(figures: dict, name: str, **labels) -> float:
    return figures.get((name, frozenset(labels.items())), 0.0)


def _chat(url: str, key: str) -> list[tuple[str, dict]]:
    with httpx.stream("POST", f"{url}/api/chat", json={"question": QUESTION},
                      headers={"Authorization": f"Bearer {key}"}, timeout=120) as response:
        assert response.status_code == 200
        return parse_sse(response.read().decode())


def test_metrics_answer_admins_and_tokens_only_and_count_the_work(live, keys, api_resources):
    url = live.url
    assert httpx.get(f"{url}/metrics", timeout=60).status_code == 401
    assert httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {keys['reader']}"}, timeout=60).status_code == 403
    _scrape(url, operator_token(api_resources.settings))  # the operator token is accepted too
    before = _scrape(url, keys["admin"])

    first, second = _chat(url, keys["reader"]), _chat(url, keys["reader"])
    assert first[-1][1]["cached"] is False and second[-1][1]["cached"] is True
    category = f"vpn-{uuid.uuid4().hex[:8]}"
    with api_resources.db.session() as session:
        for n, (decision, outcome) in enumerate([("auto_reply", "edited"), ("auto_reply", None), ("escalate", None)]):
            session.add(HelpdeskTicket(client="ops-tests", idempotency_key=f"{category}-{n}", request_hash="0" * 64,
                                       category=category, decision=decision, outcome=outcome))
    chat_route = {"method": "POST", "route": "/api/chat", "status": "200"}
    for _ in range(100):  # the server records a request's latency just after its last byte has left
        after = _scrape(url, keys["admin"])
        if _value(after, "assistant_http_request_duration_seconds_count", **chat_route) - _value(
            before, "assistant_http_request_duration_seconds_count", **chat_route
        ) >= 2:
            break
        time.sleep(0.05)

    def grew(name: str, **labels) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert grew("assistant_http_request_duration_seconds_count", **chat_route) == 2
    assert grew("assistant_answer_cache_requests_total", result="miss") >= 1
    assert grew("assistant_answer_cache_requests_total", result="hit") == 1
    assert grew("assistant_time_to_first_token_seconds_count") == 1  # the cached answer generated nothing
    assert grew("assistant_retrieval_duration_seconds_count") >= 1
    assert grew("assistant_llm_tokens_total", direction="completion") > 0
    assert _value(after, "assistant_adapter_info", adapter="base") == 1
    assert _value(after, "assistant_llm_circuit_state", state="closed") == 1
    assert _value(after, "assistant_llm_circuit_state", state="open") == 0
    assert _value(after, "assistant_llm_queue_depth") == 0
    assert _value(after, "assistant_jobs", kind="sync", status="done") >= 1
    assert _value(after, "assistant_helpdesk_tickets", category=category, decision="auto_reply") == 2
    assert _value(after, "assistant_helpdesk_tickets", category=category, decision="escalate") == 1
    assert _value(after, "assistant_helpdesk_outcomes", category=category, outcome="edited") == 1


def test_request_ids_reach_the_response_the_audit_row_and_json_logs(live, keys, api_resources, caplog):
    request_id = f"ops-{uuid.uuid4().hex}"
    headers = {"Authorization": f"Bearer {keys['reader']}", "X-Request-ID": request_id}
    caplog.set_level(logging.INFO, logger="assistant.api.requests")
    response = httpx.post(f"{live.url}/api/search", json={"query": QUESTION, "top_k": 2}, headers=headers, timeout=120)
    assert response.status_code == 200 and response.headers["x-request-id"] == request_id
    audit = recent_events(api_resources.db, principal="ops-reader", limit=1)[0]
    assert audit["action"] == "search" and audit["request_id"] == request_id

    refused = httpx.get(f"{live.url}/api/auth/me", headers={"X-Request-ID": "<script>"}, timeout=60)
    assert refused.status_code == 401 and len(refused.headers["x-request-id"]) == 32  # replaced, not echoed

    for _ in range(100):  # logged just after the response's last byte
        found = [r for r in caplog.records if getattr(r, "request_id", None) == request_id and r.msg == "request"]
        if found:
            break
        time.sleep(0.05)
    record = found[0]
    assert (record.route, record.status, record.method) == ("/api/search", 200, "POST")
    settings = make_settings(Path("unused"), log_format="json")
    spec = dict(logging_dict(settings)["formatters"]["default"])
    module, _, name = spec.pop("()").rpartition(".")
    line = getattr(importlib.import_module(module), name)(**spec).format(record)
    event = json.loads(line)
    assert event["request_id"] == request_id and event["message"] == "request" and event["level"] == "INFO"
    assert event["route"] == "/api/search" and "duration_s" in event
    assert "password" not in line.lower()  # neither the question nor any document text
    text = dict(logging_dict(make_settings(Path("unused"), log_format="text"))["formatters"]["default"])
    module, _, name = text.pop("()").rpartition(".")
    plain = getattr(importlib.import_module(module), name)(**text).format(record)
    assert f"[{request_id}] request method=POST route=/api/search status=200 duration_s=" in plain  # not a bare "request"


def _users(db) -> list[tuple[str, bool]]:
    with db.session() as session:
        return sorted(session.execute(select(User.name, User.is_admin)).tuples().all())


def _finished(url: str, key: str, path: str) -> dict:
    """The JSON at `path` once its `status` is neither queued nor running (an upload's or a job's)."""
    for _ in range(600):
        state = httpx.get(f"{url}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=60).json()
        if state["status"] not in ("queued", "running"):
            return state
        time.sleep(0.1)
    raise AssertionError(f"{path} still {state['status']}")


def _files_under_the_data_folder(url: str, key: str) -> tuple[dict, dict]:
    """An uploaded document and a helpdesk resolution, each with a word no other document has, indexed
    through the running server: `({"id", "word", "bytes"}, {"ticket", "word"})`."""
    auth = {"Authorization": f"Bearer {key}"}
    word = f"quoxel{uuid.uuid4().hex[:6]}"
    content = f"# Parking badges\n\nThe {word} parking badge is renewed at the front desk every January.\n".encode()
    sent = httpx.post(f"{url}/api/uploads", data={"audience": "everyone"}, headers=auth, timeout=60,
                      files=[("files", ("parking.md", content, "text/markdown"))])
    assert sent.status_code == 202, sent.text
    upload = sent.json()[0]
    assert _finished(url, key, f"/api/uploads/{upload['id']}")["status"] == "done"

    answer = f"zimbrel{uuid.uuid4().hex[:6]}"
    ticket = httpx.post(f"{url}/api/helpdesk/tickets", headers={**auth, "Idempotency-Key": uuid.uuid4().hex}, timeout=120,
                        json={"subject": "The printer on floor 3 jams", "body": "", "requester": "alice"})
    assert ticket.status_code == 201, ticket.text
    resolved = httpx.post(f"{url}/api/helpdesk/tickets/{ticket.json()['ticket_id']}/resolution", headers=auth, timeout=60,
                          json={"resolution": f"Clear the {answer} tray of the floor 3 printer, then restart it.",
                                "resolved_by": "agent-kim", "audience": ["everyone"]})
    assert resolved.status_code == 200, resolved.text
    assert _finished(url, key, f"/api/jobs/{resolved.json()['resolution_job_id']}")["status"] == "done"
    return {"id": upload["id"], "word": word, "bytes": content}, {"ticket": ticket.json()["ticket_id"], "word": answer}


def test_a_backup_taken_while_serving_restores_into_an_empty_folder(live, keys, api_resources, tmp_path):
    settings = api_resources.settings
    upload, resolution = _files_under_the_data_folder(live.url, keys["admin"])
    env = {**os.environ, "ASSISTANT_DATA_DIR": str(settings.storage.data_dir)}
    target = tmp_path / "backup"
    command = [str(Path(sys.executable).parent / "assistant"), "backup", str(target), "--server-url", live.url, "--json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)["manifest"]
    assert manifest["vectors"]["kind"] == "edge" and manifest["database"] == "database.sqlite"
    assert manifest["folders"]["uploads"]["files"] == 1 and manifest["folders"]["helpdesk-resolutions"]["files"] == 1
    assert (target / "manifest.json").is_file() and (target / "qdrant-edge").is_dir()
    assert not list((settings.storage.data_dir / "backups").iterdir())  # moved to PATH, nothing left on the server

    restored_settings = make_settings(tmp_path / "restored" / "var")
    restored_manifest = restore_backup(target, restored_settings)
    assert restored_manifest["relocated"]["documents"] == 2  # the upload and the resolution, nothing else
    restored = open_resources(restored_settings)
    try:
        assert _users(restored.db) == _users(api_resources.db)
        original = Assistant.build(api_resources).retriever.retrieve(QUESTION, principal=ANONYMOUS, top_k=5)
        retriever = Assistant.build(restored).retriever
        again = retriever.retrieve(QUESTION, principal=ANONYMOUS, top_k=5)
        assert original and [c.chunk_id for c in again] == [c.chunk_id for c in original]

        admin = load_principal(restored.db, "ops-admin")
        for word in (upload["word"], resolution["word"]):  # searchable, and the cited document opens
            hit = next(c for c in retriever.retrieve(word, principal=admin, top_k=5) if word in c.text)
            doc, content = read_original(restored.db, hit.doc_id, principal=admin)
            assert word.encode() in content and doc.local_path.is_relative_to(restored_settings.storage.data_dir.resolve())
            if word == upload["word"]:
                assert content == upload["bytes"]
                assert get_upload(restored.db, upload["id"], user_id=admin.user_id).document_id == hit.doc_id
    finally:
        restored.close()

    with pytest.raises(ConfigError, match="already holds"):
        restore_backup(target, restored_settings)
    restore_backup(target, restored_settings, force=True)

    # Never under a running server, --force or not: its files would be replaced while it writes them.
    holder = subprocess.Popen(
        [sys.executable, "-c", "from assistant.core.resources import Resources\n"
         "r = Resources.open(); r.store.count(); print('held', flush=True); input()"],
        env={**os.environ, "ASSISTANT_DATA_DIR": str(restored_settings.storage.data_dir)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match="stop it before restoring") as refused:
            restore_backup(target, restored_settings, force=True)
        assert refused.value.code == "store_locked"
    finally:
        holder.communicate("\n", timeout=60)
