"""The run page in a browser: the diagram's highlights (a fork's join gateway's too), why a run
waits, the live refresh while the run has not ended, the timeline, and retry / cancel (each
reached with the keyboard)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect
from ui_pages import (
    HIRE,
    assert_frame,
    expect_step_state,
    section,
    start_tenants,
    step_node,
    visit,
)
from ui_site import (
    ONBOARDING,
    UiSite,
    is_focused,
    navigate_with_enter,
    submit_with_enter,
    tab_to,
    wait_run,
)

FLAKY = "globex flaky-2"
BREAKER = """\
flow: breaker
description: One step that always fails, so the run waits for a retry or a cancel.
steps:
  - boom: { fail: "broken on purpose" }
"""
LONG = """\
flow: long-history
inputs:
  items: { type: array, required: true }
steps:
  - each:
      for_each: "{{ items }}"
      steps:
        - note: { set: { seen: "{{ item }}" } }
"""


def test_flaky_tenant_waits_on_a_retry_then_completes_while_the_page_watches(
    ui: UiSite, page: Page
) -> None:
    run_id = start_tenants(ui, (FLAKY,)).runs[FLAKY]
    wait_run(ui, run_id, lambda r: r["tokens"] and r["tokens"][0].get("waiting_for"), "a retry")
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    assert_frame(page, f"Run {run_id}")
    for heading in ("Diagram", "Why it waits", "Timeline", "Bindings", "Vars"):
        expect(page.get_by_role("heading", name=heading, exact=True, level=2)).to_have_count(1)
    expect_step_state(page, "createSchema", "is-active")
    expect_step_state(page, "provisionApp", None)
    why = section(page, "Why it waits")
    expect(why).to_contain_text("createSchema")
    expect(why).to_contain_text("retry 2 of 4")
    expect(why).to_contain_text("schema service unavailable (attempt 1)")
    expect(section(page, "Vars")).to_contain_text("dbPassword")

    ui.advance("2m")  # attempts 2 (fails) and 3 (succeeds), then provisionApp: the run ends
    wait_run(ui, run_id, lambda r: r["status"] == "completed", "completed")
    # No reload: the page refreshes itself while the run has not ended.
    expect(page.get_by_text(re.compile(r"\bcompleted\b")).first).to_be_visible()
    for step in ("createSchema", "provisionApp"):
        expect_step_state(page, step, "is-done")
    for step in ("recordFailure", "markFailed"):
        expect_step_state(page, step, None)
    expect(section(page, "Why it waits")).not_to_contain_text("retry 2 of 4")


# An intent fork of two user tasks, its join going on at consolidate.
FORK = """\
name: quotes
entities:
  - name: Quote
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: state, type: string, length: 20 }
processes:
  - name: QuoteReview
    trigger: { onCreate: Quote }
    steps:
      - { name: reviews, kind: parallel, args: { branches: [tech, legal], next: consolidate } }
      - { name: tech, kind: userTask, args: { assignee: engineer } }
      - { name: legal, kind: userTask, args: { assignee: lawyer } }
      - { name: consolidate, kind: serviceTask, args: { setField: state, value: done } }
"""
ACTIVE_STROKE = "rgb(10, 88, 202)"  # procflow.css: .is-active's outline
DONE_FILL = "rgb(220, 252, 231)"  # and .is-done's fill


def test_a_forked_run_highlights_both_branches_and_the_join_they_wait_at(
    ui: UiSite, page: Page, tmp_path: Path
) -> None:
    """The classes are the TestClient tests' business; here the stylesheet is: chromium paints
    the join gateway (a group of its own, not a step) as it paints an active step."""
    app = tmp_path / "quotes.intent"
    app.write_text(FORK)
    ui.deploy(app)
    record = ui.create_record("Quote", {})
    run_id = ui.run_of_record("Quote", record["id"])["id"]
    visit(page, ui.url(f"/ui/runs/{run_id}"))  # refreshes itself until both tasks are open
    for step in ("tech", "legal"):
        expect_step_state(page, step, "is-active")
        expect(step_node(page, step).locator("path, polygon").first).to_have_css(
            "stroke", ACTIVE_STROKE
        )
    join = page.locator('svg g.join[data-join="reviews"]')
    expect(join).to_have_class(re.compile(r"(^|\s)is-active(\s|$)"))
    expect(join.locator("polygon")).to_have_css("stroke", ACTIVE_STROKE)
    expect_step_state(page, "reviews", "is-done")  # the fork has split
    expect(step_node(page, "reviews").locator("polygon")).to_have_css("fill", DONE_FILL)
    expect_step_state(page, "consolidate", None)
    why = section(page, "Why it waits")
    expect(why).to_contain_text("reviews: join waiting for branches tech, legal")


def test_download_json_is_the_runs_show_shape(ui: UiSite, page: Page) -> None:
    run_id = start_tenants(ui, (FLAKY,)).runs[FLAKY]
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    link = page.get_by_role("link", name="Download JSON", exact=True)
    href = link.get_attribute("href")
    assert href is not None
    answer = page.request.get(ui.url(href) if href.startswith("/") else href)
    assert answer.status == 200
    shown = answer.json()
    assert shown["id"] == run_id
    assert shown["name"] == "TenantProvisioning"
    assert {"status", "tokens", "history", "vars"} <= set(shown)


def test_a_failed_run_is_retried_from_its_page_with_the_keyboard(
    ui: UiSite, page: Page, tmp_path: Path
) -> None:
    flow = tmp_path / "breaker.flow.yaml"
    flow.write_text(BREAKER)
    ui.deploy(flow)
    run_id = ui.start_flow("breaker", {})
    wait_run(ui, run_id, lambda r: r["status"] == "failed", "failed")
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    expect_step_state(page, "boom", "is-failed")
    retry = page.get_by_role("button", name="Retry", exact=True)
    expect(retry).to_be_enabled()
    assert submit_with_enter(page, retry) == 200  # the confirmation step
    confirm_by_keyboard(page)

    def retried(run: dict[str, Any]) -> bool:
        return any(e["type"] == "run.retried" for e in run["history"])

    wait_run(ui, run_id, retried, "run.retried in its history")
    expect(section(page, "Timeline")).to_contain_text("run.retried")


def test_a_waiting_run_is_cancelled_with_the_keyboard_and_says_why_it_cannot_be_retried(
    ui: UiSite, page: Page
) -> None:
    ui.deploy(ONBOARDING)
    run_id = ui.start_flow("hire-onboarding", HIRE)
    wait_run(ui, run_id, lambda r: r["status"] == "waiting", "waiting on its timer")
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    expect_step_state(page, "cooling_off", "is-active")
    retry = page.get_by_role("button", name="Retry", exact=True)
    expect(retry).to_be_disabled()
    expect(page.get_by_text("Only a failed run can be retried")).to_be_visible()
    cancel = page.get_by_role("button", name="Cancel", exact=True)
    expect(cancel).to_be_enabled()
    assert submit_with_enter(page, cancel) == 200
    confirm_by_keyboard(page)
    wait_run(ui, run_id, lambda r: r["status"] == "cancelled", "cancelled")
    expect(page.get_by_text(re.compile(r"\bcancelled\b")).first).to_be_visible()
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_be_disabled()
    expect(page.get_by_role("button", name="Retry", exact=True)).to_be_disabled()


def confirm_by_keyboard(page: Page) -> None:
    """The confirmation step after Retry / Cancel: its "Confirm" button, reached with Tab and
    pressed with Enter, lands back on the run's page."""
    confirming = page.get_by_role("button", name="Confirm", exact=True)
    expect(confirming).to_be_visible()
    assert submit_with_enter(page, confirming) < 400
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"^Run \w+$"))


