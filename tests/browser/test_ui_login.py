"""Signing in with a token (``PROCFLOW_API_TOKENS``: the HTTP tests' table), and what a signed-in
user may not do: complete a task of a role they lack (a visible refusal, status 403), or post a
form without its CSRF token."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect
from serving import ADMIN_TOKEN, OPS_TOKEN, TOKENS
from ui_pages import assert_frame, open_order_task, visit
from ui_site import UiSite, submit_with_enter, wait_run


def sign_in(page: Page, ui: UiSite, token: str) -> None:
    visit(page, ui.url("/ui/login"))
    assert_frame(page, "Sign in")
    field = page.get_by_label("Token", exact=True)
    expect(field).to_have_attribute("type", "password")
    field.fill(token)
    submit_with_enter(page, page.get_by_role("button", name="Sign in", exact=True))


def test_pages_need_a_token_and_a_wrong_one_is_refused(ui_unserved: UiSite, page: Page) -> None:
    ui = ui_unserved
    ui.serve(environ={"PROCFLOW_API_TOKENS": TOKENS})
    visit(page, ui.url("/ui/runs"))
    expect(page).to_have_url(re.compile(r"/ui/login"))
    assert_frame(page, "Sign in")
    sign_in(page, ui, "not-a-token-" + "x" * 24)
    expect(page.get_by_role("alert")).to_contain_text("That token is not valid")
    expect(page.get_by_role("button", name="Sign out", exact=True)).to_have_count(0)

    sign_in(page, ui, ADMIN_TOKEN)
    visit(page, ui.url("/ui/runs"))
    assert_frame(page, "Runs")
    expect(page.get_by_text("ada", exact=True).first).to_be_visible()
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = [c for c in cookies.values() if c["httpOnly"]]
    assert session and all(c["sameSite"] == "Strict" for c in session), cookies
    assert all(ADMIN_TOKEN not in c["value"] for c in cookies.values()), (
        "the token is not the cookie"
    )

    submit_with_enter(page, page.get_by_role("button", name="Sign out", exact=True))
    visit(page, ui.url("/ui/runs"))
    expect(page).to_have_url(re.compile(r"/ui/login"))


def test_a_task_of_another_role_shows_its_buttons_disabled_saying_why(
    ui_unserved: UiSite, page: Page
) -> None:
    ui = ui_unserved
    ui.serve(environ={"PROCFLOW_API_TOKENS": TOKENS})
    task = open_order_task(ui)  # assigned to the role `manager`: olga (ops) is not a member
    sign_in(page, ui, OPS_TOKEN)
    visit(page, ui.url(f"/ui/tasks/{task['id']}"))
    expect(page.get_by_text("olga", exact=True).first).to_be_visible()
    approve = page.get_by_role("button", name="approve", exact=True)
    expect(approve).to_be_disabled()
    why = page.get_by_text(re.compile(r"You may not complete this task: ")).first
    expect(why).to_be_visible()
    assert approve.get_attribute("aria-describedby") == why.get_attribute("id")
    assert [t["id"] for t in ui.tasks()] == [task["id"]], "the task is still open"


def test_a_form_posted_without_its_csrf_token_is_refused(ui_unserved: UiSite, page: Page) -> None:
    ui = ui_unserved
    ui.serve(environ={"PROCFLOW_API_TOKENS": TOKENS})
    task = open_order_task(ui)
    sign_in(page, ui, ADMIN_TOKEN)
    visit(page, ui.url(f"/ui/tasks/{task['id']}"))
    button = page.get_by_role("button", name="approve", exact=True)
    form = button.locator("xpath=ancestor::form[1]")
    action = form.get_attribute("action") or f"/ui/tasks/{task['id']}"
    hidden = form.locator('input[type="hidden"]')
    fields: dict[str, str | float | bool] = {
        name: hidden.nth(i).get_attribute("value") or ""
        for i in range(hidden.count())
        if (name := hidden.nth(i).get_attribute("name") or "") and "csrf" not in name.lower()
    }
    assert hidden.count() > len(fields), "the form carries a hidden CSRF token"
    fields.update({"total": "100", "note": "forged", "action": "approve"})
    target = ui.url(action) if action.startswith("/") else action
    answer = page.request.post(target, form=fields, max_redirects=0)
    assert answer.status == 403, f"{answer.status}: {answer.text()[:300]}"
    assert "Traceback" not in answer.text()
    assert [t["id"] for t in ui.tasks()] == [task["id"]], "a forged post changes nothing"

    # The same form submitted by the page itself (with its token) is accepted.
    assert submit_with_enter(page, button) < 400
    wait_run(ui, task["run_id"], lambda r: r["status"] == "completed", "completed by ada")
