"""Flow control: a flow's ``concurrency`` and a step's ``throttle``
(docs/reference/flow-control.md).

Private to :mod:`procflow.model.flow.compiler`. A concurrency key is rendered when a run starts,
from its inputs alone; a throttle key in the step's scope, when an attempt is about to start.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta

from procflow.errors import DurationError
from procflow.expr import Shape, Template, parse_duration
from procflow.model.flow.exprs import Exprs, Scope
from procflow.model.ir import Concurrency, FlowStep, Throttle
from procflow.model.reading.reader import IDENT, Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name

__all__ = ["CONCURRENCY_KEYS", "THROTTLE_KEYS", "check_shared", "concurrency", "throttle"]

CONCURRENCY_KEYS = ("limit", "key", "on_limit")
THROTTLE_KEYS = ("limit", "per", "key", "name")
ON_LIMIT = ("queue", "refuse")
CTX = "concurrency"


def concurrency(
    r: Reader,
    x: Exprs,
    node: YNode | None,
    inputs: Mapping[str, Shape],
    step_ids: Mapping[str, str],
) -> Concurrency | None:
    """``concurrency: { limit, key, on_limit }``; ``step_ids``: every step id of the file, which
    the key may not name (it is rendered before any step ran)."""
    body = r.map(node, CTX, "concurrency")
    if body is None:
        return None
    r.keys(body, CONCURRENCY_KEYS, CTX)
    limit = _limit(r, body, CTX, "concurrency", "runs active at once")
    key: Template | None = None
    ok = True
    if "key" in body.entries:
        hint = "concurrency's key is rendered when a run starts, from its inputs only"
        scope = Scope(inputs, dict.fromkeys(step_ids, hint))
        key = x.template(body.get("key"), scope, CTX, "concurrency.key")
        ok = key is not None
    on_limit = "queue"
    written = body.get("on_limit")
    if written is not None:
        value = r.string(written, CTX, "on_limit")
        if value is not None and value not in ON_LIMIT:
            r.error(written.pos, CTX, f"on_limit must be queue or refuse, got [{value}]")
            ok = False
        elif value is not None:
            on_limit = value
    if limit is None or not ok:
        return None
    return Concurrency(limit, body.pos, key, "refuse" if on_limit == "refuse" else "queue")


def throttle(
    r: Reader, x: Exprs, node: YNode | None, scope: Scope, ctx: str, own: str
) -> Throttle | None:
    """``throttle: { limit, per, key, name }`` of a step; ``own``: the budget's name when none
    is written (``flow/step``)."""
    body = r.map(node, ctx, "throttle")
    if body is None:
        return None
    r.keys(body, THROTTLE_KEYS, f"{ctx} throttle")
    limit = _limit(r, body, ctx, "throttle", "attempts per `per`")
    per = _per(r, r.require(body, "per", f"{ctx} throttle", "a duration, e.g. 1s"), ctx)
    key = x.template(body.get("key"), scope, ctx, "throttle.key") if "key" in body.entries else None
    name_node = body.get("name")
    name = r.string(name_node, ctx, "throttle.name") if name_node is not None else None
    if name is not None and name_node is not None and not IDENT.match(name):
        r.error(name_node.pos, ctx, f"throttle.name [{name}] must be a name (letters, digits, _)")
        name = None
    if limit is None or per is None or ("key" in body.entries and key is None):
        return None
    if name_node is not None and name is None:
        return None
    return Throttle(limit, per, name or own, body.pos, key, shared=name is not None)


def _limit(r: Reader, body: YMap, ctx: str, what: str, means: str) -> int | None:
    node = r.require(body, "limit", f"{ctx} {what}" if ctx != what else ctx, means)
    limit = r.integer(node, ctx, f"{what}.limit")
    if limit is not None and node is not None and limit < 1:
        r.error(node.pos, ctx, f"{what}.limit must be at least 1, got {limit}")
        return None
    return limit


def _per(r: Reader, node: YNode | None, ctx: str) -> timedelta | None:
    if node is None:
        return None
    if not isinstance(node, YScalar) or not isinstance(node.value, str | int):
        r.error(node.pos, ctx, f"throttle.per must be a duration, got {kind_name(node)}")
        return None
    if isinstance(node.value, str) and "{{" in node.value:
        r.error(
            node.pos, ctx, "throttle.per must be a literal duration (e.g. 1s), not an expression"
        )
        return None
    try:
        value = parse_duration(node.value)
    except DurationError as exc:
        r.error(node.pos, ctx, f"throttle.per: {exc}")
        return None
    if value <= timedelta(0):
        r.error(node.pos, ctx, f"throttle.per must be longer than zero, got {node.value}")
        return None
    return value


def check_shared(r: Reader, steps: tuple[FlowStep, ...]) -> None:
    """Steps of one file sharing a throttle name must declare the same limit and per."""
    first: dict[str, tuple[str, Throttle]] = {}
    for step_id, t in _throttles(steps):
        if not t.shared:
            continue
        if t.name not in first:
            first[t.name] = (step_id, t)
            continue
        other_id, other = first[t.name]
        if (other.limit, other.per) != (t.limit, t.per):
            r.error(
                t.pos,
                f"step [{step_id}]",
                f"throttle [{t.name}] is declared with limit {other.limit} per "
                f"{other.per.total_seconds():g}s by step [{other_id}] (line {other.pos.line}); "
                "steps sharing a throttle name must agree",
            )


def _throttles(steps: tuple[FlowStep, ...]) -> Iterator[tuple[str, Throttle]]:
    for step in steps:
        if step.mods.throttle is not None:
            yield step.id, step.mods.throttle
        inner = getattr(step, "steps", None)
        if inner:
            yield from _throttles(inner)
        if step.mods.recover:
            yield from _throttles(step.mods.recover)
