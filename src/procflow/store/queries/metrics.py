"""What the metrics gauges read: counts of runs and of what they wait for.

Each is one statement over one index, reading no table row on SQLite (a covering index) and
an index-only scan on PostgreSQL once its visibility map is current; ``tests/ops`` checks the
plans on both backends. The ``timers``, ``waits`` and open ``tasks`` rows exist only while a run
waits, so those counts cost what is waiting, never what has ended.
"""

from __future__ import annotations

from procflow.store.queries.base import Queries, sql_strings

# The timer kinds a run waits on as such (``waiting_for.kind``); the others (an event's or a
# task's timeout, a task about to open) belong to a wait counted from its own table.
TIMED_WAITS = ("timer", "retry", "poll", "throttle")

RUNS_BY_STATUS_AND_NAME = "SELECT status, name, count(*) FROM runs GROUP BY status, name"
WAITING_ON_TIMERS = (
    "SELECT kind, count(DISTINCT run_id) FROM timers "
    f"WHERE kind IN ({sql_strings(TIMED_WAITS)}) GROUP BY kind"
)
WAITING_ON_WAITS = "SELECT kind, count(DISTINCT run_id) FROM waits GROUP BY kind"
WAITING_ON_TASKS = "SELECT count(DISTINCT run_id) FROM tasks WHERE status='open'"
OPEN_TASKS = "SELECT count(*) FROM tasks WHERE status='open'"
EARLIEST_DUE = "SELECT min(due_at) FROM timers"
# Runs queued behind a concurrency limit, by flow: the tokens index by wait kind finds them, each
# run's name is one primary-key lookup (what is queued, never every run).
QUEUED_BY_FLOW = (
    "SELECT r.name, count(DISTINCT t.run_id) FROM tokens t JOIN runs r ON r.id = t.run_id "
    "WHERE t.wait_kind = 'queue' GROUP BY r.name"
)


class MetricsQueries(Queries):
    def run_counts_by_status_and_name(self) -> dict[tuple[str, str], int]:
        """(status, definition name) -> how many runs."""
        rows = self.c.execute(RUNS_BY_STATUS_AND_NAME).fetchall()
        return {(str(r[0]), str(r[1])): int(r[2]) for r in rows}

    def waiting_run_counts(self) -> dict[str, int]:
        """What runs wait for (``timer``, ``retry``, ``poll``, ``event``, ``record``, ``task``)
        -> how many runs wait on it (a run waiting on two kinds counts under each)."""
        counts = {str(k): int(n) for k, n in self.c.execute(WAITING_ON_TIMERS).fetchall()}
        counts.update({str(k): int(n) for k, n in self.c.execute(WAITING_ON_WAITS).fetchall()})
        row = self.c.execute(WAITING_ON_TASKS).fetchone()
        counts["task"] = int(row[0]) if row is not None else 0
        return counts

    def queued_run_counts(self) -> dict[str, int]:
        """Flow name -> how many of its runs wait in a concurrency queue (none: absent)."""
        return {str(k): int(n) for k, n in self.c.execute(QUEUED_BY_FLOW).fetchall()}

    def open_task_count(self) -> int:
        row = self.c.execute(OPEN_TASKS).fetchone()
        return int(row[0]) if row is not None else 0

    def earliest_due(self) -> int | None:
        """The earliest due time of any timer (microseconds), None when nothing is timed."""
        row = self.c.execute(EARLIEST_DUE).fetchone()
        return None if row is None or row[0] is None else int(row[0])
