"""When a stored schedule's slots fall: its :class:`~procflow.calendar.Calendar`, the due time
of a slot with its jitter, which of several missed slots fire; and what firing one did
(:class:`Fired`), shared by the flow schedules' firing and the intent schedules' sweeps."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from procflow.calendar import Calendar, calendar_of, zone_problem
from procflow.model.schedule import Missed
from procflow.store.codec import dumps
from procflow.store.rows import ScheduleRow

__all__ = [
    "MAX_SLOTS", "Fired", "calendar", "due_time", "is_late", "is_sweep", "late_slots",
    "warm_calendars",
]  # fmt: skip

MAX_SLOTS = 1_000  # the most runs one firing (missed: all) or one backfill starts


@dataclass
class Fired:
    """What firing did, by outcome (the metrics count them), and the lag of the slot fired.

    An intent schedule's sweep fires a slot in batches, one transaction each: ``started`` holds
    the runs a ``start`` action started, ``swept`` the slots it finished, and ``partial`` says
    the batch left its slot unfinished (the next batch continues it; its lag was told once,
    with the slot's first batch)."""

    started: list[str] = field(default_factory=list)
    skipped: int = 0
    missed: int = 0
    buffered: int = 0
    lag: int = 0  # microseconds from the nominal instant to the firing
    swept: int = 0
    partial: bool = False


def is_sweep(row: ScheduleRow) -> bool:
    """Whether ``row`` is an intent schedule (a sweep), not a flow's schedule."""
    return row.spec.get("kind") == "intent"


MAX_WALK = 1_000_000  # late slots counted one by one at most; past it, the newest walked counts


def is_late(row_due: int | None, slot: int, spec: dict[str, Any], now: int) -> bool:
    """Whether the armed ``slot`` fires more than ``grace`` after it was due (its jitter is
    not lateness: a slot is due at its due time)."""
    return now - (row_due if row_due is not None else slot) > int(spec.get("grace") or 0)


def late_slots(spec: dict[str, Any], slot: int, now: int) -> tuple[list[int], int]:
    """The late ``slot`` and every slot after it up to ``now``: those that fire (oldest first:
    the newest for ``latest``, the first :data:`MAX_SLOTS` for ``all``, none for ``none``) and
    how many are missed. However many passed, the newest is found and every one counted (up to
    :data:`MAX_WALK`)."""
    cal, oldest, newest, total = calendar(spec), [slot], slot, 1
    while total < MAX_WALK:
        chunk = cal.slots_between(newest, now, 10_000)
        if not chunk:
            break
        oldest += chunk[: max(0, MAX_SLOTS - len(oldest))]
        newest, total = chunk[-1], total + len(chunk)
    missed = Missed(spec.get("missed") or Missed.LATEST)
    fire = [] if missed is Missed.NONE else [newest] if missed is Missed.LATEST else oldest
    return fire, total - len(fire)


def calendar(spec: dict[str, Any]) -> Calendar:
    """The calendar of a stored schedule spec (``Schedule.spec()``), parsed once per spec."""
    return _calendar(dumps(spec))


@lru_cache(maxsize=4096)
def _calendar(text: str) -> Calendar:
    import json

    spec = json.loads(text)
    return calendar_of(
        cron=spec.get("cron"), every_micros=spec.get("every"), at=spec.get("at"),
        timezone=spec.get("timezone") or "UTC", start=spec.get("start"), end=spec.get("end"),
        spring=bool(spec.get("spring")),
    )  # fmt: skip


def warm_calendars() -> None:
    """Load now what a process's first calendar loads: the time zone names every calendar
    checks its zone against (a walk of the zone database, tens of milliseconds). A worker
    does it on start rather than inside its first due slot's firing."""
    zone_problem("UTC")


_draw = random.Random()


def due_time(spec: dict[str, Any], slot: int) -> int:
    """When ``slot`` fires: the slot plus a random delay in [0, jitter), never at or past the
    slot after it (so jitter never reorders slots)."""
    jitter = int(spec.get("jitter") or 0)
    if jitter <= 0:
        return slot
    delay = _draw.randrange(jitter)
    following = calendar(spec).next_after(slot)
    if following is not None:
        delay = min(delay, following - slot - 1)
    return slot + max(0, delay)
