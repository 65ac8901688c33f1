"""What every query group works on, and the SQL text they share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
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

    def write_together(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Run writes whose results nobody reads, that are independent of each other (none
        reads or writes a row another writes): one statement where the backend takes writes in
        ``WITH`` (every write but the last a clause of it, all seeing the same snapshot), else
        one by one."""
        if not self.b.writes_in_with:
            for sql, params in statements:
                self.c.execute(sql, params)
            return
        chained = with_chain(tuple(sql for sql, _ in statements))
        self.c.execute(chained, [value for _, params in statements for value in params])


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


@lru_cache(maxsize=64)
def with_chain(statements: tuple[str, ...]) -> str:
    """``WITH w0 AS (s0), w1 AS (s1) s2``: the statements as one (parameters stay in order)."""
    *first, last = statements
    if not first:
        return last
    return "WITH " + ", ".join(f"w{i} AS ({sql})" for i, sql in enumerate(first)) + " " + last
