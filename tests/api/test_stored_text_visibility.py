"""Stored text (questions, answers, ratings, corrections, tickets, audit queries, private uploads' names)
never reaches a reader who may not open what it rests on, through ANY route (issue 36).

A canary document restricted to a group; a member asks about it in a conversation, through `/api/chat`
without one and through `/v1` with the group's API key, rates the answer down with a correction that
quotes the canary, hands the conversation to the helpdesk, files a ticket through the helpdesk's key and
uploads an "only me" file. Then every GET route the app serves (walked from the app itself, so that a new
route is covered without editing this test), `/metrics` and the JSON log lines are read as another
user, as an admin outside the group and as an API key outside the group: the canary, the question's
marker and the private file's name appear nowhere. Positive controls: the member, an admin inside the
group and an auditor (the audit trail) do see them, so the test fails if the text never got stored.
"""

from __future__ import annotations

import io
import json
import logging
import re
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
import yaml
from fastapi.routing import APIRoute
from pythonjsonlogger.json import JsonFormatter

from assistant.auth.accounts import create_user, set_flags
from assistant.auth.acl_manifest import AclManifest
from assistant.auth.api_keys import create_api_key
from assistant.core.log_config import RequestIdFilter, logging_dict
from ingest.pipeline import Ingestor
from tests.api.conftest import API_FILES, parse_sse
from tests.api.live_server import LiveServer, serving_settings
from tests.conftest import copy_subset, open_resources
from tests.corpus import HANDBOOK

TAG = uuid.uuid4().hex[:10]
CANARY = f"KESTREL{TAG.upper()}"  # only in the restricted page (and what quotes it)
MARK = f"ref{TAG[:6]}q"  # only in the member's questions
UPLOAD_NAME = f"bonus-plan-{TAG}.md"  # the member's private upload
SECRET_FILE = "departments/vault/reimbursement-codes.md"
SECRET_PAGE = (
    "# Vault reimbursement codes\n\n"
    f"The vault travel reimbursement code is {CANARY} for every trip.\n\n"
    "Ask the vault team before you book.\n"
)
QUESTION = f"What is the vault travel reimbursement code? ({MARK})"
PASSWORD = "correct-horse-visibility-battery"
RAG_MODEL = "assistant-rag"

# GET routes that are not read, each with why. Empty today: a route that streams without end would go here.
SKIPPED: dict[str, str] = {}


@dataclass
class Scene:
    """The served app and what the member left behind."""

    url: str
    res: object
    app: object
    log: io.StringIO
    member: str
    names: dict[str, str]  # role -> account or key name
    headers: dict[str, dict]  # role -> auth headers for API keys
    ids: dict[str, list[str]] = field(default_factory=dict)  # path parameter -> values to fill in


def _session(url: str, name: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=600.0)
    r = client.post("/api/auth/login", json={"username": name, "password": PASSWORD})
    assert r.status_code == 200, r.text
    client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return client


def _json_log_handler(settings) -> logging.Handler:
    """A handler writing the product's JSON log lines (its own formatter settings) into a buffer."""
    json_settings = settings.model_copy(update={"log_format": "json"})
    spec = dict(logging_dict(json_settings)["formatters"]["default"])
    spec.pop("()")
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(JsonFormatter(**spec))
    handler.addFilter(RequestIdFilter())
    handler.setLevel(logging.INFO)
    return handler


def _chat(client: httpx.Client, body: dict) -> dict:
    with client.stream("POST", "/api/chat", json=body) as r:
        assert r.status_code == 200, r.read()
        events = parse_sse("".join(r.iter_text()))
    assert "error" not in [k for k, _ in events], events
    done = next(d for k, d in events if k == "done")
    done["citations"] = next((d["citations"] for k, d in events if k == "citations"), [])
    return done


