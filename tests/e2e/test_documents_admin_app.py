"""The documents and admin pages in Debian's Chromium: upload files as "only me" and find them by search
while another user cannot (a failed file says why); a question the documents do not answer says so and
hands the conversation to the helpdesk; a restricted document stays invisible outside its group; a
rating shows up in the admin's quality view; the admin's users page creates and disables accounts; the
admin's adapters page compares canary and live ratings and promotes and rolls back.

The package's one server (tests/e2e/conftest.py; one of its pages is readable by group `hr` only),
answered by the citing stand-in model (tests/standin_openai.py). Screenshots go to docs/screenshots/ (upload,
admin users, admin quality, admin adapters), linked from the README and docs/finetune.md.
"""

from __future__ import annotations

import uuid

import pytest

from assistant.auth.accounts import create_user
from tests.e2e.conftest import CHROMIUM, PASSWORD, RESTRICTED, RESTRICTED_GROUP, shot, sign_in
from tests.standin_openai import extractive_answer

AQUARIUM = "# Aquarium policy\n\nThe office aquarium is fed by the zebrafish rota every Tuesday at noon.\n"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make browser)")


def account(res, *groups: str, admin: bool = False) -> str:
    name = f"{'admin' if admin else 'user'}-{uuid.uuid4().hex[:6]}"
    create_user(res.db, name, password=PASSWORD, groups=list(groups), is_admin=admin)
    return name


def ask(page, question: str) -> None:
    from playwright.sync_api import expect

    finished = page.locator("#thread .turn.assistant .actions")
    before = finished.count()
    page.fill("#question", question)
    page.click("#send")
    expect(finished).to_have_count(before + 1, timeout=60_000)


def searchable(page, url: str, query: str) -> list[str]:
    """The sources the signed-in page's user finds for `query` through the search API."""
    csrf = page.evaluate("fetch('/api/auth/me').then(r => r.json()).then(b => b.csrf_token)")
    hits = page.request.post(f"{url}/api/search", data={"query": query, "top_k": 5}, headers={"X-CSRF-Token": csrf})
    assert hits.ok, hits.text()
    return [h["source"] for h in hits.json()]


def test_upload_as_only_me_is_found_by_search_and_not_by_another_user(served, browser):
    from playwright.sync_api import expect

    url, res, llm = served
    llm.answer = extractive_answer
    owner, other = account(res), account(res)
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    sign_in(page, url, owner)
    page.click('#views [data-view="documents"]')
    expect(page.locator('#views [data-view="admin"]')).to_be_hidden()  # not an admin
    expect(page.locator("#upload-audience option")).to_have_count(1)  # only me: no groups, not an admin
    name = f"aquarium-{uuid.uuid4().hex[:6]}.md"
    page.set_input_files("#upload-input", [
        {"name": name, "mimeType": "text/markdown", "buffer": AQUARIUM.encode()},
        {"name": "scanner.exe", "mimeType": "application/octet-stream", "buffer": b"MZ\x90\x00" + bytes(range(256)) * 4},
    ])
    expect(page.locator("#upload-chosen")).to_have_text("2 file(s) chosen")
    page.click("#upload-send")
    row = page.locator("#upload-rows tr", has_text=name)
    expect(row.locator("[data-testid=upload-status]")).to_have_text("Searchable", timeout=60_000)
    failed = page.locator("#upload-rows tr", has_text="scanner.exe")
    expect(failed.locator("[data-testid=upload-status]")).to_have_text("Unsupported file type", timeout=60_000)
    expect(row).to_contain_text("Only me")
    shot(page, "upload.png")

    assert name in searchable(page, url, "who feeds the office aquarium zebrafish")
    page.click('#views [data-view="chat"]')
    ask(page, "Who feeds the office aquarium?")
    expect(page.locator("[data-testid=citations]").last).to_contain_text(name)

    # Another user finds nothing, is told so plainly, and can hand the question to the helpdesk.
    stranger = browser.new_context().new_page()
    sign_in(stranger, url, other)
    assert name not in searchable(stranger, url, "who feeds the office aquarium zebrafish")
    ask(stranger, "Who feeds the office aquarium?")
    note = stranger.locator("[data-testid=not-found]").last
    expect(note).to_contain_text("do not answer this")
    expect(stranger.locator("[data-testid=citations]")).to_have_count(0)
    note.locator(".ask-helpdesk").click()
    expect(note).to_contain_text("Sent to the helpdesk as ticket #")
    page.context.close()
    stranger.context.close()


def test_a_restricted_document_stays_invisible_outside_its_group(app, browser):
    from playwright.sync_api import expect

    url, res, llm = app
    llm.answer = extractive_answer
    outsider, member = account(res), account(res, RESTRICTED_GROUP)
    name = RESTRICTED.rsplit("/", 1)[-1]
    question = "When are the salary bands of engineers reviewed?"
    page = browser.new_context().new_page()
    sign_in(page, url, outsider)
    assert not any(name in s for s in searchable(page, url, "salary bands engineers review"))
    ask(page, question)
    expect(page.locator("#thread")).not_to_contain_text(name)
    expect(page.locator("#thread")).not_to_contain_text("compensation committee")
    page.context.close()

    page = browser.new_context().new_page()
    sign_in(page, url, member)
    ask(page, question)
    expect(page.locator("[data-testid=citations]").last).to_contain_text(name)
    expect(page.locator("[data-testid=answer]").last).to_contain_text("compensation committee")
    page.context.close()


