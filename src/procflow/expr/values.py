"""Runtime values: their kinds, JSON equality, text rendering and timestamp parsing.

Values are plain data only: ``None``, ``bool``, ``int``, ``float``, ``str``, lists (tuples read as
lists), mappings, timestamps (``datetime``; a naive one is taken as UTC) and durations
(``timedelta``). Anything else is refused with :class:`ExprEvalError` rather than inspected.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from procflow.errors import ExprEvalError
from procflow.expr.duration import format_duration, format_short_duration

__all__ = [
    "INT_MAX",
    "MAX_ITEMS",
    "comparison_problem",
    "duration_result",
    "format_timestamp",
    "is_number",
    "json_equal",
    "kind_of",
    "parse_timestamp",
    "render_text",
    "shift",
    "to_json_text",
    "to_utc",
    "years_problem",
]

# Results outside a signed 64-bit integer are refused: they cannot be stored portably (SQLite,
# PostgreSQL bigint, JSON consumers) and only arise from runaway arithmetic.
INT_MAX = 2**63 - 1
# Cap on strings and lists built by + so that an expression cannot exhaust memory.
MAX_ITEMS = 1_000_000

_DATE_ONLY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_YEAR_BEYOND = re.compile(r"(?:[+-][0-9]{4,}|[0-9]{5,}|0000)-[0-9]{2}-[0-9]{2}(?:$|[T ])")


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def kind_of(value: Any) -> str:
    """The kind name used in messages: null boolean integer number string list mapping ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, timedelta):
        return "duration"
    raise ExprEvalError(f"unsupported value of type [{type(value).__name__}]")


NUMERIC_KINDS = ("integer", "number")
ORDERED_KINDS = ("integer", "number", "string", "timestamp", "duration")


def comparison_problem(op: str, left: str, right: str) -> str | None:
    """Why values of kinds ``left`` and ``right`` cannot be compared with ``op``; None if they can.

    Values of different kinds are never compared: the answer would be a silent ``false`` (a
    timestamp is not equal to its own text). Integers and numbers are one kind here (``1 ==
    1.0``). ``null`` compares with ``==``/``!=`` like any value; the ordering operators refuse it
    before they get here, naming the expression that is null. ``in`` is not a comparison of
    two values and is not judged here.
    """
    if op in ("in", "not in") or "null" in (left, right):
        return None
    if left in NUMERIC_KINDS and right in NUMERIC_KINDS:
        return None
    if left == right:
        if op in ("==", "!=") or left in ORDERED_KINDS:
            return None
        return f"[{op}] cannot order {left}s"
    hint = ""
    if {left, right} == {"timestamp", "string"}:
        hint = "; timestamp(text) reads ISO-8601 text as a timestamp"
    return f"[{op}] cannot compare {left} with {right}{hint}"


_YEARS = "the years 0001 to 9999"  # what Python's datetime (and so procflow) represents


def to_utc(value: datetime) -> datetime:
    try:
        if value.tzinfo is None or value.utcoffset() is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    except OverflowError:
        raise ExprEvalError(f"timestamp out of range: in UTC it falls outside {_YEARS}") from None


def shift(start: datetime, delta: timedelta, sign: int = 1) -> datetime:
    """``start + sign * delta``, refused with a clear message outside the representable years."""
    begin = to_utc(start)
    try:
        return begin + delta * sign
    except OverflowError:
        op = "+" if sign > 0 else "-"
        shown = f"{format_timestamp(begin)} {op} {format_short_duration(delta)}"
        raise ExprEvalError(f"timestamp out of range: {shown} falls outside {_YEARS}") from None


