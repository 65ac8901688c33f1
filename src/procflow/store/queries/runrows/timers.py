"""Timers: due times of waiting tokens (timeouts, delays, repeats)."""

from __future__ import annotations

from collections.abc import Sequence

from procflow.store.queries.base import Queries
from procflow.store.rows import TimerRow

FIRST_TIMER = "SELECT due_at FROM timers ORDER BY due_at LIMIT 1"
# SQLite sorts NULLs first: the armed schedules only.
FIRST_SCHEDULE = "SELECT due_at FROM schedules WHERE due_at IS NOT NULL ORDER BY due_at LIMIT 1"
DELETE_TIMERS_OF_TOKEN = "DELETE FROM timers WHERE token_id=?"
_DELETE_OF_TOKENS = "DELETE FROM timers WHERE token_id = ANY(?::bigint[])"
_DELETE = "DELETE FROM timers WHERE id=?"
_DELETE_ARRAY = "DELETE FROM timers WHERE id = ANY(?::bigint[])"


class TimerQueries(Queries):
    def insert_timers(self, timers: Sequence[tuple[str, int, str, int]]) -> None:
        """(run_id, token_id, kind, due_at) each."""
        self.c.executemany(
            "INSERT INTO timers(run_id, token_id, kind, due_at) VALUES (?, ?, ?, ?)", timers
        )

    def delete_timers_of_tokens(self, token_ids: Sequence[int]) -> None:
        self.b.batch(DELETE_TIMERS_OF_TOKEN, _DELETE_OF_TOKENS, [(i,) for i in token_ids])

    def delete_run_timers(self, run_id: str) -> None:
        self.c.execute("DELETE FROM timers WHERE run_id=?", (run_id,))

    def next_timer_due(self) -> int | None:
        """The earliest due time of a timer (a run's own), schedules aside."""
        row = self.c.execute(FIRST_TIMER).fetchone()
        return None if row is None else int(row[0])

    def due_timers_free(self, now: int, wall: int, limit: int) -> list[TimerRow]:
        """Timers due by the engine clock ``now`` of runs no live worker holds (leases run on
        the wall clock ``wall``, so a frozen virtual clock never freezes a lease), oldest first.
        Timer and run rows are locked, skipping those another worker holds."""
        rows = self.c.execute(
            "SELECT t.id, t.run_id, t.token_id, t.kind, t.due_at FROM timers t "
            "JOIN runs r ON r.id=t.run_id WHERE t.due_at<=? "
            "AND (r.lease_owner IS NULL OR r.lease_until<?) ORDER BY t.due_at, t.id LIMIT ?"
            + self.b.skip_locked,
            (now, wall, limit),
        ).fetchall()
        return [TimerRow(*r) for r in rows]

    def timers_of_run(self, run_id: str) -> list[TimerRow]:
        rows = self.c.execute(
            "SELECT id, run_id, token_id, kind, due_at FROM timers WHERE run_id=? ORDER BY due_at",
            (run_id,),
        ).fetchall()
        return [TimerRow(*r) for r in rows]

    def delete_timer(self, timer_id: int) -> None:
        self.c.execute("DELETE FROM timers WHERE id=?", (timer_id,))

    def delete_timers(self, timer_ids: Sequence[int]) -> None:
        self.b.batch(_DELETE, _DELETE_ARRAY, [(i,) for i in timer_ids])

    def next_due(self) -> int | None:
        """The earliest due time of a timer or an armed schedule slot: one probe of each
        due-time index, in one statement. (Asked as ``due_at<=? LIMIT 1``, PostgreSQL's generic
        plan expects a third of the rows to match and scans the table for the first.)"""
        row = self.c.execute(f"SELECT ({FIRST_TIMER}), ({FIRST_SCHEDULE})").fetchone()
        found = [int(v) for v in (row or ()) if v is not None]
        return min(found) if found else None
