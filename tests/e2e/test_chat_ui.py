"""The product as a new user meets it: `assistant ingest docs` + `assistant serve`, then a real browser
signs in, asks about the product's own docs, watches the answer stream and sees its citations.

The server's model is the citing stand-in (`tests.standin_openai.extractive_answer`) behind the `openai`
backend: SmolLM2-135M, the tests' in-process model, writes answers that grounding rightly declines, so a
cited answer would depend on its luck (a CI run got "I could not find this…" here). The shipped chat model
is tested on its own (tests/service/test_builtin_chat_model.py, test_grounded_answers.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PASSWORD = "e2e-Secret-Password-1"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (make test installs it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def citing_server():
    """The citing stand-in model, a word every 50 ms (so that the page can be seen to stream)."""
    from tests.standin_openai import ScriptedOpenAIServer, extractive_answer

    with ScriptedOpenAIServer(extractive_answer, usage=None, delay_s=0.05) as llm:
        yield llm


@pytest.fixture(scope="module")
def server(tmp_path_factory, citing_server):
    data = tmp_path_factory.mktemp("e2e") / "var"
    env = {
        **os.environ, "ASSISTANT_DATA_DIR": str(data), "ASSISTANT_BOOTSTRAP_ADMIN_PASSWORD": PASSWORD,
        "HF_HUB_OFFLINE": "1", "ASSISTANT_LLM_BACKEND": "openai", "ASSISTANT_OPENAI_BASE_URL": citing_server.base_url,
        "ASSISTANT_OPENAI_MODEL": "assistant", "ASSISTANT_QUERY_REWRITE": "rules",
    }
    cli = [sys.executable, "-m", "assistant.cli.main"]
    subprocess.run([*cli, "ingest", str(REPO / "docs")], env=env, check=True, cwd=REPO, capture_output=True)
    port = _free_port()
    log = open(data / "serve.log", "w")
    proc = subprocess.Popen([*cli, "serve", "--port", str(port)], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the server did not start: " + (data / "serve.log").read_text()[-2000:])
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _signed_in(p, server: str):
    """A headless Chromium (`p`: the sync Playwright) and its page, signed in to `server` as the admin."""
    from playwright.sync_api import expect

    browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    page = browser.new_page()
    page.goto(server)
    page.fill("#username", "admin")
    page.fill("#password", PASSWORD)
    page.locator("#login button[type=submit]").click()
    expect(page.locator("#question")).to_be_visible(timeout=20_000)
    return browser, page


def test_sign_in_ask_and_see_cited_answer(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser, page = _signed_in(p, server)

        # Every change to the conversation is recorded as it happens: the answer's length then, and
        # whether the citations (sent after the last token) were already shown.
        page.evaluate(
            """() => {
                window.answerUpdates = [];
                new MutationObserver(() => {
                    const answers = document.querySelectorAll("[data-testid=answer]");
                    window.answerUpdates.push({
                        ms: performance.now(),
                        chars: answers.length ? answers[answers.length - 1].textContent.length : 0,
                        citations: document.querySelector("[data-testid=citations]") !== null,
                    });
                }).observe(document.querySelector("#thread"), {childList: true, subtree: true, characterData: true});
            }"""
        )
        page.fill("#question", "What does the assistant do when the documents do not contain the answer?")
        page.click("#send")
        answer = page.locator("[data-testid=answer]").last
        expect(answer).not_to_be_empty(timeout=240_000)
        citations = page.locator("[data-testid=citations]").last
        expect(citations).to_be_visible(timeout=240_000)
        expect(citations).to_contain_text("getting-started.md")
        assert len(answer.inner_text().strip()) > 10
        # The answer streams in: the page showed it growing, in several steps, before the citations came.
        updates = page.evaluate("window.answerUpdates")
        streamed = [u for u in updates if u["chars"] > 0 and not u["citations"]]
        assert len({u["chars"] for u in streamed}) >= 2, updates
        browser.close()


def test_a_double_click_on_ask_asks_once_and_stop_still_stops(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser, page = _signed_in(p, server)

        # The second click lands on Stop, which takes Ask's place at once: it must not stop the answer.
        page.fill("#question", "How do I ingest a folder of documents?")
        page.dblclick("#send")
        expect(page.locator("#send")).to_be_visible(timeout=240_000)  # the answer ended
        expect(page.locator("[data-testid=answer-note]")).to_have_count(0)  # not "Stopped."
        expect(page.locator("[data-testid=citations]").last).to_be_visible()
        page.wait_for_function("location.hash.startsWith('#c=')")
        conversation = page.evaluate("location.hash").removeprefix("#c=")
        messages = page.evaluate(f"fetch('/api/conversations/{conversation}/messages').then(r => r.json())")
        assert [m["role"] for m in messages] == ["user", "assistant"], messages

        # Stop still stops an answer once the double click's time has passed.
        page.fill("#question", "What does the assistant do when the documents do not contain the answer?")
        page.click("#send")
        page.wait_for_timeout(700)
        page.click("#stop")
        expect(page.locator("[data-testid=answer-note]").last).to_have_text("Stopped.", timeout=20_000)
        browser.close()
