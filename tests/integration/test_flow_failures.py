"""Failure handling in flows (docs/reference/flow.md, "Failure"), end to end on both
store backends with a virtual clock.

Each test writes one small flow (`flow: f`) and a project connector `svc` (actions `call` and
`check`) into tmp_path. ``procflow.testing.fake_action`` replaces both actions with one scripted
fake (:class:`Svc`) that records every call by path and attempt, so tests count side effects
independently of the engine's own history.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine
from procflow.testing import fake_action

T0 = "2027-01-01T00:00:00Z"

MANIFEST = """\
connector: svc
description: A scripted stand-in service (the tests fake both actions).
actions:
  call:
    args: { n: { type: any } }
  check:
    args: { id: { type: string } }
    result: { status: { type: string } }
"""

PACKAGE = '''\
"""Never called: the tests replace both actions with procflow.testing.fake_action."""


def call(ctx, n=None):
    raise AssertionError("svc.call is faked in these tests")


def check(ctx, id=None):
    raise AssertionError("svc.check is faked in these tests")
'''


def at(seconds: int) -> str:
    """T0 + ``seconds`` as the ISO text the engine shows (within the first hour)."""
    return f"2027-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


# --- the scripted connector ------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    step: str
    path: str
    attempt: int
    args: dict[str, Any]


Outcome = Callable[[Call], dict[str, Any]]


def ok(**result: Any) -> Outcome:
    return lambda call: dict(result) if result else {"ok": True}


def down(message: str) -> Outcome:
    def raise_(call: Call) -> dict[str, Any]:
        raise RuntimeError(message)

    return raise_


class Svc:
    """The fake behind `svc.call` and `svc.check`. ``script`` maps a path (``each[1].b``) or a
    step id to an outcome; the default outcome returns ``{"ok": true}``."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.script: dict[str, Outcome] = {}

    def __call__(self, ctx: Any, **args: Any) -> dict[str, Any]:
        path = ctx.idempotency_key.split("/", 1)[1]  # idempotency_key = f"{run_id}/{path}"
        call = Call(ctx.step, path, ctx.attempt, args)
        self.calls.append(call)
        outcome = self.script.get(path) or self.script.get(ctx.step) or ok()
        return outcome(call)

    def paths(self, step: str | None = None) -> list[str]:
        return [c.path for c in self.calls if step is None or c.step == step]

    def attempts(self, path: str) -> list[int]:
        return [c.attempt for c in self.calls if c.path == path]


# --- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture
def svc() -> Iterator[Svc]:
    fake = Svc()
    with fake_action("svc.call", fake), fake_action("svc.check", fake):
        yield fake


Start = Callable[..., str]


@pytest.fixture
def start(eng: Engine, svc: Svc, tmp_path: Path) -> Start:
    """``start(flow_body, **inputs)``: write the project, deploy `f`, start a run, work."""

    def go(body: str, **inputs: Any) -> str:
        project = tmp_path / "project"
        (project / "connectors" / "svc").mkdir(parents=True, exist_ok=True)
        (project / "connectors" / "svc" / "manifest.yaml").write_text(MANIFEST)
        (project / "connectors" / "svc" / "__init__.py").write_text(PACKAGE)
        flow = project / "f.flow.yaml"
        flow.write_text("flow: f\n" + textwrap.dedent(body).lstrip("\n"))
        eng.deploy(str(flow))
        run_id = eng.start_flow("f", inputs)
        eng.work()
        return run_id

    return go


def trail(run: dict[str, Any], *types: str) -> list[str]:
    """The run's history as ``"<type> <path> [<error_type>]"`` lines: all of it, or ``types``.
    Every step entry (a group's, a skipped step's too) names its full path and its attempt."""
    out = []
    for entry in run["history"]:
        if entry.get("step") is not None:
            assert entry.get("path") and entry.get("attempt") is not None, entry
        if types and entry["type"] not in types:
            continue
        line = entry["type"]
        if "path" in entry:
            line += f" {entry['path']}"
        if entry["type"] == "step.failed":
            line += f" {entry['error_type']}"
        out.append(line)
    return out


def entries(run: dict[str, Any], kind: str, path: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in run["history"] if e["type"] == kind and (path is None or e.get("path") == path)
    ]


FAILURES = ("step.failed", "step.recovered", "run.failed", "run.completed")


def err(message: str, step: str, type_: str) -> dict[str, str]:
    return {"message": message, "step": step, "type": type_}


# --- 1. optional ------------------------------------------------------------------------------

