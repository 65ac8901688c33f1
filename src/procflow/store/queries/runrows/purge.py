"""Retention: finding ended runs and deleting them with every row that belongs to them.

A run's rows live in the tables below, each with a ``run_id`` column and an index leading with
it. ``outbox`` keeps messages unconfigured senders did not send: they belong to their run and
go with it. ``events`` and ``records`` are not a run's (an event may have reached many runs, a
record outlives its runs): they stay.
"""

from __future__ import annotations

from collections.abc import Sequence

from procflow.store.queries.base import ENDED_SQL, Queries, marks

# Children first, the run row last: a purge interrupted between statements (it never is: one
# transaction) would otherwise leave rows whose run is gone.
RUN_TABLES = (
    "history",
    "tokens",
    "timers",
    "waits",
    "scopes",
    "vars",
    "deliveries",
    "tasks",
    "outbox",
)

# ``started_at < ?`` is implied (a run ends after it starts) and is what lets the (status,
# started_at) index bound the scan: only runs started before the cut-off are looked at.
# A child run stays while its parent is stored (its parent's view lists it); once the parent is
# purged, the next batch may take the child.
_ENDED_BEFORE = (
    f"FROM runs WHERE status IN ({ENDED_SQL}) AND started_at < ? AND ended_at < ? "
    "AND NOT EXISTS (SELECT 1 FROM calls c JOIN runs p ON p.id=c.parent_id "
    "WHERE c.child_id=runs.id)"
)


class PurgeQueries(Queries):
    def ended_runs_before(self, before: int, limit: int) -> list[str]:
        """Up to ``limit`` ids of runs completed, cancelled or aborted before ``before``."""
        rows = self.c.execute(
            f"SELECT id {_ENDED_BEFORE} ORDER BY started_at, id LIMIT ?", (before, before, limit)
        ).fetchall()
        return [str(r[0]) for r in rows]

    def count_ended_runs_before(self, before: int) -> int:
        row = self.c.execute(f"SELECT count(*) {_ENDED_BEFORE}", (before, before)).fetchone()
        return int(row[0]) if row is not None else 0

    def delete_runs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """Delete the runs ``run_ids`` and their rows in every table; rows deleted per table.
        The runs are deleted only if still ended (a retried run is not: ``failed`` never is
        ended, and nothing reopens an ended run)."""
        if not run_ids:
            return {}
        ids = list(run_ids)
        held = self.c.execute(
            f"SELECT id FROM runs WHERE id IN ({marks(len(ids))}) AND status IN ({ENDED_SQL})"
            + self.b.for_update,
            ids,
        ).fetchall()
        ids = [str(r[0]) for r in held]
        if not ids:
            return {}
        where = f"run_id IN ({marks(len(ids))})"
        deleted = {
            table: int(self.c.execute(f"DELETE FROM {table} WHERE {where}", ids).rowcount)
            for table in RUN_TABLES
        }
        deleted["calls"] = self.delete_calls_of(ids)
        deleted["runs"] = int(
            self.c.execute(f"DELETE FROM runs WHERE id IN ({marks(len(ids))})", ids).rowcount
        )
        return deleted

    def delete_calls_of(self, run_ids: Sequence[str]) -> int:
        """The links of runs deleted: as parent and as child."""
        if not run_ids:
            return 0
        ids = list(run_ids)
        where = marks(len(ids))
        cursor = self.c.execute(
            f"DELETE FROM calls WHERE child_id IN ({where}) OR parent_id IN ({where})", ids + ids
        )
        return int(cursor.rowcount)
