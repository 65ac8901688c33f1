"""The README's pictures, taken on the demo data (the three tenants of `make demo`, its reminders
flow, and an open orders task) at 1280×800: docs/images/runs.png, run.png (the flaky tenant's
run: its retries in the timeline) and inbox.png. A test of the suite, so the pictures follow the
pages; on SQLite only (the pictures do not depend on the store). The suite takes them into a
temporary folder (run ids are random: a committed picture would change with every run);
``UPDATE_SCREENSHOTS=1 pytest tests/browser/test_ui_screenshots.py`` writes them into docs/."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from ui_pages import demo_data, visit
from ui_site import ROOT, UiSite

IMAGES = ROOT / "docs" / "images"
MAX_BYTES = 300 * 1024


@pytest.fixture
def demo_site(tmp_path: Path) -> Iterator[UiSite]:
    site = UiSite(f"sqlite:///{tmp_path / 'demo.db'}", {}, tmp_path)
    site.init_store()
    try:
        yield site
    finally:
        site.stop()


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def shoot(page: Page, folder: Path, name: str) -> Path:
    path = folder / name
    page.screenshot(path=str(path), full_page=False, animations="disabled", caret="hide")
    assert png_size(path) == (1280, 800)
    assert path.stat().st_size < MAX_BYTES, f"{path}: {path.stat().st_size:,} bytes"
    return path


@pytest.mark.screenshots
def test_readme_screenshots(demo_site: UiSite, page: Page, tmp_path: Path) -> None:
    runs = demo_data(demo_site)
    demo_site.serve()
    folder = IMAGES if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path / "images"
    folder.mkdir(parents=True, exist_ok=True)

    visit(page, demo_site.url("/ui/runs"))
    expect(page.get_by_role("table", name="Runs").get_by_role("row")).to_have_count(6)
    shoot(page, folder, "runs.png")

    visit(page, demo_site.url(f"/ui/runs/{runs['globex flaky-2']}"))
    expect(page.locator('svg g.step[data-step="createSchema"]')).to_have_count(1)
    shoot(page, folder, "run.png")

    visit(page, demo_site.url("/ui/tasks"))
    expect(page.get_by_role("link", name=runs["task"], exact=True)).to_be_visible()
    shoot(page, folder, "inbox.png")
