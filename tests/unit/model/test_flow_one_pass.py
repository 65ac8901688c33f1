"""The flow compiler reports every problem of a file in one pass: a check is not skipped because
another check of the same step or declaration failed first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_flow import HEAD, F, assert_exactly, case, compile_ok, compile_text

from procflow.model.ir import ActionStep, SetStep

CASES = [
    case(
        "an arg's syntax error does not hide the next arg",
        HEAD + "  - a: { http.request: { method: '{{ 1 + }}', url: '{{ other }}' } }\n",
        F + "5:42: error: step [a]: http.request.method: expected a value, found [}]",
        F + "5:56: error: step [a]: http.request.url: unknown name [other]",
    ),
    case(
        "wait with both for and until still checks both",
        HEAD + "  - a: { wait: { for: '{{ bogus }}', until: '{{ other }}' } }\n",
        F + "5:38: error: step [a]: wait has both [for] and [until]; give exactly one",
        F + "5:27: error: step [a]: wait.for: unknown name [bogus]",
        F + "5:49: error: step [a]: wait.until: unknown name [other]",
    ),
    case(
        "a step without a construct still checks its if",
        HEAD + "  - a: { sett: { x: 1 }, if: '{{ bogus }}' }\n",
        F + "5:8: error: step [a]: has no construct",
        F + "5:10: error: step [a]: unknown key [sett]; did you mean [set]?",
        F + "5:34: error: step [a]: if: unknown name [bogus]",
    ),
    case(
        "a step with two constructs still checks its modifiers",
        HEAD + "  - a: { set: { x: 1 }, fail: boom, if: '{{ bogus }}', optional: 2 }\n",
        F + "5:25: error: step [a]: has 2 constructs, [set] and [fail]",
        F + "5:45: error: step [a]: if: unknown name [bogus]",
        F + "5:66: error: step [a]: optional must be true or false, got an integer",
    ),
    case(
        "a step id that is not an identifier still has its body checked",
        HEAD + "  - my-step: { set: { x: '{{ bogus }}' } }\n",
        F + "5:5: error: step: step id [my-step] is not an identifier",
        F + "5:30: error: step [my-step]: set.x: unknown name [bogus]",
    ),
    case(
        "an input of unknown type is still declared and checked",
        "flow: t\ninputs:\n  n: { type: strng, required: true, default: 3 }\n"
        "steps:\n  - a: { set: { x: '{{ n }}' } }\n",
        F + "3:14: error: input [n]: unknown type [strng]; did you mean [string]?",
        F + "3:46: error: input [n]: a required input never uses its default",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_every_problem_is_reported_at_once(tmp_path: Path, text: str, expected: list[str]) -> None:
    loaded, shown = compile_text(tmp_path, text)
    assert_exactly(shown, expected)
    assert loaded.definition is None


def test_a_literal_null_value_keeps_its_step(tmp_path: Path) -> None:
    """A ``set`` value or an action arg that is a literal null is a value, not a failure: the
    step stays in the flow (it was once dropped without a word)."""
    flow = compile_ok(
        tmp_path,
        HEAD + "  - a: { set: { none: null } }\n"
        "  - b: { http.request: { url: 'https://x', json: null } }\n",
    )
    a, b = flow.steps
    assert isinstance(a, SetStep) and dict(a.values) == {"none": None}
    assert isinstance(b, ActionStep) and b.args["json"] is None
