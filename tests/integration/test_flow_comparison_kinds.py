"""Comparing values of different kinds fails the step with an ``expression`` error naming both
kinds, end to end on both store backends; ``null`` compares like any value.

The kinds here are known only when the flow runs (a ``set`` binding), so validation lets the flow
through and the run meets the comparison.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from procflow.runtime.engine import Engine


def run_flow(eng: Engine, tmp_path: Path, steps: str) -> dict[str, Any]:
    flow = tmp_path / "f.flow.yaml"
    flow.write_text("flow: f\nsteps:\n" + textwrap.indent(textwrap.dedent(steps), "  "))
    eng.deploy(str(flow))
    run_id = eng.start_flow("f", {})
    eng.work()
    return eng.show(run_id)


def test_an_if_comparing_a_string_with_a_number_fails_the_step(eng: Engine, tmp_path: Path) -> None:
    run = run_flow(
        eng,
        tmp_path,
        """
        - a: { set: { x: "one" } }
        - b:
            if: "{{ a.x == 1 }}"
            set: { y: 2 }
        - c: { set: { z: 3 } }
        """,
    )
    assert run["status"] == "failed"
    assert run["error"] == {
        "step": "b",
        "type": "expression",
        "message": "if: [==] cannot compare string with integer",
    }
    failed = [e for e in run["history"] if e["type"] == "step.failed"]
    assert [(e["path"], e["error_type"]) for e in failed] == [("b", "expression")]


def test_null_and_numbers_of_either_form_compare_without_error(eng: Engine, tmp_path: Path) -> None:
    run = run_flow(
        eng,
        tmp_path,
        """
        - a: { set: { n: 2, f: 2.0, none: null } }
        - b: { set: { same: "{{ a.n == a.f }}", missing: "{{ a.none == 'x' }}" } }
        """,
    )
    assert run["status"] == "completed"
    assert run["bindings"]["b"] == {"same": True, "missing": False}
