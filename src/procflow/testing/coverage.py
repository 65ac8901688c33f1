"""Route coverage: every route of a definition's IR, and the routes a run took (from its history).

A route is ``(source, kind) → target``: a step's ``next`` (its fall-through included), a
decision's ``then``/``else``, ``onError``, a user task's ``timeout`` and ``expire``, a process's
``abortOn``, a parallel's ``branch <first step>`` for each branch and its ``join`` (to
``next``); in flows a step's ``next``, an ``if``'s ``then`` (the step runs) and ``else`` (it is
skipped), a ``wait_for``'s ``event`` and ``wait_for timeout``, ``optional``, ``recover``, an
action's or a call's ``timeout``, ``repeat exhausted``. Its position is that of the route's value
in the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procflow.model.ir import (
    END,
    ActionStep,
    CallStep,
    Decision,
    EndStep,
    FailStep,
    Flow,
    FlowStep,
    ForEachStep,
    GroupStep,
    ParallelStep,
    Process,
    RepeatStep,
    ServiceTask,
    UserTask,
    WaitForStep,
)
from procflow.model.reading.yamlsrc import YMap, YNode, YSeq, load_yaml
from procflow.model.source import Diagnostics, Pos
from procflow.runtime.interpret.flow_call import TIMED_OUT

FAILED = "failed"  # the target of a failure no handler catches: the run fails
TIMEOUT_TEXT = "the attempt ran longer than"


@dataclass(frozen=True)
class Route:
    source: str
    kind: str
    target: str
    pos: Pos

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.kind)

    def describe(self, display_file: str | None = None) -> str:
        where = f"{display_file or self.pos.file}:{self.pos.line}:{self.pos.col}"
        return f"{where}: route {self.source} → {self.target} ({self.kind})"


@dataclass
class Coverage:
    """One definition's coverage over every scenario that tests it."""

    file: str
    name: str
    steps: tuple[str, ...]
    routes: tuple[Route, ...]
    steps_hit: set[str] = field(default_factory=set)
    routes_hit: set[tuple[str, str]] = field(default_factory=set)

    def add(self, steps: Iterable[str], routes: Iterable[tuple[str, str]]) -> None:
        self.steps_hit |= set(steps) & set(self.steps)
        self.routes_hit |= set(routes) & {r.key for r in self.routes}

    @property
    def untaken(self) -> list[Route]:
        return [r for r in self.routes if r.key not in self.routes_hit]

    @property
    def percent(self) -> float:
        if not self.routes:
            return 100.0
        return 100.0 * (len(self.routes) - len(self.untaken)) / len(self.routes)

    def summary(self) -> str:
        taken = len(self.routes) - len(self.untaken)
        return (
            f"{self.file} ({self.name}): steps {len(self.steps_hit)}/{len(self.steps)}, "
            f"routes {taken}/{len(self.routes)} ({self.percent:.0f}%)"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "name": self.name,
            "steps": {"taken": len(self.steps_hit), "total": len(self.steps)},
            "routes": {"taken": len(self.routes) - len(self.untaken), "total": len(self.routes)},
            "percent": round(self.percent, 1),
            "untaken": [
                {"line": r.pos.line, "col": r.pos.col, "step": r.source, "target": r.target,
                 "kind": r.kind}
                for r in self.untaken
            ],
        }  # fmt: skip


def coverage_of(definition_file: str, chosen: Process | Flow) -> Coverage:
    root = _yaml(definition_file)
    if isinstance(chosen, Process):
        return Coverage(definition_file, chosen.name, _intent_steps(chosen),
                        tuple(_IntentRoutes(chosen, root).all()))  # fmt: skip
    return Coverage(definition_file, chosen.name, tuple(s.id for s in _flow_steps(chosen)),
                    tuple(_FlowRoutes(chosen, root).all()))  # fmt: skip


def _yaml(path: str) -> YNode | None:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    return load_yaml(text, path, Diagnostics())


def _at(node: YNode | None, *keys: str) -> YNode | None:
    for key in keys:
        node = node.get(key) if isinstance(node, YMap) else None
    return node


def _pos(fallback: Pos, node: YNode | None, *keys: str) -> Pos:
    found = _at(node, *keys)
    return found.pos if found is not None else fallback


# --- intent -------------------------------------------------------------------------------------


def _intent_steps(process: Process) -> tuple[str, ...]:
    return tuple(s.name for s in process.steps)