# construct → (body of step `x`, script, the error `x` binds, step.failed lines, svc paths called)
OPTIONAL_CASES: dict[str, tuple[str, dict[str, Outcome], dict[str, str], list[str], list[str]]] = {
    "action": (
        """
        svc.call: { n: 1 }
        retry: { count: 1, every: 5s }
        """,
        {"x": down("svc is down")},
        err("svc is down", "x", "action"),
        ["step.failed x action"],
        ["x", "x"],  # the retry first: optional applies to the step's final failure
    ),
    "set": (
        """
        set: { v: "{{ a.x / 0 }}" }
        """,
        {},
        err("division by zero", "x", "expression"),
        ["step.failed x expression"],
        [],
    ),
    "fail": (
        """
        fail: "gave up on {{ a.s }}"
        """,
        {},
        err("gave up on nope", "x", "fail"),
        ["step.failed x fail"],
        [],
    ),
    "wait": (
        """
        wait: { until: "{{ a.s | plus(1d) }}" }
        """,
        {},
        err(
            "[nope] is not an ISO-8601 timestamp (e.g. 2027-01-10T09:00:00Z or 2027-01-10)",
            "x",
            "expression",
        ),
        ["step.failed x expression"],
        [],
    ),
    "group": (
        """
        steps:
          - b: { set: { y: 2 } }
          - c: { svc.call: { n: 1 } }
          - d: { svc.call: { n: 2 } }
        """,
        {"c": down("c is down")},
        err("c is down", "c", "action"),
        ["step.failed x.c action", "step.failed x action"],
        ["x.c"],
    ),
    "for_each": (
        """
        for_each: "{{ [1, 2, 3] }}"
        steps:
          - c: { svc.call: { n: "{{ item }}" } }
        """,
        {"x[1].c": down("c is down for 2")},
        err("c is down for 2", "c", "action"),
        ["step.failed x[1].c action", "step.failed x action"],
        ["x[0].c", "x[1].c"],
    ),
    "repeat": (
        """
        repeat: { every: 30s, max: 5, until: "{{ c.ok == false }}" }
        steps:
          - c: { svc.call: { n: 1 } }
        """,
        {"x[1].c": down("c is down in iteration 2")},
        err("c is down in iteration 2", "c", "action"),
        ["step.failed x[1].c action", "step.failed x action"],
        ["x[0].c", "x[1].c"],
    ),
}


@pytest.mark.parametrize("construct", list(OPTIONAL_CASES))
def test_optional_binds_the_error_and_the_scope_continues(
    construct: str, start: Start, eng: Engine, svc: Svc
) -> None:
    body, script, error, failed, called = OPTIONAL_CASES[construct]
    svc.script.update(script)
    step = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 6)
    run_id = start(
        "steps:\n"
        '  - a: { set: { x: 1, s: "nope" } }\n'
        "  - x:\n"
        "      optional: true\n" + step + "\n"
        '  - after: { set: { seen: "{{ x.error }}", t: "{{ x.error.type }}" } }\n'
        'output: "{{ after.seen.step }}"\n'
    )
    eng.advance("1h")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["error"] is None
    assert run["tokens"] == []
    assert run["bindings"] == {
        "a": {"x": 1, "s": "nope"},
        "x": {"error": error},
        "after": {"seen": error, "t": error["type"]},
    }
    assert run["output"] == error["step"]  # the innermost failed step
    assert svc.paths() == called
    assert trail(run, *FAILURES) == [*failed, "run.completed"]
    assert [e["message"] for e in entries(run, "step.failed")] == [error["message"]] * len(failed)
    assert len(entries(run, "step.completed", "after")) == 1


