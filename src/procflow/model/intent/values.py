"""Typed values of the intent dialect: record field values and seeded setting values.

Seed rows, ``defaultValue`` and ``setField`` values are all checked by :func:`value_problem`, so
a value the runtime would reject on a write is rejected when the file is validated instead.
"""

from __future__ import annotations

import math
import re
import uuid
from datetime import date, datetime
from typing import Any

from procflow.expr.values import years_problem
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YScalar
from procflow.model.values import describe

FIELD_TYPES = (
    "string", "text", "integer", "int", "long", "decimal", "double", "boolean", "date",
    "timestamp", "uuid",
)  # fmt: skip
INTEGER_TYPES = frozenset({"integer", "int", "long"})
NUMBER_TYPES = frozenset({"decimal", "double"})
TEXT_TYPES = frozenset({"string", "text"})
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def a_type(type_: str) -> str:
    """``an integer``, ``a decimal``: a type name with its article, for messages."""
    return ("an " if type_[:1] in "aeiou" else "a ") + type_


def value_problem(type_: str, length: int | None, value: Any) -> str | None:
    """Why ``value`` cannot be stored in a field of ``type_`` (``None``: it can, as null can)."""
    if value is None:
        return None
    if type_ in TEXT_TYPES:
        if not isinstance(value, str):
            return f"must be text, got {describe(value)}; quote it to store it as text"
        if length is not None and len(value) > length:
            return f"is {len(value)} characters long; the field holds at most {length}"
        return None
    checker = _CHECKERS.get(type_)
    return checker(value) if checker else None


def _integer(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return None
    return f"must be an integer, got {describe(value)}"


def _number(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return None
    return f"must be a number, got {describe(value)}"


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, got {describe(value)}"


def _date(value: Any) -> str | None:
    if isinstance(value, str) and _DATE.match(value):
        try:
            date.fromisoformat(value)
            return None
        except ValueError:
            pass
    beyond = years_problem(value) if isinstance(value, str) else None
    return (
        f"must be a date in the years 0001 to 9999: {beyond}"
        if beyond
        else (f"must be a date written YYYY-MM-DD, got {describe(value)}")
    )


def _timestamp(value: Any) -> str | None:
    beyond = years_problem(value) if isinstance(value, str) else None
    if beyond:
        return f"must be a timestamp in the years 0001 to 9999: {beyond}"
    if isinstance(value, str) and len(value) >= 10:
        try:
            datetime.fromisoformat(value)
            return None
        except ValueError:
            pass
    return f"must be an ISO-8601 timestamp (2027-01-10T09:30:00Z), got {describe(value)}"


def _uuid(value: Any) -> str | None:
    if isinstance(value, str):
        try:
            uuid.UUID(value)
            return None
        except ValueError:
            pass
    return f"must be a UUID, got {describe(value)}"


_CHECKERS = {
    **dict.fromkeys(INTEGER_TYPES, _integer),
    **dict.fromkeys(NUMBER_TYPES, _number),
    "boolean": _boolean,
    "date": _date,
    "timestamp": _timestamp,
    "uuid": _uuid,
}


def literal_fits(type_: str, value: Any) -> bool:
    """Whether an expression literal can equal a value of a field of ``type_`` (guards)."""
    if value is None:
        return True
    if type_ in TEXT_TYPES or type_ in ("date", "timestamp", "uuid"):
        return isinstance(value, str)
    if type_ in INTEGER_TYPES or type_ in NUMBER_TYPES:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "boolean":
        return isinstance(value, bool)
    return True


def read_description(node: YMap, context: str, reader: Reader) -> str | None:
    """A free-text description; an empty one (``description:``) is simply absent."""
    value = node.get("description")
    if isinstance(value, YScalar) and value.value is None:
        return None
    return reader.string(value, context, "description")