class _IntentRoutes:
    def __init__(self, process: Process, root: YNode | None) -> None:
        self.process = process
        self.nodes = self._step_nodes(root)

    def _step_nodes(self, root: YNode | None) -> dict[str, YMap]:
        processes = _at(root, "processes")
        found: dict[str, YMap] = {}
        for item in processes.items if isinstance(processes, YSeq) else ():
            if isinstance(item, YMap) and _scalar(item.get("name")) == self.process.name:
                found["<process>"] = item
                steps = item.get("steps")
                for step in steps.items if isinstance(steps, YSeq) else ():
                    if isinstance(step, YMap):
                        found.setdefault(str(_scalar(step.get("name"))), step)
        return found

    def all(self) -> list[Route]:
        routes: list[Route] = []
        abort = self.process.abort_on
        if abort is not None:
            node = self.nodes.get("<process>")
            pos = _pos(abort.pos, node, "abortOn", "then")
            routes.append(Route(self.process.name, "abortOn", abort.then, pos))
        for step in self.process.steps:
            routes += self._routes(step)
        return routes

    def _routes(self, step: Any) -> list[Route]:
        if isinstance(step, EndStep):
            return []
        node, name = self.nodes.get(step.name), step.name
        after = self.process.fall_through(name)
        if isinstance(step, Decision):
            else_key = "else" if step.else_ is not None else "if"
            return [
                Route(name, "then", step.then, _pos(step.pos, node, "args", "then")),
                Route(name, "else", step.else_ or after, _pos(step.pos, node, "args", else_key)),
            ]
        if isinstance(step, ParallelStep):
            return self._fork_routes(step, node, after)
        out = [Route(name, "next", step.next or after, _pos(step.pos, node, "args", "next"))]
        if isinstance(step, ServiceTask) and step.on_error is not None:
            out.append(
                Route(name, "onError", step.on_error, _pos(step.pos, node, "args", "onError"))
            )
        if isinstance(step, UserTask) and step.timeout is not None:
            pos = _pos(step.pos, node, "args", "timeout", "then")
            out.append(Route(name, "timeout", step.timeout.then, pos))
        if isinstance(step, UserTask) and step.expire is not None:
            pos = _pos(step.pos, node, "args", "expire", "then")
            out.append(Route(name, "expire", step.expire.then, pos))
        return out

    def _fork_routes(self, step: ParallelStep, node: YMap | None, after: str) -> list[Route]:
        """A route into each branch, and the join's to ``next`` (a nested fork's: to the join
        it flows into)."""
        written = _at(node, "args", "branches")
        items = written.items if isinstance(written, YSeq) else []
        out = [
            Route(step.name, f"branch {first}", first, items[i].pos if i < len(items) else step.pos)
            for i, first in enumerate(step.branches)
        ]
        pos = _pos(step.pos, node, "args", "next")
        return [*out, Route(step.name, "join", step.next or after, pos)]


def _scalar(node: YNode | None) -> Any:
    return getattr(node, "value", None)


# --- flow ---------------------------------------------------------------------------------------


def _flow_steps(flow: Flow) -> list[FlowStep]:
    found: list[FlowStep] = []

    def walk(steps: Sequence[FlowStep] | None) -> None:
        for step in steps or ():
            found.append(step)
            if isinstance(step, GroupStep | ForEachStep | RepeatStep):
                walk(step.steps)
                walk(step.mods.recover)

    walk(flow.steps)
    walk(flow.recover)
    return found


class _FlowRoutes:
    def __init__(self, flow: Flow, root: YNode | None) -> None:
        self.flow = flow
        self.root = root
        self.nodes: dict[str, YMap] = {}
        self._index(root)

    def _index(self, node: YNode | None) -> None:
        if isinstance(node, YMap):
            for key, entry in node.entries.items():
                if key in ("steps", "recover") and isinstance(entry.value, YSeq):
                    for item in entry.value.items:
                        if isinstance(item, YMap) and len(item.entries) == 1:
                            ((step_id, body),) = item.entries.items()
                            if isinstance(body.value, YMap):
                                self.nodes.setdefault(step_id, body.value)
                            self._index(body.value)
                else:
                    self._index(entry.value)
        elif isinstance(node, YSeq):
            for item in node.items:
                self._index(item)

    def all(self) -> list[Route]:
        routes: list[Route] = []
        recover = self.flow.recover
        on_fail = recover[0].id if recover else FAILED
        self._sequence(self.flow.steps, END, on_fail, routes)
        if recover:
            pos = _pos(self.flow.pos, self.root, "recover")
            routes.append(Route(self.flow.name, "recover", recover[0].id, pos))
            self._sequence(recover, END, FAILED, routes)
        return routes

    def _sequence(
        self, steps: Sequence[FlowStep], exit_to: str, on_fail: str, routes: list[Route]
    ) -> None:
        for i, step in enumerate(steps):
            after = steps[i + 1].id if i + 1 < len(steps) else exit_to
            routes += self._routes(step, after, on_fail)
            if isinstance(step, GroupStep | ForEachStep | RepeatStep):
                recover = step.mods.recover
                inner_fail = (
                    recover[0].id if recover else (after if step.mods.optional else on_fail)
                )
                self._sequence(step.steps, step.id, inner_fail, routes)
                if recover:
                    pos = _pos(step.pos, self.nodes.get(step.id), "recover")
                    routes.append(Route(step.id, "recover", recover[0].id, pos))
                    self._sequence(recover, step.id, on_fail, routes)

    def _routes(self, step: FlowStep, after: str, on_fail: str) -> list[Route]:
        node, sid, mods = self.nodes.get(step.id), step.id, step.mods
        failure = after if mods.optional else on_fail
        out: list[Route] = []
        if mods.if_ is not None:
            out.append(Route(sid, "then", sid, _pos(step.pos, node, "if")))
            out.append(Route(sid, "else", after, _pos(step.pos, node, "if")))
        if isinstance(step, WaitForStep):
            out.append(Route(sid, "event", after, _pos(step.pos, node, "wait_for")))
            out.append(Route(sid, "wait_for timeout", after, _pos(step.pos, node, "timeout")))
        elif isinstance(step, RepeatStep):
            out.append(Route(sid, "next", after, _pos(step.pos, node, "repeat", "until")))
            out.append(
                Route(sid, "repeat exhausted", failure, _pos(step.pos, node, "repeat", "max"))
            )
        elif not isinstance(step, FailStep):
            out.append(Route(sid, "next", after, step.pos))
        if isinstance(step, ActionStep | CallStep) and mods.timeout is not None:
            target = sid if mods.retry is not None else failure
            out.append(Route(sid, "timeout", target, _pos(step.pos, node, "timeout")))
        if mods.optional:
            out.append(Route(sid, "optional", after, _pos(step.pos, node, "optional")))
        return out


