"""Scheduled starts in the IR: a flow's ``trigger: { schedule }`` (one or several), as compiled.

A :class:`Schedule` is data only: when its slots fall is :mod:`procflow.calendar`'s to say, and
what firing a slot does is the runtime's. Instants are microseconds since the Unix epoch (UTC),
as everywhere in procflow; durations are :class:`~datetime.timedelta`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from procflow.model.source import Pos

__all__ = ["Missed", "Overlap", "Schedule"]


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