def test_optional_inside_an_iteration_lets_that_iteration_continue(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["each[1].b"] = down("b is down for 2")
    run_id = start(
        """
        steps:
          - each:
              for_each: "{{ [1, 2] }}"
              steps:
                - b:
                    optional: true
                    svc.call: { n: "{{ item }}" }
                - c: { set: { n: "{{ item }}", b: "{{ b }}" } }
        """
    )
    run = eng.show(run_id)
    assert run["status"] == "completed"
    b_error = {"error": err("b is down for 2", "b", "action")}
    assert run["bindings"]["each"] == [
        {"b": {"ok": True}, "c": {"n": 1, "b": {"ok": True}}},
        {"b": b_error, "c": {"n": 2, "b": b_error}},
    ]
    assert trail(run, *FAILURES) == ["step.failed each[1].b action", "run.completed"]


# --- 2. abandonment ---------------------------------------------------------------------------


def test_a_failed_scope_is_abandoned_at_the_failing_step(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(
        """
        steps:
          - grp:
              steps:
                - b: { svc.call: { n: 1 } }
                - c: { svc.call: { n: 2 } }
                - d: { svc.call: { n: 3 } }
                - e: { set: { y: 1 } }
              recover:
                - r: { set: { b: "{{ b }}" } }
          - after: { svc.call: { n: 4 } }
        """
    )
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert svc.paths() == ["grp.b", "grp.c", "after"]  # d never ran
    assert run["bindings"]["grp"] == {"b": {"ok": True}, "r": {"b": {"ok": True}}}  # no c, d, e
    started = [e["path"] for e in entries(run, "step.started")]
    assert started == ["grp", "grp.b", "grp.c", "grp.r", "after"]


def test_an_unhandled_failure_at_the_top_level_abandons_the_rest_of_the_run(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["b"] = down("b is down")
    run_id = start(
        """
        steps:
          - a: { svc.call: { n: 1 } }
          - b: { svc.call: { n: 2 } }
          - c: { svc.call: { n: 3 } }
          - d: { set: { y: 1 } }
        output: "{{ a }}"
        """
    )
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert svc.paths() == ["a", "b"]
    assert run["bindings"] == {"a": {"ok": True}}
    assert run["output"] is None
    assert run["error"] == err("b is down", "b", "action")
    assert run["tokens"] == [{"step": "b", "state": "failed"}]
    assert trail(run) == [
        "run.started",
        "step.started a",
        "step.completed a",
        "step.started b",
        "attempt.failed b",
        "step.failed b action",
        "run.failed b",
    ]
    assert entries(run, "run.failed")[0]["message"] == "b is down"


# --- 3, 4. recover ----------------------------------------------------------------------------


def test_recover_on_a_group_sees_the_bindings_so_far_and_error(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(
        """
        steps:
          - a: { set: { x: 1 } }
          - grp:
              steps:
                - b: { set: { y: 2 } }
                - c: { svc.call: { n: "{{ b.y }}" } }
                - d: { set: { z: 3 } }
              recover:
                - r: { set: { error: "{{ error }}", b: "{{ b.y }}", a: "{{ a.x }}" } }
                - r2: { set: { r: "{{ r.b }}", msg: "{{ error.message }}" } }
          - after: { set: { grp: "{{ grp }}" } }
        """
    )
    run = eng.show(run_id)
    error = err("c is down", "c", "action")
    grp = {"b": {"y": 2}, "r": {"error": error, "b": 2, "a": 1}, "r2": {"r": 2, "msg": "c is down"}}
    assert run["status"] == "completed"
    assert run["bindings"] == {"a": {"x": 1}, "grp": grp, "after": {"grp": grp}}
    assert trail(run)[3:] == [
        "step.started grp",
        "step.started grp.b",
        "step.completed grp.b",
        "step.started grp.c",
        "attempt.failed grp.c",
        "step.failed grp.c action",
        "step.started grp.r",
        "step.completed grp.r",
        "step.started grp.r2",
        "step.completed grp.r2",
        "step.recovered grp",
        "step.completed grp",
        "step.started after",
        "step.completed after",
        "run.completed",
    ]
    assert entries(run, "step.recovered")[0]["error"] == error


def test_recover_on_a_for_each_recovers_one_iteration_and_moves_on(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["a"] = lambda call: {"got": call.args["n"]}
    svc.script["each[1].b"] = down("b is down for 2")
    run_id = start(
        """
        steps:
          - each:
              for_each: "{{ [1, 2, 3] }}"
              as: n
              steps:
                - a: { svc.call: { n: "{{ n }}" } }
                - b: { svc.call: { n: "{{ n }}" } }
                - c: { set: { n: "{{ n }}" } }
              recover:
                - r: { set: { n: "{{ n }}", a: "{{ a.got }}", error: "{{ error }}" } }
          - after: { set: { count: "{{ each | length }}", last: "{{ each[-1].c.n }}" } }
        """
    )
    run = eng.show(run_id)
    error = err("b is down for 2", "b", "action")
    assert run["status"] == "completed"
    assert run["bindings"]["each"] == [
        {"a": {"got": 1}, "b": {"ok": True}, "c": {"n": 1}},
        {"a": {"got": 2}, "r": {"n": 2, "a": 2, "error": error}},
        {"a": {"got": 3}, "b": {"ok": True}, "c": {"n": 3}},
    ]
    assert run["bindings"]["after"] == {"count": 3, "last": 3}
    assert svc.paths() == ["each[0].a", "each[0].b", "each[1].a", "each[1].b", "each[2].a",
                           "each[2].b"]  # fmt: skip
    assert trail(run, *FAILURES, "step.completed") == [
        "step.completed each[0].a",
        "step.completed each[0].b",
        "step.completed each[0].c",
        "step.completed each[1].a",
        "step.failed each[1].b action",
        "step.completed each[1].r",
        "step.recovered each",
        "step.completed each[2].a",
        "step.completed each[2].b",
        "step.completed each[2].c",
        "step.completed each",
        "step.completed after",
        "run.completed",
    ]


REPEAT_WITH_RECOVER = """
steps:
  - poll:
      repeat: { every: 30s, max: 5, until: "{{ check.status == 'indexed' }}" }
      steps:
        - check: { svc.check: { id: "T-1" } }
        - verify: { svc.call: { n: "{{ check.status }}" } }
      recover:
        - r: { set: { status: "{{ check.status }}", failed: "{{ error.step }}" } }
  - after: { set: { polls: "{{ poll | length }}" } }
"""


def test_recover_on_a_repeat_iteration_then_until_true_completes_the_repeat(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["poll[0].check"] = ok(status="pending")
    svc.script["poll[1].check"] = ok(status="indexed")
    svc.script["poll[1].verify"] = down("verify is down")
    run_id = start(REPEAT_WITH_RECOVER)
    assert eng.show(run_id)["status"] == "waiting"
    eng.advance("30s")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    # `until` ran in the recovered iteration's scope: its check said indexed.
    assert run["bindings"] == {
        "poll": [
            {"check": {"status": "pending"}, "verify": {"ok": True}},
            {"check": {"status": "indexed"}, "r": {"status": "indexed", "failed": "verify"}},
        ],
        "after": {"polls": 2},
    }
    assert svc.paths() == ["poll[0].check", "poll[0].verify", "poll[1].check", "poll[1].verify"]
    assert trail(run, *FAILURES, "timer.armed") == [
        "timer.armed poll",
        "step.failed poll[1].verify action",
        "step.recovered poll",
        "run.completed",
    ]
    assert entries(run, "step.completed", "poll")[0]["iterations"] == 2
    assert entries(run, "step.recovered")[0]["at"] == at(30)


def test_recover_on_a_repeat_iteration_then_until_false_keeps_polling(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["poll[0].check"] = ok(status="pending")
    svc.script["poll[0].verify"] = down("verify is down")
    svc.script["poll[1].check"] = ok(status="indexed")
    run_id = start(REPEAT_WITH_RECOVER)
    run = eng.show(run_id)
    assert run["status"] == "waiting"
    assert run["tokens"] == [
        {
            "step": "poll",
            "state": "waiting",
            "waiting_for": {"kind": "poll", "iteration": 2, "of": 5, "due": at(30)},
            "since": T0,
        }
    ]
    eng.advance("30s")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "poll": [
            {"check": {"status": "pending"}, "r": {"status": "pending", "failed": "verify"}},
            {"check": {"status": "indexed"}, "verify": {"ok": True}},
        ],
        "after": {"polls": 2},
    }
    assert trail(run, *FAILURES, "timer.armed") == [
        "step.failed poll[0].verify action",
        "step.recovered poll",
        "timer.armed poll",
        "run.completed",
    ]
    assert [e.get("iteration") for e in entries(run, "step.started", "poll")] == [1, 2]


def test_top_level_recover_completes_the_run_and_renders_the_output(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["b"] = down("b is down")
    run_id = start(
        """
        steps:
          - a: { set: { x: 1 } }
          - b: { svc.call: { n: 1 } }
          - c: { set: { x: 2 } }
        recover:
          - r: { set: { error: "{{ error }}", x: "{{ a.x }}" } }
        output: { x: "{{ a.x }}", text: "a={{ a.x }}" }
        """
    )
    run = eng.show(run_id)
    error = err("b is down", "b", "action")
    assert run["status"] == "completed"
    assert run["error"] is None
    assert run["tokens"] == []
    assert run["output"] == {"x": 1, "text": "a=1"}
    assert run["bindings"] == {"a": {"x": 1}, "r": {"error": error, "x": 1}}
    assert trail(run) == [
        "run.started",
        "step.started a",
        "step.completed a",
        "step.started b",
        "attempt.failed b",
        "step.failed b action",
        "step.started r",
        "step.completed r",
        "step.recovered",  # the flow's own recover: no step, no path
        "run.completed",
    ]
    recovered = entries(run, "step.recovered")[0]
    assert "step" not in recovered
    assert recovered["error"] == error


def test_top_level_recover_catches_a_failure_propagated_from_an_iteration(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["each[1].b"] = down("b is down for 2")
    run_id = start(
        """
        steps:
          - a: { set: { x: 1 } }
          - each:
              for_each: "{{ [1, 2, 3] }}"
              steps:
                - b: { svc.call: { n: "{{ item }}" } }
          - z: { set: { x: 2 } }
        recover:
          - r: { set: { error: "{{ error }}", a: "{{ a.x }}" } }
        output: "{{ a.x }}"
        """
    )
    run = eng.show(run_id)
    error = err("b is down for 2", "b", "action")
    assert run["status"] == "completed"
    assert run["output"] == 1
    assert run["bindings"] == {"a": {"x": 1}, "r": {"error": error, "a": 1}}
    assert svc.paths() == ["each[0].b", "each[1].b"]
    assert trail(run, *FAILURES) == [
        "step.failed each[1].b action",
        "step.failed each action",
        "step.recovered",
        "run.completed",
    ]


def test_optional_on_a_recover_step_lets_the_recovery_continue(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    svc.script["r1"] = down("r1 is down")
    run_id = start(
        """
        steps:
          - grp:
              steps:
                - c: { svc.call: { n: 1 } }
              recover:
                - r1:
                    optional: true
                    svc.call: { n: 2 }
                - r2: { set: { r1: "{{ r1.error.step }}", error: "{{ error.step }}" } }
        """
    )
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "grp": {
            "r1": {"error": err("r1 is down", "r1", "action")},
            "r2": {"r1": "r1", "error": "c"},
        }
    }
    assert trail(run, *FAILURES) == [
        "step.failed grp.c action",
        "step.failed grp.r1 action",
        "step.recovered grp",
        "run.completed",
    ]
    assert entries(run, "step.recovered")[0]["error"] == err("c is down", "c", "action")


# --- 5. propagation ---------------------------------------------------------------------------

NESTED = """
steps:
  - a: { set: { x: 1 } }
  - outer:<outer>
      steps:
        - inner:<inner>
            steps:
              - c: { svc.call: { n: 1 } }
              - d: { svc.call: { n: 2 } }
        - e: { svc.call: { n: 3 } }<recover>
  - z: { set: { seen: "{{ outer }}" } }
"""


def nested(outer: str = "", inner: str = "", recover: str = "") -> str:
    return NESTED.replace("<outer>", outer).replace("<inner>", inner).replace("<recover>", recover)


OPTIONAL = "\n      optional: true"
INNER_OPTIONAL = "\n            optional: true"
OUTER_RECOVER = '\n      recover:\n        - r: { set: { error: "{{ error }}", a: "{{ a.x }}" } }'


def test_without_recover_the_failure_fails_each_owner_up_to_the_run(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(nested())
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == err("c is down", "c", "action")
    assert run["tokens"] == [{"step": "c", "state": "failed", "path": "outer.inner.c"}]
    assert run["bindings"] == {"a": {"x": 1}}
    assert svc.paths() == ["outer.inner.c"]
    assert trail(run, *FAILURES) == [
        "step.failed outer.inner.c action",
        "step.failed outer.inner action",
        "step.failed outer action",
        "run.failed outer.inner.c",
    ]
    assert {e["message"] for e in entries(run, "step.failed")} == {"c is down"}


def test_the_owners_optional_catches_the_failure_one_level_up(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(nested(inner=INNER_OPTIONAL))
    run = eng.show(run_id)
    error = err("c is down", "c", "action")
    outer = {"inner": {"error": error}, "e": {"ok": True}}
    assert run["status"] == "completed"
    assert run["bindings"] == {"a": {"x": 1}, "outer": outer, "z": {"seen": outer}}
    assert svc.paths() == ["outer.inner.c", "outer.e"]
    assert trail(run, *FAILURES) == [
        "step.failed outer.inner.c action",
        "step.failed outer.inner action",
        "run.completed",
    ]


def test_optional_two_levels_up_catches_the_failure_there(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(nested(outer=OPTIONAL))
    run = eng.show(run_id)
    error = err("c is down", "c", "action")
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "a": {"x": 1},
        "outer": {"error": error},
        "z": {"seen": {"error": error}},
    }
    assert svc.paths() == ["outer.inner.c"]
    assert trail(run, *FAILURES) == [
        "step.failed outer.inner.c action",
        "step.failed outer.inner action",
        "step.failed outer action",
        "run.completed",
    ]


def test_a_failure_in_an_inner_group_is_recovered_by_the_outer_groups_recover(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(nested(recover=OUTER_RECOVER))
    run = eng.show(run_id)
    error = err("c is down", "c", "action")
    outer = {"r": {"error": error, "a": 1}}
    assert run["status"] == "completed"
    assert run["bindings"] == {"a": {"x": 1}, "outer": outer, "z": {"seen": outer}}
    assert svc.paths() == ["outer.inner.c"]
    assert trail(run)[3:] == [
        "step.started outer",
        "step.started outer.inner",
        "step.started outer.inner.c",
        "attempt.failed outer.inner.c",
        "step.failed outer.inner.c action",
        "step.failed outer.inner action",
        "step.started outer.r",
        "step.completed outer.r",
        "step.recovered outer",
        "step.completed outer",
        "step.started z",
        "step.completed z",
        "run.completed",
    ]


# --- 6. recover inside recover ----------------------------------------------------------------


def test_a_failure_inside_recover_steps_goes_to_the_enclosing_scopes_recover(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["c"] = down("c is down")
    run_id = start(
        """
        steps:
          - outer:
              steps:
                - inner:
                    steps:
                      - c: { svc.call: { n: 1 } }
                    recover:
                      - note: { set: { saw: "{{ error.step }}" } }
                      - rf: { fail: "inner recover gave up after {{ error.step }}" }
                      - never: { svc.call: { n: 2 } }
                - e: { svc.call: { n: 3 } }
              recover:
                - r: { set: { error: "{{ error }}" } }
          - z: { set: { outer: "{{ outer }}" } }
        """
    )
    run = eng.show(run_id)
    error = err("inner recover gave up after c", "rf", "fail")
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "outer": {"r": {"error": error}},
        "z": {"outer": {"r": {"error": error}}},
    }
    assert svc.paths() == ["outer.inner.c"]
    assert trail(run)[1:] == [
        "step.started outer",
        "step.started outer.inner",
        "step.started outer.inner.c",
        "attempt.failed outer.inner.c",
        "step.failed outer.inner.c action",
        "step.started outer.inner.note",
        "step.completed outer.inner.note",
        "step.started outer.inner.rf",
        "step.failed outer.inner.rf fail",
        "step.failed outer.inner fail",
        "step.started outer.r",
        "step.completed outer.r",
        "step.recovered outer",
        "step.completed outer",
        "step.started z",
        "step.completed z",
        "run.completed",
    ]
    assert entries(run, "step.recovered")[0]["error"] == error


def test_a_failure_inside_the_top_level_recover_fails_the_run(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["b"] = down("b is down")
    svc.script["r2"] = down("r2 is down")
    run_id = start(
        """
        steps:
          - b: { svc.call: { n: 1 } }
        recover:
          - r1: { set: { saw: "{{ error.step }}" } }
          - r2: { svc.call: { n: 2 } }
          - r3: { set: { y: 1 } }
        output: "done"
        """
    )
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == err("r2 is down", "r2", "action")
    assert run["tokens"] == [{"step": "r2", "state": "failed"}]
    assert run["bindings"] == {"r1": {"saw": "b"}}
    assert run["output"] is None
    assert trail(run, *FAILURES, "step.started") == [
        "step.started b",
        "step.failed b action",
        "step.started r1",
        "step.started r2",
        "step.failed r2 action",
        "run.failed r2",
    ]
    # runs retry re-runs the failed recover step; the recovery then finishes.
    svc.script["r2"] = ok()
    eng.retry(run_id)
    eng.work()
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["output"] == "done"
    assert run["bindings"] == {"r1": {"saw": "b"}, "r2": {"ok": True}, "r3": {"y": 1}}
    assert svc.paths() == ["b", "r2", "r2"]
    assert entries(run, "step.recovered")[0]["error"] == err("b is down", "b", "action")


def test_a_failure_inside_an_iterations_recover_fails_the_loop_one_level_up(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["each[1].b"] = down("b is down for 2")
    run_id = start(
        """
        steps:
          - each:
              optional: true
              for_each: "{{ [1, 2, 3] }}"
              steps:
                - b: { svc.call: { n: "{{ item }}" } }
              recover:
                - rf: { fail: "cannot recover item {{ item }}" }
          - z: { set: { type: "{{ each.error.type }}" } }
        """
    )
    run = eng.show(run_id)
    error = err("cannot recover item 2", "rf", "fail")
    assert run["status"] == "completed"
    assert run["bindings"] == {"each": {"error": error}, "z": {"type": "fail"}}
    assert svc.paths() == ["each[0].b", "each[1].b"]  # the third iteration never ran
    assert trail(run, *FAILURES) == [
        "step.failed each[1].b action",
        "step.failed each[1].rf fail",
        "step.failed each fail",
        "run.completed",
    ]


# --- 7. the seed's repeat ---------------------------------------------------------------------

SEED_REPEAT = """
      - indexed:<mods>
          repeat: { every: 30s, max: 20, until: "{{ check.status == 'indexed' }}" }
          steps:
            - check: { svc.check: { id: "{{ ticket.id }}" } }
"""
EXHAUSTED = err(
    "repeat [indexed] ran its max of 20 iterations and [check.status == 'indexed'] is still "
    "false (check.status = 'pending')",
    "indexed",
    "repeat",
)
TICKET = {"id": "T-1"}
INPUTS = "inputs:\n  ticket: { type: object, required: true }\n"


def seed_repeat(mods: str = "", indent: int = 2) -> str:
    return textwrap.indent(textwrap.dedent(SEED_REPEAT.replace("<mods>", mods)), " " * indent)


def assert_polled_twenty_times(run: dict[str, Any], svc: Svc, prefix: str = "") -> None:
    assert svc.paths() == [f"{prefix}indexed[{i}].check" for i in range(20)]
    assert all(c.args == {"id": "T-1"} for c in svc.calls)
    checks = entries(run, "step.started")
    checks = [e for e in checks if e["step"] == "check"]
    assert [e["at"] for e in checks] == [at(30 * i) for i in range(20)]  # last at t0 + 19 * 30s
    iterations = [e["iteration"] for e in entries(run, "step.started", f"{prefix}indexed")]
    assert iterations == list(range(1, 21))
    assert len(entries(run, "timer.armed", f"{prefix}indexed")) == 19
    failed = entries(run, "step.failed", f"{prefix}indexed")
    assert [(e["at"], e["message"], e["error_type"]) for e in failed] == [
        (at(570), EXHAUSTED["message"], "repeat")
    ]


def test_the_seeds_repeat_fails_after_exactly_max_iterations(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["check"] = ok(status="pending")
    run_id = start(INPUTS + "steps:" + seed_repeat(), ticket=TICKET)
    run = eng.show(run_id)
    assert run["status"] == "waiting"
    assert run["tokens"][0]["waiting_for"] == {
        "kind": "poll",
        "iteration": 2,
        "of": 20,
        "due": at(30),
    }
    eng.advance("1h")
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == EXHAUSTED
    assert run["tokens"] == [{"step": "indexed", "state": "failed"}]
    assert run["bindings"] == {}
    assert_polled_twenty_times(run, svc)
    assert trail(run, *FAILURES) == ["step.failed indexed repeat", "run.failed indexed"]


def test_the_seeds_repeat_exhaustion_is_caught_by_optional(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["check"] = ok(status="pending")
    body = seed_repeat("\n          optional: true")
    body += '  - after: { set: { type: "{{ indexed.error.type }}" } }\n'
    run_id = start(INPUTS + "steps:" + body, ticket=TICKET)
    eng.advance("1h")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["ended_at"] == at(570)
    assert run["bindings"] == {"indexed": {"error": EXHAUSTED}, "after": {"type": "repeat"}}
    assert_polled_twenty_times(run, svc)
    assert trail(run, *FAILURES) == ["step.failed indexed repeat", "run.completed"]


def test_the_seeds_repeat_exhaustion_is_caught_by_the_enclosing_groups_recover(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["check"] = ok(status="pending")
    body = "\n  - watch:\n      steps:" + seed_repeat(indent=8)
    body += "        - never: { svc.call: { n: 1 } }\n"
    body += '      recover:\n        - note: { set: { error: "{{ error }}" } }\n'
    run_id = start(INPUTS + "steps:" + body, ticket=TICKET)
    eng.advance("1h")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["bindings"] == {"watch": {"note": {"error": EXHAUSTED}}}
    assert_polled_twenty_times(run, svc, prefix="watch.")
    assert trail(run, *FAILURES) == [
        "step.failed watch.indexed repeat",
        "step.recovered watch",
        "run.completed",
    ]


def test_a_repeat_whose_every_iteration_was_recovered_is_still_exhausted_at_max(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["check"] = ok(status="pending")
    svc.script["verify"] = down("verify is down")
    run_id = start(
        """
        steps:
          - poll:
              optional: true
              repeat: { every: 30s, max: 3, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { svc.check: { id: "T-1" } }
                - verify: { svc.call: { n: 1 } }
              recover:
                - r: { set: { failed: "{{ error.step }}" } }
        """
    )
    eng.advance("5m")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "poll": {
            "error": err(
                "repeat [poll] ran its max of 3 iterations and [check.status == 'indexed'] is "
                "still false (check.status = 'pending')",
                "poll",
                "repeat",
            )
        }
    }
    assert trail(run, *FAILURES) == [
        "step.failed poll[0].verify action",
        "step.recovered poll",
        "step.failed poll[1].verify action",
        "step.recovered poll",
        "step.failed poll[2].verify action",
        "step.recovered poll",
        "step.failed poll repeat",
        "run.completed",
    ]


def test_until_after_a_recovered_iteration_whose_check_failed_keeps_polling(
    start: Start, eng: Engine, svc: Svc
) -> None:
    """The seed's repeat with a recover: the iteration's `check` itself failed, so in the
    recovered iteration's scope `check` has no binding; `check.status == 'indexed'` is then
    false (null propagates through the path) and polling goes on."""
    svc.script["indexed[0].check"] = down("search is down")
    svc.script["indexed[1].check"] = ok(status="indexed")
    run_id = start(
        INPUTS
        + "steps:"
        + seed_repeat().rstrip("\n")
        + '\n      recover:\n        - note: { set: { failed: "{{ error.step }}" } }\n',
        ticket=TICKET,
    )
    eng.advance("5m")
    run = eng.show(run_id)
    assert run["error"] is None
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "indexed": [{"note": {"failed": "check"}}, {"check": {"status": "indexed"}}]
    }
    assert svc.paths() == ["indexed[0].check", "indexed[1].check"]


# --- 8. unhandled failure and runs retry ------------------------------------------------------


def test_retry_reruns_the_failed_step_of_an_iteration_with_a_fresh_budget(
    start: Start, eng: Engine, svc: Svc
) -> None:
    broken = {"on": True}

    def b(call: Call) -> dict[str, Any]:
        if broken["on"] and call.args["n"] == 2:
            raise RuntimeError(f"b is down for {call.args['n']}")
        return {"n": call.args["n"]}

    svc.script["a"] = lambda call: {"got": call.args["n"]}
    svc.script["b"] = b
    run_id = start(
        """
        steps:
          - each:
              for_each: "{{ [1, 2, 3] }}"
              steps:
                - a: { svc.call: { n: "{{ item }}" } }
                - b:
                    svc.call: { n: "{{ item }}" }
                    retry: { count: 2, every: 10s }
                - c: { set: { a: "{{ a.got }}", b: "{{ b.n }}" } }
          - done: { set: { count: "{{ each | length }}" } }
        """
    )
    eng.advance("1m")
    run = eng.show(run_id)
    error = err("b is down for 2", "b", "action")
    assert run["status"] == "failed"
    assert run["error"] == error
    assert run["tokens"] == [{"step": "b", "state": "failed", "path": "each[1].b"}]
    assert run["bindings"] == {}
    assert svc.attempts("each[1].b") == [1, 2, 3]
    assert trail(run, *FAILURES) == [
        "step.failed each[1].b action",
        "step.failed each action",
        "run.failed each[1].b",
    ]

    eng.retry(run_id)  # still broken: three more attempts (count 2 → 3 attempts)
    run = eng.show(run_id)
    retried = entries(run, "run.retried")
    assert [(e["step"], e["path"]) for e in retried] == [("b", "each[1].b")]  # its full path
    eng.advance("1m")
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == error
    assert svc.attempts("each[1].b") == [1, 2, 3, 1, 2, 3]
    assert len(entries(run, "retry.scheduled", "each[1].b")) == 4

    broken["on"] = False
    eng.retry(run_id)
    assert eng.show(run_id)["status"] == "running"
    eng.work()
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["error"] is None
    assert run["bindings"] == {
        "each": [{"a": {"got": n}, "b": {"n": n}, "c": {"a": n, "b": n}} for n in (1, 2, 3)],
        "done": {"count": 3},
    }
    # a ran once per iteration: the failed iteration's earlier binding was kept, not re-made.
    assert svc.paths("a") == ["each[0].a", "each[1].a", "each[2].a"]
    assert svc.attempts("each[1].b") == [1, 2, 3, 1, 2, 3, 1]
    assert svc.paths("b").count("each[0].b") == 1
    assert trail(run, *FAILURES, "run.retried") == [
        "step.failed each[1].b action",
        "step.failed each action",
        "run.failed each[1].b",
        "run.retried each[1].b",
        "step.failed each[1].b action",
        "step.failed each action",
        "run.failed each[1].b",
        "run.retried each[1].b",
        "run.completed",
    ]


def test_retry_of_an_exhausted_repeat_reruns_it_from_its_first_iteration(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["check"] = ok(status="pending")
    run_id = start(
        """
        steps:
          - indexed:
              repeat: { every: 30s, max: 3, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { svc.check: { id: "T-1" } }
        """
    )
    eng.advance("5m")
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == err(
        "repeat [indexed] ran its max of 3 iterations and [check.status == 'indexed'] is "
        "still false (check.status = 'pending')",
        "indexed",
        "repeat",
    )
    assert svc.paths() == ["indexed[0].check", "indexed[1].check", "indexed[2].check"]

    svc.calls.clear()
    svc.script["indexed[1].check"] = ok(status="indexed")
    eng.retry(run_id)
    eng.advance("5m")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert svc.paths() == ["indexed[0].check", "indexed[1].check"]
    assert run["bindings"] == {
        "indexed": [{"check": {"status": "pending"}}, {"check": {"status": "indexed"}}]
    }
    after_retry = run["history"][[e["type"] for e in run["history"]].index("run.retried") :]
    started = [e for e in after_retry if e["type"] == "step.started" and e["step"] == "indexed"]
    assert [e["iteration"] for e in started] == [1, 2]
    assert entries(run, "step.completed", "indexed")[0]["iterations"] == 2


def test_retry_does_not_re_evaluate_the_if_of_a_step_that_had_begun(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["b"] = down("b is down")
    run_id = start(
        """
        steps:
          - b:
              if: "{{ now() < run.started_at | plus(1h) }}"
              svc.call: { n: 1 }
              retry: { count: 1, every: 10s }
          - probe:
              if: "{{ now() < run.started_at | plus(1h) }}"
              set: { x: 1 }
          - c: { set: { b: "{{ b }}" } }
        """
    )
    eng.advance("1m")
    assert eng.show(run_id)["status"] == "failed"
    eng.advance("2h")  # the condition is false from now on
    svc.script["b"] = ok(done=True)
    eng.retry(run_id)
    eng.work()
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert run["bindings"] == {"b": {"done": True}, "probe": None, "c": {"b": {"done": True}}}
    assert svc.attempts("b") == [1, 2, 1]
    assert trail(run, "step.skipped") == ["step.skipped probe"]


def test_retry_of_a_failed_step_inside_a_repeat_continues_that_iteration(
    start: Start, eng: Engine, svc: Svc
) -> None:
    svc.script["indexed[0].check"] = ok(status="pending")
    svc.script["indexed[1].check"] = down("search is down")
    run_id = start(
        """
        steps:
          - indexed:
              repeat: { every: 30s, max: 5, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { svc.check: { id: "T-1" } }
                - note: { set: { s: "{{ check.status }}" } }
        """
    )
    eng.advance("1m")
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == err("search is down", "check", "action")
    assert run["tokens"] == [{"step": "check", "state": "failed", "path": "indexed[1].check"}]

    svc.script["indexed[1].check"] = ok(status="pending")
    svc.script["indexed[2].check"] = ok(status="indexed")
    eng.retry(run_id)
    eng.advance("1m")
    run = eng.show(run_id)
    assert run["status"] == "completed"
    assert svc.paths() == [
        "indexed[0].check",
        "indexed[1].check",
        "indexed[1].check",
        "indexed[2].check",
    ]
    assert run["bindings"] == {
        "indexed": [
            {"check": {"status": s}, "note": {"s": s}} for s in ("pending", "pending", "indexed")
        ]
    }
    iterations = [e["iteration"] for e in entries(run, "step.started", "indexed")]
    assert iterations == [1, 2, 3]  # the retried iteration 2 was not started over
    assert entries(run, "step.completed", "indexed")[0]["iterations"] == 3


# --- 9. error types ---------------------------------------------------------------------------


def slow(call: Call) -> dict[str, Any]:
    time.sleep(0.5)
    return {"late": True}


# kind → (steps after `a`, script, the run's error, svc paths called)
ERROR_TYPES: dict[str, tuple[str, dict[str, Outcome], dict[str, str], list[str]]] = {
    "action": (
        "- b: { svc.call: { n: 1 } }",
        {"b": down("b is down")},
        err("b is down", "b", "action"),
        ["b"],
    ),
    "expression-in-args-no-retry": (
        '- b:\n    svc.call: { n: "{{ a.x / 0 }}" }\n    retry: { count: 3, every: 1s }',
        {},
        err("args: division by zero", "b", "expression"),
        [],
    ),
    "expression-in-if": (
        '- b:\n    if: "{{ a.x / 0 == 1 }}"\n    svc.call: { n: 1 }',
        {},
        err("if: division by zero", "b", "expression"),
        [],
    ),
    "expression-in-for_each": (
        '- b:\n    for_each: "{{ a.x }}"\n    steps:\n      - c: { svc.call: { n: 1 } }',
        {},
        err("for_each must give a list, got integer", "b", "expression"),
        [],
    ),
    "expression-in-until": (
        '- b:\n    repeat: { every: 1s, max: 2, until: "{{ a.x / 0 == 1 }}" }\n'
        "    steps:\n      - c: { svc.call: { n: 1 } }",
        {},
        err("until: division by zero", "b", "expression"),
        ["b[0].c"],
    ),
    "repeat": (
        '- b:\n    repeat: { every: 1s, max: 2, until: "{{ c.ok == false }}" }\n'
        "    steps:\n      - c: { svc.call: { n: 1 } }",
        {},
        err(
            "repeat [b] ran its max of 2 iterations and [c.ok == false] is still false "
            "(c.ok = true)",
            "b",
            "repeat",
        ),
        ["b[0].c", "b[1].c"],
    ),
    "fail": (
        '- b: { fail: "x is {{ a.x }}" }',
        {},
        err("x is 1", "b", "fail"),
        [],
    ),
    "timeout": (
        "- b:\n    svc.call: { n: 1 }\n    timeout: 100ms",
        {"b": slow},
        err("the attempt ran longer than 0.1s", "b", "timeout"),
        ["b"],
    ),
}


@pytest.mark.parametrize("kind", list(ERROR_TYPES))
def test_error_type_of_each_kind_of_failure(kind: str, start: Start, eng: Engine, svc: Svc) -> None:
    steps, script, error, called = ERROR_TYPES[kind]
    svc.script.update(script)
    run_id = start("steps:\n  - a: { set: { x: 1 } }\n" + textwrap.indent(steps, "  ") + "\n")
    eng.advance("1m")
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == error
    assert svc.paths() == called
    failed = entries(run, "step.failed", "b")
    assert [(e["message"], e["error_type"]) for e in failed] == [(error["message"], error["type"])]
    assert entries(run, "retry.scheduled") == []
    assert run["tokens"] == [{"step": "b", "state": "failed"}]


# --- 10. output -------------------------------------------------------------------------------


def test_an_output_that_cannot_be_rendered_fails_the_run(
    start: Start, eng: Engine, svc: Svc
) -> None:
    run_id = start(
        """
        steps:
          - a: { set: { x: 1 } }
        recover:
          - r: { svc.call: { n: 1 } }
        output: { ok: "{{ a.x }}", bad: "{{ a.x / 0 }}" }
        """
    )
    run = eng.show(run_id)
    assert run["status"] == "failed"
    assert run["error"] == err("output: division by zero", "output", "expression")
    assert run["output"] is None
    assert run["bindings"] == {"a": {"x": 1}}
    assert svc.paths() == []  # not a step failure: the flow's recover does not run
    assert trail(run) == [
        "run.started",
        "step.started a",
        "step.completed a",
        "run.failed output",
    ]
    assert entries(run, "run.failed")[0]["message"] == "output: division by zero"
    assert run["tokens"] == [{"step": "output", "state": "failed"}]