@pytest.fixture(scope="module")
def scene(tmp_path_factory, citing_model) -> Iterator[Scene]:
    root = tmp_path_factory.mktemp("visibility")
    docs = copy_subset(HANDBOOK, root / "docs", API_FILES)
    (docs / SECRET_FILE).parent.mkdir(parents=True)
    (docs / SECRET_FILE).write_text(SECRET_PAGE, encoding="utf-8")
    manifest = root / "acl.yaml"
    manifest.write_text(yaml.safe_dump({"default": ["everyone"], "rules": [{"path": "departments/vault/**", "allow": ["group:vault"]}]}))
    settings = serving_settings(root / "var", citing_model["openai_base_url"], helpdesk_handoff=True)
    handler = _json_log_handler(settings)
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.addHandler(handler)
    root_logger.setLevel(logging.INFO)
    res = open_resources(settings)
    outcomes = Ingestor(res).sync(docs, acl=AclManifest.load(manifest))
    assert all(o.status == "done" for o in outcomes), outcomes
    names = {role: f"{role}-{TAG[:6]}" for role in ("member", "other", "admin", "insider", "auditor")}
    create_user(res.db, names["member"], groups=["vault"], password=PASSWORD)
    create_user(res.db, names["other"], password=PASSWORD)
    create_user(res.db, names["admin"], password=PASSWORD, is_admin=True)
    create_user(res.db, names["insider"], groups=["vault"], password=PASSWORD, is_admin=True)
    create_user(res.db, names["auditor"], password=PASSWORD)
    set_flags(res.db, names["auditor"], is_auditor=True)
    keys = {"member_key": create_api_key(res.db, f"helpdesk-in-{TAG[:6]}", groups=["vault"]),
            "key": create_api_key(res.db, f"helpdesk-out-{TAG[:6]}"),
            # The helpdesk's key that reads the tickets the web app hands over (their client is "web-app").
            "webapp_key": create_api_key(res.db, "web-app")}
    server = LiveServer(settings, res).start()
    try:
        scene = Scene(
            url=server.url, res=res, app=server.app, log=handler.stream, member=names["member"],
            names=names | {k: v.name for k, v in keys.items()},
            headers={k: {"Authorization": f"Bearer {v.key}"} for k, v in keys.items()},
        )
        _act_as_member(scene)
        yield scene
    finally:
        server.stop()
        res.close()
        root_logger.removeHandler(handler)
        root_logger.setLevel(old_level)


def _act_as_member(scene: Scene) -> None:
    """The member asks (conversation, plain /api/chat, /v1), rates down with a correction, hands the
    conversation over, files a ticket with the group's key and uploads a private file."""
    member = _session(scene.url, scene.member)
    conversation = member.post("/api/conversations", json={"title": ""}).json()["id"]
    done = _chat(member, {"question": QUESTION, "conversation_id": conversation})
    assert CANARY in done["answer"] and SECRET_FILE in [c["source"] for c in done["citations"]], done
    rated = member.put(f"/api/messages/{done['message_id']}/feedback", json={
        "rating": -1, "comment": f"It should quote {CANARY} in full", "corrected_answer": f"The code is {CANARY}, always.",
    })
    assert rated.status_code == 200, rated.text
    # A "not found" cites nothing, but the member's correction may state what only the group reads.
    # Its question is the member's own words, and may name what only the group reads (fresh-user trial: a
    # "not found" follow-up naming a restricted project was listed to an admin outside the group).
    unanswered = _chat(member, {"question": f"Which colour are the cafeteria chairs on Fridays? ({MARK})",
                                "conversation_id": conversation})
    assert unanswered["citations"] == [], unanswered
    rated = member.put(f"/api/messages/{unanswered['message_id']}/feedback", json={
        "rating": -1, "comment": "from the vault page", "corrected_answer": f"Use the vault code {CANARY} there.",
    })
    assert rated.status_code == 200, rated.text
    assert CANARY in _chat(member, {"question": QUESTION})["answer"]
    v1 = httpx.post(f"{scene.url}/v1/chat/completions", headers=scene.headers["member_key"], timeout=600.0, json={
        "model": RAG_MODEL, "messages": [{"role": "user", "content": QUESTION}],
    })
    assert v1.status_code == 200 and CANARY in v1.json()["choices"][0]["message"]["content"], v1.text
    handoff = member.post(f"/api/conversations/{conversation}/handoff")
    assert handoff.status_code == 201, handoff.text
    ticket = httpx.post(f"{scene.url}/api/helpdesk/tickets", headers=scene.headers["member_key"], timeout=600.0, json={
        "subject": "Vault travel code", "body": QUESTION, "requester": scene.member, "external_id": f"T-{TAG}",
    })
    assert ticket.status_code == 201, ticket.text
    assert CANARY in ticket.json()["reply"], ticket.json()
    sent = member.post("/api/uploads", data={"audience": f"user:{scene.member}"},
                       files=[("files", (UPLOAD_NAME, f"# Bonus plan\n\nThe bonus code is {CANARY}.\n".encode()))])
    assert sent.status_code == 202, sent.text
    upload = sent.json()[0]
    while upload["status"] in ("queued", "running"):  # the in-process worker ingests it
        time.sleep(0.2)
        upload = member.get(f"/api/uploads/{upload['id']}").json()
    assert upload["status"] == "done", upload
    scene.ids = {
        "conversation_id": [conversation], "upload_id": [upload["id"]], "job_id": [str(upload["job_id"])],
        "doc_id": [done["citations"][0]["doc_id"], upload["document_id"]],
        "ticket_id": [str(ticket.json()["ticket_id"]), str(handoff.json()["ticket_id"])],
        "name": [scene.member], "model": [RAG_MODEL], "adapter_id": ["1"], "snapshot_id": ["1"],
    }


