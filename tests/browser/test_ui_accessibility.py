"""axe-core on every page of the web UI, in the states a user meets them (a list with rows, a run
waiting and one ended, a refused form, a bad upload, a delivery report, the sign-in page, the
"Not found" page, a confirmation step, schedules active and paused and a form's status line, a
run a schedule started): no violation of impact serious or critical on any."""

from __future__ import annotations

from pathlib import Path

from a11y import blocking, describe, violations
from playwright.sync_api import Page, expect
from serving import TOKENS
from ui_pages import demo_data, visit
from ui_site import UiSite

BROKEN = "flow: broken\nsteps:\n  - second:\n      nosuch.action: { x: 1 }\n"
NIGHTLY = """\
flow: nightly
trigger:
  - schedule: { name: early, every: 1h }
  - schedule: { name: late, cron: "0 18 * * MON-FRI", timezone: Europe/Berlin }
steps:
  - hold: { wait: { for: 90m } }
"""


def test_no_page_has_a_serious_accessibility_violation(
    ui_unserved: UiSite, page: Page, tmp_path: Path
) -> None:
    ui = ui_unserved
    runs = demo_data(ui)
    (tmp_path / "nightly.flow.yaml").write_text(NIGHTLY)
    ui.deploy(tmp_path / "nightly.flow.yaml")  # two schedules: one paused (disabled buttons)
    ui.cli("schedules", "pause", "nightly/late", "--note", "holidays")
    scheduled = ui.cli_json("schedules", "trigger", "nightly/early")["started"][0]
    ui.serve()
    found: list[str] = []

    def check(where: str) -> None:
        serious = blocking(violations(page))
        if serious:
            found.append(describe(where, serious))

    plain_pages = [
        "/ui/runs", f"/ui/runs/{runs['globex flaky-2']}", f"/ui/runs/{runs['initech refused']}",
        f"/ui/runs/{runs['OrderApproval']}", f"/ui/runs/{runs['renewal-reminders']}",
        "/ui/tasks", f"/ui/tasks/{runs['task']}", "/ui/definitions",
        "/ui/definitions/TenantProvisioning", "/ui/definitions/renewal-reminders",
        "/ui/entities/TenantApplication", "/ui/outbox", "/ui/events/new", "/ui/schedules",
        f"/ui/runs/{scheduled}",
    ]  # fmt: skip
    for path in plain_pages:
        visit(page, ui.url(path))
        check(path)
    visit(page, ui.url("/ui/runs/0123456789abcdef0123456789abcdef"), status=404)
    check("the Not found page")

    visit(page, ui.url(f"/ui/runs/{runs['OrderApproval']}"))
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("button", name="Confirm", exact=True)).to_be_visible()
    check("the confirmation step of Cancel")

    visit(page, ui.url("/ui/schedules"))
    page.get_by_role("button", name="Resume nightly/late", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Resumed nightly/late.")
    check("the schedules page saying what its form did")

    visit(page, ui.url(f"/ui/tasks/{runs['task']}"))
    total = page.get_by_label("total", exact=True)
    total.evaluate("input => { input.type = 'text'; }")  # to send what the server refuses
    total.fill("a lot")
    page.get_by_role("button", name="approve", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Task {runs['task']}")
    check("a task form with a refused field")

    broken = tmp_path / "broken.flow.yaml"
    broken.write_text(BROKEN)
    visit(page, ui.url("/ui/definitions"))
    page.get_by_label("Definition file", exact=True).set_input_files(str(broken))
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("heading", name="Problems", exact=True)).to_be_visible()
    check("the definitions page after a bad upload")

    visit(page, ui.url("/ui/events/new"))
    page.get_by_label("Type", exact=True).fill("slack.approval")
    page.get_by_label("Data (JSON)", exact=True).fill('{"message": "no run waits for this"}')
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.get_by_role("heading", name="Delivery", exact=True)).to_be_visible()
    check("the send-event page with its delivery report")

    ui.serve(environ={"PROCFLOW_API_TOKENS": TOKENS})  # a second server, with sign-in
    visit(page, ui.url("/ui/login"))
    check("/ui/login")
    page.get_by_label("Token", exact=True).fill("not-a-token-" + "x" * 24)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_be_visible()
    check("/ui/login after a wrong token")

    assert not found, "\n\n".join(found)
