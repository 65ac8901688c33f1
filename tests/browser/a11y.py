"""axe-core (vendored in ``vendor/axe.min.js``, MPL-2.0, licence beside it) run inside a page.

The script is evaluated through the DevTools protocol (``page.evaluate``), so a page's Content
Security Policy cannot block it and the page itself never references it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
BLOCKING = ("serious", "critical")  # the impacts a page of procflow may not have


@cache
def axe_source() -> str:
    return AXE.read_text(encoding="utf-8")


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now (every rule axe runs by default)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())
    result: dict[str, Any] = page.evaluate(
        "async () => await axe.run(document, { resultTypes: ['violations'] })"
    )
    found: list[dict[str, Any]] = result["violations"]
    return found


def blocking(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in found if v.get("impact") in BLOCKING]


def describe(where: str, found: list[dict[str, Any]]) -> str:
    """Violations as a reader wants them: rule, impact, what to do, and each element's selector
    with axe's summary of what is wrong with it."""
    lines = [f"{where}: {len(found)} serious or critical accessibility violations"]
    for violation in found:
        lines.append(
            f"  [{violation['impact']}] {violation['id']}: {violation['help']} "
            f"({violation['helpUrl']})"
        )
        for node in violation["nodes"][:10]:
            target = " ".join(str(t) for t in node.get("target", []))
            summary = (node.get("failureSummary") or "").replace("\n", " / ")
            lines.append(f"      {target}: {summary}")
            lines.append(f"        {node.get('html', '')[:200]}")
        if len(violation["nodes"]) > 10:
            lines.append(f"      … and {len(violation['nodes']) - 10} more elements")
    return "\n".join(lines)


def assert_accessible(page: Page, where: str) -> None:
    found = blocking(violations(page))
    assert not found, describe(where, found)
