"""The helpdesk ticket flow over HTTP on a few real handbook pages, answered by a scripted OpenAI-protocol
server (a real HTTP server): decisions, the requester's ACLs, idempotency, resolutions as documents,
webhooks against a real local receiver, and rate limits."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from assistant.answering.prompt import NO_ANSWER
from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from assistant.auth.acl_manifest import AclManifest
from assistant.auth.api_keys import configure_api_key, create_api_key
from assistant.core.db.identity import load_principal
from assistant.core.db.models import User
from assistant.core.errors import InvalidRequestError
from assistant.helpdesk.delivery import SIGNATURE_HEADER, verify_signature
from assistant.helpdesk.resolutions import check_audience
from assistant.helpdesk.store import claim_ticket, get_ticket
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer, extractive_answer

OKTA = "departments/tech-ops/tools/Okta/okta-verify-troubleshooting-steps.md"
PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
ACCESS = "departments/tech-ops/process/application_access_request.md"
STANDARDS = "departments/tech-ops/process/internal-security/computer-standards.md"
FILES = [OKTA, PASSWORDS, ACCESS, STANDARDS]
OKTA_REPLY = (
    "Sometimes the Okta Verify window can get stuck and not prompt [1]. "
    "Right-click the Okta Verify icon in your taskbar and click 'Quit Okta Verify' [1]. "
    "Reopen the browser and try reaccessing Okta Verify [1]."
)


def citing(path: str, reply: str):
    """A scripted answer: `reply` with its `[1]` replaced by the prompt's number for `path`, as a faithful
    model cites: the order of the sources follows retrieval (and earlier tests' resolutions, which become
    documents on the same words), so a page is not always source [1]."""

    def answer(request: dict) -> str:
        user = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
        numbers = [n for n, found in re.findall(r"^\[(\d+)\] (.*)$", user, re.MULTILINE) if path in found]
        return reply.replace("[1]", f"[{numbers[0]}]") if numbers else reply

    return answer


okta_reply = citing(OKTA, OKTA_REPLY)
PASSWORD_REPLY = (
    "Create a password that is ideally 15 characters or longer [1]. "
    "Do not use the browser based auto-fill; the 1Password browser extension should be used [1]."
)


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer("") as server:
        yield server


@pytest.fixture(scope="module")
def helpdesk(tmp_path_factory, scripted):
    """`(client, resources, key)`: the app over FILES, PASSWORDS readable by group secops only; users
    alice (no group), bob (secops) and erin (secops, e-mail erin@example.com); the helpdesk's key in
    groups secops and it."""
    root = tmp_path_factory.mktemp("helpdesk")
    folder = copy_subset(HANDBOOK, root / "docs", FILES)
    settings = make_settings(
        root / "var", llm_backend="openai", llm_context_tokens=4096, openai_base_url=scripted.base_url,
        openai_model="assistant", answer_cache_entries=0, webhook_allowed_hosts=["127.0.0.1"],
        webhook_backoff_s=0.2, webhook_backoff_max_s=1.0, webhook_max_attempts=5,
    )
    res = open_resources(settings)
    manifest = AclManifest.from_dict({"default": ["everyone"], "rules": [{"path": PASSWORDS, "allow": ["group:secops"]}]})
    Ingestor(res).sync(folder, acl=manifest)
    create_user(res.db, "alice")
    create_user(res.db, "bob", groups=["secops"])
    create_user(res.db, "erin", groups=["secops"])
    with res.db.session() as session:
        session.execute(update(User).where(User.name == "erin").values(email="Erin@Example.com"))
    key = create_api_key(res.db, "helpdesk", groups=["secops", "it"])
    app = create_app(settings, resources=res)
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {key.key}"}) as client:
            yield client, res, key
    finally:
        asyncio.run(res.llm.aclose())
        res.close()


def post_ticket(client, *, subject: str, body: str = "", requester: str = "alice", key: str | None = None, **extra):
    headers = {"Idempotency-Key": key or uuid.uuid4().hex}
    return client.post(
        "/api/helpdesk/tickets", json={"subject": subject, "body": body, "requester": requester, **extra}, headers=headers
    )


def sources(ticket: dict) -> set[str]:
    return {c["source"] for c in ticket["citations"]}


def test_okta_ticket_gets_a_cited_auto_reply(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = OKTA_REPLY
    response = post_ticket(client, subject="Okta Verify is not prompting me", body="When I sign in, no push comes.",
                           category="access")
    assert response.status_code == 201, response.text
    ticket = response.json()
    assert ticket["decision"] == "auto_reply", ticket["reasons"]
    assert sources(ticket) == {OKTA}
    assert "[1]" in ticket["reply"] and "Quit Okta Verify" in ticket["reply"]
    assert ticket["language"] == "en" and 0.5 <= ticket["confidence"] <= 1.0
    assert [r["code"] for r in ticket["reasons"]] == ["grounded"]
    stored = client.get(f"/api/helpdesk/tickets/{ticket['ticket_id']}").json()
    assert stored["reply"] == ticket["reply"] and stored["category"] == "access"
    assert stored["evidence"]["retrieval"]["supported_share"] > 0 and stored["evidence"]["retrieval"]["chunk_id"]


def test_uncovered_ticket_goes_to_an_agent_without_invented_specifics(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = "The coffee machine on floor 3 is serviced by Acme every Tuesday at 9am [1]."
    ticket = post_ticket(client, subject="The coffee machine in the kitchen is leaking water",
                         body="There is a puddle under the espresso machine on floor 3.").json()
    assert ticket["decision"] == "needs_agent"
    assert ticket["citations"] == [] and ticket["confidence"] == 0.0
    assert ticket["reply"] == NO_ANSWER["en"]
    assert "Acme" not in ticket["reply"] and "Tuesday" not in ticket["reply"]
    assert {r["code"] for r in ticket["reasons"]} & {"no_answer_in_documents", "no_citations"}


def test_requester_outside_a_restricted_group_never_gets_its_documents(helpdesk, scripted):
    client, _, _ = helpdesk
    # A model that copies the sentences closest to each part of the question (two parts here).
    scripted.answer = extractive_answer
    subject, body = "Password rules", "How many characters should a password ideally have, and may I use the browser's auto-fill?"
    # The key is in secops, alice is not: the ticket reads as alice within the key's groups.
    alice = post_ticket(client, subject=subject, body=body, requester="alice").json()
    assert PASSWORDS not in sources(alice)
    assert "15 characters" not in alice["reply"] and alice["decision"] == "needs_agent"
    stored = client.get(f"/api/helpdesk/tickets/{alice['ticket_id']}").json()
    assert "group:secops" not in stored["evidence"]["read_as"]
    bob = post_ticket(client, subject=subject, body=body, requester="bob").json()
    assert PASSWORDS in sources(bob) and "15 characters" in bob["reply"]
    # A requester named by e-mail (any case) is the same person.
    erin = post_ticket(client, subject=subject, body=body, requester="erin@example.com").json()
    assert PASSWORDS in sources(erin)


def test_a_reply_with_a_wrong_value_is_answered_from_the_sentence_it_restates(helpdesk, scripted):
    # Fresh-user trial (issue 42): the model's "12 characters" was rightly removed, and the ticket said
    # "nothing found" with passwords.md as its closest document. Asked so that the page's chunk that holds
    # the length ranks first by a clear margin (14 %): for "How long should my password be?" its two chunks tie
    # within 0.4 % and which one is packed has changed between installs.
    client, _, _ = helpdesk
    scripted.answer = citing(PASSWORDS, "The password should be at least 12 characters long [1].")
    ticket = post_ticket(client, subject="How long should my password be in characters?", requester="bob").json()
    assert ticket["reply"] != NO_ANSWER["en"] and "ideally 15 characters or longer" in ticket["reply"], ticket
    assert sources(ticket) == {PASSWORDS} and "12 characters" not in ticket["reply"]
    assert "no_answer_in_documents" not in [r["code"] for r in ticket["reasons"]], ticket["reasons"]


def test_a_withdrawn_sentence_never_reaches_the_ticket_system(helpdesk, scripted):
    # Fresh-user trial (issue 42): a needs_agent ticket's `reasons[].message` carried the model's
    # withdrawn draft sentence, judged unsupported, to the helpdesk.
    client, _, _ = helpdesk
    invented = "The IT desk re-enrolls Okta Verify every Friday at 4pm in room 12."
    scripted.answer = f"{OKTA_REPLY} {invented}"
    ticket = post_ticket(client, subject="Okta Verify is not prompting me", requester="nobody@example.com").json()
    assert ticket["decision"] == "needs_agent" and "Quit Okta Verify" in ticket["reply"]
    removed = [r["message"] for r in ticket["reasons"] if r["code"] == "unsupported_sentence"]
    assert removed == ["1 sentence(s) of the draft removed, not supported by their sources"], ticket["reasons"]
    stored = client.get(f"/api/helpdesk/tickets/{ticket['ticket_id']}").json()
    for shown in (ticket, stored):
        assert "Friday" not in json.dumps(shown) and "room 12" not in json.dumps(shown), shown


def test_a_key_outside_the_group_reads_nothing_of_it_for_a_requester_inside(helpdesk, scripted):
    client, res, _ = helpdesk
    scripted.answer = PASSWORD_REPLY
    name = f"it-only-{uuid.uuid4().hex[:6]}"
    key = create_api_key(res.db, name, groups=["it"])  # bob is in secops, this key is not
    response = client.post(
        "/api/helpdesk/tickets", headers={"Authorization": f"Bearer {key.key}", "Idempotency-Key": "p1"},
        json={"subject": "Password rules", "body": "How long should my password be?", "requester": "bob"},
    )
    assert response.status_code == 201
    assert PASSWORDS not in sources(response.json()) and "15 characters" not in response.json()["reply"]


def test_unknown_requester_reads_everyone_only_and_goes_to_an_agent(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = OKTA_REPLY
    ticket = post_ticket(client, subject="Okta Verify is not prompting me", requester="nobody@example.com").json()
    assert ticket["decision"] == "needs_agent"
    assert "requester_unknown" in [r["code"] for r in ticket["reasons"]]
    assert sources(ticket) <= {OKTA}  # a draft for the agent, from documents open to everyone


def test_a_ticket_asking_for_an_action_goes_to_an_agent(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = OKTA_REPLY
    ticket = post_ticket(client, subject="Okta Verify is not prompting me",
                         body="Please reset my Okta Verify enrollment so I can set it up again.").json()
    assert ticket["decision"] == "needs_agent"
    codes = [r["code"] for r in ticket["reasons"]]
    assert "action_requested" in codes and "grounded" not in codes


def test_same_key_same_result_without_a_second_generation_and_409_for_another_body(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = OKTA_REPLY
    key = uuid.uuid4().hex
    first = post_ticket(client, subject="Okta Verify is not prompting me", key=key)
    generations = len(scripted.requests)
    again = post_ticket(client, subject="Okta Verify is not prompting me", key=key)
    assert first.status_code == 201 and again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert len(scripted.requests) == generations  # no second generation
    other = post_ticket(client, subject="Okta Verify is not prompting me", body="and more", key=key)
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_conflict"
    # external_id stands in for the header.
    external = f"ZD-{uuid.uuid4().hex[:8]}"
    body = {"subject": "Okta Verify is not prompting me", "requester": "alice", "external_id": external}
    one = client.post("/api/helpdesk/tickets", json=body)
    two = client.post("/api/helpdesk/tickets", json=body)
    assert one.status_code == 201 and two.status_code == 200 and one.json()["ticket_id"] == two.json()["ticket_id"]
    assert client.post("/api/helpdesk/tickets", json={"subject": "x", "requester": "alice"}).status_code == 400


def test_tickets_are_listed_with_filters(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = OKTA_REPLY
    category = f"cat-{uuid.uuid4().hex[:6]}"
    auto = post_ticket(client, subject="Okta Verify is not prompting me", category=category).json()
    agent = post_ticket(client, subject="Please grant me admin rights on my laptop", category=category).json()
    assert auto["decision"] == "auto_reply" and agent["decision"] == "needs_agent"
    listed = client.get("/api/helpdesk/tickets", params={"category": category}).json()
    assert [t["ticket_id"] for t in listed] == [agent["ticket_id"], auto["ticket_id"]]
    only = client.get("/api/helpdesk/tickets", params={"category": category, "decision": "auto_reply"}).json()
    assert [t["ticket_id"] for t in only] == [auto["ticket_id"]]
    future = client.get("/api/helpdesk/tickets", params={"category": category, "since": "2999-01-01T00:00:00Z"}).json()
    assert future == []
    assert client.get("/api/helpdesk/tickets/999999").status_code == 404


def test_a_resolution_becomes_a_document_for_its_audience_only(helpdesk, scripted):
    client, res, _ = helpdesk
    scripted.answer = OKTA_REPLY
    word = f"zorblat{uuid.uuid4().hex[:6]}"  # a term no other document has
    ticket = post_ticket(client, subject=f"The {word} VPN client crashes on start").json()
    assert ticket["decision"] == "needs_agent"
    resolution = f"Reinstall the {word} VPN client from Self Service, then sign in again with Okta."
    response = client.post(
        f"/api/helpdesk/tickets/{ticket['ticket_id']}/resolution",
        json={"resolution": resolution, "resolved_by": "agent-kim", "audience": ["group:secops"]},
    )
    assert response.status_code == 200, response.text
    stored = response.json()
    assert stored["outcome"] == "rejected" and stored["state"] == "resolved" and stored["resolution_job_id"]
    assert client.app.state.dispatcher.join(timeout_s=120)
    retriever = client.app.state.assistant.retriever
    hits_bob = retriever.search(f"{word} VPN client", principal=load_principal(res.db, "bob"))
    hits_alice = retriever.search(f"{word} VPN client", principal=load_principal(res.db, "alice"))
    assert any(word in c.text for c in hits_bob.chunks), [c.source for c in hits_bob.chunks]
    assert not any(word in c.text for c in hits_alice.chunks)
    bad = client.post(f"/api/helpdesk/tickets/{ticket['ticket_id']}/resolution",
                      json={"resolution": "x", "resolved_by": "kim", "audience": ["group"]})
    assert bad.status_code == 400


def test_a_resolution_is_never_published_wider_than_the_documents_its_reply_cites(helpdesk, scripted):
    # Fresh-user trial: a finance-only key resolved a ticket whose reply quoted a finance page with
    # audience ["everyone"], and the page's figures became searchable by everyone.
    client, res, _ = helpdesk
    scripted.answer = extractive_answer
    ticket = post_ticket(client, subject="Password rules", body="How many characters should a password ideally have?",
                         requester="bob").json()
    assert PASSWORDS in sources(ticket), ticket  # the reply rests on the secops-only page
    path = f"/api/helpdesk/tickets/{ticket['ticket_id']}/resolution"
    for audience in (["everyone"], ["group:secops", "group:it"]):
        refused = client.post(path, json={"resolution": ticket["reply"], "resolved_by": "kim", "audience": audience})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "audience_too_wide", refused.text
        assert PASSWORDS in refused.json()["error"]["message"] and "group:secops" in refused.json()["error"]["message"]
    assert client.get(f"/api/helpdesk/tickets/{ticket['ticket_id']}").json()["state"] != "resolved"  # nothing stored
    kept = client.post(path, json={"resolution": ticket["reply"], "resolved_by": "kim", "audience": ["group:secops"]})
    assert kept.status_code == 200 and kept.json()["audience"] == ["group:secops"], kept.text

    # A conversation handed over from the web app cites nothing of its own: what it rests on are the
    # documents its answers cited (fresh-user trial: a hand-over of a finance conversation went to everyone).
    handed = dataclasses.replace(get_ticket(res.db, ticket["ticket_id"], client="helpdesk"), citations=[],
                                 evidence={"conversation_doc_ids": [c["doc_id"] for c in ticket["citations"]]})
    with pytest.raises(InvalidRequestError, match="audience_too_wide|wider than the readers"):
        check_audience(res.db, handed, ["everyone"])
    check_audience(res.db, handed, ["group:secops"])


def test_an_accepted_reply_is_recorded_as_accepted(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = OKTA_REPLY
    ticket = post_ticket(client, subject="Okta Verify is not prompting me").json()
    resolved = client.post(
        f"/api/helpdesk/tickets/{ticket['ticket_id']}/resolution",
        json={"resolution": ticket["reply"], "resolved_by": "agent-kim", "audience": ["everyone"]},
    ).json()
    assert resolved["outcome"] == "accepted"
    listed = client.get("/api/helpdesk/tickets", params={"outcome": "accepted"}).json()
    assert ticket["ticket_id"] in [t["ticket_id"] for t in listed]


class Receiver:
    """A real local HTTP server that answers 500 to the first `failures` POSTs, then 200 (or, with
    `redirect_to`, a 302 there); it keeps each request's headers and body."""

    def __init__(self, *, failures: int = 0, redirect_to: str | None = None):
        self.failures, self.redirect_to = failures, redirect_to
        self.received: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.received.append((dict(self.headers), body))
                if receiver.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", receiver.redirect_to)
                else:
                    self.send_response(500 if len(receiver.received) <= receiver.failures else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/hook"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def wait_for_delivery(client, ticket_id: int, headers: dict, *, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = client.get("/api/helpdesk/deliveries", params={"ticket_id": ticket_id}, headers=headers).json()
        if listed and listed[0]["status"] != "pending":
            return listed[0]
        time.sleep(0.1)
    raise AssertionError(f"delivery of ticket {ticket_id} still pending after {timeout_s} s: {listed}")


def test_webhook_is_signed_retried_and_delivered(helpdesk, scripted):
    client, res, _ = helpdesk
    scripted.answer = OKTA_REPLY
    receiver = Receiver(failures=2)
    try:
        name = f"hook-{uuid.uuid4().hex[:6]}"
        key = create_api_key(res.db, name, groups=["it"])
        secret = configure_api_key(res.db, name, webhook_url=receiver.url).webhook_secret
        headers = {"Authorization": f"Bearer {key.key}"}
        ticket = client.post("/api/helpdesk/tickets", headers={**headers, "Idempotency-Key": "w1"},
                             json={"subject": "Okta Verify is not prompting me", "requester": "alice"}).json()
        delivery = wait_for_delivery(client, ticket["ticket_id"], headers)
        assert delivery["status"] == "delivered"
        assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 200]
        assert len(receiver.received) == 3
        for got_headers, body in receiver.received:
            assert verify_signature(secret, got_headers[SIGNATURE_HEADER], body)
            assert not verify_signature("whsec_other", got_headers[SIGNATURE_HEADER], body)
        payload = json.loads(receiver.received[-1][1])
        assert payload["ticket_id"] == ticket["ticket_id"] and payload["decision"] == ticket["decision"]
        assert payload["reply"] == ticket["reply"]
        # Another key sees none of these deliveries.
        assert client.get("/api/helpdesk/deliveries", params={"ticket_id": ticket["ticket_id"]}).json() == []
    finally:
        receiver.close()


