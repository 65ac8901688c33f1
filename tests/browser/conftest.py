"""The browser tests: Playwright drives Debian's chromium (``/usr/bin/chromium``, headless)
against a real ``procflow serve`` on a virtual-clock store, on both store backends.

- ``browser``: one chromium per test process. Without ``/usr/bin/chromium`` every browser test
  fails with a message saying how to install it: the browser tests never skip, on CI or elsewhere
  (Playwright never downloads a browser of its own here).
- ``page``: a fresh browser context (no cookies) at 1280×800 for each test.
- ``ui``: a :class:`ui_site.UiSite` on the test's store (``db_factory``: SQLite or PostgreSQL),
  made by ``procflow db init --virtual-clock`` and served (no token table: the caller is the
  administrator ``local``); ``ui_unserved`` is the same store not served yet (a test that starts
  the server itself, e.g. with a token table).
- A failing test leaves a screenshot of its page in ``tests/browser/.failures/`` (a folder that
  ignores itself in git) and the server's stderr in the report.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

# The serve harness of the HTTP tests, imported rather than copied (tests/ has no packages: its
# folders are on sys.path as pytest collects them, but not when only this folder is collected).
SERVER_TESTS = str(Path(__file__).resolve().parents[1] / "server")
if SERVER_TESTS not in sys.path:
    sys.path.append(SERVER_TESTS)

from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright  # noqa: E402
from ui_site import VIEWPORT, UiSite  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FAILURES = Path(__file__).resolve().parent / ".failures"
EXPECT_MS = 15_000  # how long an expectation waits for the page (the run page polls every 2 s)

expect.set_options(timeout=EXPECT_MS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "screenshots: writes the docs' pictures (docs/images/); runs in the suite",
    )


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"the browser tests need Debian's chromium at {CHROMIUM}: `apt-get install chromium` "
            "(.ci/run installs it). They never skip; Playwright never downloads a browser here.",
            pytrace=False,
        )
    launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, locale="en-GB", timezone_id="UTC")
    context.set_default_timeout(EXPECT_MS)
    opened = context.new_page()
    yield opened
    context.close()


@pytest.fixture
def ui_unserved(tmp_path: Path) -> Iterator[UiSite]:
    """A site on SQLite, not served yet. The browser tests check what chromium makes of the
    pages (scripts, keyboard, stylesheet, accessibility), which no store changes; what the
    pages do on each store is tests/web's (TestClient, both stores), and one browser test of a
    form writing through the UI runs on both (:func:`ui_on_each_store`)."""
    site = UiSite(f"sqlite:///{tmp_path / 'ui.db'}", {}, tmp_path)
    site.init_store()
    try:
        yield site
    finally:
        site.stop()


@pytest.fixture
def ui(ui_unserved: UiSite) -> UiSite:
    ui_unserved.serve()
    return ui_unserved


@pytest.fixture
def ui_on_each_store(
    db_factory: Callable[..., str], db_env: dict[str, str], tmp_path: Path
) -> Iterator[UiSite]:
    """A served site on each store of the matrix."""
    url = db_factory("ui", empty=True)  # a store `procflow db init --virtual-clock` makes
    site = UiSite(url, db_env, tmp_path)
    site.init_store()
    site.serve()
    try:
        yield site
    finally:
        site.stop()


def _failure_name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.split("::", 1)[-1])[:150]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On a failure: a screenshot of the test's page, and what its servers wrote to stderr."""
    report = yield
    if report.failed and report.when in ("setup", "call"):
        funcargs = getattr(item, "funcargs", {})
        opened = funcargs.get("page")
        if isinstance(opened, Page) and not opened.is_closed():
            FAILURES.mkdir(exist_ok=True)
            (FAILURES / ".gitignore").write_text("*\n")  # the folder keeps itself out of git
            shot = FAILURES / f"{_failure_name(item.nodeid)}.png"
            try:
                opened.screenshot(path=str(shot), full_page=True)
                report.sections.append(
                    ("browser", f"screenshot of the page: {shot} ({opened.url})")
                )
            except Exception as exc:  # a crashed page: the report still says why there is none
                report.sections.append(("browser", f"no screenshot: {exc}"))
        for name in ("ui", "ui_unserved"):
            site = funcargs.get(name)
            if isinstance(site, UiSite) and site.served:
                report.sections.append(("procflow serve stderr", site.server_output()[-20_000:]))
                break
    return report
