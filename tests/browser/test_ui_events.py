"""The send-event form in a browser: the onboarding example's run, parked on its Slack approval
(`wait_for: slack.approval`, matched on the posted message's ts), resumed by the event typed in."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, expect
from ui_pages import assert_frame, onboarding_waiting_for_approval, section, visit
from ui_site import UiSite, submit_with_enter, wait_run


def test_the_onboarding_run_is_resumed_from_the_send_event_form(ui: UiSite, page: Page) -> None:
    run_id, ts = onboarding_waiting_for_approval(ui)
    visit(page, ui.url("/ui/events/new"))
    assert_frame(page, "Send event")
    page.get_by_label("Type", exact=True).fill("slack.approval")
    data = {"message": ts, "approved": True, "user": "ada.lovelace"}
    page.get_by_label("Data (JSON)", exact=True).fill(json.dumps(data))
    page.get_by_label("Event id").fill("browser-approval-1")
    assert submit_with_enter(page, page.get_by_role("button", name="Send", exact=True)) == 200

    delivery = section(page, "Delivery")
    expect(delivery).to_contain_text("Resumed")
    expect(delivery).to_contain_text("Started")
    delivery.get_by_role("link", name=run_id, exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run {run_id}")

    def approved(run: dict[str, Any]) -> bool:
        return bool(run["bindings"].get("approval", {}).get("status") == "received")

    run = wait_run(ui, run_id, approved, "the approval bound")
    assert run["bindings"]["approval"]["event"] == data


def test_bad_json_is_refused_and_changes_nothing(ui: UiSite, page: Page) -> None:
    run_id, ts = onboarding_waiting_for_approval(ui)
    visit(page, ui.url("/ui/events/new"))
    page.get_by_label("Type", exact=True).fill("slack.approval")
    page.get_by_label("Data (JSON)", exact=True).fill('{"message": ')
    status = submit_with_enter(page, page.get_by_role("button", name="Send", exact=True))
    assert 400 <= status < 500
    assert_frame(page, "Send event")
    expect(page.get_by_role("alert").first).to_be_visible()
    expect(page.get_by_role("heading", name="Delivery", exact=True)).to_have_count(0)
    waits = [t.get("waiting_for") or {} for t in ui.run(run_id)["tokens"]]
    assert [w.get("kind") for w in waits] == ["event"], "the run still waits for its approval"
    assert ts