def _get_routes(app) -> set[str]:
    """The path of every GET route the app serves, in the OpenAPI schema or not (routers included into
    routers are walked down: FastAPI keeps an included router as one route that holds the others)."""
    found: set[str] = set()

    def walk(routes, prefix: str) -> None:
        for route in routes:
            if isinstance(route, APIRoute):
                if "GET" in route.methods:
                    found.add(prefix + route.path)
            elif hasattr(route, "original_router"):  # fastapi.routing._IncludedRouter
                walk(route.original_router.routes, prefix + getattr(route.include_context, "prefix", ""))

    walk(app.routes, "")
    return found


def _urls(scene: Scene, path: str, schema_paths: dict) -> list[str]:
    """`path` with its parameters filled by every value the scene has, and each `limit` at its maximum."""
    params = re.findall(r"{(\w+)}", path)
    missing = [p for p in params if p not in scene.ids]
    assert not missing, f"GET {path}: no value for path parameter(s) {missing}; add the IDs this test creates for it"
    urls = [path]
    for p in params:
        urls = [u.replace("{" + p + "}", v) for u in urls for v in scene.ids[p]]
    query = []
    for spec in (schema_paths.get(path, {}).get("get", {}).get("parameters", [])):
        if spec.get("in") == "query" and spec["name"] == "limit":
            query.append(f"limit={spec.get('schema', {}).get('maximum', 100)}")
    return [u + ("?" + "&".join(query) if query else "") for u in urls]


def _readable(r: httpx.Response) -> str:
    """Everything a client gets: headers and body, a zip's members unpacked."""
    text = "\n".join(f"{k}: {v}" for k, v in r.headers.items()) + "\n"
    if r.content[:2] == b"PK":
        with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
            return text + "\n".join(n + "\n" + archive.read(n).decode("utf-8", "replace") for n in archive.namelist())
    return text + r.content.decode("utf-8", "replace")


def _client_for(scene: Scene, role: str) -> httpx.Client:
    if role in scene.headers:
        return httpx.Client(base_url=scene.url, headers=scene.headers[role], timeout=600.0)
    return _session(scene.url, scene.names[role])


