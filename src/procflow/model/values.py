"""Plain values as definitions type them: how a value reads in a message, and whether a literal
is of a flow's schema type.

The compilers check a definition's literals with these, and the runtime checks the data users
send (events, inputs, records, connector arguments) with the same words; kept apart from the
compilers so that checking a value never imports YAML reading or a compiler.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

from procflow.expr.values import years_problem

__all__ = ["describe", "is_instant", "kind_of_plain", "literal_mismatch"]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def describe(value: Any) -> str:
    """How a plain value reads in a message: its kind, and the value when it is short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean [{'true' if value else 'false'}]"
    if isinstance(value, int):
        return f"the integer [{value}]"
    if isinstance(value, float):
        return f"the number [{value}]"
    if isinstance(value, str):
        return f"the text [{value}]" if len(value) <= 40 else "a text"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def kind_of_plain(value: Any) -> str:
    """A plain value's kind with its article (``an integer``, ``a mapping``), as YAML types it."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return "a string"


def is_instant(text: str) -> bool:
    """An ISO-8601 date, or a date-time with an offset (``Z`` or ``+hh:mm``), that falls in the
    years 0001 to 9999 in UTC (see :func:`procflow.expr.values.years_problem`)."""
    if _DATE.match(text):
        try:
            date.fromisoformat(text)
        except ValueError:
            return False
        return True
    try:
        return datetime.fromisoformat(text).tzinfo is not None and years_problem(text) is None
    except ValueError:
        return False


def literal_mismatch(value: Any, type_: str) -> str | None:
    """Why ``value`` (plain data from YAML) is not of schema type ``type_``; None when it is."""
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "timestamp": isinstance(value, str) and is_instant(value),
        "any": True,
    }[type_]
    if ok:
        return None
    if type_ == "timestamp" and isinstance(value, str):
        return f"[{value}] is not an ISO-8601 timestamp with an offset (Z) or a date"
    article = "an" if type_[0] in "aeiou" else "a"
    return f"must be {article} {type_}, got {kind_of_plain(value)}"
