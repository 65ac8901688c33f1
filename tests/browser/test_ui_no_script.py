"""The web UI with JavaScript switched off: every page still renders, and its forms still work
(server-rendered HTML; htmx only makes it live)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from ui_pages import assert_frame, open_order_task, start_tenants, visit
from ui_site import VIEWPORT, UiSite, submit_with_enter, wait_run


@pytest.fixture
def scriptless(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    yield context.new_page()
    context.close()


def test_pages_and_forms_work_without_javascript(ui: UiSite, scriptless: Page) -> None:
    page = scriptless
    runs = start_tenants(ui, ("globex flaky-2",)).runs
    task = open_order_task(ui)
    for path, h1 in (("/ui/runs", "Runs"), (f"/ui/runs/{runs['globex flaky-2']}",
                     f"Run {runs['globex flaky-2']}"), ("/ui/tasks", "Tasks"),
                     ("/ui/definitions", "Definitions"), ("/ui/schedules", "Schedules"),
                     ("/ui/outbox", "Outbox"), ("/ui/events/new", "Send event")):  # fmt: skip
        visit(page, ui.url(path))
        assert_frame(page, h1)
    visit(page, ui.url("/ui/runs"))
    page.get_by_label("Status", exact=True).select_option("waiting")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page).to_have_url(re.compile(r"/ui/runs\?(.*&)?status=waiting(&|$)"))
    expect(page.get_by_role("link", name=runs["globex flaky-2"], exact=True)).to_be_visible()

    visit(page, ui.url(f"/ui/tasks/{task['id']}"))
    page.get_by_label("note", exact=True).fill("approved without scripts")
    assert submit_with_enter(page, page.get_by_role("button", name="approve", exact=True)) < 400
    wait_run(ui, task["run_id"], lambda r: r["status"] == "completed", "completed")