def _walk(scene: Scene, role: str) -> dict[str, httpx.Response]:
    """GET every route (and /metrics) as `role`; returns the responses by URL."""
    client = _client_for(scene, role)
    schema_paths = scene.app.openapi()["paths"]
    routes = _get_routes(scene.app)
    assert {p for p, ops in schema_paths.items() if "get" in ops} <= set(routes)
    assert set(SKIPPED) <= set(routes), "a skipped route no longer exists"
    seen = {}
    for path in sorted(set(routes) - set(SKIPPED)):
        for url in _urls(scene, path, schema_paths):
            seen[url] = client.get(url, follow_redirects=False)
    seen["/metrics"] = client.get("/metrics")
    return seen


FORBIDDEN = (CANARY, MARK, UPLOAD_NAME)


@pytest.mark.parametrize("role", ["other", "admin", "key", "webapp_key"])
def test_no_stored_text_reaches_a_reader_outside_the_group_through_any_get_route(scene, role):
    seen = _walk(scene, role)
    leaks = {url: [s for s in FORBIDDEN if s.lower() in _readable(r).lower()] for url, r in seen.items()}
    assert {u: s for u, s in leaks.items() if s} == {}
    ok = [url for url, r in seen.items() if r.status_code == 200]
    assert len(ok) >= 5, {u: r.status_code for u, r in seen.items()}  # the walk reached the routes
    if role == "webapp_key":  # the handed-over conversation is listed, its text withheld
        tickets = seen["/api/helpdesk/tickets?limit=500"].json()
        assert [(t["requester"], t["withheld"], t["reply"]) for t in tickets] == [(scene.member, True, None)]
    if role == "admin":  # the admin sees that the items exist, with their text withheld
        feedback = seen["/api/admin/feedback?limit=1000"].json()
        mine = [f for f in feedback if f["principal"] == scene.member]
        assert mine and all(f["withheld"] and f["question"] is None and f["corrected"] and f["rating"] == -1 for f in mine)
        uploads = seen["/api/admin/uploads"].json()
        assert [(u["owner"], u["filename"], u["withheld"]) for u in uploads] == [(scene.member, None, True)]
        audit = seen["/api/audit?limit=1000"].json()
        assert any(row.get("withheld") and row["principal"] == scene.member for row in audit)


def test_json_logs_hold_no_stored_text(scene):
    for role in ("other", "admin", "key", "webapp_key"):
        _walk(scene, role)
    lines = [json.loads(line) for line in scene.log.getvalue().splitlines() if line.strip()]
    assert lines, "no JSON log line was written"
    text = scene.log.getvalue().lower()
    assert [s for s in (CANARY, MARK) if s.lower() in text] == []


def test_the_member_an_admin_in_the_group_and_the_auditor_see_the_text(scene):
    member = _session(scene.url, scene.member)
    messages = member.get(f"/api/conversations/{scene.ids['conversation_id'][0]}/messages").text
    assert CANARY in messages and MARK in messages
    assert UPLOAD_NAME in member.get("/api/uploads").text
    insider = _session(scene.url, scene.names["insider"])
    feedback = insider.get("/api/admin/feedback").json()
    mine = [f for f in feedback if f["principal"] == scene.member]
    assert len(mine) == 2 and not any(f["withheld"] for f in mine), mine
    assert all(CANARY in f["corrected_answer"] for f in mine) and any(MARK in f["question"] for f in mine), mine
    auditor = _session(scene.url, scene.names["auditor"])
    trail = auditor.get("/api/audit", params={"limit": 1000, "user": scene.member}).json()
    assert any(MARK in (row["query"] or "") for row in trail) and not any(row.get("withheld") for row in trail)
    key_ticket = httpx.get(f"{scene.url}/api/helpdesk/tickets/{scene.ids['ticket_id'][0]}",
                           headers=scene.headers["member_key"], timeout=600.0).json()
    assert CANARY in key_ticket["reply"] and not key_ticket["withheld"]


def test_usage_counts_every_answered_question(scene):
    admin = _session(scene.url, scene.names["admin"])
    report = admin.get("/api/admin/quality", params={"days": 1}).json()
    assert {"conversation", "chat", "v1", "helpdesk_tickets"} <= set(report["endpoints"]), report["endpoints"]
    assert report["questions"] >= 4 and report["answered"] >= 4
