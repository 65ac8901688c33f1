"""A flow run's position and bindings, as plain JSON in the run row (``runs.state``).

``state["bindings"]`` is the top-level scope (what ``runs show`` prints); ``state["frames"]``
is the stack of scopes the run is in, outermost first. ``frames[0]`` is the top level; each
further frame is a group's scope or the current iteration of a ``for_each``/``repeat``::

    {"i": 2}                                          # the top level, at its third step
    {"o": "indexed", "i": 0, "scope": {}, "n": 3}     # a repeat, in its 4th iteration
    {"o": "grp", "i": 1, "scope": {...}, "rec": true, "err": {...}} # a group running recover

Frame keys: ``o`` owner step id (absent at the top), ``i`` index of the current step in the
frame's step list, ``s`` the current step has begun (its ``if`` held), ``due`` a ``wait`` step's
armed instant, ``rec``/``err`` running the owner's ``recover`` steps for that error, ``scope``
the frame's bindings, ``n``/``count``/``poll`` iteration state. A loop's items and finished
iteration scopes are rows of their own (table ``scopes``, keyed by the loop's path), not part of
the run row: rewriting them with every commit made long loops quadratic. Everything here is
pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from procflow.errors import ExprError
from procflow.expr import Expr, format_duration, format_timestamp, kind_of, render_text, root_paths
from procflow.model.ir import (
    Flow,
    FlowStep,
    ForEachStep,
    GroupStep,
    RepeatStep,
)
from procflow.runtime.clock import iso
from procflow.runtime.data.inputs import input_env

Frame = dict[str, Any]
ITEMS = -1  # the loop row holding a for_each's items (iteration scopes are rows 0, 1, ...)
OWNERS = (GroupStep, ForEachStep, RepeatStep)


@dataclass
class FlowIndex:
    """Every step of a flow by id (ids are unique in the whole file), built once per version."""

    flow: Flow
    steps: dict[str, FlowStep] = field(default_factory=dict)
    _ids: frozenset[str] | None = None
    _input_names: frozenset[str] | None = None

    def __post_init__(self) -> None:
        stack: list[FlowStep] = [*self.flow.steps, *(self.flow.recover or ())]
        while stack:
            step = stack.pop()
            self.steps[step.id] = step
            if isinstance(step, OWNERS):
                stack.extend(step.steps)
            if step.mods.recover:
                stack.extend(step.mods.recover)

    @property
    def ids(self) -> frozenset[str]:
        if self._ids is None:
            self._ids = frozenset(self.steps)
        return self._ids

    @property
    def input_names(self) -> frozenset[str]:
        if self._input_names is None:
            self._input_names = frozenset(self.flow.inputs)
        return self._input_names

    def owner(self, frame: Frame) -> GroupStep | ForEachStep | RepeatStep | None:
        name = frame.get("o")
        if name is None:
            return None
        step = self.steps[name]
        assert isinstance(step, OWNERS)
        return step

    def steps_of(self, frame: Frame) -> tuple[FlowStep, ...]:
        owner = self.owner(frame)
        if owner is None:
            return (self.flow.recover or ()) if frame.get("rec") else self.flow.steps
        return (owner.mods.recover or ()) if frame.get("rec") else owner.steps

    def recover_of(self, frame: Frame) -> tuple[FlowStep, ...] | None:
        owner = self.owner(frame)
        return self.flow.recover if owner is None else owner.mods.recover


INPUTS = ("", -1)  # the loop row (path, n) that holds the run's inputs: written once, at start


def initial_state() -> dict[str, Any]:
    return {"bindings": {}, "frames": [{"i": 0}]}


def prefix(frames: list[Frame]) -> str:
    """The path of the innermost frame's steps: ``escalate.`` or ``indexed[3].``."""
    out = ""
    for frame in frames[1:]:
        owner = frame["o"]
        out += f"{owner}[{frame['n']}]." if "n" in frame else f"{owner}."
    return out


def scope_of(state: dict[str, Any], frame: Frame) -> dict[str, Any]:
    scope: dict[str, Any] = frame["scope"] if "o" in frame else state["bindings"]
    return scope