def test_a_rating_shows_in_the_admin_quality_view_and_admins_manage_users(app, browser):
    from playwright.sync_api import expect

    url, res, llm = app
    llm.answer = extractive_answer
    reader, admin = account(res), account(res, admin=True)
    page = browser.new_context().new_page()
    sign_in(page, url, reader)
    question = "When are visitor badges printed?"
    ask(page, question)
    with page.expect_response(lambda r: "/feedback" in r.url and r.status == 200):
        page.locator(".rate-down").last.click()
    page.locator(".comment-input textarea").last.fill("It missed the approval step.")
    page.locator(".correction-input textarea").last.fill("Badges are printed at the front desk once a host approves.")
    with page.expect_response(lambda r: "/feedback" in r.url and r.status == 200):
        page.locator(".comment-send").last.click()
    page.context.close()
    from assistant.answering.store import list_feedback

    mine = next(f for f in list_feedback(res.db, limit=50) if f.principal == reader)
    assert (mine.comment, mine.corrected_answer) == (
        "It missed the approval step.", "Badges are printed at the front desk once a host approves.")

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    sign_in(page, url, admin)
    page.click('#views [data-view="admin"]')
    users = page.locator("[data-testid=users-table]")
    expect(users).to_contain_text(reader)
    newcomer = f"newcomer-{uuid.uuid4().hex[:6]}"
    form = page.locator("#user-create")
    form.locator("input[name=name]").fill(newcomer)
    form.locator("input[name=password]").fill("newcomer-password-123")
    form.locator("input[name=groups]").fill("finance, legal")
    form.locator("button[type=submit]").click()
    expect(page.locator("#admin-status")).to_have_text(f"Created {newcomer}.")
    row = users.locator("tr", has_text=newcomer)
    expect(row).to_contain_text("finance, legal")
    row.locator("button", has_text="Disable").click()
    expect(users.locator("tr", has_text=newcomer)).to_contain_text("Disabled")
    shot(page, "admin-users.png")

    page.click("#admin-tabs [data-tab=quality]")
    ratings = page.locator("[data-testid=ratings-table]")
    expect(ratings).to_contain_text(question)
    expect(ratings).to_contain_text("It missed the approval step.")
    expect(page.locator("[data-testid=gaps]")).to_contain_text(question)  # rated down: a document to write
    expect(page.locator("[data-testid=q-questions] .tile-value")).not_to_have_text("0")
    shot(page, "admin-quality.png")
    page.select_option("#lang", "zh")
    expect(page.locator("#admin-tabs [data-tab=quality]")).to_have_text("使用与质量")
    expect(page.locator("[data-testid=ratings-table]")).to_contain_text(question)
    page.context.close()


def test_admins_compare_canary_and_live_feedback_then_promote_and_roll_back(app, browser):
    """The adapters tab: ratings of the answers each serving adapter wrote, side by side; promote the
    canary to live and roll it back, each in one click (for an audience nobody belongs to, so that no
    other test's answers are routed to these adapters)."""
    from playwright.sync_api import expect

    from assistant.adapters import store as registry_db
    from assistant.answering.store import add_answer, create_conversation, rate_answer, start_exchange
    from assistant.core.db.identity import load_principal

    url, res, _llm = app
    audience, tag = f"group:nobody-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:6]
    made = {}
    for role in ("live", "canary"):
        record = registry_db.add_adapter(res.db, name=f"{role}-{tag}", audience=audience, base_model="b", snapshot_id=None,
                                         job_id=None, hyperparameters={})
        registry_db.promote(res.db, record.id, by="test", to=role)
        made[role] = record
    reader = load_principal(res.db, account(res))
    for role, rating in (("live", 1), ("live", -1), ("canary", 1)):
        conv = create_conversation(res.db, user_id=reader.user_id)
        start_exchange(res.db, conv.id, user_id=reader.user_id, question=f"Where is the {role} printer?")
        stored = add_answer(res.db, conv.id, user_id=reader.user_id, answer="On floor 2.", citations=[], abstained=False)
        registry_db.record_answer_adapter(res.db, stored.id, made[role].name)
        rate_answer(res.db, stored.id, principal=reader, rating=rating)

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    sign_in(page, url, account(res, admin=True))
    page.click('#views [data-view="admin"]')
    page.click("#admin-tabs [data-tab=adapters]")
    compared = page.locator("[data-testid=adapter-feedback]")
    expect(compared.locator("tr", has_text=f"live-{tag}")).to_contain_text("50%")
    expect(compared.locator("tr", has_text=f"canary-{tag}")).to_contain_text("100%")
    shot(page, "admin-adapters.png")
    adapters = page.locator("[data-testid=adapters-table]")
    adapters.locator("tr", has_text=f"canary-{tag}").locator("button", has_text="Make live").click()
    # The app's model server (the stand-in) is told to load and unload: its answers stream for a few seconds.
    expect(page.locator("#admin-status")).to_have_text(f"Loaded: canary-{tag}. Unloaded: live-{tag}.", timeout=30_000)
    assert registry_db.get_adapter(res.db, made["canary"].id).status == "live"
    page.locator("[data-testid=rollbacks] button", has_text=f"Roll back {audience}").click()
    expect(page.locator("#admin-status")).to_have_text(f"Loaded: live-{tag}. Unloaded: canary-{tag}.", timeout=30_000)
    assert registry_db.get_adapter(res.db, made["live"].id).status == "live"
    expect(adapters.locator("tr", has_text=f"canary-{tag}")).to_contain_text("retired")
    page.context.close()
    registry_db.set_status(res.db, made["live"].id, "retired", by="test")
