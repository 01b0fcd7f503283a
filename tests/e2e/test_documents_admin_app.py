"""The documents and admin pages in Debian's Chromium: upload files as "only me" and find them by search
while another user cannot (a failed file says why); a question the documents do not answer says so and
hands the conversation to the helpdesk; a restricted document stays invisible outside its group; a
rating shows up in the admin's quality view; the admin's users page creates and disables accounts.

One server per module over two handbook pages (one readable by group `secops` only), answered by the
citing stand-in model (tests/standin_openai.py). Screenshots go to docs/screenshots/ (upload,
admin users, admin quality), linked from the README.
"""

from __future__ import annotations

import uuid

import pytest
import yaml

from assistant.core.acl_manifest import AclManifest
from assistant.core.auth.accounts import create_user
from ingest.pipeline import Ingestor
from tests.api.live_server import LiveServer
from tests.conftest import CORPUS_MODEL, copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.e2e.test_chat_app import CHROMIUM, PASSWORD, browser, shot, sign_in  # noqa: F401 (browser: a fixture)

PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
ACCESS = "departments/tech-ops/process/application_access_request.md"
AQUARIUM = "# Aquarium policy\n\nThe office aquarium is fed by the zebrafish rota every Tuesday at noon.\n"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make browser)")


@pytest.fixture(scope="module")
def app(tmp_path_factory, citing_model):
    """`(url, resources)` of the app, with a helpdesk taking conversations."""
    root = tmp_path_factory.mktemp("documents-admin")
    docs = copy_subset(HANDBOOK, root / "docs", [PASSWORDS, ACCESS])
    manifest = {"default": ["everyone"], "rules": [{"path": PASSWORDS, "allow": ["group:secops"]}]}
    settings = make_settings(
        root / "var", embedding_model=CORPUS_MODEL, llm_context_tokens=4096, answer_cache_entries=0,
        sse_coalesce_ms=0, helpdesk_handoff=True, **citing_model,
    )
    res = open_resources(settings)
    Ingestor(res).sync(docs, acl=AclManifest.from_dict(yaml.safe_load(yaml.safe_dump(manifest))))
    server = LiveServer(settings, res).start()
    yield server.url, res
    server.stop()
    res.close()


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


def test_upload_as_only_me_is_found_by_search_and_not_by_another_user(app, browser):
    from playwright.sync_api import expect

    url, res = app
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

    url, res = app
    outsider, member = account(res), account(res, "secops")
    page = browser.new_context().new_page()
    sign_in(page, url, outsider)
    assert not any("passwords.md" in s for s in searchable(page, url, "password requirements length"))
    ask(page, "How long should my passwords be?")
    expect(page.locator("#thread")).not_to_contain_text("passwords.md")
    expect(page.locator("#thread")).not_to_contain_text("15 characters")
    page.context.close()

    page = browser.new_context().new_page()
    sign_in(page, url, member)
    ask(page, "How long should my passwords be?")
    expect(page.locator("[data-testid=citations]").last).to_contain_text("passwords.md")
    page.context.close()


def test_a_rating_shows_in_the_admin_quality_view_and_admins_manage_users(app, browser):
    from playwright.sync_api import expect

    url, res = app
    reader, admin = account(res), account(res, admin=True)
    page = browser.new_context().new_page()
    sign_in(page, url, reader)
    question = "How do I request access to an application?"
    ask(page, question)
    with page.expect_response(lambda r: "/feedback" in r.url and r.status == 200):
        page.locator(".rate-down").last.click()
    page.locator(".comment-input textarea").last.fill("It missed the approval step.")
    with page.expect_response(lambda r: "/feedback" in r.url and r.status == 200):
        page.locator(".comment-send").last.click()
    page.context.close()

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