def test_webhook_redirect_to_another_host_is_not_followed(helpdesk, scripted):
    client, res, _ = helpdesk
    scripted.answer = OKTA_REPLY
    target = Receiver()
    # "localhost" is another origin than 127.0.0.1, though the same machine.
    redirecting = Receiver(redirect_to=f"http://localhost:{target.http.server_address[1]}/stolen")
    try:
        name = f"redir-{uuid.uuid4().hex[:6]}"
        key = create_api_key(res.db, name, groups=["it"])
        configure_api_key(res.db, name, webhook_url=redirecting.url)
        headers = {"Authorization": f"Bearer {key.key}"}
        ticket = client.post("/api/helpdesk/tickets", headers={**headers, "Idempotency-Key": "r1"},
                             json={"subject": "Okta Verify is not prompting me", "requester": "alice"}).json()
        delivery = wait_for_delivery(client, ticket["ticket_id"], headers)
        assert delivery["status"] == "dead" and len(delivery["attempts"]) == 1
        assert "redirect to another origin" in delivery["attempts"][0]["error"]
        assert target.received == []
    finally:
        redirecting.close()
        target.close()


def test_rate_limits_answer_429_with_headers(helpdesk, scripted):
    client, res, _ = helpdesk
    name = f"rl-{uuid.uuid4().hex[:6]}"
    key = create_api_key(res.db, name)
    configure_api_key(res.db, name, requests_per_minute=2)
    headers = {"Authorization": f"Bearer {key.key}"}
    first = client.get("/v1/models", headers=headers)
    assert first.status_code == 200
    assert first.headers["x-ratelimit-limit-requests"] == "2" and first.headers["x-ratelimit-remaining-requests"] == "1"
    assert client.get("/v1/models", headers=headers).status_code == 200
    refused = client.get("/v1/models", headers=headers)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"  # OpenAI's shape under /v1
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60 and refused.headers["x-ratelimit-reset-requests"].endswith("s")
    # The helpdesk routes count against the same budget.
    assert client.get("/api/helpdesk/tickets", headers=headers).status_code == 429
    # Another key is not affected.
    assert client.get("/v1/models").status_code == 200


