"""Questions and tickets of several parts over HTTP, on real handbook pages, answered by a model server
that copies and cites (`tests.standin_openai.extractive_answer`, a real HTTP server): each part answered
or named as not covered, a ticket auto-replied only when every part is, the requester's ACL per part."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from assistant.answering.cache import AnswerCache, MemoryStore, index_version
from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from assistant.auth.acl_manifest import AclManifest
from assistant.auth.api_keys import create_api_key
from assistant.core.db.documents import readable_versions
from assistant.core.principals import Principal
from ingest.pipeline import Ingestor
from tests.api.conftest import parse_sse
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer, extractive_answer

OKTA = "departments/tech-ops/tools/Okta/okta-verify-troubleshooting-steps.md"
PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
STANDARDS = "departments/tech-ops/process/internal-security/computer-standards.md"
GROUPS = "departments/tech-ops/tools/googlegroups.md"
FILES = [OKTA, PASSWORDS, STANDARDS, GROUPS]
UNCOVERED = "How do I book a meeting room in the Berlin office?"
PASSWORD_LENGTH = "How many characters should a password ideally have?"


@pytest.fixture(scope="module")
def copier() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(extractive_answer, usage=None) as server:
        yield server


@pytest.fixture(scope="module")
def desk(tmp_path_factory, copier):
    """`(client, key)`: the app over FILES, PASSWORDS readable by group secops only; users alice (no
    group) and bob (secops); the client holds the helpdesk's key (groups secops and it)."""
    root = tmp_path_factory.mktemp("parts")
    folder = copy_subset(HANDBOOK, root / "docs", FILES)
    settings = make_settings(
        root / "var", llm_backend="openai", openai_base_url=copier.base_url, openai_model="assistant",
        answer_cache_entries=0, query_rewrite="rules",
    )
    res = open_resources(settings)
    manifest = AclManifest.from_dict({"default": ["everyone"], "rules": [{"path": PASSWORDS, "allow": ["group:secops"]}]})
    Ingestor(res).sync(folder, acl=manifest)
    create_user(res.db, "alice")
    create_user(res.db, "bob", groups=["secops"])
    key = create_api_key(res.db, "helpdesk-parts", groups=["secops", "it"])
    app = create_app(settings, resources=res)
    try:
        with TestClient(app, headers={"Authorization": f"Bearer {key.key}"}) as client:
            yield client, key
    finally:
        asyncio.run(res.llm.aclose())
        res.close()


