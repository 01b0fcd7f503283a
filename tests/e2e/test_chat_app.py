"""The chat app in Debian's Chromium: sign in, ask, watch the answer stream before its sources, open a
source's preview, rate the answer, reload and find the conversation, stop an answer, switch to Chinese,
use it on a phone-sized screen, and see hostile document text and model output rendered inert.

One server for the browser tests of the app (tests/e2e/conftest.py: the real app under uvicorn over one
small index, a handbook page and a page written to attack the browser among its pages). The model is a real HTTP server speaking OpenAI's protocol with a
scripted answer copied from the indexed page (so grounding keeps and cites it), one word every
`WORD_DELAY_S`. Screenshots of the main screens go to docs/screenshots/ (linked from the README).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from assistant.answering.store import add_answer, create_conversation, list_feedback, start_exchange
from assistant.auth.accounts import create_user
from assistant.core.db.identity import load_principal
from tests.e2e.conftest import ANSWER, CHROMIUM, PASSWORD, SCREENSHOTS, shot, sign_in

QUESTION = "How long should my passwords be?"
HOSTILE_ANSWER = (
    "**Badges** come from the front desk [1]. <img src=x onerror=\"window.__xss = 'answer img'\"> "
    "[click here](javascript:window.__xss='answerlink') <script>window.__xss = 'answer script'</script>"
)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make browser)")


def reader(res) -> str:
    name = f"reader-{uuid.uuid4().hex[:8]}"
    create_user(res.db, name, password=PASSWORD)
    return name


def test_ask_stream_preview_rate_reload_and_switch_to_chinese(app, browser):
    from playwright.sync_api import expect

    url, res, llm = app
    llm.answer = ANSWER
    name = reader(res)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sign_in(page, url, name, screenshot="sign-in.png")
    expect(page.locator("#thread .empty")).to_be_visible()

    # Every change to the thread is recorded: the answer's length then, and whether its sources were shown.
    page.evaluate(
        """() => {
            window.answerUpdates = [];
            new MutationObserver(() => {
                const answers = document.querySelectorAll("[data-testid=answer]");
                const status = document.querySelector("[data-testid=answer-status]");
                window.answerUpdates.push({
                    chars: answers.length ? answers[answers.length - 1].textContent.length : 0,
                    citations: document.querySelector("[data-testid=citations]") !== null,
                    found: document.querySelector("[data-testid=found-sources]") !== null,
                    draft: document.querySelector("[data-testid=answer-draft]") !== null,
                    status: status && !status.hidden ? status.textContent : "",
                });
            }).observe(document.querySelector("#thread"), {childList: true, subtree: true, characterData: true});
        }"""
    )
    page.fill("#question", QUESTION)
    page.click("#send")
    expect(page.locator("#stop")).to_be_visible()
    sources = page.locator("[data-testid=citations]").last
    expect(sources).to_be_visible(timeout=60_000)
    expect(sources).to_contain_text("passwords.md")
    expect(page.locator("#send")).to_be_visible()
    streamed = [u for u in page.evaluate("window.answerUpdates") if u["chars"] > 0 and not u["citations"]]
    assert len({u["chars"] for u in streamed}) >= 2, streamed  # tokens arrived, in steps, before the sources
    # Issue 42: the sources found and a status came before any answer text; the draft was marked as
    # being checked while it was written; the status said reading, writing, then checking.
    updates = page.evaluate("window.answerUpdates")
    first_text = next(u for u in updates if u["chars"] > 0)
    assert first_text["found"] and any(u["status"].startswith("Reading") for u in updates[: updates.index(first_text) + 1]), updates
    assert any(u["draft"] for u in streamed), streamed
    said = [u["status"].split()[0] for u in updates if u["status"]]
    assert said.index("Reading") < said.index("Writing…") < said.index("Checking"), said
    expect(page.locator("[data-testid=answer-draft]")).to_have_count(0)  # all checked at the end
    answer = page.locator("[data-testid=answer]").last
    expect(answer).to_contain_text("15 characters or longer")
    expect(answer.locator("[data-testid=chip]")).to_have_count(3)  # one chip per [1] marker, inline
    assert "[1]" not in answer.inner_text()
    assert re.match(r"Source \d+: ", answer.locator("[data-testid=chip]").first.get_attribute("aria-label"))
    expect(page.locator(".conv-open").first).to_have_text(QUESTION)
    shot(page, "chat.png")

    # The source's preview: its path, the cited passage and the document itself.
    page.locator("[data-testid=source]").first.click()
    preview = page.locator("#preview")
    expect(preview).to_have_attribute("open", "")
    expect(preview.locator("[data-testid=preview-content]")).to_contain_text("Password requirements")
    expect(preview.locator(".preview-path")).to_contain_text("passwords.md")
    page.wait_for_timeout(400)  # the dialog's opening animation
    shot(page, "source-preview.png")
    page.keyboard.press("Escape")
    expect(preview).not_to_have_attribute("open", "")

    # Thumbs up, then a comment: stored with the question, the answer, its chunks and the reader.
    with page.expect_response(lambda r: "/feedback" in r.url and r.status == 200):
        page.locator(".rate-up").last.click()
    expect(page.locator(".rate-up").last).to_have_attribute("aria-pressed", "true")
    page.locator(".comment-input textarea").last.fill("Clear and cited.")
    with page.expect_response(lambda r: "/feedback" in r.url and r.status == 200):
        page.locator(".comment-send").last.click()
    expect(page.locator(".rate-status").last).to_have_text("Comment sent.")
    rows = [f for f in list_feedback(res.db) if f.principal == name]
    assert [(f.rating, f.comment, f.question) for f in rows] == [(1, "Clear and cited.", QUESTION)]
    assert rows[0].chunk_ids and "15 characters" in rows[0].answer

    # Keyboard focus is visible.
    page.locator("#question").focus()
    page.keyboard.press("Tab")  # to the Ask button
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), outline

    # A reload opens the same conversation, rating included; the sidebar lists it and reopens it.
    page.reload()
    expect(page.locator("[data-testid=answer]").last).to_contain_text("15 characters or longer")
    expect(page.locator(".rate-up").last).to_have_attribute("aria-pressed", "true")
    page.click("#new-chat")
    expect(page.locator("#thread .empty")).to_be_visible()
    page.locator(".conv-open", has_text=QUESTION).click()
    expect(page.locator("[data-testid=answer]")).to_have_count(1)
    expect(page.locator("[data-testid=citations]")).to_contain_text("passwords.md")

    # Switch to Chinese: the page's texts change at once and the choice survives a reload.
    page.select_option("#lang", "zh")
    expect(page.locator("#send")).to_have_text("提问")
    expect(page.locator("#new-chat")).to_have_text("新对话")
    expect(page.locator(".sources-title").last).to_have_text("来源")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    shot(page, "chat-zh.png")
    page.reload()
    expect(page.locator("#send")).to_have_text("提问")
    context.close()

    # A browser that prefers Chinese starts in Chinese.
    zh = browser.new_context(locale="zh-CN")
    page = zh.new_page()
    page.goto(url)
    expect(page.locator("#login button[type=submit]")).to_have_text("登录")
    zh.close()


def test_stop_ends_the_answer_and_the_server_stops_generating(app, browser):
    from playwright.sync_api import expect

    url, res, llm = app
    llm.answer = " ".join([ANSWER] * 4)  # about ten seconds of words
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, url, reader(res))
    closed_before = llm.closed_early
    page.fill("#question", QUESTION)
    page.click("#send")
    expect(page.locator("[data-testid=answer]").last).to_contain_text("15 characters", timeout=30_000)
    page.click("#stop")
    expect(page.locator("[data-testid=answer-note]").last).to_have_text("Stopped.")
    expect(page.locator("#send")).to_be_visible()
    deadline = time.monotonic() + 15
    while llm.closed_early == closed_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert llm.closed_early > closed_before, "the model server kept streaming after the reader stopped"
    context.close()


def test_hostile_document_text_and_model_output_render_inert(app, browser):
    from playwright.sync_api import expect

    url, res, llm = app
    llm.answer = "Visitor badges are printed at the front desk before nine in the morning [1]."
    name = reader(res)
    # A stored answer carrying script, as a model could write it: shown when the conversation opens.
    principal = load_principal(res.db, name)
    conv = create_conversation(res.db, user_id=principal.user_id, title="hostile answer")
    start_exchange(res.db, conv.id, user_id=principal.user_id, question="Where do badges come from?")
    add_answer(res.db, conv.id, user_id=principal.user_id, answer=HOSTILE_ANSWER, citations=[], abstained=False)

    context = browser.new_context(viewport={"width": 390, "height": 844})  # a phone-sized screen
    page = context.new_page()
    sign_in(page, url, name)
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    page.click("#sidebar-toggle")
    expect(page.locator("#sidebar")).to_be_in_viewport(ratio=1)
    page.wait_for_timeout(300)  # the slide-in
    shot(page, "phone-sidebar.png")
    page.click("#sidebar-close")
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    page.click("#sidebar-toggle")
    page.locator(".conv-open", has_text="hostile answer").click()
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    answer = page.locator("[data-testid=answer]").last
    expect(answer.locator("strong")).to_have_text("Badges")  # Markdown still renders
    expect(answer).to_contain_text("click here")

    page.goto(url)  # a fresh thread for the document's own text
    expect(page.locator("#ask")).to_be_visible()
    page.fill("#question", "When are visitor badges printed?")
    page.click("#send")
    sources = page.locator("[data-testid=citations]").last
    expect(sources).to_contain_text("visitor-badges.md", timeout=60_000)
    page.locator("[data-testid=source]", has_text="Visitor badges").first.click()
    content = page.locator("#preview [data-testid=preview-content]")
    expect(content).to_contain_text("badge policy")
    page.wait_for_timeout(400)  # the dialog's opening animation
    shot(page, "phone-preview.png")

    page.wait_for_timeout(500)  # an image error handler would have run by now
    found = page.evaluate(
        """() => ({
            xss: window.__xss ?? null,
            handlers: [...document.querySelectorAll("*")].filter(
                (n) => [...n.attributes].some((a) => a.name.startsWith("on"))).length,
            scriptLinks: [...document.querySelectorAll("a[href]")].filter(
                (a) => a.getAttribute("href").trim().toLowerCase().startsWith("javascript:")).length,
            scripts: [...document.querySelectorAll("#thread script, #preview script")].length,
        })"""
    )
    assert found == {"xss": None, "handlers": 0, "scriptLinks": 0, "scripts": 0}, found
    page.locator("#preview a", has_text="badge policy").click(no_wait_after=True)
    page.wait_for_timeout(300)
    assert page.evaluate("window.__xss ?? null") is None
    context.close()
