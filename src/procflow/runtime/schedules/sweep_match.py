"""Which records an intent schedule's slot acts on: its ``where`` conditions, with the moments
resolved at the slot's instant, evaluated against each stored record.

Pure: no I/O. Values compare in their field's terms, the same on every store backend: numbers
as numbers, dates as dates, timestamps as instants (``2027-01-10T10:00:00Z`` and
``2027-01-10T10:00:00.000001Z`` in order, which their text is not), a relation as the related
id. As in SQL, a condition on a field that is null holds only for ``eq null`` (and ``ne null``
only where it is not null). ``like`` is SQL's: ``%`` any run of characters, ``_`` one,
``\\`` escapes the next; it is case-sensitive, as PostgreSQL's.
"""

from __future__ import annotations

import calendar as month_lengths
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from procflow.model.schedule import Condition, Moment, WhereOp
from procflow.store.rows import RecordRow

__all__ = ["Matcher", "moment_value"]

_Day = TypeVar("_Day", date, datetime)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_ORDER: dict[WhereOp, Callable[[Any, Any], bool]] = {
    WhereOp.EQ: lambda a, b: a == b,
    WhereOp.NE: lambda a, b: a != b,
    WhereOp.GT: lambda a, b: a > b,
    WhereOp.GE: lambda a, b: a >= b,
    WhereOp.LT: lambda a, b: a < b,
    WhereOp.LE: lambda a, b: a <= b,
}


class Matcher:
    """The conditions of one slot, their moments resolved at ``slot`` (a date in ``zone``)."""

    def __init__(self, conditions: Sequence[Condition], slot: int, zone: str) -> None:
        self.checks = [(c, _operand(c, slot, zone)) for c in conditions]

    def matches(self, row: RecordRow) -> bool:
        return all(_holds(c, _stored(c, row), operand) for c, operand in self.checks)


def _operand(condition: Condition, slot: int, zone: str) -> Any:
    value = condition.value
    if isinstance(value, Moment):
        resolved = moment_value(value, slot, zone)
        return resolved if isinstance(resolved, date) else _instant(resolved)
    return None if value is None else _comparable(condition.compare, value)


def _stored(condition: Condition, row: RecordRow) -> Any:
    if condition.column == "created_at":
        return row.created_at
    if condition.column == "updated_at":
        return row.updated_at
    value = row.data.get(condition.field)
    return None if value is None else _comparable(condition.compare, value)


def _comparable(compare: str, value: Any) -> Any:
    if compare == "timestamp":
        return value if isinstance(value, int) else _instant(str(value))
    if compare == "date":
        return date.fromisoformat(str(value))
    if compare == "uuid":
        return str(uuid.UUID(str(value)))
    return value


def _instant(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (moment - _EPOCH) // _MICRO


def _holds(condition: Condition, stored: Any, operand: Any) -> bool:
    op = condition.op
    if operand is None:
        return (stored is None) == (op is WhereOp.EQ)
    if stored is None:
        return False
    if op is WhereOp.LIKE:
        return _like(operand).fullmatch(stored) is not None
    return _ORDER[op](stored, operand)


@lru_cache(maxsize=256)
def _like(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    escaped = False
    for char in pattern:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)


# --- moments -----------------------------------------------------------------------------------


def moment_value(moment: Moment, slot: int, zone: str) -> date | str:
    """``moment`` at the instant ``slot``: a date (``CURRENT_DATE``: the slot's day in ``zone``)
    or an instant as ISO-8601 UTC text (the stored form of a timestamp field). An offset that
    would leave the years 1 to 9999 stops at their end."""
    at = _EPOCH + timedelta(microseconds=slot)
    sign = moment.sign
    try:
        if moment.date:
            day = _add_months(at.astimezone(ZoneInfo(zone)).date(), sign * moment.months)
            return day + timedelta(days=sign * moment.days)
        moved = _add_months(at, sign * moment.months)
        moved += sign * timedelta(days=moment.days, microseconds=moment.micros)
    except (OverflowError, ValueError):
        if moment.date:
            return date.max if sign > 0 else date.min
        moved = datetime.max.replace(tzinfo=UTC) if sign > 0 else datetime.min.replace(tzinfo=UTC)
    return moved.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _add_months(day: _Day, months: int) -> _Day:
    """``day`` (a date or datetime) moved by calendar months, its day of the month kept or
    clamped to the month's last (31 January + 1 month is 28 or 29 February)."""
    if not months:
        return day
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    last = month_lengths.monthrange(year, month + 1)[1]
    return day.replace(year=year, month=month + 1, day=min(day.day, last))
