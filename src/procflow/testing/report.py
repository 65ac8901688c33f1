"""How results are told: lines for people (a readable diff for maps and lists), JSON, JUnit XML."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any
from xml.etree import ElementTree as ET

from procflow.testing.coverage import Coverage
from procflow.testing.expectations import Failure
from procflow.testing.runner import Result

INDENT = "    "


def result_lines(result: Result) -> list[str]:
    """``PASS name (file:line)``, or ``FAIL ...`` with the failure under it."""
    head = f"{'PASS' if result.passed else 'FAIL'} {result.name} ({result.file}:{result.line})"
    if result.failure is None:
        return [head]
    return [head, *(INDENT + line for line in failure_lines(result.failure, result.file))]


def failure_lines(failure: Failure, file: str) -> list[str]:
    where = f"{file}:{failure.pos.line}: " if failure.pos is not None else ""
    lines = [f"{where}{_key(failure.key)}"]
    same_shape = type(failure.expected) is type(failure.actual)
    if same_shape and isinstance(failure.expected, dict | list):
        lines += [f"  expected: {_one(failure.expected)}", f"  actual:   {_one(failure.actual)}"]
        lines += ["  diff (- expected, + actual):"]
        lines += ["    " + d for d in diff(failure.expected, failure.actual)]
    else:
        lines += [f"  expected: {_one(failure.expected)}", f"  actual:   {_one(failure.actual)}"]
    if failure.note:
        lines.append(f"  {failure.note}")
    return lines


def _key(key: str) -> str:
    action_keys = ("advance", "until", "event", "complete", "update", "create", "delete", "cancel")
    if key in action_keys or key.startswith("given"):
        return f"{key}: the action failed"
    return f"expect.{key}"


def _one(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def diff(expected: Any, actual: Any) -> list[str]:
    """A line diff of two values printed as indented JSON (keys sorted)."""
    left = json.dumps(expected, indent=2, sort_keys=True, default=str).splitlines()
    right = json.dumps(actual, indent=2, sort_keys=True, default=str).splitlines()
    return [
        line
        for line in difflib.unified_diff(left, right, lineterm="", n=1)
        if not line.startswith(("---", "+++", "@@"))
    ]


def summary(results: Sequence[Result]) -> str:
    passed = sum(1 for r in results if r.passed)
    return f"{passed} passed, {len(results) - passed} failed"


def coverage_lines(coverage: Sequence[Coverage]) -> list[str]:
    lines: list[str] = []
    for one in coverage:
        lines.append(one.summary())
        lines += [INDENT + route.describe() for route in one.untaken]
    return lines


def as_json(results: Sequence[Result]) -> str:
    return json.dumps([r.as_json() for r in results], indent=2, ensure_ascii=False, default=str)


def junit_xml(results: Sequence[Result]) -> str:
    """JUnit XML: a ``testsuite`` per test file, a ``testcase`` per scenario (``classname`` the
    file), a ``failure`` child holding the message for a failing one."""
    root = ET.Element("testsuites", tests=str(len(results)),
                      failures=str(sum(1 for r in results if not r.passed)))  # fmt: skip
    files = list(dict.fromkeys(r.file for r in results))
    for file in files:
        mine = [r for r in results if r.file == file]
        suite = ET.SubElement(
            root, "testsuite", name=file, tests=str(len(mine)),
            failures=str(sum(1 for r in mine if not r.passed)),
            time=f"{sum(r.seconds for r in mine):.3f}",
        )  # fmt: skip
        for result in mine:
            case = ET.SubElement(suite, "testcase", name=result.name, classname=file,
                                 time=f"{result.seconds:.3f}")  # fmt: skip
            if result.failure is not None:
                lines = failure_lines(result.failure, result.file)
                failure = ET.SubElement(case, "failure", message=lines[0], type=result.failure.key)
                failure.text = "\n".join(lines)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
