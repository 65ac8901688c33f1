"""Every message of a flow's `concurrency` and a step's `throttle` in the flow compiler, at its
position (docs/reference/flow-control.md)."""

from __future__ import annotations

import pytest

from procflow.model.validate import load_text

HEAD = "flow: t\ninputs:\n  k: { type: string, default: x }\n"
LOG = "log.write: { message: hi }"


def problems(text: str) -> list[str]:
    loaded = load_text(text, "t.flow.yaml", ".")
    return [d.format() for d in loaded.diagnostics]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            HEAD + "concurrency: { limit: 1, on_limit: wait }\nsteps:\n  - a: { set: { x: 1 } }\n",
            "t.flow.yaml:4:36: error: concurrency: on_limit must be queue or refuse, got [wait] "
            "(concurrency.on_limit)",
            id="on_limit",
        ),
        pytest.param(
            HEAD + "concurrency: { key: '{{ k }}' }\nsteps:\n  - a: { set: { x: 1 } }\n",
            "t.flow.yaml:4:14: error: concurrency: missing required key [limit] (runs active at "
            "once) (concurrency)",
            id="no limit",
        ),
        pytest.param(
            HEAD + f"steps:\n  - a: {{ {LOG}, throttle: {{ limit: 0, per: 1s }} }}\n",
            "t.flow.yaml:5:57: error: step [a]: throttle.limit must be at least 1, got 0 "
            "(steps[0].a.throttle.limit)",
            id="throttle limit",
        ),
        pytest.param(
            HEAD + f"steps:\n  - a: {{ {LOG}, throttle: {{ limit: 1, per: '{{{{ k }}}}' }} }}\n",
            "t.flow.yaml:5:65: error: step [a]: throttle.per must be a literal duration (e.g. "
            "1s), not an expression (steps[0].a.throttle.per)",
            id="templated per",
        ),
        pytest.param(
            HEAD + f"steps:\n  - a: {{ {LOG}, throttle: {{ limit: 1, per: 1s, name: a-b }} }}\n",
            "t.flow.yaml:5:75: error: step [a]: throttle.name [a-b] must be a name (letters, "
            "digits, _) (steps[0].a.throttle.name)",
            id="bad name",
        ),
        pytest.param(
            HEAD + "steps:\n  - w: { wait: { for: 1s }, throttle: { limit: 1, per: 1s } }\n",
            "t.flow.yaml:5:29: error: step [w]: [throttle] is not allowed on a wait step; "
            "throttle applies to action and call steps only (steps[0].w.throttle)",
            id="throttle on a wait",
        ),
    ],
)
def test_each_problem_is_reported_at_its_position(text: str, expected: str) -> None:
    assert expected in problems(text)
