"""The statuses a run and a token can be in: one definition for every layer and face.

Both are :class:`~enum.StrEnum`, so a member *is* its text: it compares equal to the string the
store holds and the JSON shapes print, and it needs no conversion at either boundary.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ENDED", "FINISHED", "RunStatus", "TokenState"]


class RunStatus(StrEnum):
    """Where a run stands. ``failed`` is not the end: ``runs retry`` or ``runs cancel`` follows."""

    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ABORTED = "aborted"


class TokenState(StrEnum):
    """Where one token of a run stands (a finished token is deleted, not kept in a state)."""

    READY = "ready"
    WAITING = "waiting"
    FAILED = "failed"


ENDED: frozenset[RunStatus] = frozenset(
    {RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.ABORTED}
)
"""Statuses a run never leaves: nothing more happens to it (purge may delete it)."""

FINISHED: frozenset[RunStatus] = ENDED | {RunStatus.FAILED}
"""Statuses in which no token of the run moves until an operator acts (retry, cancel)."""