class FlowEnv(dict[str, Any]):
    """Bindings for expressions in which a step id without a binding — a step that was
    abandoned, skipped by a failure, or not reached — reads as null (validation has already
    refused names that cannot be bound at that point, such as later steps).

    The run's inputs are read from the store only when an expression names one: most steps
    after a wait never do, and the read is a statement per run resumed."""

    __slots__ = ("_input_names", "_inputs", "known")

    def __init__(
        self,
        known: frozenset[str],
        inputs: Callable[[], Mapping[str, Any]] | None = None,
        input_names: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__()
        self.known = known
        self._inputs, self._input_names = inputs, input_names

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._loaded(key) or key in self.known

    def __missing__(self, key: str) -> Any:
        if self._loaded(key):
            return dict.__getitem__(self, key)
        if key in self.known:
            return None
        raise KeyError(key)

    def _loaded(self, key: object) -> bool:
        """Whether ``key``, not bound yet, is an input now bound by loading the inputs."""
        return key in self._input_names and self._load_inputs() and dict.__contains__(self, key)

    def _load_inputs(self) -> bool:
        """Add the inputs under every name no binding has taken; False once done before."""
        load, self._inputs = self._inputs, None
        if load is None:
            return False
        for name, value in load().items():
            self.setdefault(name, value)
        return True


def environment(
    flow: Flow,
    index: FlowIndex,
    state: dict[str, Any],
    run: Mapping[str, Any],
    item: Callable[[str, int], Any],
) -> dict[str, Any]:
    """The names an expression at the current position sees: inputs, ``run``, the bindings of
    every enclosing scope (outermost first), loop names, and ``error`` inside ``recover``.
    ``item(path, n)`` reads a loop row (a for_each's items, the run's inputs)."""
    env = FlowEnv(index.ids, lambda: input_env(flow, item(*INPUTS)), index.input_names)
    env["run"] = dict(run)
    env.update(state["bindings"])
    frames: list[Frame] = state["frames"]
    if frames and frames[0].get("rec"):
        env["error"] = frames[0].get("err")
    path = ""
    for frame in frames[1:]:
        owner = index.owner(frame)
        if isinstance(owner, ForEachStep):
            env[owner.as_] = item(path + owner.id, ITEMS)[frame["n"]]
        path += f"{frame['o']}[{frame['n']}]." if "n" in frame else f"{frame['o']}."
        env.update(frame["scope"])
        if frame.get("rec"):
            env["error"] = frame.get("err")
    return env


def run_names(
    run_id: str, started_at: int, schedule: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``run`` in expressions; ``scheduled_at``: the slot of the schedule that started the run
    (its nominal instant, before jitter), null in any other run."""
    slot = None if schedule is None else iso(int(schedule["slot"]))
    return {"id": run_id, "started_at": iso(started_at), "scheduled_at": slot}


def to_json(value: Any) -> Any:
    """A value as stored in bindings: timestamps and durations become their ISO-8601 text (the
    text renderings of docs/reference/expressions.md), everything else is already JSON data."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value


def watched_values(expr: Expr, env: Mapping[str, Any]) -> str:
    """`` (check.status = 'pending')``: the values ``expr`` looks at, for a message."""
    shown = []
    for ref in root_paths(expr):
        if ref.root not in env or ref.root == "run":
            continue
        value, name = env[ref.root], ref.root
        for seg in ref.segments:
            name += f"[{seg}]" if isinstance(seg, int) else f".{seg}"
            value = _step_into(value, seg)
        shown.append(f"{name} = {_show(value)}")
    return f" ({', '.join(dict.fromkeys(shown))})" if shown else ""


def _step_into(value: Any, seg: str | int) -> Any:
    if isinstance(value, dict) and isinstance(seg, str):
        return value.get(seg)
    if isinstance(value, list) and isinstance(seg, int) and -len(value) <= seg < len(value):
        return value[seg]
    return None


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    try:
        return str(render_text(value))
    except ExprError:
        return kind_of(value)
