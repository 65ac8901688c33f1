"""Time as the runtime sees it: integer microseconds since the epoch, UTC.

Integers compare and index cheaply in both SQL dialects; conversion to ISO-8601 happens only at
the edges (CLI, API, history output). Which clock is in force is a property of the store: a
store created with ``--virtual-clock`` keeps its own time, read by :func:`store_now`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from procflow.expr import parse_timestamp


class ClockMeta(Protocol):
    """Where a store keeps its clock (a transaction, a reader)."""

    def meta_get(self, key: str) -> str | None: ...


def system_now() -> int:
    return time.time_ns() // 1000


def store_now(meta: ClockMeta | None) -> int:
    """The store's clock, the one way every reader reads it: a virtual clock's time, kept in the
    store (another process may move it), else the system's. ``None``: the caller knows the store
    keeps no clock of its own (``Engine.now`` reads that once, not in every transaction)."""
    value = meta.meta_get("clock_now") if meta is not None else None
    return int(value) if value is not None else system_now()


def to_datetime(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def from_datetime(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros(duration: timedelta) -> int:
    return (duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds


def iso(value: int | None) -> str | None:
    """``value`` as :func:`~procflow.expr.format_timestamp` writes it (``…Z``, milliseconds or
    microseconds only when not zero), by the C ``isoformat``: lists print two per run."""
    if value is None:
        return None
    text = (_EPOCH + timedelta(microseconds=value)).isoformat()  # naive: no "+00:00" to cut
    if len(text) > 19 and text.endswith("000"):
        text = text[:23]
    return text + "Z"


_EPOCH = datetime(1970, 1, 1)


LATEST = (datetime.max.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
    microseconds=1
)
"""The last instant procflow can name (9999-12-31T23:59:59.999999Z), in microseconds."""

VIRTUAL_EPOCH = "2027-01-01T00:00:00Z"
"""Where a virtual clock starts (``procflow db init --virtual-clock``, ``Engine.virtual``)."""


def from_iso(text: str) -> int:
    """An ISO-8601 timestamp (with its zone) in microseconds."""
    return from_datetime(parse_timestamp(text))
