"""The runs list in a browser: the table, counts per status, the filter form (its choices in the
URL), keyset paging, the link to each run; and the "Not found" page."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect
from ui_pages import assert_frame, start_tenants, visit
from ui_site import UiSite, navigate_with_enter, wait_for

COLUMNS = ("Id", "Name", "Status", "Waiting for", "Started", "Ended")


def settled(ui: UiSite) -> dict[str, str]:
    """The three demo tenants' runs once the worker has taken each as far as it goes now: acme
    completed, the other two waiting on a retry. Title → run id."""
    runs = start_tenants(ui).runs

    def done() -> bool:
        statuses = {t: ui.run(r)["status"] for t, r in runs.items()}
        return statuses == {"acme": "completed", "globex flaky-2": "waiting",
                            "initech refused": "waiting"}  # fmt: skip

    wait_for(done, "acme completed and the other two tenants waiting")
    return runs


def run_links(page: Page) -> list[str]:
    table = page.get_by_role("table", name="Runs")
    expect(table).to_be_visible()
    return [link.inner_text() for link in table.get_by_role("link").all()]


def test_runs_table_counts_and_links(ui: UiSite, page: Page) -> None:
    runs = settled(ui)
    visit(page, ui.url("/ui/runs"))
    assert_frame(page, "Runs")
    table = page.get_by_role("table", name="Runs")
    for column in COLUMNS:
        expect(table.get_by_role("columnheader", name=column, exact=True)).to_be_visible()
    assert run_links(page) == ui.api_runs()
    expect(page.get_by_role("link", name="waiting (2)", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="completed (1)", exact=True)).to_be_visible()
    flaky = runs["globex flaky-2"]
    row = table.get_by_role("row").filter(has=page.get_by_role("link", name=flaky, exact=True))
    expect(row).to_contain_text("retry")
    row.get_by_role("link", name=flaky, exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run {flaky}")

    visit(page, ui.url("/ui/runs"))
    page.get_by_role("link", name="completed (1)", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]status=completed(&|$)"))
    assert run_links(page) == [runs["acme"]]


def test_the_filter_form_puts_its_choices_in_the_url(ui: UiSite, page: Page) -> None:
    runs = settled(ui)
    visit(page, ui.url("/ui/runs"))
    form = page.get_by_role("form", name="Filter runs")
    expect(form).to_be_visible()
    form.get_by_label("Status", exact=True).select_option("waiting")
    form.get_by_label("Waiting for", exact=True).select_option("retry")
    form.get_by_label("Name", exact=True).fill("TenantProvisioning")
    navigate_with_enter(page, form.get_by_role("button", name="Filter", exact=True))
    for part in ("status=waiting", "name=TenantProvisioning"):
        expect(page).to_have_url(re.compile(rf"[?&]{part}(&|$)"))
    assert sorted(run_links(page)) == sorted([runs["globex flaky-2"], runs["initech refused"]])

    bookmarked = page.url
    visit(page, bookmarked)  # the URL alone brings the same list back
    form = page.get_by_role("form", name="Filter runs")
    expect(form.get_by_label("Status", exact=True)).to_have_value("waiting")
    expect(form.get_by_label("Waiting for", exact=True)).to_have_value("retry")
    assert len(run_links(page)) == 2

    form.get_by_label("Waiting for", exact=True).select_option("task")
    form.get_by_role("button", name="Filter", exact=True).click()
    expect(page.get_by_role("table", name="Runs").get_by_role("link")).to_have_count(0)
    form = page.get_by_role("form", name="Filter runs")
    for choice in ("timer", "retry", "poll", "event", "record", "task"):
        expect(
            form.get_by_label("Waiting for", exact=True).locator(f'option[value="{choice}"]')
        ).to_have_count(1)
    for status in ("running", "waiting", "completed", "failed", "cancelled", "aborted"):
        expect(
            form.get_by_label("Status", exact=True).locator(f'option[value="{status}"]')
        ).to_have_count(1)


def test_runs_are_paged_by_a_cursor_in_the_url(ui: UiSite, page: Page) -> None:
    settled(ui)
    newest_first = ui.api_runs()
    visit(page, ui.url("/ui/runs?limit=2"))
    assert run_links(page) == newest_first[:2]
    page.get_by_role("link", name="Next page", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]cursor="))
    assert run_links(page) == newest_first[2:]
    expect(page.get_by_role("link", name="Next page", exact=True)).to_have_count(0)


def test_an_unknown_run_is_a_not_found_page(ui: UiSite, page: Page) -> None:
    for path in ("/ui/runs/0123456789abcdef0123456789abcdef", "/ui/tasks/999999",
                 "/ui/definitions/nosuch", "/ui/nosuch"):  # fmt: skip
        visit(page, ui.url(path), status=404)
        expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
        expect(page.locator("body")).not_to_contain_text("Traceback")


def test_the_root_redirects_to_the_runs_page(ui: UiSite, page: Page) -> None:
    visit(page, ui.url("/"))
    expect(page).to_have_url(re.compile(r"/ui/runs$"))
    assert_frame(page, "Runs")
