"""The admin pages' layout in Debian's Chromium (issue 41): no table header or cell breaks inside a word
(a path may) at desktop widths (1300 and 1280 px) or a phone's (390 px), where a wide table scrolls sideways instead; and the
quality view draws the usage per day as a chart (Chart.js on a canvas) whose bars stand on the days
that had questions, with the numbers behind a "show table" toggle.

The package's one server (tests/e2e/conftest.py), with a week of usage written through the answering
store and moved onto earlier days. Screenshots go to docs/screenshots/ (admin-usage-chart.png,
admin-usage-chart-narrow.png, admin-sources-1300.png, admin-jobs-1300.png).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from assistant.auth.accounts import create_user
from tests.e2e.conftest import CHROMIUM, PASSWORD, shot, sign_in

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make browser)")

DESKTOP = {"width": 1280, "height": 900}
WIDE = {"width": 1300, "height": 900}  # the fresh-user trial's window, where cells broke ("folde r")
PHONE = {"width": 390, "height": 844}
# Days ago -> (answered, not found, thumbs up, thumbs down) of the questions asked that day.
USAGE = {6: (2, 1, 1, 0), 4: (3, 2, 1, 1), 1: (2, 0, 2, 0)}
# The chart's series colours (web/src/usage.js).
ANSWERED, NOT_FOUND = (0x00, 0x9E, 0x73), (0xE6, 0x9F, 0x00)

# Each word of a table header or cell whose letters lie on more than one line: [table's testid, word]. A
# line may end after a hyphen or a slash ("admin-" / "566197"), and a path (`.path`) may break anywhere.
SPLIT_WORDS_JS = """() => {
  const split = [];
  for (const cell of document.querySelectorAll("#admin-panel table th, #admin-panel table td")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      if (text.parentElement.closest(".path")) continue;
      for (const m of text.data.matchAll(/[^\\s\\-\\/]+/g)) {
        const range = document.createRange();
        range.setStart(text, m.index);
        range.setEnd(text, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (lines.size > 1) split.push([cell.closest("table").dataset.testid, m[0]]);
      }
    }
  }
  return split;
}"""

# The x ranges [first, last] (canvas pixels) of the columns holding `rgb` (within 3 per channel), left to right.
COLUMNS_JS = """([rgb]) => {
  const canvas = document.querySelector("[data-testid=usage-chart] canvas");
  const { width, height } = canvas;
  const pixels = canvas.getContext("2d").getImageData(0, 0, width, height).data;
  const hit = (x) => {
    for (let y = 0; y < height; y++) {
      const i = (y * width + x) * 4;
      if (pixels[i + 3] > 250 && Math.abs(pixels[i] - rgb[0]) <= 3 && Math.abs(pixels[i + 1] - rgb[1]) <= 3
          && Math.abs(pixels[i + 2] - rgb[2]) <= 3) return true;
    }
    return false;
  };
  const runs = [];
  for (let x = 0; x < width; x++) {
    if (!hit(x)) continue;
    if (runs.length && runs[runs.length - 1][1] === x - 1) runs[runs.length - 1][1] = x;
    else runs.push([x, x]);
  }
  return runs;
}"""


@pytest.fixture(scope="module")
def usage(app):
    """`app`, with `USAGE` written (once for the module)."""
    seed_usage(app[1])
    return app


def seed_usage(res) -> None:
    """Questions, answers and ratings of one reader on the days of `USAGE`, written through the
    answering store and then moved to noon UTC of their day."""
    from assistant.answering.store import add_answer, create_conversation, rate_answer, start_exchange
    from assistant.core.db.identity import load_principal
    from assistant.core.db.models import Message

    name = f"reader-{uuid.uuid4().hex[:6]}"
    create_user(res.db, name, password=PASSWORD)
    reader = load_principal(res.db, name)
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    for days_ago, (answered, not_found, up, down) in USAGE.items():
        ids = []
        for n in range(answered + not_found):
            conv = create_conversation(res.db, user_id=reader.user_id)
            ids.append(conv.id)
            start_exchange(res.db, conv.id, user_id=reader.user_id, question=f"Question {n} of {days_ago} days ago?")
            stored = add_answer(res.db, conv.id, user_id=reader.user_id, answer="Printed at the front desk.",
                                citations=[], abstained=n >= answered)
            if n < up + down:
                rate_answer(res.db, stored.id, principal=reader, rating=1 if n < up else -1)
        with res.db.session() as session:  # the store writes now; the report counts each message's own day
            session.execute(update(Message).where(Message.conversation_id.in_(ids))
                            .values(created_at=today - timedelta(days=days_ago)))


def open_admin(browser, url: str, name: str, viewport: dict):
    page = browser.new_context(viewport=viewport).new_page()
    sign_in(page, url, name)
    page.click('#views [data-view="admin"]')
    page.wait_for_selector("[data-testid=users-table]")
    return page


# Each admin tab with tables, and one table it always draws (drawn: the tab's calls have answered).
TABS = {"users": "users-table", "keys": "keys-table", "sources": "sources-table", "jobs": "jobs-table",
        "quality": "slowest-table"}


def split_words(page, tab: str) -> list:
    """The words of admin tab `tab`'s tables that break across lines, as `SPLIT_WORDS_JS` lists them."""
    page.click(f"#admin-tabs [data-tab={tab}]")
    page.wait_for_selector(f"#admin-panel [data-testid={TABS[tab]}]")
    return page.evaluate(SPLIT_WORDS_JS)


