"""Leases on runs: claiming ready runs, saving the runs a worker holds, renewing, releasing.

A worker claims a batch of ready runs by writing its lease (owner, until) on them; every later
write of a held run checks the lease is still the worker's, so a worker that stalled past its
lease (and whose runs another worker took over) changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from procflow.store.codec import chunks
from procflow.store.queries.base import LIVE_SQL, Queries, marks
from procflow.store.queries.runrows.runs import RUN_COLS, RunImage, run_row
from procflow.store.queries.runrows.timers import FIRST_SCHEDULE, FIRST_TIMER
from procflow.store.rows import RunRow

_HELD = f" AND lease_owner=? AND lease_until>=? AND status IN ({LIVE_SQL})"
_SAVE_HELD = (
    "UPDATE runs SET status=?, ended_at=?, state=?, output=?, error=?, seq=?, "
    "lease_owner=?, lease_until=? WHERE id=?" + _HELD
)
_SEQ_HELD = "UPDATE runs SET seq=? WHERE id=?" + _HELD
_HELD_ARRAYS = (
    f" WHERE r.id=u.id AND r.lease_owner=? AND r.lease_until>=? AND r.status IN ({LIVE_SQL})"
)
_SAVE_HELD_ARRAYS = (
    "UPDATE runs AS r SET status=u.status, ended_at=u.ended_at, state=u.state, "
    "output=u.output, error=u.error, seq=u.seq, lease_owner=u.lease_owner, "
    "lease_until=u.lease_until FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], "
    "?::text[], ?::bigint[], ?::text[], ?::bigint[], ?::text[]) AS u(status, ended_at, "
    "state, output, error, seq, lease_owner, lease_until, id)" + _HELD_ARRAYS
)
_SEQ_HELD_ARRAYS = (
    "UPDATE runs AS r SET seq=u.seq FROM unnest(?::bigint[], ?::text[]) AS u(seq, id)"
    + _HELD_ARRAYS
)


class LeaseQueries(Queries):
    def save_held_runs(
        self,
        full: Sequence[tuple[RunRow, RunImage, int | None, str | None]],
        seq_only: Sequence[RunRow],
        owner: str,
        now: int,
    ) -> int:
        """Save runs whose lease ``owner`` still holds at ``now`` (and that still run); returns
        how many matched. ``full``: (run, its :func:`run_image`, lease until, lease owner), every
        column written; ``seq_only``: runs whose row changed in ``seq`` alone (the hot path: a
        narrow update that touches no index)."""
        matched = 0
        if full:
            rows = [
                (*image, run.seq, lease_owner, lease_until, run.id)
                for run, image, lease_until, lease_owner in full
            ]
            matched += self.b.batch(_SAVE_HELD, _SAVE_HELD_ARRAYS, rows, (owner, now))
        if seq_only:
            rows_seq = [(run.seq, run.id) for run in seq_only]
            matched += self.b.batch(_SEQ_HELD, _SEQ_HELD_ARRAYS, rows_seq, (owner, now))
        return matched

    def leases_held(self, run_ids: Iterable[str], owner: str, now: int) -> set[str]:
        """The runs among ``run_ids`` whose lease ``owner`` still holds (and that still run)."""
        held: set[str] = set()
        for chunk in chunks(list(run_ids)):
            rows = self.c.execute(
                f"SELECT id FROM runs WHERE id IN ({marks(len(chunk))})" + _HELD,
                (*chunk, owner, now),
            ).fetchall()
            held.update(r[0] for r in rows)
        return held

    def claim_runs(self, owner: str, now: int, lease_until: int, limit: int) -> list[RunRow]:
        """Lease up to ``limit`` running runs no live worker holds: those whose lease expired
        (a worker died) first, then those never claimed since they became ready.

        Two scans of the claimable index, not one for either condition: PostgreSQL answers an
        ``OR`` with a bitmap scan, which never marks the index entries of dead row versions as
        dead, and a burst of runs that ran and went on to wait leaves one such entry each
        until vacuum comes round (30,000 runs parked: 6 ms a claim instead of 0.3). The plain
        index scan of ``lease_until IS NULL`` marks them as it passes."""
        rows = self.c.execute(
            f"WITH expired AS (SELECT id FROM runs WHERE status='running' AND lease_until<? "
            f"LIMIT ?{self.b.skip_locked}), "
            f"fresh AS (SELECT id FROM runs WHERE status='running' AND lease_until IS NULL "
            f"LIMIT ?{self.b.skip_locked}) "
            "UPDATE runs SET lease_owner=?, lease_until=? WHERE id IN (SELECT id FROM "
            "(SELECT id FROM expired UNION ALL SELECT id FROM fresh) AS claimable LIMIT ?) "
            f"RETURNING {RUN_COLS}",
            (now, limit, limit, owner, lease_until, limit),
        ).fetchall()
        return [run_row(r) for r in rows]

    def renew_leases(self, owner: str, run_ids: Iterable[str], lease_until: int) -> None:
        """Extend the leases ``owner`` still holds (the heartbeat). A row locked meanwhile is
        skipped, never waited for: the lock is this worker's own commit (which renews a lease
        past half its time; the next beat renews the others) or a claim of a lease already
        expired. Waiting on the commit, whose run-row update may in turn wait on rows this
        statement has locked, deadlocks (PostgreSQL)."""
        for chunk in chunks(list(run_ids)):
            self.c.execute(
                "UPDATE runs SET lease_until=? WHERE id IN (SELECT id FROM runs WHERE "
                f"lease_owner=? AND id IN ({marks(len(chunk))}){self.b.skip_locked})",
                (lease_until, owner, *chunk),
            )

    def release_leases(self, owner: str, run_ids: Iterable[str]) -> None:
        for chunk in chunks(list(run_ids)):
            self.c.execute(
                "UPDATE runs SET lease_owner=NULL, lease_until=NULL WHERE lease_owner=? "
                f"AND id IN ({marks(len(chunk))})",
                (owner, *chunk),
            )

    def lease_of(self, run_id: str) -> tuple[str | None, int | None]:
        row = self.c.execute(
            "SELECT lease_owner, lease_until FROM runs WHERE id=?", (run_id,)
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def next_wake_times(self) -> tuple[int | None, int | None]:
        """(the next timer's or schedule slot's due time, the first lease expiry on ready
        work): what an idle worker waits for, in one statement."""
        row = self.c.execute(
            f"SELECT ({FIRST_TIMER}), ({FIRST_SCHEDULE}), (SELECT min(lease_until) FROM runs "
            "WHERE status='running' AND lease_until IS NOT NULL)"
        ).fetchone()
        timer, schedule, expiry = (None, None, None) if row is None else row
        dues = [d for d in (timer, schedule) if d is not None]
        due = min(dues) if dues else None
        return (
            None if due is None else int(due),
            None if expiry is None else int(expiry),
        )
