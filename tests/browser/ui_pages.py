"""What every page of the web UI shares (title, navigation, one h1), and the data sets the browser
tests put in a store before looking at it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Locator, Page, Response, expect
from ui_site import ONBOARDING, ORDERS, PROVISIONING, REMINDERS, UiSite, wait_for

NAV_LINKS = ("Runs", "Tasks", "Definitions", "Schedules", "Outbox", "Send event")
STEP_STATES = ("is-done", "is-active", "is-failed")
TENANTS = ("acme", "globex flaky-2", "initech refused")  # the three of `make demo`
DEMO_ACCOUNTS = {
    "accounts": [
        {"name": "Acme", "owner": "@ada", "renews": "2027-02-01"},
        {"name": "Globex", "owner": "@bob", "renews": "2027-03-15"},
    ]
}
HIRE = {"hire": {"start_date": "2027-01-10", "name": "Ada"}, "deal": {"name": "Acme"},
        "ticket": {"id": "T-1"}}  # fmt: skip


def visit(page: Page, url: str, status: int = 200) -> Response:
    """Opens ``url``; the page must answer ``status``."""
    answer = page.goto(url)
    assert answer is not None, f"no answer from {url}"
    assert answer.status == status, f"{url} answered {answer.status}, not {status}"
    return answer


def assert_frame(page: Page, h1: str | re.Pattern[str]) -> None:
    """The contract's frame of every page: a title "<what> · procflow", a navigation landmark
    with its six links, exactly one h1 (with this text)."""
    expect(page).to_have_title(re.compile(r"^\S.* · procflow$"))
    nav = page.get_by_role("navigation")
    for name in NAV_LINKS:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    headings = page.get_by_role("heading", level=1)
    expect(headings).to_have_count(1)
    expect(headings).to_have_text(h1)


def section(page: Page, heading: str) -> Locator:
    """The part of the page under the h2 ``heading``: its nearest enclosing element that holds
    more than the heading itself (a <section>, or whatever the page wraps it in)."""
    title = page.get_by_role("heading", name=heading, exact=True, level=2)
    expect(title).to_have_count(1)
    return title.locator("xpath=ancestor::*[count(*) > 1][1]")


def step_node(page: Page, step: str) -> Locator:
    return page.locator(f'svg g.step[data-step="{step}"]')


def step_state(page: Page, step: str) -> str | None:
    """The one highlight class a step's node has (None when not reached); fails on two."""
    classes = (step_node(page, step).get_attribute("class") or "").split()
    states = [c for c in classes if c in STEP_STATES]
    assert len(states) <= 1, f"step {step} has {states}: at most one of {STEP_STATES}"
    return states[0] if states else None


def expect_step_state(page: Page, step: str, state: str | None) -> None:
    node = step_node(page, step)
    expect(node).to_have_count(1)
    if state is not None:
        expect(node).to_have_class(re.compile(rf"(^|\s){state}(\s|$)"))
    others = [s for s in STEP_STATES if s != state]
    expect(node).not_to_have_class(re.compile(rf"(^|\s)({'|'.join(others)})(\s|$)"))


# --- data sets ---------------------------------------------------------------------------------


@dataclass
class Tenants:
    """The provisioning runs of the three demo tenants, by title."""

    runs: dict[str, str]


def start_tenants(site: UiSite, titles: tuple[str, ...] = TENANTS) -> Tenants:
    """Deploys the provisioning example and creates a TenantApplication per title; the server's
    worker starts their runs (each waits on a retry after a failure, or completes)."""
    site.deploy(PROVISIONING)
    ids = [site.create_record("TenantApplication", {"title": t})["id"] for t in titles]
    return Tenants(
        {
            t: site.run_of_record("TenantApplication", i)["id"]
            for t, i in zip(titles, ids, strict=True)
        }
    )


def open_order_task(site: UiSite, total: float = 100) -> dict[str, Any]:
    """An Order (the orders example deployed) whose approval run waits on the task `review`,
    assigned to the role `manager`; the open task."""
    site.deploy(ORDERS)
    order = site.create_record("Order", {"total": total, "note": "two crates"})
    if not site.served:  # no server's worker to start the approval run: the CLI's does
        site.cli("worker", "--until-idle")

    def task() -> dict[str, Any] | None:
        found = [t for t in site.tasks() if t["record"] == {"entity": "Order", "id": order["id"]}]
        return found[0] if found else None

    return wait_for(task, f"the review task of order {order['id']}")


def onboarding_waiting_for_approval(site: UiSite) -> tuple[str, str]:
    """A hire-onboarding run moved (by the virtual clock) to its Slack approval wait; (run id,
    the ts of the message the approval must name)."""
    site.deploy(ONBOARDING)
    run_id = site.start_flow("hire-onboarding", HIRE)
    site.advance("8d")  # the cooling-off period, then the day before the start: ask, then wait

    def asked() -> str | None:
        shown = site.run(run_id)
        waits = [t.get("waiting_for") or {} for t in shown["tokens"]]
        return (
            shown["bindings"]["ask"]["ts"] if any(w.get("kind") == "event" for w in waits) else None
        )

    return run_id, wait_for(asked, f"run {run_id} to wait for slack.approval")


def demo_data(site: UiSite) -> dict[str, str]:
    """What `make demo` leaves in its store (the three tenants run to their end with ``procflow
    run --wait``, the reminders flow), plus an open orders task. Returns run ids by tenant title
    and by definition name for the others, and ``task``: the open task's id."""
    for title in TENANTS:
        site.cli("run", str(PROVISIONING), "--wait", "--record", json.dumps({"title": title}))
    site.cli("run", str(REMINDERS), "--wait", "--inputs", json.dumps(DEMO_ACCOUNTS))
    task = open_order_task(site)
    found = {"task": str(task["id"])}
    for item in site.runs():
        record = site.run(item["id"])["record"]
        if item["name"] == "TenantProvisioning":
            got = site.cli_json("records", "get", record["entity"], str(record["id"]))
            found[str(got["title"])] = item["id"]
        else:
            found[item["name"]] = item["id"]
    return found
