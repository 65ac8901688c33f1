"""History: the append-only log of what happened in each run, numbered by the run's seq."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from procflow.store.codec import loads, none_or_dumps
from procflow.store.queries.base import Queries
from procflow.store.rows import HistoryRow

# The columns history_values() gives, in its order: every insert of an entry starts so.
INTO_HISTORY = "INSERT INTO history(run_id, seq, at, type, step, path, attempt, data) "
INSERT_HISTORY = f"{INTO_HISTORY}VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_ARRAYS = (
    f"{INTO_HISTORY}SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::text[], "
    "?::text[], ?::text[], ?::bigint[], ?::text[])"
)


def history_values(run_id: str, h: HistoryRow) -> tuple[Any, ...]:
    """The parameters of :data:`INSERT_HISTORY` for the entry ``h`` of run ``run_id``."""
    return (run_id, h.seq, h.at, h.type, h.step, h.path, h.attempt, none_or_dumps(h.data))


class HistoryQueries(Queries):
    def append_history(self, run_id: str, entries: Sequence[HistoryRow]) -> None:
        self.append_history_many([(run_id, h) for h in entries])

    def append_history_many(self, rows: Sequence[tuple[str, HistoryRow]]) -> None:
        values = [  # history_values(), inlined: this runs for every entry the worker writes
            (run_id, h.seq, h.at, h.type, h.step, h.path, h.attempt, none_or_dumps(h.data))
            for run_id, h in rows
        ]
        self.b.batch(INSERT_HISTORY, _INSERT_ARRAYS, values)

    def history(self, run_id: str) -> list[HistoryRow]:
        rows = self.c.execute(
            "SELECT seq, at, type, step, path, attempt, data FROM history WHERE run_id=? "
            "ORDER BY seq",
            (run_id,),
        ).fetchall()
        return [HistoryRow(r[0], r[1], r[2], r[3], r[4], r[5], loads(r[6])) for r in rows]

    def history_before(
        self, run_id: str, before: int | None, limit: int, types: Sequence[str] = ()
    ) -> list[HistoryRow]:
        """A page of a run's history, newest first: entries with ``seq`` below ``before``
        (None: from the newest), of ``types`` when given. One range of the (run_id, seq) key
        read backwards, so a page of a long history costs what a page of a short one does."""
        sql = "SELECT seq, at, type, step, path, attempt, data FROM history WHERE run_id=?"
        args: list[object] = [run_id]
        if before is not None:
            sql += " AND seq<?"
            args.append(before)
        if types:
            sql += f" AND type IN ({','.join('?' * len(types))})"
            args.extend(types)
        rows = self.c.execute(sql + " ORDER BY seq DESC LIMIT ?", [*args, limit]).fetchall()
        return [HistoryRow(r[0], r[1], r[2], r[3], r[4], r[5], loads(r[6])) for r in rows]

    def step_outcomes(self, run_id: str) -> list[tuple[str, str, int]]:
        """(step, entry type, last seq) of each step's ``step.completed``/``step.failed``/
        ``step.recovered``/``step.skipped`` entries: what a run's diagram colours."""
        rows = self.c.execute(
            "SELECT step, type, max(seq) FROM history WHERE run_id=? AND step IS NOT NULL "
            "AND type IN ('step.completed','step.failed','step.recovered','step.skipped') "
            "GROUP BY step, type",
            (run_id,),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]