def test_admin_tables_keep_their_words_whole_at_desktop_and_phone_widths(usage, browser, tmp_path):
    from playwright.sync_api import expect

    from ingest.tasks import ingestor_for

    url, res, _llm = usage
    admin = f"admin-{uuid.uuid4().hex[:6]}"
    create_user(res.db, admin, password=PASSWORD, is_admin=True)
    # A source with long paths and a long error, as a company folder has: the columns of short words
    # ("folder", "Searchable") must not be squeezed to let them fit.
    folder = tmp_path / "quarterly-planning-documents-of-the-finance-department" / "board-meetings-2026"
    folder.mkdir(parents=True)
    (folder / "minutes-of-the-extraordinary-board-meeting-on-the-budget.md").write_text("# Minutes\n\nApproved.\n")
    (folder / "scanned-signature-pages-of-the-annual-report-2026.pdf").write_bytes(b"%PDF-1.7\nnot really a pdf")
    ingestor_for(res).sync(folder)
    for viewport in (WIDE, DESKTOP, PHONE):
        page = open_admin(browser, url, admin, viewport)
        for tab in TABS:
            assert split_words(page, tab) == [], (viewport, tab)
            if viewport is WIDE and tab in ("sources", "jobs"):
                shot(page, f"admin-{tab}-1300.png")
        # A table wider than the phone scrolls in its box; the page itself does not.
        page.click("#admin-tabs [data-tab=sources]")
        expect(page.locator("[data-testid=sources-table]")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        page.context.close()


def test_usage_per_day_is_a_chart_with_its_numbers_behind_a_toggle(usage, browser):
    from playwright.sync_api import expect

    url, res, _llm = usage
    admin = f"admin-{uuid.uuid4().hex[:6]}"
    create_user(res.db, admin, password=PASSWORD, is_admin=True)
    page = open_admin(browser, url, admin, DESKTOP)
    report = page.request.get(f"{url}/api/admin/quality?days=30").json()
    page.click("#admin-tabs [data-tab=quality]")
    figure = page.locator("[data-testid=usage-chart]")
    canvas = figure.locator("canvas")
    expect(canvas).to_have_attribute("role", "img")
    expect(canvas).to_have_attribute("aria-label", f"Chart of the last 30 days: {report['questions']} questions, "
                                     f"{report['answered']} answered, {report['not_found']} not found, "
                                     f"{report['thumbs_up']} thumbs up, {report['thumbs_down']} thumbs down.")
    expect(figure.locator("figcaption")).to_contain_text("per day")
    figure.scroll_into_view_if_needed()

    # One bar of each series per day that has some, each in its day's place along the axis.
    for key, colour in (("answered", ANSWERED), ("not_found", NOT_FOUND)):
        days = [i for i, d in enumerate(report["days"]) if d[key]]
        columns = page.evaluate(COLUMNS_JS, [list(colour)])
        assert len(columns) == len(days), (key, columns, days)
        centres = [(a + b) / 2 for a, b in columns]
        if len(days) > 1:
            step = (centres[-1] - centres[0]) / (days[-1] - days[0])  # pixels per day
            for day, centre in zip(days, centres, strict=True):
                assert abs(centres[0] + (day - days[0]) * step - centre) < step / 4, (key, day, centres)
    shot(page, "admin-usage-chart.png")

    # The numbers: a table of the days with questions, shown on request.
    table = page.locator("[data-testid=days-table]")
    expect(table).to_be_hidden()
    toggle = figure.locator("button.usage-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(table).to_be_visible()
    for days_ago, (answered, not_found, up, down) in USAGE.items():
        day = (datetime.now(UTC) - timedelta(days=days_ago)).date()
        label = page.evaluate("(d) => new Intl.DateTimeFormat('en-GB', {dateStyle: 'medium', timeZone: 'UTC'})"
                              ".format(new Date(d + 'T00:00:00Z'))", day.isoformat())
        cells = table.locator("tr", has_text=label).locator("td")
        expect(cells).to_have_text([label, str(answered + not_found), str(answered), str(not_found), str(up), str(down)])
    page.context.close()

    page = open_admin(browser, url, admin, PHONE)
    page.click("#admin-tabs [data-tab=quality]")
    figure = page.locator("[data-testid=usage-chart]")
    figure.locator("button.usage-toggle").click()
    figure.scroll_into_view_if_needed()
    assert page.evaluate(COLUMNS_JS, [list(ANSWERED)]), "no answered bars drawn at 390 px"
    shot(page, "admin-usage-chart-narrow.png")
    page.context.close()


def test_an_admin_stops_a_queued_sync_from_the_jobs_view(usage, browser, tmp_path):
    from playwright.sync_api import expect

    from assistant.core.db.jobs import queue_sync_job

    url, res, _llm = usage
    admin = f"admin-{uuid.uuid4().hex[:6]}"
    create_user(res.db, admin, password=PASSWORD, is_admin=True)
    job = queue_sync_job(res.db, {"path": str(tmp_path)})  # queued, not handed to the worker: it waits
    page = open_admin(browser, url, admin, DESKTOP)
    page.click("#admin-tabs [data-tab=jobs]")
    row = page.locator("[data-testid=jobs-table] tr", has_text=str(tmp_path))
    row.get_by_role("button", name="Stop").click()
    expect(page.locator("#admin-status")).to_have_text(
        f"Job {job.id} stops after the files in progress; it resumes at the next start or sync.")
    expect(row).to_contain_text("Interrupted")
    expect(row.get_by_role("button", name="Stop")).to_have_count(0)  # it has ended: nothing more to stop
    page.context.close()
