"""Fault injection at named points of the runtime, for crash tests. A no-op in production
(``point`` returns at its first test unless a plan is set).

Points: ``after_claim`` (leases taken, nothing run), ``before_delegate``, ``after_delegate`` (the
side effect happened, nothing committed), ``before_commit``, ``after_commit``, ``slot_fired`` (a
schedule's slot started its run and armed the next, not yet committed), ``after_sweep_action``
(an intent schedule acted on one record of a batch not committed yet), ``child_started`` (a
call step's child run written with its parent parked on it, not committed), ``child_ended`` (a
child's final transition about to resume its parent, not committed), ``parent_woken`` (the
parent's token handed the child's outcome, not committed).

``PROCFLOW_FAULTS="after_delegate=2,before_commit=1"`` makes the process kill itself with
SIGKILL the 2nd time it reaches ``after_delegate``. Nothing is flushed or cleaned up: exactly
what a power cut or the OOM killer would do.
"""

from __future__ import annotations

import os
import signal

from procflow.config import raw

POINTS = (
    "after_claim", "before_delegate", "after_delegate", "before_commit", "after_commit",
    "slot_fired", "after_sweep_action", "child_started", "child_ended", "parent_woken",
)  # fmt: skip

_plan: dict[str, int] = {}
enabled = False


def configure(spec: str) -> None:
    """Set the plan (``"point=n,..."``; empty: none). Read from ``PROCFLOW_FAULTS`` at import; a
    test that forks workers from a warm process sets each child's plan with this."""
    global enabled
    plan: dict[str, int] = {}
    for item in filter(None, spec.split(",")):
        name, _, count = item.partition("=")
        plan[name.strip()] = int(count or "1")
    unknown = sorted(plan.keys() - set(POINTS))
    if unknown:  # a misspelt point would silently never fire
        raise ValueError(f"PROCFLOW_FAULTS names unknown fault points {unknown}; known: {POINTS}")
    _plan.clear()
    _plan.update(plan)
    enabled = bool(plan)


configure(raw("PROCFLOW_FAULTS") or "")


def point(name: str) -> None:
    """Reached a named point: die here if a fault is planned for this hit."""
    if not enabled or name not in _plan:
        return
    _plan[name] -= 1
    if _plan[name] == 0:
        os.kill(os.getpid(), signal.SIGKILL)
