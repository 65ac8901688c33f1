"""The checks of a test file's parts: keys (with did-you-mean), shapes, durations, timestamps, and
which fakes the definition under test can use. Every problem goes into one :class:`Diagnostics`."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from procflow.errors import DurationError, InputError, ProcflowError
from procflow.expr.duration import parse_duration
from procflow.model.ir import (
    ActionStep,
    CallStep,
    Delegate,
    Flow,
    FlowStep,
    ForEachStep,
    GroupStep,
    Notify,
    Process,
    RepeatStep,
    ServiceTask,
)
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name, to_plain
from procflow.model.source import Diagnostics, Pos, suggest
from procflow.runtime.clock import from_iso
from procflow.runtime.data.inputs import check_inputs
from procflow.runtime.operations.listing import WAIT_KINDS
from procflow.testing.scenario_types import DEFAULT_CLOCK, Action, Given, Scenario

FAKE_KEYS = (
    "returns", "returns_each", "fail", "message", "raise", "non_retryable", "sets", "produces",
    "takes",
)  # fmt: skip
GIVEN_KEYS = ("record", "inputs", "clock", "records", "secrets", "users")
ACTION_KEYS = (
    "advance", "until", "event", "complete", "update", "create", "delete", "cancel", "expect",
)  # fmt: skip
EXPECT_KEYS = (
    "status", "path", "visited", "not_visited", "waiting", "output", "bindings", "record",
    "error", "tasks", "outbox", "calls", "history", "runs",
)  # fmt: skip
_LIST_OF_NAMES = ("path", "visited", "not_visited", "history")
_MAPS = ("output", "bindings", "record", "calls")
HTTP_REQUEST = "http.request"


class Checker:
    """Checks one file's nodes, reporting into ``diags``."""

    def __init__(self, diags: Diagnostics) -> None:
        self.diags = diags

    # --- shapes ---------------------------------------------------------------------------

    def mapping(self, node: YNode, what: str, allowed: Sequence[str] | None) -> YMap | None:
        """``node`` as a mapping whose keys are among ``allowed`` (None: any key)."""
        if not isinstance(node, YMap):
            self.diags.error(node.pos, f"{what}: expected a mapping, got {kind_name(node)}")
            return None
        if allowed is not None:
            for key, entry in node.entries.items():
                if key not in allowed:
                    self.diags.error(
                        entry.key_pos,
                        f"{what}: unknown key [{key}]{suggest(key, allowed)}"
                        f" (known: {', '.join(allowed)})",
                    )
        return node

    def required(self, node: YMap, keys: Sequence[str], what: str) -> None:
        for key in keys:
            if key not in node.entries:
                self.diags.error(node.pos, f"{what}: [{key}] is required")

    def text(self, node: YNode, what: str) -> str | None:
        if isinstance(node, YScalar) and isinstance(node.value, str):
            return node.value
        self.diags.error(node.pos, f"{what}: expected text, got {kind_name(node)}")
        return None

    def duration(self, node: YNode, what: str) -> Any:
        text = node.value if isinstance(node, YScalar) else None
        try:
            return parse_duration(text)
        except DurationError as exc:
            self.diags.error(node.pos, f"{what}: {exc}")
            return None

    def timestamp(self, node: YNode, what: str) -> str | None:
        text = self.text(node, what)
        if text is None:
            return None
        try:
            from_iso(text)
        except (ValueError, ProcflowError):
            self.diags.error(node.pos, f"{what}: [{text}] is not a timestamp like {DEFAULT_CLOCK}")
            return None
        return text

    def plain_map(self, node: YNode, what: str) -> dict[str, Any] | None:
        if self.mapping(node, what, None) is None:
            return None
        value = to_plain(node)
        assert isinstance(value, dict)
        return value

    # --- fakes ----------------------------------------------------------------------------

    def fake(self, name: str, node: YNode) -> dict[str, Any] | None:
        fake = self.mapping(node, f"fake [{name}]", FAKE_KEYS)
        if fake is None:
            return None
        spec: dict[str, Any] = {}
        for key, entry in fake.entries.items():
            value, where = entry.value, f"fake [{name}] {key}"
            if key == "returns_each":
                if not isinstance(value, YSeq) or not value.items:
                    self.diags.error(value.pos, f"{where}: expected a non-empty list of results")
                else:
                    spec["returns_each"] = tuple(to_plain(value))
            elif key == "fail":
                spec["fail"] = self._count(value, where)
            elif key in ("message", "raise"):
                spec["raise_" if key == "raise" else key] = self.text(value, where)
            elif key == "non_retryable":
                spec[key] = self._flag(value, where)
            elif key in ("sets", "produces"):
                spec[key] = self.plain_map(value, where)
            elif key == "takes":
                spec[key] = self.duration(value, where)
            elif key == "returns":
                spec[key] = to_plain(value)
        return spec

    def _count(self, node: YNode, what: str) -> int:
        if isinstance(node, YScalar) and type(node.value) is int and node.value >= 0:
            return node.value
        self.diags.error(node.pos, f"{what}: expected a whole number (0 or more)")
        return 0

    def _flag(self, node: YNode, what: str) -> bool:
        if isinstance(node, YScalar) and isinstance(node.value, bool):
            return node.value
        self.diags.error(node.pos, f"{what}: expected true or false")
        return False

    # --- given ----------------------------------------------------------------------------

    def given(self, node: YNode | None, chosen: Process | Flow | None, where: Pos) -> Given:
        if node is None:
            if isinstance(chosen, Process):
                self.diags.error(where, "given: an intent scenario needs given.record")
            if isinstance(chosen, Flow) and chosen.schedules:
                return Given(inputs=None)  # no run of its own: its schedules start them
            return Given(inputs={} if isinstance(chosen, Flow) else None)
        given = self.mapping(node, "given", GIVEN_KEYS)
        if given is None:
            return Given()
        values: dict[str, Any] = {}
        for key, entry in given.entries.items():
            value = self._given_value(key, entry.value) if key in GIVEN_KEYS else None
            if value is not None:
                values[key] = value
        self._given_fits(given, values, chosen)
        return Given(**values)

    def _given_value(self, key: str, node: YNode) -> Any:
        where = f"given.{key}"
        if key == "clock":
            return self.timestamp(node, where)
        if key in ("record", "inputs", "secrets"):
            return self.plain_map(node, where)
        if key == "records":
            records = self.plain_map(node, where)
            if records is not None and not all(
                isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
                for rows in records.values()
            ):
                self.diags.error(node.pos, f"{where}: expected {{ Entity: [ {{...}}, ... ] }}")
                return None
            return records
        users = self.plain_map(node, where)
        if users is not None and not all(
            isinstance(roles, list) and all(isinstance(r, str) for r in roles)
            for roles in users.values()
        ):
            self.diags.error(node.pos, f"{where}: expected {{ NAME: [role, ...] }}")
            return None
        return users

    def _given_fits(
        self, given: YMap, values: dict[str, Any], chosen: Process | Flow | None
    ) -> None:
        if isinstance(chosen, Process):
            if "inputs" in given.entries:
                self.diags.error(given.entries["inputs"].key_pos, "given.inputs: for flows only")
            if "record" not in given.entries:
                self.diags.error(given.pos, "given: an intent scenario needs given.record")
        elif isinstance(chosen, Flow):
            if "record" in given.entries:
                self.diags.error(given.entries["record"].key_pos, "given.record: for intent only")
            values.setdefault("inputs", {})
            try:
                check_inputs(chosen, values["inputs"])
            except InputError as exc:
                where = (
                    given.entries["inputs"].value.pos if "inputs" in given.entries else given.pos
                )
                self.diags.error(where, f"given.inputs: {exc}")

    # --- do -------------------------------------------------------------------------------

    def actions(self, node: YNode | None) -> list[Action]:
        if node is None:
            return []
        if not isinstance(node, YSeq):
            self.diags.error(node.pos, "do: expected a list of actions")
            return []
        found: list[Action] = []
        for item in node.items:
            action = self.mapping(item, "an action", ACTION_KEYS)
            if action is None:
                continue
            if len(action.entries) != 1:
                self.diags.error(
                    item.pos, f"an action has exactly one key of {', '.join(ACTION_KEYS)}"
                )
                continue
            ((kind, entry),) = action.entries.items()
            if kind in ACTION_KEYS and self._action_ok(kind, entry.value):
                keys = (
                    {k: e.key_pos for k, e in entry.value.entries.items()}
                    if isinstance(entry.value, YMap)
                    else {}
                )
                found.append(Action(kind, to_plain(entry.value), entry.key_pos, keys))
        return found

    def _action_ok(self, kind: str, node: YNode) -> bool:
        before = len(self.diags.items)
        if kind == "advance":
            self.duration(node, "advance")
        elif kind == "until":
            self.timestamp(node, "until")
        elif kind == "event":
            event = self.mapping(node, "event", ("type", "data", "id"))
            if event is not None:
                self.required(event, ("type",), "event")
        elif kind == "complete":
            done = self.mapping(node, "complete", ("task", "action", "data", "as"))
            if done is not None:
                self.required(done, ("task",), "complete")
        elif kind in ("update", "create"):
            self.plain_map(node, kind)
        elif kind in ("delete", "cancel"):
            if not (isinstance(node, YScalar) and node.value is True):
                self.diags.error(node.pos, f"{kind}: write {kind}: true")
        else:
            self._expect(node)
        return len(self.diags.items) == before

    def _expect(self, node: YNode) -> None:
        expect = self.mapping(node, "expect", EXPECT_KEYS)
        if expect is None:
            return
        for key, entry in expect.entries.items():
            value, where = entry.value, f"expect.{key}"
            if key in _LIST_OF_NAMES and not _is_list_of(value, str):
                self.diags.error(value.pos, f"{where}: expected a list of names")
            elif key in _MAPS and not isinstance(value, YMap):
                self.diags.error(value.pos, f"{where}: expected a mapping")
            elif key == "waiting":
                wait = self.mapping(value, where, ("step", "kind"))
                kind = wait.get("kind") if wait is not None else None
                if isinstance(kind, YScalar) and kind.value not in WAIT_KINDS:
                    self.diags.error(
                        kind.pos,
                        f"{where}.kind: [{kind.value}] is not a wait kind"
                        f"{suggest(str(kind.value), WAIT_KINDS)} (known: {', '.join(WAIT_KINDS)})",
                    )
            elif key == "error":
                self.mapping(value, where, ("step", "message"))
            elif key == "tasks":
                self._list_of_maps(value, where, ("step", "assignee"))
            elif key == "outbox":
                if not (isinstance(value, YScalar) and type(value.value) is int):
                    self._list_of_maps(value, where, None)
            elif key == "status" and not (isinstance(value, YScalar) and value.value is not None):
                self.diags.error(value.pos, f"{where}: expected a run status")
            elif key == "runs" and not (
                isinstance(value, YScalar) and type(value.value) is int and value.value >= 0
            ):
                self._list_of_maps(value, where, ("status", "output", "scheduled_at"))

    def _list_of_maps(self, node: YNode, what: str, allowed: Sequence[str] | None) -> None:
        if not isinstance(node, YSeq):
            self.diags.error(node.pos, f"{what}: expected a list of mappings")
            return
        for item in node.items:
            self.mapping(item, what, allowed)


