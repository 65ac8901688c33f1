"""The task inbox and a task's form in a browser (the orders example: a review task assigned to the
role `manager`), completed with the keyboard; a refused value re-renders the form with a 422."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect
from ui_pages import assert_frame, open_order_task, visit
from ui_site import UiSite, navigate_with_enter, submit_with_enter, wait_run


def test_an_orders_task_is_completed_through_its_form(ui_on_each_store: UiSite, page: Page) -> None:
    ui = ui_on_each_store  # the browser's one write through the UI, on each store
    task = open_order_task(ui)
    task_id = str(task["id"])
    visit(page, ui.url("/ui/tasks"))
    assert_frame(page, "Tasks")
    table = page.get_by_role("table", name="Open tasks")
    expect(table).to_be_visible()
    table.get_by_role("link", name=task_id, exact=True).click()

    assert_frame(page, f"Task {task_id}")
    expect(page.get_by_text("two crates").first).to_be_visible()  # the record is shown
    total = page.get_by_label("total", exact=True)
    note = page.get_by_label("note", exact=True)
    expect(total).to_be_editable()
    note.fill("approved by the browser test")
    for action in task["actions"]:
        expect(page.get_by_role("button", name=action, exact=True)).to_be_visible()
    status = submit_with_enter(page, page.get_by_role("button", name="approve", exact=True))
    assert status < 400, f"completing answered {status}"

    run = wait_run(ui, task["run_id"], lambda r: r["status"] == "completed", "completed")
    completed = [e for e in run["history"] if e["type"] == "task.completed"]
    assert [(e["task_id"], e["action"]) for e in completed] == [(task["id"], "approve")]
    order = ui.cli_json("records", "get", "Order", str(task["record"]["id"]))
    assert order["note"] == "approved by the browser test"
    assert order["Status"] == 2  # Approved
    assert ui.tasks() == []
    visit(page, ui.url("/ui/tasks"))
    expect(page.get_by_role("link", name=task_id, exact=True)).to_have_count(0)


def test_a_refused_field_is_shown_next_to_it_with_a_422(ui: UiSite, page: Page) -> None:
    task = open_order_task(ui)
    visit(page, ui.url(f"/ui/tasks/{task['id']}"))
    total = page.get_by_label("total", exact=True)
    # A number input lets no browser send "a lot"; a text input (as a browser without number
    # inputs shows it, or a hand-made request) does: the server's own check must answer.
    total.evaluate("input => { input.type = 'text'; }")
    total.fill("a lot")
    status = submit_with_enter(page, page.get_by_role("button", name="approve", exact=True))
    assert status == 422
    assert_frame(page, f"Task {task['id']}")
    total = page.get_by_label("total", exact=True)
    described = total.get_attribute("aria-describedby")
    alert = (
        page.locator(f"#{described.split()[0]}")
        if described
        else page.get_by_role("alert").filter(has_text="total")
    )
    expect(alert.first).to_be_visible()
    expect(alert.first).not_to_have_text("")
    assert [t["id"] for t in ui.tasks()] == [task["id"]], "a refused form changes nothing"


def test_the_inbox_filters_by_assignee(ui: UiSite, page: Page) -> None:
    task = open_order_task(ui)
    visit(page, ui.url("/ui/tasks"))
    page.get_by_label("Assignee", exact=True).fill("cfo")
    navigate_with_enter(page, page.get_by_role("button", name="Filter", exact=True))
    expect(page).to_have_url(re.compile(r"[?&]assignee=cfo(&|$)"))
    expect(page.get_by_role("link", name=str(task["id"]), exact=True)).to_have_count(0)
    page.get_by_label("Assignee", exact=True).fill("manager")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.get_by_role("link", name=str(task["id"]), exact=True)).to_be_visible()
