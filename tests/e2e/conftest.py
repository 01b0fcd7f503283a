"""The browser tests' shared app: one server for the package (the real app under uvicorn over one small
index: a handbook page, a page written to attack the browser, and a page readable by group `hr` only),
its scripted model server, Chromium for each module, and the sign-in and screenshot steps they all take.

The model is a real HTTP server speaking OpenAI's protocol; a test sets its `answer` (a fixed text
copied from the indexed page, or `extractive_answer`, the citing stand-in) and it streams one word
every `WORD_DELAY_S`. A helpdesk takes conversations (`helpdesk_handoff`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from assistant.auth.acl_manifest import AclManifest
from assistant.core import resources as resources_mod
from ingest.tasks import ingestor_for
from tests.api.live_server import LiveServer
from tests.conftest import CORPUS_MODEL, copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "docs" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
PASSWORD = "chat-app-password"
PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
WORD_DELAY_S = 0.06
ANSWER = (
    "Create a password that is ideally 15 characters or longer [1]. "
    "Use a mix of numbers, letters (upper and lower case), and special characters [1]. "
    "Create a new password for every system [1]."
)
# Planted in the page below and in a stored answer: each would set window.__xss if it ran.
HOSTILE_PAGE = """# Visitor badges

Visitor badges are printed at the front desk before nine in the morning.
<img src=x onerror="window.__xss = 'document img'">

Read the [badge policy](javascript:window.__xss='doclink') before printing one.

<script>window.__xss = 'document script'</script>
"""
# Files over this are refused by an upload's job as too large (the indexed pages are far smaller).
MAX_FILE_SIZE_BYTES = 256 * 1024
RESTRICTED = "hr/salary-bands.md"
RESTRICTED_GROUP = "hr"
RESTRICTED_PAGE = "# Salary bands\n\nThe salary bands of engineers are reviewed by the compensation committee every March.\n"


@pytest.fixture(scope="package")
def app(tmp_path_factory):
    """`(url, resources, model server)` of the app over the package's index."""
    root = tmp_path_factory.mktemp("chat-app")
    docs = copy_subset(HANDBOOK, root / "docs", [PASSWORDS])
    (docs / "visitor-badges.md").write_text(HOSTILE_PAGE, encoding="utf-8")
    (docs / RESTRICTED).parent.mkdir(parents=True)
    (docs / RESTRICTED).write_text(RESTRICTED_PAGE, encoding="utf-8")
    manifest = AclManifest.from_dict(
        {"default": ["everyone"], "rules": [{"path": RESTRICTED, "allow": [f"group:{RESTRICTED_GROUP}"]}]}
    )
    with ScriptedOpenAIServer(ANSWER, delay_s=WORD_DELAY_S) as llm:
        settings = make_settings(
            root / "var", embedding_model=CORPUS_MODEL, llm_backend="openai", openai_base_url=llm.base_url,
            openai_model="assistant", llm_context_tokens=4096, answer_cache_entries=0, query_rewrite="rules",
            sse_coalesce_ms=0, helpdesk_handoff=True, max_file_size_bytes=MAX_FILE_SIZE_BYTES,
        )
        res = open_resources(settings)
        # The process's ingestor: the server's job worker (uploads) reuses its warm parser process.
        ingestor = ingestor_for(res)
        ingestor.sync(docs, acl=manifest)
        server = LiveServer(settings, res).start()
        yield server.url, res, llm
        server.stop()
        ingestor.close()
        asyncio.run(res.llm.aclose())
        res.close()


@pytest.fixture
def served(app):
    """`app`, its resources registered as the process's: the job worker runs its tasks (uploads) on
    those, and another module's in-process server may have registered its own since."""
    resources_mod.set_current(app[1])
    return app


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright, per module: the modules that start Playwright themselves
    (`with sync_playwright()`) cannot while another instance runs in the same thread."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def sign_in(page, url: str, name: str, *, screenshot: str | None = None) -> None:
    """Sign `page` in at `url` as `name` (password `PASSWORD`), optionally saving the form's screenshot."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator("#login")).to_be_visible()
    page.fill("#username", name)
    page.fill("#password", PASSWORD)
    if screenshot:
        page.screenshot(path=str(SCREENSHOTS / screenshot))
    page.click("#login button[type=submit]")
    expect(page.locator("#ask")).to_be_visible()


def shot(page, name: str) -> None:
    """Save a screenshot of `page` as docs/screenshots/`name`."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))
