"""Scheduled starts in the IR: a flow's ``trigger: { schedule }`` (one or several), and an intent
file's ``schedules:`` (sweeps: each slot acts on the records that match), as compiled.

A :class:`Schedule` and an :class:`IntentSchedule` are data only: when their slots fall is
:mod:`procflow.calendar`'s to say, and what firing a slot does is the runtime's. Instants are
microseconds since the Unix epoch (UTC), as everywhere in procflow; durations are
:class:`~datetime.timedelta`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal

from procflow.model.notify import Notify
from procflow.model.source import Pos

__all__ = [
    "Condition", "Generate", "IntentSchedule", "Missed", "Moment", "Overlap", "Schedule",
    "StartProcess", "SweepAction", "WhereOp",
]  # fmt: skip


class Overlap(StrEnum):
    """What a slot does while runs its schedule started have not ended."""

    SKIP = "skip"
    ALLOW = "allow"
    BUFFER_ONE = "buffer_one"
    CANCEL_PREVIOUS = "cancel_previous"


class Missed(StrEnum):
    """What becomes of slots that fired later than ``grace`` after their nominal instant."""

    LATEST = "latest"
    ALL = "all"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule of a flow. Exactly one of ``cron``, ``every`` and ``at`` is set.

    ``name``: the flow's name for a lone ``trigger: { schedule }``, else the schedule's own
    ``name`` (commands address it as ``FLOW/NAME``). ``timezone``: an IANA name (``cron`` is read
    in it; ``every`` and ``at`` ignore it). ``start``/``end``: no slot before/after.
    """

    name: str
    pos: Pos
    cron: str | None = None
    every: timedelta | None = None
    at: int | None = None
    timezone: str = "UTC"
    jitter: timedelta = timedelta(0)
    overlap: Overlap = Overlap.SKIP
    missed: Missed = Missed.LATEST
    grace: timedelta = timedelta(minutes=1)
    start: int | None = None
    end: int | None = None

    def spec(self) -> dict[str, Any]:
        """What a deploy compares and the store keeps: every field but the position, as JSON
        (durations in microseconds)."""
        return {
            "cron": self.cron,
            "every": _micros(self.every),
            "at": self.at,
            "timezone": self.timezone,
            "jitter": _micros(self.jitter),
            "overlap": self.overlap.value,
            "missed": self.missed.value,
            "grace": _micros(self.grace),
            "start": self.start,
            "end": self.end,
        }


def _micros(value: timedelta | None) -> int | None:
    return None if value is None else value // timedelta(microseconds=1)


# --- intent schedules (sweeps) ------------------------------------------------------------


class WhereOp(StrEnum):
    """How a ``where`` condition compares a record's value with its own."""

    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GE = "ge"
    LT = "lt"
    LE = "le"
    LIKE = "like"


Compare = Literal["text", "number", "boolean", "date", "timestamp", "uuid", "relation"]
"""How a condition's two values compare: the field's type, integers and decimals alike as
numbers, a to-one relation as the related id."""


@dataclass(frozen=True, slots=True)
class Moment:
    """``CURRENT_DATE``, ``CURRENT_TIMESTAMP`` or ``NOW`` with at most one signed ISO-8601 offset,
    resolved at each slot's instant: ``date`` (CURRENT_DATE) is the slot's day in the schedule's
    zone, moved by whole ``months`` and ``days``; otherwise the slot's instant, moved by calendar
    ``months`` (in UTC), ``days`` of 24 hours and ``micros``. ``sign`` is +1 or -1."""

    text: str  # as written: CURRENT_TIMESTAMP-PT30M
    date: bool
    sign: int = 1
    months: int = 0  # years and months
    days: int = 0  # weeks and days
    micros: int = 0  # hours, minutes, seconds


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``{ field, op, value }`` of a ``where`` list. ``value`` is a literal (a relation's
    seeded name already resolved to its id), a :class:`Moment`, or None (``eq``/``ne`` null).
    ``column``: ``created_at`` or ``updated_at`` when ``field`` is ``createdAt`` or ``changedAt``
    and the entity declares no such field (the record's stored instants)."""

    field: str
    op: WhereOp
    value: Any
    compare: Compare
    pos: Pos
    column: str | None = None


@dataclass(frozen=True, slots=True)
class Generate:
    """``generate``: one new record of ``to`` per matching row. ``map``: (target, source) field
    or relation names; ``defaults``: (target, literal or :class:`Moment`) — ``now`` is a Moment."""

    to: str
    map: tuple[tuple[str, str], ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class StartProcess:
    """``start``: a run of a trigger-less process of the file for each matching row."""

    process: str


SweepAction = Notify | Generate | StartProcess


@dataclass(frozen=True, slots=True)
class IntentSchedule:
    """One entry of an intent file's ``schedules:``: at each slot of ``cron`` (a Spring cron or
    a five-field one, read in ``timezone``), do ``action`` for every record of ``entity`` that
    matches all of ``where``. ``overlap`` concerns a ``start`` action's runs (one per record)."""

    name: str
    pos: Pos
    cron: str
    entity: str
    action: SweepAction
    where: tuple[Condition, ...] = ()
    timezone: str = "UTC"
    overlap: Overlap = Overlap.SKIP
    missed: Missed = Missed.LATEST
    grace: timedelta = timedelta(minutes=1)

    def spec(self, app: str) -> dict[str, Any]:
        """What a deploy compares and the store keeps: the calendar (as a flow schedule's spec,
        ``spring`` set), ``kind: intent``, the application, and the sweep in words."""
        return {
            "kind": "intent", "app": app, "entity": self.entity, "cron": self.cron,
            "spring": True, "every": None, "at": None, "timezone": self.timezone, "jitter": 0,
            "overlap": self.overlap.value, "missed": self.missed.value,
            "grace": _micros(self.grace), "start": None, "end": None,
            "where": [[c.field, c.op.value, _shown(c.value)] for c in self.where],
            "action": _action(self.action),
        }  # fmt: skip


def _shown(value: Any) -> Any:
    return value.text if isinstance(value, Moment) else value


def _action(action: SweepAction) -> dict[str, Any]:
    if isinstance(action, Notify):
        to = action.to.address or ".".join(action.to.path)
        notify = {"to": to, "subject": action.subject.text, "body": action.body.text}
        return {"notify": notify}
    if isinstance(action, Generate):
        defaults = {k: _shown(v) for k, v in action.defaults}
        return {"generate": {"to": action.to, "map": dict(action.map), "defaults": defaults}}
    return {"start": action.process}
