"""The BPMN export imports into bpmn-js (what bpmn.io and Camunda Modeler are built on) with no
warning, every element drawn: each of ``bpmn_files.definitions()`` (the examples and
``tests/bpmn_cases``), in Debian's chromium. The XSD check of the same files is
``tests/unit/test_bpmn.py``.

The order-review example's picture in docs/reference/bpmn.md (docs/images/order-review.bpmn.svg)
is what bpmn-js saves (``saveSVG``) of the export, checked here to be what it draws now;
``UPDATE_SCREENSHOTS=1 pytest tests/browser/test_bpmn_js.py -k picture`` writes it anew."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from bpmn_files import ROOT, definitions, exported
from bpmn_js import IMPORT, SAVE_SVG, modeler_source, stable_markers, without_font_metrics
from lxml import etree
from playwright.sync_api import Browser, Page

BPMN = "http://www.omg.org/spec/BPMN/20100524/MODEL"
PICTURED = "examples/order-review/order-review.intent"
PICTURE = ROOT / "docs" / "images" / "order-review.bpmn.svg"


@pytest.fixture(scope="module")
def modeler_page(browser: Browser) -> Iterator[Page]:
    """One page with the modeler loaded; each import makes a modeler of its own in it."""
    context = browser.new_context()
    opened = context.new_page()
    opened.set_content("<!doctype html><html><body></body></html>")
    opened.evaluate(modeler_source())
    yield opened
    context.close()


def imported(page: Page, xml: str) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(IMPORT, xml)
    return result


def semantic_ids(xml: str) -> set[str]:
    """The ids of the process's flow nodes and sequence flows (what bpmn-js draws)."""
    root = etree.fromstring(xml.encode())
    [process] = root.iterfind(f"{{{BPMN}}}process")
    return {str(el.get("id")) for el in process.iter() if el.get("id") and el is not process}


@pytest.mark.parametrize(("file", "name"), definitions())
def test_bpmn_js_imports_the_export_without_a_warning(
    modeler_page: Page, file: str, name: str
) -> None:
    xml = exported(file, name)
    result = imported(modeler_page, xml)
    assert result["error"] is None, result
    assert result["warnings"] == []
    assert semantic_ids(xml) <= set(result["drawn"])


def test_bpmn_js_reports_what_is_wrong_with_a_broken_document(modeler_page: Page) -> None:
    """The check can fail: a flow to an element that is not there is a warning."""
    xml = exported("examples/orders/orders.intent")
    broken = xml.replace('targetRef="remind"', 'targetRef="nowhere"', 1)
    assert broken != xml
    result = imported(modeler_page, broken)
    assert any("nowhere" in w for w in result["warnings"]), result


@pytest.mark.screenshots
def test_the_docs_picture_is_what_bpmn_js_draws_of_the_export(modeler_page: Page) -> None:
    xml = exported(PICTURED)
    saved: dict[str, Any] = modeler_page.evaluate(SAVE_SVG, xml)
    assert saved["warnings"] == []
    svg = stable_markers(saved["svg"]) + "\n"
    assert semantic_ids(xml) <= set(re.findall(r'data-element-id="([^"]+)"', svg))
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        PICTURE.write_text(svg, encoding="utf-8")
    rel = PICTURE.relative_to(ROOT)
    assert PICTURE.is_file(), f"{rel} is missing: write it with UPDATE_SCREENSHOTS=1"
    committed = without_font_metrics(PICTURE.read_text(encoding="utf-8"))
    assert committed == without_font_metrics(svg), (
        f"{rel} is not what bpmn-js draws of `procflow graph {PICTURED} --format bpmn` now "
        "(the export or the pinned bpmn-js changed; label positions are not compared): write it "
        "anew with "
        "`UPDATE_SCREENSHOTS=1 pytest tests/browser/test_bpmn_js.py -k picture` and look at it"
    )
