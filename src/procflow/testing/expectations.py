"""The checks of ``expect:``: each compares what the file expects with what the scenario's store
holds, and says what differs (:class:`Failure`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from procflow.model.ir import Application, Entity
from procflow.model.source import Pos


@dataclass(frozen=True)
class Failure:
    """A check that did not hold: the check's key, what was expected, what there was."""

    key: str
    expected: Any
    actual: Any
    pos: Pos | None = None
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "expected": self.expected, "actual": self.actual}


@dataclass(frozen=True)
class Observed:
    """What a scenario's store says about its run when an ``expect`` runs."""

    run: dict[str, Any]  # ``runs show`` JSON, history included
    record: dict[str, Any] | None  # the run's record now (None: flows, or deleted)
    entity: Entity | None
    application: Application | None
    tasks: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    calls: dict[str, int]
    runs: list[dict[str, Any]]  # every run of the tested flow, oldest first (``runs show``)

    @property
    def trail(self) -> list[str]:
        kinds = ("step.completed", "step.failed")
        return [h.get("path") or h["step"] for h in self.run["history"] if h["type"] in kinds]

    @property
    def trail_steps(self) -> set[str]:
        kinds = ("step.completed", "step.failed")
        return {h["step"] for h in self.run["history"] if h["type"] in kinds}


def check(key: str, expected: Any, seen: Observed) -> Failure | None:
    """The failure of ``expect.<key>: expected``, or None when it holds."""
    return CHECKS[key](expected, seen)


def _status(expected: Any, seen: Observed) -> Failure | None:
    actual = str(seen.run["status"])
    return None if actual == str(expected) else Failure("status", expected, actual)


def _path(expected: Any, seen: Observed) -> Failure | None:
    return None if seen.trail == list(expected) else Failure("path", expected, seen.trail)


def _in_trail(name: str, seen: Observed) -> bool:
    return name in seen.trail or name in seen.trail_steps


def _visited(expected: Any, seen: Observed) -> Failure | None:
    missing = [n for n in expected if not _in_trail(n, seen)]
    return (
        Failure("visited", expected, seen.trail, note=f"not visited: {missing}")
        if missing
        else None
    )


def _not_visited(expected: Any, seen: Observed) -> Failure | None:
    there = [n for n in expected if _in_trail(n, seen)]
    return Failure("not_visited", expected, seen.trail, note=f"visited: {there}") if there else None


def _waiting(expected: Any, seen: Observed) -> Failure | None:
    waits = [
        {"step": t.get("path", t["step"]), "kind": t["waiting_for"]["kind"]}
        for t in seen.run["tokens"]
        if t.get("waiting_for")
    ]
    for wait in waits:
        step_ok = "step" not in expected or expected["step"] in (
            wait["step"],
            wait["step"].split(".")[-1],
        )
        if step_ok and expected.get("kind", wait["kind"]) == wait["kind"]:
            return None
    return Failure("waiting", expected, waits)


def subset(
    expected: Any, actual: Any, translate: Callable[[str, Any, Any], Any] | None = None
) -> bool:
    """Whether every key given in ``expected`` equals ``actual``'s (nested maps the same way)."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return False
        for key, value in expected.items():
            if key not in actual:
                return False
            got = actual[key]
            if translate is not None:
                got = translate(key, value, got)
            if not subset(value, got):
                return False
        return True
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(subset, expected, actual))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual  # true is not 1
    return bool(expected == actual)


def _runs(expected: Any, seen: Observed) -> Failure | None:
    """``runs: N`` or ``runs: [ {status, output, scheduled_at}, ... ]``, oldest first: the runs
    of the tested flow in the scenario's store (a scheduled flow's: those its schedules
    started)."""
    if isinstance(expected, int):
        count = len(seen.runs)
        return None if count == expected else Failure("runs", expected, count)
    actual = [
        {
            "status": r["status"], "output": r["output"],
            "scheduled_at": (r.get("schedule") or {}).get("slot"),
        }
        for r in seen.runs
    ]  # fmt: skip
    return None if subset(list(expected), actual) else Failure("runs", expected, actual)


def _output(expected: Any, seen: Observed) -> Failure | None:
    actual = seen.run["output"]
    return None if subset(expected, actual) else Failure("output", expected, actual)


def _bindings(expected: Any, seen: Observed) -> Failure | None:
    actual = seen.run["bindings"]
    return None if subset(expected, actual) else Failure("bindings", expected, actual)


def _record(expected: Any, seen: Observed) -> Failure | None:
    actual = seen.record
    if subset(expected, actual, _seeded(seen)):
        return None
    return Failure("record", expected, actual)


def _seeded(seen: Observed) -> Callable[[str, Any, Any], Any]:
    """A status (any to-one relation to seeded rows) may be expected by its seeded name."""

    def translate(key: str, expected: Any, actual: Any) -> Any:
        entity, app = seen.entity, seen.application
        relation = entity.relation(key) if entity is not None else None
        if relation is None or app is None or not isinstance(expected, str):
            return actual
        for seed in app.seeds:
            for row in seed.rows if seed.entity == relation.to else ():
                if row.get("id") == actual and row.get("name") == expected:
                    return expected
        return actual

    return translate


def _error(expected: Any, seen: Observed) -> Failure | None:
    actual = seen.run["error"]
    if actual is None:
        return Failure("error", expected, None)
    if "step" in expected and expected["step"] != actual.get("step"):
        return Failure("error", expected, actual)
    if "message" in expected and str(expected["message"]) not in str(actual.get("message")):
        return Failure("error", expected, actual)
    return None


def _tasks(expected: Any, seen: Observed) -> Failure | None:
    actual = [{"step": t["step"], "assignee": t["assignee"]} for t in seen.tasks]
    if len(actual) == len(expected) and all(map(subset, expected, actual)):
        return None
    return Failure("tasks", expected, actual)


def _outbox(expected: Any, seen: Observed) -> Failure | None:
    if isinstance(expected, int):
        count = len(seen.outbox)
        return None if count == expected else Failure("outbox", expected, count)
    shown = [
        {k: m.get(k) for k in ("channel", "to", "subject", "body", "step")} for m in seen.outbox
    ]
    if len(shown) == len(expected) and all(map(subset, expected, shown)):
        return None
    return Failure("outbox", expected, shown)


def _calls(expected: Any, seen: Observed) -> Failure | None:
    actual = {name: seen.calls.get(name, 0) for name in expected}
    return None if actual == dict(expected) else Failure("calls", dict(expected), actual)


def _history(expected: Any, seen: Observed) -> Failure | None:
    types = [h["type"] for h in seen.run["history"]]
    if _in_order(list(expected), types):
        return None
    return Failure("history", expected, types)


def _in_order(wanted: Sequence[str], types: Sequence[str]) -> bool:
    remaining = iter(types)
    return all(any(t == w for t in remaining) for w in wanted)


CHECKS: dict[str, Callable[[Any, Observed], Failure | None]] = {
    "status": _status,
    "path": _path,
    "visited": _visited,
    "not_visited": _not_visited,
    "waiting": _waiting,
    "output": _output,
    "bindings": _bindings,
    "record": _record,
    "error": _error,
    "tasks": _tasks,
    "outbox": _outbox,
    "calls": _calls,
    "history": _history,
    "runs": _runs,
}
