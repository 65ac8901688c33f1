"""Definitions in a browser: uploading a file (a broken one shows each problem with its line and
column, as `procflow validate` finds them), a definition's page, records and the outbox."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect
from ui_pages import DEMO_ACCOUNTS, assert_frame, start_tenants, visit
from ui_site import REMINDERS, UiSite, submit_with_enter

BROKEN = """\
flow: broken
steps:
  - first: { set: { a: 1 } }
  - second:
      nosuch.action: { x: 1 }
  - third: { set: { b: "{{ a + }}" } }
"""
GOOD = """\
flow: greeting
inputs:
  who: { type: string, required: true }
steps:
  - greet: { set: { text: "hello {{ who }}" } }
"""


def upload(page: Page, file: Path) -> int:
    """Chooses ``file`` in the upload form and presses Upload with the keyboard; the status."""
    form = page.get_by_role("form", name="Upload a definition")
    expect(form).to_be_visible()
    form.get_by_label("Definition file", exact=True).set_input_files(str(file))
    return submit_with_enter(page, form.get_by_role("button", name="Upload", exact=True))


def test_a_broken_upload_shows_each_problem_with_line_and_column(
    ui: UiSite, page: Page, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.flow.yaml"
    broken.write_text(BROKEN)
    found = ui.cli("validate", str(broken), "--json", check=False, store=False)
    expected = json.loads(found.stdout)
    assert len(expected) == 2
    visit(page, ui.url("/ui/definitions"))
    assert_frame(page, "Definitions")
    assert upload(page, broken) == 422
    expect(page.get_by_role("heading", name="Problems", exact=True)).to_be_visible()
    problems = page.get_by_role("heading", name="Problems").locator(
        "xpath=following::*[self::ul or self::ol][1]"
    )
    items = problems.get_by_role("listitem")
    expect(items).to_have_count(len(expected))
    for item, problem in zip(items.all(), expected, strict=True):
        expect(item).to_contain_text(
            f"broken.flow.yaml:{problem['line']}:{problem['col']}: {problem['message']}"
        )
    assert ui.cli_json("definitions", "list") == [], "a refused upload deploys nothing"


def test_a_good_upload_lists_the_definition_and_its_page(
    ui: UiSite, page: Page, tmp_path: Path
) -> None:
    good = tmp_path / "greeting.flow.yaml"
    good.write_text(GOOD)
    visit(page, ui.url("/ui/definitions"))
    assert upload(page, good) < 400
    visit(page, ui.url("/ui/definitions"))
    table = page.get_by_role("table", name="Definitions")
    table.get_by_role("link", name="greeting", exact=True).click()
    assert_frame(page, "Definition greeting")
    expect(page.get_by_role("heading", name="Diagram", exact=True, level=2)).to_be_visible()
    expect(page.locator('svg g.step[data-step="greet"]')).to_have_count(1)
    versions = page.get_by_role("table", name="Versions")
    expect(versions).to_be_visible()
    for column in ("version", "deployed at", "active runs", "disabled"):
        expect(versions.get_by_role("columnheader", name=column)).to_be_visible()
    expect(versions.get_by_role("row")).to_have_count(2)  # the header and version 1


def test_records_and_the_outbox_have_their_pages(ui: UiSite, page: Page) -> None:
    start_tenants(ui, ("acme",))
    visit(page, ui.url("/ui/entities/TenantApplication"))
    assert_frame(page, "TenantApplication records")
    records = page.get_by_role("table", name="Records")
    expect(records).to_contain_text("acme")

    ui.cli("run", str(REMINDERS), "--wait", "--inputs", json.dumps(DEMO_ACCOUNTS))
    messages = ui.cli_json("outbox", "list")
    assert messages
    visit(page, ui.url("/ui/outbox"))
    assert_frame(page, "Outbox")
    kept = page.get_by_role("table", name="Kept messages")
    expect(kept.get_by_role("row")).to_have_count(len(messages) + 1)
    expect(kept).to_contain_text(str(messages[0]["to"]))
