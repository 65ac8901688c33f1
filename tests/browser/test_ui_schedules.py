"""The schedules page in a browser: a schedule paused with a note and resumed by its buttons (the
Pause button reached with the keyboard), the page saying what each did and the store agreeing;
then triggered, its run's page naming the schedule and the slot."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from ui_pages import assert_frame, visit
from ui_site import UiSite, submit_with_enter

TICK = """\
flow: tick
trigger:
  schedule: { every: 1h }
steps:
  - hold: { wait: { for: 90m } }
"""


def test_a_schedule_is_paused_and_resumed_by_its_buttons(ui: UiSite, page: Page) -> None:
    (ui.folder / "tick.flow.yaml").write_text(TICK)
    ui.deploy(ui.folder / "tick.flow.yaml")
    visit(page, ui.url("/ui/schedules"))
    assert_frame(page, "Schedules")
    table = page.get_by_role("table", name="Schedules")
    row = table.get_by_role("row").filter(has=page.get_by_role("link", name="tick", exact=True))
    expect(row).to_contain_text("every 1h")
    expect(row).to_contain_text("active")
    expect(row).to_contain_text("2027-01-01 01:00:00Z")  # the next slot
    expect(row.get_by_role("button", name="Resume tick", exact=True)).to_be_disabled()

    row.get_by_label("Note for tick", exact=True).fill("database upgrade")
    posted = submit_with_enter(page, row.get_by_role("button", name="Pause tick", exact=True))
    assert posted == 303
    expect(page.get_by_role("status")).to_have_text("Paused tick.")
    expect(row).to_contain_text("paused: database upgrade")
    expect(row.get_by_role("button", name="Pause tick", exact=True)).to_be_disabled()
    expect(row).to_contain_text("It is paused already")
    shown = ui.cli_json("schedules", "show", "tick")
    assert (shown["state"], shown["note"], shown["next"]) == ("paused", "database upgrade", [])

    row.get_by_role("button", name="Resume tick", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Resumed tick.")
    expect(row).to_contain_text("active")
    expect(row).not_to_contain_text("database upgrade")
    assert ui.cli_json("schedules", "show", "tick")["state"] == "active"

    row.get_by_role("button", name="Trigger now tick", exact=True).click()
    status = page.get_by_role("status")
    expect(status).to_contain_text("Triggered tick: started run")
    status.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(
        f"Run {ui.cli_json('schedules', 'show', 'tick')['last']['run_id']}"
    )
    expect(page.get_by_text("tick, slot 2027-01-01 00:00:00Z")).to_be_visible()
