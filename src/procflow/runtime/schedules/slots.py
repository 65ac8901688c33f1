"""When a stored schedule's slots fall: its :class:`~procflow.calendar.Calendar`, and the due time
of a slot with its jitter."""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any

from procflow.calendar import Calendar, calendar_of
from procflow.store.codec import dumps

__all__ = ["calendar", "due_time"]


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