def post_ticket(client, *, subject: str, body: str, requester: str = "bob") -> dict:
    response = client.post(
        "/api/helpdesk/tickets", json={"subject": subject, "body": body, "requester": requester},
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    assert response.status_code == 201, response.text
    return response.json()


def cited(ticket_or_done: dict) -> set[str]:
    return {c["source"] for c in ticket_or_done["citations"]}


def test_a_question_of_two_parts_answers_one_and_names_the_other_as_not_covered(desk, copier):
    client, _ = desk
    before = len(copier.requests)
    response = client.post("/api/chat", json={"question": f"How do I create a Google Group? {UNCOVERED}"})
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    done = next(data for name, data in events if name == "done")
    citations = next(data for name, data in events if name == "citations")
    assert not done["abstained"]
    # What each part finds is listed before the first part is answered (parts are answered in turn).
    (kind, found), (status, stage) = events[:2]
    assert kind == "sources" and found["preliminary"] and GROUPS in {s["source"] for s in found["sources"]}, events[:2]
    assert (status, stage["stage"]) == ("status", "reading"), events[:2]
    first, second = done["parts"]
    assert first["text"] == "How do I create a Google Group?" and first["covered"] and first["chunk_ids"]
    assert second["text"] == UNCOVERED and not second["covered"]
    assert f"I found nothing about “{UNCOVERED[:-1]}”" in done["answer"]
    assert "[1]" in done["answer"].split("I found nothing")[0]  # the answered part keeps its citation
    assert cited(citations) == {GROUPS}
    tokens = "".join(data["text"] for name, data in events if name == "token")
    assert tokens == done["answer"]
    assert len(copier.requests) - before >= 1  # the uncovered part may be declined before generation


def test_a_single_question_is_answered_once(desk, copier):
    client, _ = desk
    before = len(copier.requests)
    response = client.post("/api/chat", json={"question": "How do I reset my password and log in again?"})
    done = next(data for name, data in parse_sse(response.text) if name == "done")
    assert "parts" not in done
    assert len(copier.requests) - before <= 1


def test_a_ticket_with_an_uncovered_half_goes_to_an_agent_with_the_covered_half_as_draft(desk):
    client, _ = desk
    ticket = post_ticket(client, subject="A Google Group and a meeting room",
                         body=f"How do I create a Google Group for my team? Also, {UNCOVERED[0].lower()}{UNCOVERED[1:]}")
    assert ticket["decision"] == "needs_agent"
    codes = [r["code"] for r in ticket["reasons"]]
    assert "part_not_covered" in codes and "grounded" not in codes
    uncovered = next(r for r in ticket["reasons"] if r["code"] == "part_not_covered")
    assert "meeting room in the Berlin office" in uncovered["message"]
    assert cited(ticket) == {GROUPS} and "[1]" in ticket["reply"]  # the draft keeps the covered half
    assert "Berlin office" in ticket["reply"]  # and names the other
    stored = client.get(f"/api/helpdesk/tickets/{ticket['ticket_id']}").json()
    assert [p["covered"] for p in stored["evidence"]["parts"]] == [True, False]


def test_a_ticket_answered_in_both_parts_is_auto_replied_citing_both(desk):
    client, _ = desk
    ticket = post_ticket(
        client, subject="Password and screen lock",
        body=f"{PASSWORD_LENGTH} And after how many minutes of inactivity must the laptop screen lock?",
    )
    assert cited(ticket) == {PASSWORDS, STANDARDS}, ticket["reply"]
    assert ticket["decision"] == "auto_reply", ticket["reasons"]
    assert "I found nothing" not in ticket["reply"]
    assert [r["code"] for r in ticket["reasons"]] == ["grounded"]


def test_each_part_is_read_with_the_requesters_acl(desk):
    client, _ = desk
    body = f"{PASSWORD_LENGTH} And after how many minutes of inactivity must the laptop screen lock?"
    insider = post_ticket(client, subject="Password and screen lock", body=body, requester="bob")
    outsider = post_ticket(client, subject="Password and screen lock", body=body, requester="alice")
    assert PASSWORDS in cited(insider)
    assert PASSWORDS not in cited(outsider)  # alice is not in secops: no part reads the page
    assert "15 characters" in insider["reply"] and "15 characters" not in outsider["reply"]


def test_a_question_of_several_parts_is_cached_whole_per_acl_scope(desk, copier):
    client, _ = desk
    answerer = copy.copy(client.app.state.assistant.answerer)
    res = client.app.state.assistant.resources
    answerer.cache = AnswerCache(
        MemoryStore(10), versions=lambda ids, p: readable_versions(res.db, ids, principal=p),
        index_version=index_version("parts", uuid.uuid4().hex), ttl_s=60,
    )
    question = f"{PASSWORD_LENGTH} And after how many minutes of inactivity must the laptop screen lock?"
    reader = Principal(name="carol", groups=frozenset({"secops"}))
    first = asyncio.run(answerer.answer(question, principal=reader))
    assert not first.abstained and {c.source for c in first.citations} == {PASSWORDS, STANDARDS}
    generations = len(copier.requests)
    again = asyncio.run(answerer.answer(question, principal=reader))
    assert again.answer == first.answer and len(copier.requests) == generations  # served from the cache
    outsider = asyncio.run(answerer.answer(question, principal=Principal(name="erin", groups=frozenset())))
    assert PASSWORDS not in {c.source for c in outsider.citations}  # another ACL scope: answered anew


def test_a_part_answered_from_a_page_about_something_else_is_not_covered(desk):
    # The desk-phone half shares "phone" with the Okta page, whose sentences the copier copies and cites
    # (a kept, cited, grounded answer, though not to the question asked): the part is not covered, the
    # reply says so before those sentences, and the ticket is not auto-replied (issue 42 part 4: every
    # part covered by a sentence that answers it).
    client, _ = desk
    ticket = post_ticket(client, subject="A Google Group and my desk phone",
                         body="How do I create a Google Group for my team? "
                              "And how do I set up the voicemail PIN on my desk phone?")
    stored = client.get(f"/api/helpdesk/tickets/{ticket['ticket_id']}").json()
    assert ticket["decision"] == "needs_agent", ticket["reasons"]
    uncovered = [r["message"] for r in ticket["reasons"] if r["code"] == "part_not_covered"]
    assert len(uncovered) == 1 and "voicemail PIN" in uncovered[0], ticket["reasons"]
    assert [p["covered"] for p in stored["evidence"]["parts"]] == [True, False]
    assert GROUPS in cited(ticket), ticket["reply"]
    unsure = "I am not sure the documents answer “How do I set up the voicemail PIN on my desk phone”."
    assert unsure in ticket["reply"] and ticket["reply"].index(unsure) > ticket["reply"].index("Google Group")


@pytest.fixture
def cached_desk(desk):
    """`desk`'s client with an answer cache of its own on the app's answerer for one test (restored after)."""
    client, _ = desk
    answerer = client.app.state.assistant.answerer
    res = client.app.state.assistant.resources
    before = answerer.cache
    answerer.cache = AnswerCache(
        MemoryStore(10), versions=lambda ids, p: readable_versions(res.db, ids, principal=p),
        index_version=index_version("cached-tickets", uuid.uuid4().hex), ttl_s=60,
    )
    try:
        yield client
    finally:
        answerer.cache = before


@pytest.mark.parametrize("subject, body", [
    ("A Google Group", "How do I create a Google Group for my team?"),
    ("Password and screen lock", f"{PASSWORD_LENGTH} And after how many minutes of inactivity must the laptop screen lock?"),
], ids=["one-question", "two-parts"])
def test_a_reply_from_the_answer_cache_is_weighed_as_when_it_was_written(cached_desk, copier, subject, body):
    # A cached answer lost its grounding report (`sentences` 0) and its parts: the same ticket was then
    # weighed on other evidence than the first time (issue 42).
    client = cached_desk
    first = post_ticket(client, subject=subject, body=body)
    generations = len(copier.requests)
    again = post_ticket(client, subject=subject, body=body)
    assert len(copier.requests) == generations  # served from the answer cache
    written, served = (client.get(f"/api/helpdesk/tickets/{t['ticket_id']}").json() for t in (first, again))
    assert not written["evidence"]["cached"] and served["evidence"]["cached"]
    assert written["evidence"]["grounding"]["sentences"] > 0
    assert served["evidence"]["grounding"] == written["evidence"]["grounding"]
    assert served["evidence"].get("parts") == written["evidence"].get("parts")
    assert (served["decision"], served["confidence"], served["reasons"], served["reply"]) == (
        written["decision"], written["confidence"], written["reasons"], written["reply"])