def test_timeline_filters_failed_entries_and_pages_long_histories(
    ui: UiSite, page: Page, tmp_path: Path
) -> None:
    run_id = start_tenants(ui, (FLAKY,)).runs[FLAKY]
    wait_run(ui, run_id, lambda r: r["tokens"] and r["tokens"][0].get("waiting_for"), "a retry")
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    timeline = section(page, "Timeline")
    expect(timeline).to_contain_text("run.started")
    timeline.get_by_label("Failed only").check()
    navigate_with_enter(page, timeline.get_by_role("button", name="Apply", exact=True))
    entries = section(page, "Timeline").get_by_role("table")
    expect(entries).to_contain_text("attempt.failed")
    expect(entries).not_to_contain_text("run.started")
    assert "failed" in page.url, f"the filter is in the URL (bookmarkable): {page.url}"

    flow = tmp_path / "long.flow.yaml"
    flow.write_text(LONG)
    ui.deploy(flow)
    long_id = ui.start_flow("long-history", {"items": list(range(400))})
    wait_run(ui, long_id, lambda r: r["status"] == "completed", "completed")
    visit(page, ui.url(f"/ui/runs/{long_id}"))
    older = page.get_by_role("link", name="Older entries", exact=True)
    expect(older).to_be_visible()
    first_page = section(page, "Timeline").get_by_role("table").inner_text()
    assert "run.completed" in first_page, "the newest entries come first"
    shown = section(page, "Timeline").get_by_role("row").count()
    assert shown < 400, f"a page of the timeline shows {shown} rows: not a bounded page"
    older.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run {long_id}")
    older_page = section(page, "Timeline").get_by_role("table")
    expect(older_page).not_to_contain_text("run.completed")
    assert older_page.inner_text() != first_page


def test_the_live_refresh_keeps_the_users_place(ui: UiSite, page: Page) -> None:
    """A user on the page of a run that has not ended keeps their place while it refreshes itself
    (every 2 s): the control they tabbed to keeps the focus, and a timeline filter they have
    started to change (not applied yet) keeps their choice."""
    ui.deploy(ONBOARDING)
    run_id = ui.start_flow("hire-onboarding", HIRE)
    wait_run(ui, run_id, lambda r: r["status"] == "waiting", "waiting on its timer")
    visit(page, ui.url(f"/ui/runs/{run_id}"))
    section(page, "Timeline").get_by_label("Failed only").check()
    cancel = page.get_by_role("button", name="Cancel", exact=True)
    tab_to(page, cancel)
    assert page.evaluate(NEXT_REFRESH), "the page refreshed itself"
    lost: list[str] = []
    if not is_focused(cancel):
        focused = page.evaluate("() => document.activeElement?.outerHTML?.slice(0, 80)")
        lost.append(f"the focus moved from Cancel to {focused}")
    if not section(page, "Timeline").get_by_label("Failed only").is_checked():
        lost.append('"Failed only", checked but not applied yet, was unchecked')
    assert not lost, "after the page refreshed itself: " + "; ".join(lost)


# Resolves once htmx has swapped in and settled the next refresh of the page (at most 2 s away).
NEXT_REFRESH = (
    "() => new Promise(done => document.body.addEventListener('htmx:afterSettle', "
    "() => done(true), { once: true }))"
)
