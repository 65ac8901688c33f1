"""A step's ``throttle``: before an attempt starts (an action's call, a call step's child), the
attempt takes a start from its budget; over the budget it is not made and the token waits (kind
``throttle``) until the budget allows it. Waiting is not an attempt: the attempt number and the
retry delays are unchanged.

The budget itself is kept in the store and taken in a transaction of its own, committed before
the attempt (``Reserve``, given by the worker): two workers never both see a free start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from procflow.errors import ExprError
from procflow.expr import EvalContext, render, render_text
from procflow.model.ir import ActionStep, CallStep, Throttle
from procflow.runtime.clock import iso, micros
from procflow.runtime.transition import Transition
from procflow.store.rows import TokenRow

__all__ = ["Reserve", "ThrottledMachine", "budget_of", "throttle_start"]

Reserve = Callable[[str, str, int, int, int], tuple[bool, int]]
"""(budget, key, limit, per in µs, now) → (True, the instant the attempt starts) when a start
was taken, else (False, when to come back)."""


class ThrottledMachine(Protocol):
    tr: Transition
    token: TokenRow
    eval_ctx: EvalContext

    @property
    def flow_name(self) -> str: ...
    def env(self) -> dict[str, Any]: ...
    def reserve(self) -> Reserve | None: ...
    def park(self, kind: str, due: int, extra: dict[str, Any]) -> None: ...
    def fail(self, step: ActionStep | CallStep, message: str, kind: str) -> None: ...


def budget_of(flow: str, throttle: Throttle) -> str:
    """The budget's name: the one written, else the step's own (``flow/step``)."""
    return throttle.name if throttle.shared else f"{flow}/{throttle.name}"


def throttle_start(m: ThrottledMachine, step: ActionStep | CallStep) -> int | None:
    """The instant ``step``'s attempt starts: now, or for a throttled step the instant its
    budget gave it a start. None when there is none (the token then waits, or the step failed
    on its key's expression)."""
    throttle = step.mods.throttle
    if throttle is None:
        return m.tr.now
    reserve = m.reserve()
    assert reserve is not None  # the worker gives every flow run its budget keeper
    key = ""
    if throttle.key is not None:
        try:
            value = render(throttle.key, m.env(), m.eval_ctx)
            key = value if isinstance(value, str) else str(render_text(value))
        except ExprError as exc:
            m.fail(step, f"throttle.key: {exc.message}", "expression")
            return None
    budget = budget_of(m.flow_name, throttle)
    taken, instant = reserve(budget, key, throttle.limit, micros(throttle.per), m.tr.now)
    if taken:
        return instant
    token = m.token
    m.park("throttle", instant, {"budget": budget, "key": key})
    m.tr.add("step.throttled", step.id, token.path, token.attempt, until=iso(instant),
             budget=budget)  # fmt: skip
    return None
