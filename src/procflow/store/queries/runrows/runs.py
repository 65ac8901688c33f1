"""Runs: one row per run of a process or flow (status, state, output, error, history seq)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from procflow.states import ENDED
from procflow.store.codec import chunks, dumps, loads, none_or_dumps
from procflow.store.queries.base import ENDED_SQL, Queries, marks
from procflow.store.rows import RunRow, RunSummary

SUMMARY_COLS = "id, name, dialect, status, started_at, ended_at, business_key"
RUN_COLS = (
    "id, version_id, name, dialect, status, started_at, ended_at, business_key, "
    "record_entity, record_id, start_key, state, output, error, seq"
)

RunImage = tuple[str, int | None, str, str | None, str | None]


def run_image(run: RunRow) -> RunImage:
    """The run row's rarely changing columns as stored (status, ended_at, state, output, error):
    equal images mean the row needs no rewrite of them."""
    return (
        run.status, run.ended_at, dumps(run.state), none_or_dumps(run.output),
        none_or_dumps(run.error),
    )  # fmt: skip


def run_row(row: Sequence[Any]) -> RunRow:
    """A row selected as :data:`RUN_COLS`."""
    return RunRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9],
        row[10], json.loads(row[11]), loads(row[12]), loads(row[13]), row[14],
    )  # fmt: skip


SAVE_RUN = (
    "UPDATE runs SET status=?, ended_at=?, state=?, output=?, error=?, seq=?, "
    "lease_owner=?, lease_until=? WHERE id=?"
)


def run_values(run: RunRow, lease_until: int | None, owner: str | None) -> tuple[Any, ...]:
    """The parameters of :data:`SAVE_RUN` for ``run`` with its lease (until, owner)."""
    return (
        run.status, run.ended_at, dumps(run.state), none_or_dumps(run.output),
        none_or_dumps(run.error), run.seq, owner, lease_until, run.id,
    )  # fmt: skip


class RunQueries(Queries):
    def insert_run(self, run: RunRow) -> bool:
        """False when ``start_key`` was already used (the process already ran for that record)."""
        # ON CONFLICT rather than catching the error: in PostgreSQL a failed statement aborts
        # the whole transaction (the record write that triggered the start with it).
        cur = self.c.execute(
            "INSERT INTO runs(id, version_id, name, dialect, status, started_at, business_key, "
            "record_entity, record_id, start_key, state, seq) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (start_key) DO NOTHING",
            (
                run.id, run.version_id, run.name, run.dialect, run.status, run.started_at,
                run.business_key, run.record_entity, run.record_id, run.start_key,
                dumps(run.state), run.seq,
            ),
        )  # fmt: skip
        return bool(cur.rowcount == 1)

    def insert_new_runs(self, runs: Sequence[RunRow]) -> set[str]:
        """Insert ``runs`` (of no record), a few hundred to a statement; the ids that went in
        (one whose start key was used before does not)."""
        inserted: set[str] = set()
        for chunk in chunks(list(runs), 500):
            rows = self.c.execute(
                "INSERT INTO runs(id, version_id, name, dialect, status, started_at, start_key, "
                f"state, seq) VALUES {', '.join(['(?, ?, ?, ?, ?, ?, ?, ?, ?)'] * len(chunk))} "
                "ON CONFLICT (start_key) DO NOTHING RETURNING id",
                [v for r in chunk for v in (
                    r.id, r.version_id, r.name, r.dialect, r.status, r.started_at, r.start_key,
                    dumps(r.state), r.seq,
                )],
            ).fetchall()  # fmt: skip
            inserted.update(str(row[0]) for row in rows)
        return inserted

    def run_for_update(self, run_id: str) -> RunRow | None:
        """The run, locked until commit (PostgreSQL; SQLite's write lock already serialises)."""
        row = self.c.execute(
            f"SELECT {RUN_COLS} FROM runs WHERE id=?{self.b.for_update}", (run_id,)
        ).fetchone()
        return None if row is None else run_row(row)

    def runs_for_update(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """The runs, each locked until commit as :meth:`run_for_update` locks it (in id order:
        two of these never deadlock)."""
        out: dict[str, RunRow] = {}
        for chunk in chunks(sorted(run_ids)):
            rows = self.c.execute(
                f"SELECT {RUN_COLS} FROM runs WHERE id IN ({marks(len(chunk))}) "
                f"ORDER BY id{self.b.for_update}",
                chunk,
            ).fetchall()
            out.update((r.id, r) for r in map(run_row, rows))
        return out

    def run_by_start_key(self, start_key: str) -> str | None:
        """The id of the run started with ``start_key`` (a schedule's slot), if any."""
        row = self.c.execute("SELECT id FROM runs WHERE start_key=?", (start_key,)).fetchone()
        return None if row is None else str(row[0])

    def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        out: dict[str, RunRow] = {}
        for chunk in chunks(list(run_ids)):
            rows = self.c.execute(
                f"SELECT {RUN_COLS} FROM runs WHERE id IN ({marks(len(chunk))})", chunk
            ).fetchall()
            out.update((r.id, r) for r in map(run_row, rows))
        return out

    def live_runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """The runs of ``run_ids`` that have not ended; ended or purged ones are not read (by
        its next slot, a schedule's last run has mostly ended). One statement over an array
        where the backend takes arrays: a list of values spelled out is parsed anew each time."""
        if not run_ids:
            return {}
        live = f"status NOT IN ({ENDED_SQL})"
        if self.b.arrays:
            rows = self.c.execute(
                f"SELECT {RUN_COLS} FROM runs WHERE id = ANY(?::text[]) AND {live}",
                (list(run_ids),),
            ).fetchall()
            return {r.id: r for r in map(run_row, rows)}
        out: dict[str, RunRow] = {}
        for chunk in chunks(list(run_ids)):
            rows = self.c.execute(
                f"SELECT {RUN_COLS} FROM runs WHERE id IN ({marks(len(chunk))}) AND {live}", chunk
            ).fetchall()
            out.update((r.id, r) for r in map(run_row, rows))
        return out

    def run(self, run_id: str) -> RunRow | None:
        row = self.c.execute(f"SELECT {RUN_COLS} FROM runs WHERE id=?", (run_id,)).fetchone()
        return None if row is None else run_row(row)

    def runs(self, status: str | None, name: str | None) -> list[RunRow]:
        """Every run (of one status and definition), oldest first: for tests and tools that
        want them all; the faces list runs a page at a time (:meth:`run_summaries_before`)."""
        sql = f"SELECT {RUN_COLS} FROM runs WHERE 1=1"
        args: list[Any] = []
        if status:
            sql += " AND status=?"
            args.append(status)
        if name:
            sql += " AND name=?"
            args.append(name)
        sql += " ORDER BY started_at, id"
        return [run_row(r) for r in self.c.execute(sql, args).fetchall()]

    def run_summaries_before(
        self, status: str | None, name: str | None, before: str | None, limit: int,
        waiting: str | None = None, parent: str | None = None,
    ) -> list[RunSummary]:  # fmt: skip
        """A page of runs, newest first: those whose id sorts before ``before`` (None: from the
        newest). Ids begin with their creation time, and each filter has an index ending in
        ``id``, so a page is one index range however deep it is. ``waiting``: only runs with
        a token waiting for that kind (``retry``, ``event``…), probed per run by its tokens.
        ``parent``: only the runs that run started by ``call`` (read off ``calls_by_parent``)."""
        sql = f"SELECT {SUMMARY_COLS} FROM runs WHERE 1=1"
        args: list[Any] = []
        conditions = (
            ("status=?", status), ("name=?", name), ("id<?", before),
            ("id IN (SELECT child_id FROM calls WHERE parent_id=?)", parent),
        )  # fmt: skip
        for condition, value in conditions:
            if value is not None:
                sql += f" AND {condition}"
                args.append(value)
        if waiting is not None:  # read off the index of the tokens' wait kind
            sql += " AND id IN (SELECT run_id FROM tokens WHERE wait_kind=? AND state='waiting')"
            args.append(waiting)
        rows = self.c.execute(sql + " ORDER BY id DESC LIMIT ?", [*args, limit]).fetchall()
        return [RunSummary(*r) for r in rows]

    def runs_for_record(self, entity: str, id_: int) -> list[RunRow]:
        rows = self.c.execute(
            f"SELECT {RUN_COLS} FROM runs WHERE record_entity=? AND record_id=? "
            "ORDER BY started_at, id",
            (entity, id_),
        ).fetchall()
        return [run_row(r) for r in rows]

    def active_runs_for_record(self, entity: str, id_: int) -> list[RunRow]:
        return [r for r in self.runs_for_record(entity, id_) if r.status not in ENDED]

    def save_run(self, run: RunRow, lease_until: int | None, owner: str | None) -> None:
        self.save_runs([(run, lease_until, owner)])

    def save_runs(self, runs: Sequence[tuple[RunRow, int | None, str | None]]) -> None:
        """Each run's row with its lease (until, owner), in one ``executemany``."""
        if len(runs) == 1:
            # A plain statement: psycopg runs an executemany in pipeline mode, which costs
            # several times as much for a single row.
            self.c.execute(SAVE_RUN, run_values(*runs[0]))
        else:
            self.c.executemany(SAVE_RUN, [run_values(*saved) for saved in runs])

    def run_counts(self, name: str | None) -> dict[str, int]:
        """How many runs have each status (of the definition ``name``): one GROUP BY over the
        (status, id) or (name, id) index, no row read."""
        sql, args = "SELECT status, count(*) FROM runs", []
        if name is not None:
            sql, args = sql + " WHERE name=?", [name]
        rows = self.c.execute(sql + " GROUP BY status", args).fetchall()
        return {r[0]: int(r[1]) for r in rows}