def duration_result(compute: Callable[[], timedelta]) -> timedelta:
    """A duration computed by ``compute``, refused when it does not fit (±999,999,999 days)."""
    try:
        return compute()
    except (OverflowError, ValueError):
        raise ExprEvalError(
            f"duration out of range: beyond {timedelta.max.days:,} days either way"
        ) from None


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, ``true != 1``, lists and mappings compared deeply.

    Values of different kinds are simply unequal here, at any depth: the ``==`` operator refuses
    them first (see :func:`comparison_problem`), but list membership and the items of lists and
    mappings, which may mix kinds, rely on this.

    Iterative so that deeply nested host data cannot exhaust the stack.
    """
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        kx, ky = kind_of(x), kind_of(y)
        if kx in ("integer", "number") and ky in ("integer", "number"):
            if x != y:
                return False
            continue
        if kx != ky:
            return False
        if kx == "list":
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif kx == "mapping":
            if len(x) != len(y) or any(k not in y for k in x):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif kx == "timestamp":
            if to_utc(x) != to_utc(y):
                return False
        elif x != y:
            return False
    return True


def format_timestamp(value: datetime) -> str:
    """ISO-8601 UTC with ``Z``; milliseconds or microseconds only when not zero."""
    dt = to_utc(value)
    text = (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    )
    if dt.microsecond:
        ms, us = divmod(dt.microsecond, 1000)
        text += f".{ms:03d}" if us == 0 else f".{dt.microsecond:06d}"
    return text + "Z"


def parse_timestamp(text: str) -> datetime:
    """ISO-8601 date-time with a zone (``Z`` or an offset), or a date meaning 00:00Z that day."""
    stripped = text.strip()
    try:
        if _DATE_ONLY.fullmatch(stripped):
            return datetime.fromisoformat(stripped).replace(tzinfo=UTC)
        if len(stripped) > 64:
            raise ValueError
        parsed = datetime.fromisoformat(stripped)
    except ValueError:
        problem = years_problem(stripped)
        if problem:
            raise ExprEvalError(problem) from None
        raise ExprEvalError(
            f"[{text}] is not an ISO-8601 timestamp (e.g. 2027-01-10T09:00:00Z or 2027-01-10)"
        ) from None
    if parsed.tzinfo is None:
        raise ExprEvalError(
            f"timestamp [{text}] has no time zone; add Z (UTC) or an offset such as +02:00"
        )
    try:
        return to_utc(parsed)
    except ExprEvalError:
        raise ExprEvalError(f"timestamp [{text}] falls outside {_YEARS} in UTC") from None


def years_problem(text: str) -> str | None:
    """Why ``text``, a date or date-time, names a moment procflow cannot represent (a year
    outside 0001..9999, written or once in UTC); None when it does not (or is no timestamp)."""
    stripped = text.strip()
    if _YEAR_BEYOND.match(stripped):
        return f"timestamp [{text}] is outside {_YEARS}"
    try:
        parsed = datetime.fromisoformat(stripped) if len(stripped) <= 64 else None
    except ValueError:
        return None
    if parsed is None or parsed.tzinfo is None or parsed.utcoffset() is None:
        return None
    try:
        parsed.astimezone(UTC)
    except OverflowError:
        return f"timestamp [{text}] falls outside {_YEARS} in UTC"
    return None


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise ExprEvalError(f"unsupported value of type [{type(value).__name__}]")


def to_json_text(value: Any) -> str:
    """Compact JSON; timestamps and durations inside become their text."""
    try:
        return json.dumps(
            value,
            default=_json_default,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except ExprEvalError:
        raise
    except ValueError:
        raise ExprEvalError(
            "value cannot be written as JSON (a number is infinite, NaN or too long)"
        ) from None
    except TypeError:
        raise ExprEvalError("value cannot be written as JSON (a mapping key is not text)") from None
    except RecursionError:
        raise ExprEvalError("value is nested too deeply to be written as JSON") from None


def render_text(value: Any) -> str:
    """Text form of a value, as a text template shows it; ``null`` has none and is an error."""
    if value is None:
        raise ExprEvalError("null cannot be rendered as text")
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:
            raise ExprEvalError("integer is too long to render") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExprEvalError(f"number [{value}] is not finite and cannot be rendered")
        return repr(value)
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    kind_of(value)  # refuses host objects before json sees them
    return to_json_text(value)
