"""The core of the flow step compiler: step lists, ids, construct dispatch, modifiers, scopes.

Private to :mod:`procflow.model.flow.compiler`. A step list is compiled in order; each step sees the
ids bound earlier in its scope and in enclosing scopes, and learns which ids are still to come
(``later``) so a forward reference gets "[ask] is not bound yet here" rather than "unknown".
The constructs themselves live in ``flow_waits`` (the seed's wait, wait_for, repeat) and
``flow_steps`` (action, for_each, group, set, fail), as subclasses of :class:`StepCore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from procflow.errors import DurationError
from procflow.expr import ANY, ListShape, ObjectShape, Shape, parse_duration
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.model.flow import control
from procflow.model.flow.exprs import ERROR_SHAPE, Exprs, Scope
from procflow.model.flow.ids import RESERVED, StepId, split_step
from procflow.model.ir import ConnectorManifest, FlowStep, Modifiers, RetryPolicy
from procflow.model.reading.reader import IDENT, Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name
from procflow.model.source import Pos, suggest

CONSTRUCTS = ("wait", "wait_for", "repeat", "for_each", "set", "fail", "call")
COMMON_MODIFIERS = ("if", "optional", "description")
# keys each construct accepts besides its own key and the common modifiers
CONSTRUCT_KEYS: dict[str, tuple[str, ...]] = {
    "action": ("retry", "timeout", "throttle"),
    "wait": (),
    "wait_for": ("match", "timeout", "lookback"),
    "repeat": ("steps", "recover"),
    "for_each": ("as", "steps", "recover"),
    "group": ("steps", "recover"),
    "set": (),
    "fail": (),
    "call": ("inputs", "detach", "retry", "timeout", "throttle"),
}
CONSTRUCT_NAMES = {
    "action": "an action step",
    "wait": "a wait step",
    "wait_for": "a wait_for step",
    "repeat": "a repeat step",
    "for_each": "a for_each step",
    "group": "a group",
    "set": "a set step",
    "fail": "a fail step",
    "call": "a call step",
}
# where a misplaced key belongs, for "not allowed on <construct>" messages
KEY_HOMES = {
    "retry": "retry applies to action and call steps only",
    "timeout": (
        "timeout applies to action and call steps only (wait_for has its own required timeout)"
    ),
    "recover": "recover applies to group, for_each and repeat steps only",
    "steps": "only a group, for_each or repeat holds steps",
    "match": "match belongs to wait_for",
    "lookback": "lookback belongs to wait_for",
    "as": "as belongs to for_each",
    "inputs": "inputs belong to call (the inputs of the flow it starts)",
    "detach": "detach belongs to call",
    "throttle": "throttle applies to action and call steps only",
}
ALL_CONSTRUCTS_TEXT = (
    "<connector>.<action>, wait, wait_for, repeat, for_each, steps (a group), set, fail or call"
)
RETRY_KEYS = ("count", "every")
REPEAT_KEYS = ("every", "max", "until")
WAIT_KEYS = ("for", "until")


def context_of(step_id: str) -> str:
    return f"step [{step_id}]"


def closed(fields: Mapping[str, Shape], optional: bool) -> ObjectShape:
    """A binding with known fields; an optional step may instead bind ``{ error }``."""
    return ObjectShape({**fields, "error": ERROR_SHAPE} if optional else dict(fields))


def iterations(bound: Mapping[str, Shape], optional: bool) -> Shape:
    """A repeat/for_each binding: the list of iteration scopes (or, if optional, ``{ error }``,
    which no list shape can express)."""
    return ANY if optional else ListShape(ObjectShape(bound, open=True))


@dataclass
class Body:
    """One step being compiled: its id, body and the scope it is evaluated in."""

    id: str
    pos: Pos
    body: YMap
    scope: Scope
    construct: str
    key: str  # the construct's key in the body (for actions: "<connector>.<action>")

    @property
    def ctx(self) -> str:
        return context_of(self.id)

    @property
    def optional(self) -> bool:
        node = self.body.get("optional")
        return isinstance(node, YScalar) and node.value is True


class StepCore:
    def __init__(
        self,
        reader: Reader,
        exprs: Exprs,
        registry: ConnectorRegistry,
        ids: Mapping[str, StepId],
        inputs: Mapping[str, Any],
    ) -> None:
        self.r = reader
        self.x = exprs
        self.registry = registry
        self.ids = ids
        self.inputs = inputs
        self.used: dict[str, ConnectorManifest] = {}
        self.looked_up: set[str] = set()
        self.hidden = self._hidden()

    # --- step lists ---------------------------------------------------------------------------

    def steps(
        self, node: YNode | None, parent: Scope, context: str, what: str
    ) -> tuple[tuple[FlowStep, ...], dict[str, Shape]]:
        """Compile a step list in ``parent``; returns the steps and the bindings they make."""
        items = self.r.seq(node, context, what)
        if not items and (
            isinstance(node, YSeq) or (isinstance(node, YScalar) and node.value is None)
        ):
            self.r.error(node.pos, context, f"{what} must list at least one step")
        ids = [s[0] if (s := split_step(i)) else "" for i in items]
        index = {sid: n for n, sid in reversed(list(enumerate(ids))) if sid}
        bound: dict[str, Shape] = {}
        out: list[FlowStep] = []
        for n, item in enumerate(items):
            # Views, not copies: copying the earlier and later ids for every step made
            # validation quadratic in the number of steps.
            later = _Later(index, n, parent.later)
            scope = Scope(
                _Earlier(bound, index, n, parent.visible), later, self.hidden, parent.loops
            )
            step, shape = self.step(item, scope)
            if ids[n]:
                bound[ids[n]] = shape
            if step is not None:
                out.append(step)
        return tuple(out), bound

    def _hidden(self) -> dict[str, str]:
        """How to reach each id of the file from a place where it is not bound."""
        out = {}
        for sid in self.ids.values():
            if sid.recover:
                where = f"[{sid.owner}]" if sid.owner else "the flow"
                out[sid.name] = (
                    f"it is a recover step of {where}; only the recover steps after it can use it"
                )
            elif sid.owner:
                out[sid.name] = (
                    f"it is a step inside [{sid.owner}], visible outside only as {sid.access}"
                )
        out["error"] = "it is only visible inside recover steps"
        return out

    def split(self, item: YNode) -> tuple[str, Pos, YMap] | None:
        if not isinstance(item, YMap) or len(item.entries) != 1:
            self.report_step_shape(item)
            return None
        entry = next(iter(item.entries.values()))
        step_id = self.r.ident(YScalar(entry.key_pos, entry.key), "step", "step id")
        if step_id is None and "." in entry.key:
            return None  # `- <connector>.<action>: args` without an id: the body is no step body
        if step_id is None:
            step_id = entry.key  # reported; the body is still checked, under the name as written
        else:
            self.check_id(step_id, entry.key_pos)
        body = entry.value
        if not isinstance(body, YMap):
            self.r.error(
                body.pos,
                context_of(step_id),
                f"the body must be a mapping of one construct ({ALL_CONSTRUCTS_TEXT}) and "
                f"its modifiers, got {kind_name(body)}",
            )
            return None
        return step_id, entry.key_pos, body

    def report_step_shape(self, item: YNode) -> None:
        if isinstance(item, YMap) and len(item.entries) > 1:
            keys = ", ".join(f"[{k}]" for k in item.entries)
            first = next(iter(item.entries))
            self.r.error(
                item.pos,
                "step",
                f"a step is a single-key map `- <id>: <body>`, this one has keys {keys}; "
                f"indent the body under [{first}]",
            )
            return
        got = "an empty mapping" if isinstance(item, YMap) else kind_name(item)
        self.r.error(item.pos, "step", f"a step is a single-key map `- <id>: <body>`, got {got}")

    def check_id(self, step_id: str, pos: Pos) -> None:
        if step_id in RESERVED:
            self.r.error(
                pos,
                context_of(step_id),
                f"[{step_id}] is a reserved name ({', '.join(RESERVED)}); choose another id",
            )
        elif step_id in self.inputs:
            self.r.error(
                pos,
                context_of(step_id),
                f"the id [{step_id}] is also an input; step ids, inputs and loop names must differ",
            )

    # --- one step -----------------------------------------------------------------------------

    def step(self, item: YNode, scope: Scope) -> tuple[FlowStep | None, Shape]:
        split = self.split(item)
        if split is None:
            return None, ANY
        step_id, pos, body = split
        found = self.construct(step_id, body)
        if found is None:
            # which construct is meant is unclear, but the modifiers are not: check them still
            self.modifiers(Body(step_id, pos, body, scope, "", ""))
            return None, ANY
        construct, key = found
        b = Body(step_id, pos, body, scope, construct, key)
        self.check_keys(b)
        handler: Callable[[Body], tuple[FlowStep | None, Shape]] = getattr(self, f"c_{construct}")
        return handler(b)

    def construct(self, step_id: str, body: YMap) -> tuple[str, str] | None:
        keys = [k for k in body.entries if k in CONSTRUCTS or "." in k]
        if not keys and "steps" in body.entries:
            return "group", "steps"
        if len(keys) == 1:
            return ("action" if "." in keys[0] else keys[0]), keys[0]
        if not keys:
            self.r.error(
                body.pos,
                context_of(step_id),
                f"has no construct; a step holds exactly one of {ALL_CONSTRUCTS_TEXT}",
            )
            # the unknown key is most likely the misspelt construct: say which it resembles
            known = (*CONSTRUCTS, *COMMON_MODIFIERS, *KEY_HOMES)
            self.r.keys(body, known, context_of(step_id))
        else:
            names = " and ".join(f"[{k}]" for k in keys)
            self.r.error(
                body.entries[keys[1]].key_pos,
                context_of(step_id),
                f"has {len(keys)} constructs, {names}; a step holds exactly one — split it "
                "into separate steps",
            )
        return None

    def check_keys(self, b: Body) -> None:
        allowed = (b.key, *COMMON_MODIFIERS, *CONSTRUCT_KEYS[b.construct])
        what = CONSTRUCT_NAMES[b.construct]
        hint = {k: f"[{k}] is not allowed on {what}; {home}" for k, home in KEY_HOMES.items()}
        candidates = (*allowed, *CONSTRUCTS, *KEY_HOMES)
        for key, entry in b.body.entries.items():
            if key in allowed:
                continue
            if key in hint:
                self.r.error(entry.key_pos, b.ctx, hint[key])
            else:
                self.r.error(entry.key_pos, b.ctx, f"unknown key [{key}]{suggest(key, candidates)}")

    def modifiers(self, b: Body, recover: tuple[FlowStep, ...] | None = None) -> Modifiers:
        body = b.body
        retried = b.construct in ("action", "call")
        retry = self.retry(body.get("retry"), b.ctx) if retried else None
        timeout = None
        if retried and "timeout" in body.entries:
            timeout = self.duration(body.get("timeout"), b.ctx, "timeout")
        optional = self.r.boolean(body.get("optional"), b.ctx, "optional")
        throttle = None
        if retried and "throttle" in body.entries:
            throttle = control.throttle(self.r, self.x, body.get("throttle"), b.scope, b.ctx, b.id)
        return Modifiers(
            if_=self.x.condition(body.get("if"), b.scope, b.ctx, "if", allow_bool=True),
            optional=bool(optional),
            retry=retry,
            timeout=timeout,
            recover=recover,
            description=self.r.string(body.get("description"), b.ctx, "description"),
            throttle=throttle,
        )

    def retry(self, node: YNode | None, context: str) -> RetryPolicy | None:
        retry = self.r.map(node, context, "retry")
        if retry is None:
            return None
        self.r.keys(retry, RETRY_KEYS, f"{context} retry")
        count_node = self.r.require(retry, "count", f"{context} retry", "further attempts, >= 1")
        count = self.r.integer(count_node, context, "retry.count")
        if count is not None and count_node is not None and count < 1:
            self.r.error(count_node.pos, context, f"retry.count must be at least 1, got {count}")
            count = None
        every_node = self.r.require(retry, "every", f"{context} retry", "a duration, e.g. 30s")
        every = self.duration(every_node, context, "retry.every")
        if count is None or every is None:
            return None
        return RetryPolicy(count, every, retry.pos)

    def duration(self, node: YNode | None, context: str, what: str) -> timedelta | None:
        """A literal duration > 0, in either syntax."""
        if node is None:
            return None
        if isinstance(node, YScalar) and isinstance(node.value, str) and "{{" in node.value:
            self.r.error(
                node.pos,
                context,
                f"{what} must be a literal duration (e.g. 30s, PT30S), not an "
                "expression: it is fixed when the step is compiled",
            )
            return None
        if not isinstance(node, YScalar):
            self.r.error(node.pos, context, f"{what} must be a duration, got {kind_name(node)}")
            return None
        try:
            value = parse_duration(node.value)
        except DurationError as exc:
            self.r.error(node.pos, context, f"{what}: {exc}")
            return None
        if value <= timedelta(0):
            self.r.error(node.pos, context, f"{what} must be longer than zero, got {node.value}")
            return None
        return value

    # --- nested scopes ------------------------------------------------------------------------

    def inner(
        self, b: Body, extra: Mapping[str, Shape] | None = None, loop: str | None = None
    ) -> tuple[tuple[FlowStep, ...], dict[str, Shape], Scope]:
        """The construct's own steps; returns them, their bindings and the inner base scope."""
        base = Scope(
            _Over(extra or {}, b.scope.visible),
            _Over({b.id: f"it is bound when step [{b.id}] completes"}, b.scope.later),
            b.scope.hidden,
            b.scope.loops | ({loop} if loop else set()),
        )
        node = b.body.get("steps")
        if node is None:
            self.r.error(b.body.pos, b.ctx, "missing required key [steps] (the steps it runs)")
        steps, bound = self.steps(node, base, b.ctx, "steps")
        return steps, bound, base

    def recover(
        self, b: Body, base: Scope, bound: Mapping[str, Shape]
    ) -> tuple[FlowStep, ...] | None:
        """Recover steps run in the failed scope: they see its bindings and ``error``."""
        node = b.body.get("recover")
        if node is None:
            return None
        scope = Scope(
            {**base.visible, **bound, "error": ERROR_SHAPE}, base.later, base.hidden, base.loops
        )
        steps, _ = self.steps(node, scope, b.ctx, "recover")
        return steps

    def connector(self, name: str, pos: Pos, context: str) -> ConnectorManifest | None:
        if not IDENT.match(name):
            self.r.error(pos, context, f"[{name}] is not <connector>.<name>")
            return None
        self.looked_up.add(name)
        manifest = self.registry.get(name)
        if manifest is None:
            self.r.error(
                pos, context, f"unknown connector [{name}]{suggest(name, self.registry.names())}"
            )
            return None
        self.used[name] = manifest
        return manifest


