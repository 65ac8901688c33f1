"""What every query group works on, and the SQL text they share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from procflow.states import ENDED, RunStatus
from procflow.store.backend import Backend


class Queries:
    """A group of named queries on the connection ``c`` of the backend ``b``.

    ``c`` is the backend's connection itself, not a wrapper: on the hot path every statement
    goes straight to the driver.
    """

    c: Any
    b: Backend


def sql_strings(values: Iterable[str]) -> str:
    """``'a','b'``: SQL string literals for an ``IN (...)`` list of our own constants."""
    return ",".join(f"'{value}'" for value in sorted(values))


ENDED_SQL = sql_strings(ENDED)
"""Run statuses a run never leaves."""
LIVE_SQL = sql_strings(set(RunStatus) - ENDED)
"""Run statuses of a run that may still move (a lease on it means something)."""


def marks(count: int) -> str:
    """``?,?,?``: the placeholders of an ``IN (...)`` list of ``count`` values."""
    return ",".join("?" * count)