def test_token_limit_is_charged_after_the_answer(helpdesk, scripted):
    client, res, _ = helpdesk
    scripted.answer = OKTA_REPLY
    name = f"tok-{uuid.uuid4().hex[:6]}"
    key = create_api_key(res.db, name)
    configure_api_key(res.db, name, tokens_per_minute=50)  # the scripted server reports 97 tokens per answer
    headers = {"Authorization": f"Bearer {key.key}"}
    body = {"model": "assistant-rag", "messages": [{"role": "user", "content": "Okta Verify is not prompting me"}]}
    first = client.post("/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["usage"]["total_tokens"] > 50
    refused = client.post("/v1/chat/completions", json=body, headers=headers)
    assert refused.status_code == 429
    assert refused.headers["x-ratelimit-limit-tokens"] == "50" and refused.headers["x-ratelimit-remaining-tokens"] == "0"
    assert "Retry-After" in refused.headers


def test_tickets_need_an_api_key(helpdesk):
    client, _, _ = helpdesk
    anonymous = TestClient(client.app)
    assert anonymous.post("/api/helpdesk/tickets", json={"subject": "x", "requester": "alice"}).status_code == 401


def test_metrics_count_tickets_per_day_and_category(helpdesk, scripted):
    client, _, _ = helpdesk
    scripted.answer = okta_reply
    category = f"m-{uuid.uuid4().hex[:6]}"
    auto = post_ticket(client, subject="Okta Verify is not prompting me", category=category).json()
    post_ticket(client, subject="The coffee machine in the kitchen is leaking water", category=category)
    client.post(f"/api/helpdesk/tickets/{auto['ticket_id']}/resolution",
                json={"resolution": "We re-enrolled your device in Okta.", "resolved_by": "kim", "audience": ["everyone"]})
    # A third ticket whose first request is still being answered is received, and counted as in progress.
    claim_ticket(client.app.state.assistant.resources.db, client="helpdesk", idempotency_key=f"k-{category}",
                 request_hash="h", fields=dict(subject="s", body="b", requester="alice", requester_known=True,
                                               category=category, language="en", external_id=None))
    [row] = [r for r in client.get("/api/helpdesk/metrics").json() if r["category"] == category]
    assert (row["received"], row["in_progress"], row["auto_replied"], row["escalated"]) == (3, 1, 1, 1)
    assert (row["auto_replies_edited"], row["auto_replies_rejected"]) == (0, 1)
    assert row["day"] == auto["created_at"][:10]
    assert client.app.state.dispatcher.join(timeout_s=120)  # the resolution's ingestion