def _is_list_of(node: YNode, kind: type) -> bool:
    return isinstance(node, YSeq) and all(
        isinstance(i, YScalar) and isinstance(i.value, kind) for i in node.items
    )


# --- which fakes a definition can use ------------------------------------------------------


@dataclass(frozen=True)
class FakeNames:
    """The names a fake may have: the delegates (``X``, ``custom.X``) and connector actions
    (``search.status``) of the definition under test, the flows it calls, and the actions it
    calls over HTTP."""

    names: frozenset[str]
    http_steps: tuple[str, ...]
    kinds: str = "delegate or connector action"

    @classmethod
    def of(cls, definition: object, chosen: Process | Flow) -> FakeNames:
        if isinstance(chosen, Flow):
            steps = list(_flow_steps(chosen.steps, chosen.recover))
            names = {f"{s.connector}.{s.action}" for s in steps if isinstance(s, ActionStep)}
            names |= {s.flow for s in steps if isinstance(s, CallStep)}
            http = tuple(s.id for s in steps if isinstance(s, ActionStep) and s.connector == "http")
            return cls(frozenset(names), http, "connector action or called flow")
        names = set()
        for step in chosen.steps:
            if isinstance(step, ServiceTask) and isinstance(step.action, Delegate):
                names |= {
                    step.action.ref,
                    step.action.attr,
                    f"{step.action.module}.{step.action.attr}",
                }
            elif isinstance(step, ServiceTask) and isinstance(step.action, Notify):
                names.add("email.send")
        return cls(frozenset(names), ())

    def check(self, diags: Diagnostics, name: str, pos: Pos) -> None:
        if name not in self.names:
            known = sorted(self.names)
            diags.error(
                pos,
                f"fakes: [{name}] is not a {self.kinds} of the definition"
                f"{suggest(name, known)} (known: {', '.join(known) or 'none'})",
            )

    def require_http_fakes(self, diags: Diagnostics, scenarios: Collection[Scenario]) -> None:
        if not self.http_steps:
            return
        for scenario in scenarios:
            if HTTP_REQUEST not in scenario.fakes:
                diags.error(
                    scenario.pos,
                    f"scenario [{scenario.name}]: step [{self.http_steps[0]}] calls "
                    f"{HTTP_REQUEST}, which needs a fake (a test never reaches the network)",
                )


def _flow_steps(
    steps: Sequence[FlowStep], recover: Sequence[FlowStep] | None = None
) -> Iterator[FlowStep]:
    for step in [*steps, *(recover or ())]:
        yield step
        if isinstance(step, GroupStep | ForEachStep | RepeatStep):
            yield from _flow_steps(step.steps, step.mods.recover)
