"""The BPMN export imports into bpmn-js (what bpmn.io and Camunda Modeler are built on) with no
warning, every element drawn: each of ``bpmn_files.definitions()`` (the examples and
``tests/bpmn_cases``), in Debian's chromium. The XSD check of the same files is
``tests/unit/test_bpmn.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bpmn_files import definitions, exported
from bpmn_js import IMPORT, modeler_source
from lxml import etree
from playwright.sync_api import Browser, Page

BPMN = "http://www.omg.org/spec/BPMN/20100524/MODEL"


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
