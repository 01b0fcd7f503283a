"""The web UI in a real browser: the login form appears when /api/auth/me says 401, signing in shows the
chat, and the chat's request carries the session's CSRF token (else it would be refused)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.conftest_llm_server import free_port
from tests.corpus import HANDBOOK

CHROMIUM = Path("/usr/bin/chromium")
PASSWORD = "ui-test-password"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make browser)")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("ui")
    docs = copy_subset(HANDBOOK, root / "docs", ["company-info-and-process/values/index.md"])
    settings = make_settings(root / "var")
    res = open_resources(settings)
    Ingestor(res).sync(docs)
    create_user(res.db, "uma", password=PASSWORD)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, resources=res), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    server.should_exit = True
    thread.join(timeout=30)
    res.close()


def test_login_form_then_chat_then_logout(server_url):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(server_url)
        expect(page.locator("#login")).to_be_visible()
        expect(page.locator("#ask")).to_be_hidden()

        page.fill("#username", "uma")
        page.fill("#password", "not-the-password")
        page.click("#login button[type=submit]")
        expect(page.locator("#login-error")).to_contain_text("wrong")

        page.fill("#password", PASSWORD)
        page.click("#login button[type=submit]")
        expect(page.locator("#ask")).to_be_visible()
        expect(page.locator("#whoami")).to_contain_text("uma")
        cookie = next(c for c in page.context.cookies() if c["name"] == "assistant_session")
        assert cookie["httpOnly"]

        # Unrelated to the one indexed page: the assistant abstains without calling the model, which
        # is enough to prove that the POST passed the CSRF check.
        page.fill("#question", "xyzzy plugh frobnicate quux")
        page.click("#send")
        answer = page.locator("[data-testid=answer]").last
        expect(answer).not_to_have_class("answer streaming", timeout=240_000)
        expect(answer).to_contain_text("could not find")
        expect(page.locator("#thread .error")).to_have_count(0)

        page.reload()
        expect(page.locator("#ask")).to_be_visible()  # the session survives a reload
        page.click("#logout")
        expect(page.locator("#login")).to_be_visible()
        page.reload()
        expect(page.locator("#login")).to_be_visible()
        browser.close()
