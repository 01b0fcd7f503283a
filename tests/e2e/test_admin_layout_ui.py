"""The admin pages' layout in Debian's Chromium (issue 41): no table header breaks inside a word at a
desktop width (1280 px) or a phone's (390 px), where a wide table scrolls sideways instead; and the
quality view draws the usage per day as a chart (Chart.js on a canvas) whose bars stand on the days
that had questions, with the numbers behind a "show table" toggle.

The package's one server (tests/e2e/conftest.py), with a week of usage written through the answering
store and moved onto earlier days. Screenshots go to docs/screenshots/ (admin-usage-chart.png,
admin-usage-chart-narrow.png).
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
PHONE = {"width": 390, "height": 844}
# Days ago -> (answered, not found, thumbs up, thumbs down) of the questions asked that day.
USAGE = {6: (2, 1, 1, 0), 4: (3, 2, 1, 1), 1: (2, 0, 2, 0)}
# The chart's series colours (web/src/usage.js).
ANSWERED, NOT_FOUND = (0x00, 0x9E, 0x73), (0xE6, 0x9F, 0x00)

# Each header word whose letters lie on more than one line: [table's testid, word].
SPLIT_WORDS_JS = """() => {
  const split = [];
  for (const th of document.querySelectorAll("#admin-panel table th")) {
    const text = th.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE) continue;
    for (const m of text.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(text, m.index);
      range.setEnd(text, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (lines.size > 1) split.push([th.closest("table").dataset.testid, m[0]]);
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


def split_headers(page, tab: str) -> list:
    """The header words of admin tab `tab` that break across lines, as `SPLIT_WORDS_JS` lists them."""
    page.click(f"#admin-tabs [data-tab={tab}]")
    page.wait_for_selector(f"#admin-panel [data-testid={TABS[tab]}]")
    return page.evaluate(SPLIT_WORDS_JS)


def test_admin_table_headers_keep_their_words_whole_at_desktop_and_phone_widths(usage, browser):
    from playwright.sync_api import expect

    url, res, _llm = usage
    admin = f"admin-{uuid.uuid4().hex[:6]}"
    create_user(res.db, admin, password=PASSWORD, is_admin=True)
    for viewport in (DESKTOP, PHONE):
        page = open_admin(browser, url, admin, viewport)
        for tab in TABS:
            assert split_headers(page, tab) == [], (viewport, tab)
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