class _Over(Mapping[str, Any]):
    """``own`` over ``outer`` without copying either (scopes nest once per construct)."""

    def __init__(self, own: Mapping[str, Any], outer: Mapping[str, Any]) -> None:
        self.own, self.outer = own, outer

    def __getitem__(self, name: str) -> Any:
        return self.own[name] if name in self.own else self.outer[name]

    def __contains__(self, name: object) -> bool:
        return name in self.own or name in self.outer

    def __iter__(self) -> Iterator[str]:
        yield from self.own
        yield from (k for k in self.outer if k not in self.own)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Earlier(Mapping[str, Shape]):
    """The bindings of the steps before position ``n`` of a list, over the enclosing scope's."""

    def __init__(
        self,
        bound: Mapping[str, Shape],
        index: Mapping[str, int],
        n: int,
        outer: Mapping[str, Shape],
    ) -> None:
        self.bound, self.index, self.n, self.outer = bound, index, n, outer

    def __getitem__(self, name: str) -> Shape:
        if name in self.bound and self.index[name] < self.n:
            return self.bound[name]
        return self.outer[name]

    def __contains__(self, name: object) -> bool:
        if name in self.bound and self.index[name] < self.n:  # type: ignore[index]
            return True
        return name in self.outer

    def __iter__(self) -> Iterator[str]:
        own = [k for k in self.bound if self.index[k] < self.n]
        yield from own
        yield from (k for k in self.outer if k not in own)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Later(Mapping[str, str]):
    """Ids bound at or after position ``n`` of a list (with a hint), over the enclosing scope's."""

    def __init__(self, index: Mapping[str, int], n: int, outer: Mapping[str, str]) -> None:
        self.index, self.n, self.outer = index, n, outer

    def __getitem__(self, name: str) -> str:
        at = self.index.get(name)
        if at == self.n:
            return "a step cannot read its own binding"
        if at is not None and at > self.n:
            return ""
        return self.outer[name]

    def __contains__(self, name: object) -> bool:
        at = self.index.get(name)  # type: ignore[call-overload]
        return (at is not None and at >= self.n) or name in self.outer

    def __iter__(self) -> Iterator[str]:
        own = [k for k, at in self.index.items() if at >= self.n]
        yield from own
        yield from (k for k in self.outer if k not in own)

    def __len__(self) -> int:
        return sum(1 for _ in self)