# --- what a run took ----------------------------------------------------------------------------


def visited(history: Sequence[dict[str, Any]]) -> set[str]:
    """The steps a run entered (a skipped step was not entered)."""
    kinds = ("step.started", "step.completed", "step.failed")
    return {h["step"] for h in history if h["type"] in kinds and h.get("step")}


def taken(chosen: Process | Flow, history: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """The routes ``(source, kind)`` a run's history shows it took."""
    if isinstance(chosen, Process):
        return _intent_taken(chosen, history)
    return _flow_taken(chosen, history)


def _intent_taken(process: Process, history: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    steps = {s.name: s for s in process.steps}
    for i, h in enumerate(history):
        kind, step = h["type"], steps.get(h.get("step") or "")
        following = history[i + 1] if i + 1 < len(history) else {}
        if kind == "run.aborted":
            found.add((process.name, "abortOn"))
        if step is None:
            continue
        if kind == "token.forked" and isinstance(steps.get(h.get("from") or ""), ParallelStep):
            found.add((h["from"], f"branch {step.name}"))
        elif kind == "step.completed":
            if isinstance(step, Decision):
                found.add((step.name, "then" if h.get("outcome") else "else"))
            elif isinstance(step, ParallelStep):
                found.add((step.name, "join"))
            else:
                found.add((step.name, "next"))
        elif kind == "step.failed" and following.get("type") != "run.failed":
            found.add((step.name, "onError"))
        elif kind == "timer.fired" and isinstance(step, UserTask):
            expired = following.get("type") == "task.withdrawn"
            found.add((step.name, "expire" if expired else "timeout"))
    return found


def _flow_taken(flow: Flow, history: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    steps = {s.id: s for s in _flow_steps(flow)}
    firsts = {recover[0].id: owner for owner, recover in _recovers(flow)}
    waited: dict[str, str] = {}  # a wait_for's path -> how it last resumed
    for h in history:
        kind, step = h["type"], steps.get(h.get("step") or "")
        if step is None:
            continue
        path = h.get("path") or step.id
        if kind == "step.started" and step.id in firsts:
            found.add((firsts[step.id], "recover"))
        if kind == "step.started" and step.mods.if_ is not None:
            found.add((step.id, "then"))
        elif kind == "step.skipped":
            found.add((step.id, "else"))
        elif kind == "event.received":
            waited[path] = "event"
        elif kind == "timer.fired" and isinstance(step, WaitForStep):
            waited[path] = "wait_for timeout"
        elif kind == "step.completed":
            found.add(
                (step.id, waited.pop(path, "next") if isinstance(step, WaitForStep) else "next")
            )
        elif kind in ("attempt.failed", "step.failed"):
            found |= _flow_failure(step, h)
    return found


def _flow_failure(step: FlowStep, entry: dict[str, Any]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    message = str(entry.get("message") or "")
    timed_out = (
        message.startswith(TIMEOUT_TEXT) if isinstance(step, ActionStep) else TIMED_OUT in message
    )
    if (
        isinstance(step, ActionStep | CallStep)
        and step.mods.timeout is not None
        and (timed_out or entry.get("error_type") == "timeout")
    ):
        found.add((step.id, "timeout"))
    if entry["type"] == "step.failed":
        if isinstance(step, RepeatStep) and entry.get("error_type") == "repeat":
            found.add((step.id, "repeat exhausted"))
        if step.mods.optional:
            found.add((step.id, "optional"))
    return found


def _recovers(flow: Flow) -> list[tuple[str, Sequence[FlowStep]]]:
    found: list[tuple[str, Sequence[FlowStep]]] = []
    if flow.recover:
        found.append((flow.name, flow.recover))
    for step in _flow_steps(flow):
        if isinstance(step, GroupStep | ForEachStep | RepeatStep) and step.mods.recover:
            found.append((step.id, step.mods.recover))
    return found
