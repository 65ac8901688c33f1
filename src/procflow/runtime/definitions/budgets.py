"""Throttle budgets shared by name: every step that names a budget, in every flow, declares the
same ``limit`` and ``per``; a deploy that disagrees with a deployed declaration is refused."""

from __future__ import annotations

from collections.abc import Iterator

from procflow.errors import DeployError
from procflow.model.ir import ActionStep, CallStep, Flow, FlowStep
from procflow.runtime.clock import micros
from procflow.store.store import Tx

__all__ = ["declare_budgets"]


def declare_budgets(tx: Tx, flow: Flow) -> None:
    """Record the shared budgets ``flow`` declares, or refuse one that disagrees."""
    for step in _throttled(flow.steps + (flow.recover or ())):
        throttle = step.mods.throttle
        assert throttle is not None
        if not throttle.shared:
            continue
        per = micros(throttle.per)
        here = f"flow [{flow.name}] step [{step.id}]"
        declared = tx.budget_declared(throttle.name)
        if declared is None:
            tx.declare_budget(throttle.name, throttle.limit, per, here)
            continue
        limit, known_per, where = declared
        if (limit, known_per) != (throttle.limit, per) and not where.startswith(
            f"flow [{flow.name}] "
        ):
            raise DeployError(
                f"throttle [{throttle.name}]: {here} declares limit {throttle.limit} per "
                f"{throttle.per.total_seconds():g}s, but {where} declared limit {limit} per "
                f"{known_per / 1_000_000:g}s; steps sharing a throttle name must agree",
                definition=flow.name,
            )
        if (limit, known_per) != (throttle.limit, per):  # the flow that declared it changed it
            tx.redeclare_budget(throttle.name, throttle.limit, per, here)


def _throttled(steps: tuple[FlowStep, ...]) -> Iterator[ActionStep | CallStep]:
    for step in steps:
        if isinstance(step, ActionStep | CallStep) and step.mods.throttle is not None:
            yield step
        inner = getattr(step, "steps", None)
        if inner:
            yield from _throttled(inner)
        if step.mods.recover:
            yield from _throttled(step.mods.recover)
