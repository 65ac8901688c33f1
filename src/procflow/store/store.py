"""The store: the only module that speaks SQL.

A :class:`Store` opens a database by URL and hands out transactions (:meth:`Store.tx`); a
:class:`Tx` offers one named method per query. The engine composes them, so a state change is
always exactly one transaction. SQL is written once with ``?`` placeholders; the PostgreSQL
dialect (issue 3/5) translates them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from procflow.errors import ProcflowError, UsageError
from procflow.store.rows import (
    HistoryRow,
    OutboxRow,
    RecordRow,
    RunRow,
    TimerRow,
    TokenRow,
    VersionRow,
)

SCHEMA_VERSION = 3  # schema_<dialect>_1.sql creates; each later file migrates one step
DEFAULT_URL = "sqlite:///./procflow.db"
TERMINAL = ("completed", "cancelled", "aborted")


class StoreError(ProcflowError):
    """The database is missing, not initialised, or at an unknown schema version."""


class StoreConflict(StoreError):
    """PostgreSQL rolled the transaction back to break a deadlock (or a serialisation
    conflict) with a concurrent one: nothing of it was committed, and doing it again is safe."""


def _is_conflict(exc: BaseException) -> bool:
    sqlstate = getattr(getattr(exc, "diag", None), "sqlstate", None) or getattr(
        exc, "sqlstate", None
    )
    return sqlstate in ("40P01", "40001")  # deadlock_detected, serialization_failure


def sqlite_path(url: str) -> str:
    if not url.startswith("sqlite://"):
        raise UsageError(f"unsupported database URL [{url}]; use sqlite:///path/to/file.db")
    rest = url[len("sqlite://") :]
    if rest in ("", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/"):
        raise UsageError(
            f"malformed database URL [{url}]; use sqlite:///relative.db or sqlite:////abs.db"
        )
    return rest[1:]


def _compact_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"))`` without its per-call set-up (building an
    encoder object and, inside it, the C encoder): the C encoder is built once. Where the C
    accelerator is missing, the pure-Python encoder (same output)."""
    encoder = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    chunks = make(
        None, encoder.default, json.encoder.encode_basestring_ascii, None, ":", ",",
        False, False, True,
    )  # fmt: skip

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_ENCODE = _compact_encoder()


def _dumps(value: Any) -> str:
    return "{}" if value == {} else _ENCODE(value)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class Store:
    """One connection to one database. Not shared between threads: open one per thread."""

    def __init__(self, url: str = DEFAULT_URL) -> None:
        self.url = url
        self._tx_depth = 0
        self.conn: Any
        if is_postgres(url):
            from procflow.store.pg import PgConnection

            self.dialect = "postgresql"
            self.path = ""
            self.conn = PgConnection(url)
            self._begin = "BEGIN"
            return
        self.path = sqlite_path(url)
        self.dialect = "sqlite"
        self._begin = "BEGIN IMMEDIATE"  # take the write lock now: no upgrade deadlocks later
        self.conn = sqlite3.connect(
            self.path, isolation_level=None, timeout=30.0, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA secure_delete=ON")
        self.conn.execute("PRAGMA foreign_keys=OFF")

    def close(self) -> None:
        self.conn.close()

    def _tx_obj(self) -> Tx:
        return Tx(self.conn, self.dialect)

    # --- transactions ---------------------------------------------------------------------

    @contextmanager
    def tx(self) -> Iterator[Tx]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``, one writer at a time)."""
        if self._tx_depth:
            yield self._tx_obj()
            return
        self.conn.execute(self._begin)
        self._tx_depth = 1
        try:
            yield self._tx_obj()
        except BaseException as exc:
            self.conn.execute("ROLLBACK")
            if _is_conflict(exc):
                raise StoreConflict(
                    "a concurrent change to the same run or record conflicted with this one; "
                    "nothing was changed, try again"
                ) from exc
            raise
        else:
            self.conn.execute("COMMIT")
        finally:
            self._tx_depth = 0

    def read(self) -> Tx:
        """Queries outside a transaction (each statement sees the latest commit)."""
        return self._tx_obj()

    # --- schema ---------------------------------------------------------------------------

    def schema_version(self) -> int | None:
        if self.dialect == "postgresql":
            # A catalog query, not to_regclass(): that reads the backend's name cache, which
            # still says "no meta" after another session's schema commit seen mid-transaction.
            row = self.conn.execute(
                "SELECT 1 FROM pg_catalog.pg_tables "
                "WHERE schemaname = current_schema() AND tablename = 'meta'"
            ).fetchone()
            exists = row is not None
        else:
            exists = (
                self.conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
                ).fetchone()
                is not None
            )
        if not exists:
            return None
        got = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(got[0]) if got else None

    def init(self, *, virtual_clock: bool = False, now: int = 0) -> bool:
        """Create the schema; returns False when it already existed (then nothing changes)."""
        if self.schema_version() is not None:
            return False
        with self.tx() as tx:
            # Workers starting at once on an empty database: one creates the schema (DDL and
            # meta in one transaction), the others wait for its lock and then find it made.
            self._lock_schema(tx)
            if self.schema_version() is not None:
                return False
            for version in range(1, SCHEMA_VERSION + 1):
                self._run_script(version)
            tx.meta_set("schema_version", str(SCHEMA_VERSION))
            tx.meta_set("clock", "virtual" if virtual_clock else "system")
            if virtual_clock:
                tx.meta_set("clock_now", str(now))
        return True

    def upgrade(self) -> tuple[int | None, int]:
        """Migrate to the newest schema, one version at a time in one transaction; returns
        (from, to)."""
        current = self.schema_version()
        if current is None:
            self.init()
            return None, SCHEMA_VERSION
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the database schema is version {current}, newer than this procflow "
                f"({SCHEMA_VERSION}); upgrade procflow"
            )
        if current == SCHEMA_VERSION:
            return current, current
        with self.tx() as tx:
            self._lock_schema(tx)
            found = self.schema_version() or current  # another worker may have migrated it
            for version in range(found + 1, SCHEMA_VERSION + 1):
                self._run_script(version)
            tx.meta_set("schema_version", str(SCHEMA_VERSION))
        return current, SCHEMA_VERSION

    def _lock_schema(self, tx: Tx) -> None:
        if self.dialect == "postgresql":
            tx.c.execute("SELECT pg_advisory_xact_lock(hashtext('procflow:schema'))")

    def _run_script(self, version: int) -> None:
        name = f"schema_{self.dialect}_{version}.sql"
        script = resources.files("procflow.store.sql").joinpath(name).read_text()
        if self.dialect == "postgresql":
            self.conn.executescript(script)
        else:  # executescript would commit: run the statements inside BEGIN IMMEDIATE
            for statement in _statements(script):
                self.conn.execute(statement)

    def ensure_ready(self) -> None:
        version = self.schema_version()
        if version is None:
            if (
                self.dialect == "sqlite"
                and self.path != ":memory:"
                and not Path(self.path).exists()
            ):
                raise StoreError(f"no procflow database at {self.path}; run `procflow db init`")
            self.init()
        elif version != SCHEMA_VERSION:
            self.upgrade()


class Tx:
    """Named queries. Every method is one or a few statements; none commits."""

    def __init__(self, conn: Any, dialect: str = "sqlite") -> None:
        self.c = conn
        self.dialect = dialect

    def notify(self) -> None:
        """Wake idle workers when this transaction commits (PostgreSQL ``NOTIFY``; on SQLite
        idle workers poll at most a second apart)."""
        if self.dialect == "postgresql":
            self.c.execute("SELECT pg_notify('procflow_wakeup', '')")

    # --- meta and clock ---------------------------------------------------------------------

    def meta_get(self, key: str) -> str | None:
        row = self.c.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def meta_set(self, key: str, value: str) -> None:
        self.c.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    # --- definitions ------------------------------------------------------------------------

    def version_by_hash(self, name: str, hash_: str) -> VersionRow | None:
        row = self.c.execute(
            "SELECT * FROM versions WHERE name=? AND hash=? ORDER BY version DESC LIMIT 1",
            (name, hash_),
        ).fetchone()
        return VersionRow(*row) if row else None

    def latest_version(self, name: str) -> VersionRow | None:
        row = self.c.execute(
            "SELECT v.* FROM versions v JOIN definitions d ON d.name=v.name AND d.latest=v.version "
            "WHERE d.name=?",
            (name,),
        ).fetchone()
        return VersionRow(*row) if row else None

    def version(self, version_id: int) -> VersionRow:
        row = self.c.execute("SELECT * FROM versions WHERE id=?", (version_id,)).fetchone()
        if row is None:
            raise StoreError(f"definition version {version_id} is missing from the database")
        return VersionRow(*row)

    def insert_version(
        self,
        name: str,
        dialect: str,
        hash_: str,
        file: str,
        project_dir: str,
        source: str,
        now: int,
    ) -> VersionRow:
        row = self.c.execute("SELECT latest FROM definitions WHERE name=?", (name,)).fetchone()
        number = (row[0] if row else 0) + 1
        new_id = self.c.execute(
            "INSERT INTO versions(name, version, dialect, hash, file, project_dir, source, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (name, number, dialect, hash_, file, project_dir, source, now),
        ).fetchone()[0]
        self.c.execute(
            "INSERT INTO definitions(name, dialect, enabled, latest) VALUES (?, ?, 1, ?) "
            "ON CONFLICT(name) DO UPDATE SET latest=excluded.latest",
            (name, dialect, number),
        )
        return self.version(int(new_id))

    def definitions(self) -> list[tuple[str, str, bool, int]]:
        rows = self.c.execute(
            "SELECT name, dialect, enabled, latest FROM definitions ORDER BY name"
        ).fetchall()
        return [(r[0], r[1], bool(r[2]), r[3]) for r in rows]

    def definition_enabled(self, name: str) -> bool | None:
        row = self.c.execute("SELECT enabled FROM definitions WHERE name=?", (name,)).fetchone()
        return None if row is None else bool(row[0])

    def set_enabled(self, name: str, enabled: bool) -> bool:
        cur = self.c.execute("UPDATE definitions SET enabled=? WHERE name=?", (int(enabled), name))
        return bool(cur.rowcount > 0)

    def versions_of(self, name: str) -> list[tuple[int, int, int]]:
        """(version, created_at, active runs) per version."""
        rows = self.c.execute(
            "SELECT v.version, v.created_at, "
            "(SELECT count(*) FROM runs r WHERE r.version_id=v.id AND r.status NOT IN "
            "('completed','cancelled','aborted')) FROM versions v WHERE v.name=? "
            "ORDER BY v.version",
            (name,),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def entities(self) -> dict[str, tuple[str, dict[str, Any]]]:
        rows = self.c.execute("SELECT name, app, declaration FROM entities").fetchall()
        return {r[0]: (r[1], json.loads(r[2])) for r in rows}

    def put_entity(self, name: str, app: str, version_id: int, declaration: dict[str, Any]) -> None:
        self.c.execute(
            "INSERT INTO entities(name, app, version_id, declaration) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET app=excluded.app, version_id=excluded.version_id, "
            "declaration=excluded.declaration",
            (name, app, version_id, _dumps(declaration)),
        )

    def entity_version(self, name: str) -> int | None:
        row = self.c.execute("SELECT version_id FROM entities WHERE name=?", (name,)).fetchone()
        return None if row is None else int(row[0])

    # --- records ----------------------------------------------------------------------------

    def record(self, entity: str, id_: int, *, lock: bool = False) -> RecordRow | None:
        """The record; ``lock``: locked until commit, for a read-modify-write (PostgreSQL;
        SQLite's write lock already serialises writers)."""
        row = self.c.execute(
            "SELECT entity, id, data, owner, created_at, updated_at FROM records "
            "WHERE entity=? AND id=?"
            + (" FOR UPDATE" if lock and self.dialect == "postgresql" else ""),
            (entity, id_),
        ).fetchone()
        return None if row is None else RecordRow(row[0], row[1], json.loads(row[2]), *row[3:])

    def records_by_id(self, entity: str, ids: Iterable[int]) -> dict[int, RecordRow]:
        """The records of ``entity`` among ``ids`` that exist, by id."""
        out: dict[int, RecordRow] = {}
        for chunk in _chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            rows = self.c.execute(
                "SELECT entity, id, data, owner, created_at, updated_at FROM records "
                f"WHERE entity=? AND id IN ({marks})",
                (entity, *chunk),
            ).fetchall()
            out.update((r[1], RecordRow(r[0], r[1], json.loads(r[2]), *r[3:])) for r in rows)
        return out

    def records(self, entity: str, limit: int = 1000) -> list[RecordRow]:
        rows = self.c.execute(
            "SELECT entity, id, data, owner, created_at, updated_at FROM records "
            "WHERE entity=? ORDER BY id LIMIT ?",
            (entity, limit),
        ).fetchall()
        return [RecordRow(r[0], r[1], json.loads(r[2]), *r[3:]) for r in rows]

    def record_exists(self, entity: str, id_: int) -> bool:
        row = self.c.execute(
            "SELECT 1 FROM records WHERE entity=? AND id=?", (entity, id_)
        ).fetchone()
        return row is not None

    def lock_deploys(self) -> None:
        """One deploy at a time until commit (PostgreSQL; SQLite's write lock already does):
        version numbers and the unchanged-source check are read, then written."""
        if self.dialect == "postgresql":
            self.c.execute("SELECT pg_advisory_xact_lock(hashtext('procflow:deploy'))")

    def lock_record_ids(self, entity: str) -> None:
        """Serialise id assignment and duplicate-id checks per entity until commit (PostgreSQL;
        SQLite's write lock already does)."""
        if self.dialect == "postgresql":
            self.c.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"records:{entity}",))

    def next_record_id(self, entity: str) -> int:
        self.lock_record_ids(entity)
        row = self.c.execute("SELECT max(id) FROM records WHERE entity=?", (entity,)).fetchone()
        return int(row[0] or 0) + 1

    def insert_record(
        self, entity: str, id_: int, data: dict[str, Any], owner: str | None, now: int
    ) -> None:
        self.c.execute(
            "INSERT INTO records(entity, id, data, owner, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (entity, id_, _dumps(data), owner, now, now),
        )

    def upsert_seed(self, entity: str, id_: int, data: dict[str, Any], now: int) -> None:
        self.c.execute(
            "INSERT INTO records(entity, id, data, owner, created_at, updated_at) "
            "VALUES (?, ?, ?, NULL, ?, ?) ON CONFLICT(entity, id) DO NOTHING",
            (entity, id_, _dumps(data), now, now),
        )

    def update_record(self, entity: str, id_: int, data: dict[str, Any], now: int) -> None:
        self.c.execute(
            "UPDATE records SET data=?, updated_at=? WHERE entity=? AND id=?",
            (_dumps(data), now, entity, id_),
        )

    def delete_record(self, entity: str, id_: int) -> None:
        self.c.execute("DELETE FROM records WHERE entity=? AND id=?", (entity, id_))

    # --- runs -------------------------------------------------------------------------------

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
                _dumps(run.state), run.seq,
            ),
        )  # fmt: skip
        return bool(cur.rowcount == 1)

    _RUN_COLS = (
        "id, version_id, name, dialect, status, started_at, ended_at, business_key, "
        "record_entity, record_id, start_key, state, output, error, seq"
    )

    @staticmethod
    def _run(row: Sequence[Any]) -> RunRow:
        return RunRow(
            row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9],
            row[10], json.loads(row[11]), _loads(row[12]), _loads(row[13]), row[14],
        )  # fmt: skip

    def run_for_update(self, run_id: str) -> RunRow | None:
        """The run, locked until commit (PostgreSQL; SQLite's write lock already serialises)."""
        lock = " FOR UPDATE" if self.dialect == "postgresql" else ""
        row = self.c.execute(
            f"SELECT {self._RUN_COLS} FROM runs WHERE id=?{lock}", (run_id,)
        ).fetchone()
        return None if row is None else self._run(row)

    def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        out: dict[str, RunRow] = {}
        for chunk in _chunks(list(run_ids), 500):
            marks = ",".join("?" * len(chunk))
            rows = self.c.execute(
                f"SELECT {self._RUN_COLS} FROM runs WHERE id IN ({marks})", chunk
            ).fetchall()
            out.update((r.id, r) for r in map(self._run, rows))
        return out

    def run(self, run_id: str) -> RunRow | None:
        row = self.c.execute(f"SELECT {self._RUN_COLS} FROM runs WHERE id=?", (run_id,)).fetchone()
        return None if row is None else self._run(row)

    def runs(self, status: str | None, name: str | None, limit: int = 1000) -> list[RunRow]:
        sql = f"SELECT {self._RUN_COLS} FROM runs WHERE 1=1"
        args: list[Any] = []
        if status:
            sql += " AND status=?"
            args.append(status)
        if name:
            sql += " AND name=?"
            args.append(name)
        sql += " ORDER BY started_at, id LIMIT ?"
        args.append(limit)
        return [self._run(r) for r in self.c.execute(sql, args).fetchall()]

    def runs_for_record(self, entity: str, id_: int) -> list[RunRow]:
        rows = self.c.execute(
            f"SELECT {self._RUN_COLS} FROM runs WHERE record_entity=? AND record_id=? "
            "ORDER BY started_at, id",
            (entity, id_),
        ).fetchall()
        return [self._run(r) for r in rows]

    def active_runs_for_record(self, entity: str, id_: int) -> list[RunRow]:
        return [r for r in self.runs_for_record(entity, id_) if r.status not in TERMINAL]

    _SAVE_RUN = (
        "UPDATE runs SET status=?, ended_at=?, state=?, output=?, error=?, seq=?, "
        "lease_owner=?, lease_until=? WHERE id=?"
    )

    def save_run(self, run: RunRow, lease_until: int | None, owner: str | None) -> None:
        self.save_runs([(run, lease_until, owner)])

    def save_runs(self, runs: Sequence[tuple[RunRow, int | None, str | None]]) -> None:
        """Each run's row with its lease (until, owner), in one ``executemany``."""
        self.c.executemany(
            self._SAVE_RUN,
            [
                (
                    run.status, run.ended_at, _dumps(run.state), _none_or_dumps(run.output),
                    _none_or_dumps(run.error), run.seq, owner, lease_until, run.id,
                )
                for run, lease_until, owner in runs
            ],
        )  # fmt: skip

    _HELD = " AND lease_owner=? AND lease_until>=? AND status IN ('running','waiting','failed')"
    _SAVE_HELD = (
        "UPDATE runs SET status=?, ended_at=?, state=?, output=?, error=?, seq=?, "
        "lease_owner=?, lease_until=? WHERE id=?" + _HELD
    )
    _SEQ_HELD = "UPDATE runs SET seq=? WHERE id=?" + _HELD
    # PostgreSQL: one statement for the whole batch (arrays unnested), not one per row.
    _HELD_PG = (
        " WHERE r.id=u.id AND r.lease_owner=? AND r.lease_until>=? "
        "AND r.status IN ('running','waiting','failed')"
    )
    _SAVE_HELD_PG = (
        "UPDATE runs AS r SET status=u.status, ended_at=u.ended_at, state=u.state, "
        "output=u.output, error=u.error, seq=u.seq, lease_owner=u.lease_owner, "
        "lease_until=u.lease_until FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], "
        "?::text[], ?::bigint[], ?::text[], ?::bigint[], ?::text[]) AS u(status, ended_at, "
        "state, output, error, seq, lease_owner, lease_until, id)" + _HELD_PG
    )
    _SEQ_HELD_PG = (
        "UPDATE runs AS r SET seq=u.seq FROM unnest(?::bigint[], ?::text[]) AS u(seq, id)"
        + _HELD_PG
    )

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
        pg = self.dialect == "postgresql"
        if full:
            rows = [
                (*image, run.seq, lease_owner, lease_until, run.id)
                for run, image, lease_until, lease_owner in full
            ]
            if pg:
                cur = self.c.execute_binary(self._SAVE_HELD_PG, (*_columns(rows, 9), owner, now))
            else:
                cur = self.c.executemany(self._SAVE_HELD, [(*r, owner, now) for r in rows])
            matched += cur.rowcount
        if seq_only:
            rows_seq = [(run.seq, run.id) for run in seq_only]
            if pg:
                cur = self.c.execute_binary(self._SEQ_HELD_PG, (*_columns(rows_seq, 2), owner, now))
            else:
                cur = self.c.executemany(self._SEQ_HELD, [(*r, owner, now) for r in rows_seq])
            matched += cur.rowcount
        return matched

    def savepoint(self, name: str) -> None:
        self.c.execute(f"SAVEPOINT {name}")

    def rollback_to(self, name: str) -> None:
        self.c.execute(f"ROLLBACK TO {name}")

    def leases_held(self, run_ids: Iterable[str], owner: str, now: int) -> set[str]:
        """The runs among ``run_ids`` whose lease ``owner`` still holds (and that still run)."""
        ids = list(run_ids)
        held: set[str] = set()
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            rows = self.c.execute(
                f"SELECT id FROM runs WHERE id IN ({marks}) AND lease_owner=? AND lease_until>=? "
                "AND status IN ('running','waiting','failed')",
                (*chunk, owner, now),
            ).fetchall()
            held.update(r[0] for r in rows)
        return held

    @property
    def _skip_locked(self) -> str:
        # PostgreSQL: concurrent claimers skip each other's rows instead of queueing on them.
        return " FOR UPDATE SKIP LOCKED" if self.dialect == "postgresql" else ""

    def claim_runs(self, owner: str, now: int, lease_until: int, limit: int) -> list[RunRow]:
        rows = self.c.execute(
            f"UPDATE runs SET lease_owner=?, lease_until=? WHERE id IN ("
            "SELECT id FROM runs WHERE status='running' AND (lease_until IS NULL OR lease_until<?) "
            f"LIMIT ?{self._skip_locked}) RETURNING {self._RUN_COLS}",
            (owner, lease_until, now, limit),
        ).fetchall()
        return [self._run(r) for r in rows]

    def renew_leases(self, owner: str, run_ids: Iterable[str], lease_until: int) -> None:
        """Extend the leases ``owner`` still holds (the heartbeat). A row locked meanwhile is
        skipped, never waited for: the lock is this worker's own commit (which renews a lease
        past half its time; the next beat renews the others) or a claim of a lease already
        expired. Waiting on the commit, whose run-row update may in turn wait on rows this
        statement has locked, deadlocks (PostgreSQL)."""
        for chunk in _chunks(list(run_ids), 500):
            marks = ",".join("?" * len(chunk))
            self.c.execute(
                "UPDATE runs SET lease_until=? WHERE id IN (SELECT id FROM runs WHERE "
                f"lease_owner=? AND id IN ({marks}){self._skip_locked})",
                (lease_until, owner, *chunk),
            )

    def release_leases(self, owner: str, run_ids: Iterable[str]) -> None:
        for chunk in _chunks(list(run_ids), 500):
            marks = ",".join("?" * len(chunk))
            self.c.execute(
                f"UPDATE runs SET lease_owner=NULL, lease_until=NULL WHERE lease_owner=? "
                f"AND id IN ({marks})",
                (owner, *chunk),
            )

    def lease_of(self, run_id: str) -> tuple[str | None, int | None]:
        row = self.c.execute(
            "SELECT lease_owner, lease_until FROM runs WHERE id=?", (run_id,)
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    # --- tokens -----------------------------------------------------------------------------

    @staticmethod
    def _token(row: Sequence[Any]) -> TokenRow:
        return TokenRow(
            row[0], row[1], row[2], row[3], row[4], row[5], row[6], _loads(row[7]),
            json.loads(row[8]),
        )  # fmt: skip

    def tokens(self, run_id: str) -> list[TokenRow]:
        rows = self.c.execute(
            "SELECT id, run_id, step, path, state, attempt, since, wait, data FROM tokens "
            "WHERE run_id=? ORDER BY id",
            (run_id,),
        ).fetchall()
        return [self._token(r) for r in rows]

    def tokens_of_runs(self, run_ids: Sequence[str]) -> list[TokenRow]:
        out: list[TokenRow] = []
        for chunk in _chunks(list(run_ids), 500):
            marks = ",".join("?" * len(chunk))
            rows = self.c.execute(
                "SELECT id, run_id, step, path, state, attempt, since, wait, data FROM tokens "
                f"WHERE run_id IN ({marks}) ORDER BY id",
                chunk,
            ).fetchall()
            out.extend(self._token(r) for r in rows)
        return out

    def insert_token(self, t: TokenRow) -> int:
        row = self.c.execute(
            "INSERT INTO tokens(run_id, step, path, state, attempt, since, wait, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (t.run_id, t.step, t.path, t.state, t.attempt, t.since, _none_or_dumps(t.wait),
             _dumps(t.data)),
        ).fetchone()  # fmt: skip
        t.id = int(row[0])
        return t.id

    _UPDATE_TOKENS_PG = (
        "UPDATE tokens AS t SET step=u.step, path=u.path, state=u.state, attempt=u.attempt, "
        "since=u.since, wait=u.wait, data=u.data FROM unnest(?::text[], ?::text[], ?::text[], "
        "?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::bigint[]) AS u(step, path, state, "
        "attempt, since, wait, data, id) WHERE t.id=u.id"
    )

    def update_tokens(self, tokens: Sequence[TokenRow]) -> None:
        rows = [
            (t.step, t.path, t.state, t.attempt, t.since, _none_or_dumps(t.wait), _dumps(t.data),
             t.id)
            for t in tokens
        ]  # fmt: skip
        if self.dialect != "postgresql":
            self.c.executemany(
                "UPDATE tokens SET step=?, path=?, state=?, attempt=?, since=?, wait=?, data=? "
                "WHERE id=?",
                rows,
            )
        elif rows:
            # One statement per batch; a token listed twice keeps its last image, as it would
            # row by row (an UPDATE ... FROM joins each target row to one source row only).
            last = list({r[7]: r for r in rows}.values())
            self.c.execute_binary(self._UPDATE_TOKENS_PG, _columns(last, 8))

    def delete_tokens(self, token_ids: Sequence[int]) -> None:
        if self.dialect == "postgresql":
            self.c.execute_binary(
                "DELETE FROM tokens WHERE id = ANY(?::bigint[])", [list(token_ids)]
            )
        else:
            self.c.executemany("DELETE FROM tokens WHERE id=?", [(i,) for i in token_ids])

    def delete_run_tokens(self, run_id: str) -> None:
        self.c.execute("DELETE FROM tokens WHERE run_id=?", (run_id,))

    # --- timers -----------------------------------------------------------------------------

    def insert_timers(self, timers: Sequence[tuple[str, int, str, int]]) -> None:
        """(run_id, token_id, kind, due_at) each."""
        self.c.executemany(
            "INSERT INTO timers(run_id, token_id, kind, due_at) VALUES (?, ?, ?, ?)", timers
        )

    def delete_timers_of_tokens(self, token_ids: Sequence[int]) -> None:
        if self.dialect == "postgresql":
            self.c.execute_binary(
                "DELETE FROM timers WHERE token_id = ANY(?::bigint[])", [list(token_ids)]
            )
        else:
            self.c.executemany("DELETE FROM timers WHERE token_id=?", [(i,) for i in token_ids])

    def delete_run_timers(self, run_id: str) -> None:
        self.c.execute("DELETE FROM timers WHERE run_id=?", (run_id,))

    def due_timers_free(self, now: int, wall: int, limit: int) -> list[TimerRow]:
        """Timers due by the engine clock ``now`` of runs no live worker holds (leases run on
        the wall clock ``wall``, so a frozen virtual clock never freezes a lease), oldest first."""
        rows = self.c.execute(
            "SELECT t.id, t.run_id, t.token_id, t.kind, t.due_at FROM timers t "
            "JOIN runs r ON r.id=t.run_id WHERE t.due_at<=? "
            "AND (r.lease_owner IS NULL OR r.lease_until<?) ORDER BY t.due_at, t.id LIMIT ?"
            + (" FOR UPDATE OF t, r SKIP LOCKED" if self.dialect == "postgresql" else ""),
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
        if self.dialect == "postgresql":
            self.c.execute_binary(
                "DELETE FROM timers WHERE id = ANY(?::bigint[])", [list(timer_ids)]
            )
        else:
            self.c.executemany("DELETE FROM timers WHERE id=?", [(i,) for i in timer_ids])

    def next_lease_expiry(self) -> int | None:
        """When the first lease on ready work runs out (a crashed worker's runs come back)."""
        row = self.c.execute(
            "SELECT min(lease_until) FROM runs WHERE status='running' AND lease_until IS NOT NULL"
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def next_due(self) -> int | None:
        row = self.c.execute("SELECT min(due_at) FROM timers").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def has_ready_runs(self, now: int) -> bool:
        row = self.c.execute(
            "SELECT 1 FROM runs WHERE status='running' AND (lease_until IS NULL OR lease_until<?) "
            "LIMIT 1",
            (now,),
        ).fetchone()
        return row is not None

    # --- history ----------------------------------------------------------------------------

    _HISTORY = (
        "INSERT INTO history(run_id, seq, at, type, step, path, attempt, data) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    _HISTORY_PG = (
        "INSERT INTO history(run_id, seq, at, type, step, path, attempt, data) "
        "SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::text[], ?::text[], "
        "?::text[], ?::bigint[], ?::text[])"
    )

    def append_history(self, run_id: str, entries: Sequence[HistoryRow]) -> None:
        self.append_history_many([(run_id, h) for h in entries])

    def append_history_many(self, rows: Sequence[tuple[str, HistoryRow]]) -> None:
        values = [
            (run_id, h.seq, h.at, h.type, h.step, h.path, h.attempt, _none_or_dumps(h.data))
            for run_id, h in rows
        ]
        if self.dialect != "postgresql":
            self.c.executemany(self._HISTORY, values)
        elif values:  # one statement for the batch (arrays unnested), not one per row
            self.c.execute_binary(self._HISTORY_PG, _columns(values, 8))

    def history(self, run_id: str) -> list[HistoryRow]:
        rows = self.c.execute(
            "SELECT seq, at, type, step, path, attempt, data FROM history WHERE run_id=? "
            "ORDER BY seq",
            (run_id,),
        ).fetchall()
        return [HistoryRow(r[0], r[1], r[2], r[3], r[4], r[5], _loads(r[6])) for r in rows]

    # --- vars -------------------------------------------------------------------------------

    def vars(self, run_id: str) -> dict[str, bytes]:
        rows = self.c.execute("SELECT name, value FROM vars WHERE run_id=?", (run_id,)).fetchall()
        return {r[0]: bytes(r[1]) for r in rows}

    def set_var(self, run_id: str, name: str, blob: bytes) -> None:
        self.c.execute(
            "INSERT INTO vars(run_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT(run_id, name) DO UPDATE SET value=excluded.value",
            (run_id, name, blob),
        )

    def clear_var(self, run_id: str, name: str) -> None:
        self.c.execute("DELETE FROM vars WHERE run_id=? AND name=?", (run_id, name))

    def clear_vars(self, run_id: str) -> list[str]:
        names = [r[0] for r in self.c.execute("SELECT name FROM vars WHERE run_id=?", (run_id,))]
        self.c.execute("DELETE FROM vars WHERE run_id=?", (run_id,))
        return names

    # --- outbox -----------------------------------------------------------------------------

    # --- events ----------------------------------------------------------------------------

    def lock_key(self, type_: str, keys: str) -> None:
        """Serialise, per correlation key, accepting an event with registering a wait (so an
        event and a wait with lookback never miss each other). SQLite has one writer anyway."""
        if self.dialect == "postgresql":
            self.c.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"{type_}\x1f{keys}",)
            )

    def insert_event(self, id_: str, type_: str, keys: str, data: Any, at: int) -> bool:
        """False when an event with this id was accepted before (a duplicate does nothing)."""
        cur = self.c.execute(
            "INSERT INTO events(id, type, keys, data, accepted_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (id_, type_, keys, _dumps(data), at),
        )
        return bool(cur.rowcount == 1)

    def lookback_event(
        self, type_: str, keys: str, since: int, run_id: str
    ) -> tuple[str, Any] | None:
        """The earliest event on (type, keys) accepted at or after ``since`` that has not
        reached ``run_id`` yet: (id, data)."""
        row = self.c.execute(
            "SELECT e.id, e.data FROM events e WHERE e.type=? AND e.keys=? AND e.accepted_at>=? "
            "AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id=e.id AND d.run_id=?) "
            "ORDER BY e.accepted_at, e.id LIMIT 1",
            (type_, keys, since, run_id),
        ).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def insert_delivery(self, event_id: str, run_id: str) -> None:
        self.c.execute(
            "INSERT INTO deliveries(event_id, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (event_id, run_id),
        )

    def prune_events(self, before: int) -> None:
        self.c.execute(
            "DELETE FROM deliveries WHERE event_id IN (SELECT id FROM events WHERE accepted_at<?)",
            (before,),
        )
        self.c.execute("DELETE FROM events WHERE accepted_at<?", (before,))

    def token(self, token_id: int) -> TokenRow | None:
        row = self.c.execute(
            "SELECT id, run_id, step, path, state, attempt, since, wait, data FROM tokens "
            "WHERE id=?",
            (token_id,),
        ).fetchone()
        return None if row is None else self._token(row)

    # --- waits (tokens parked on an event or a record write) ------------------------------

    def insert_waits(self, rows: Sequence[tuple[int, str, str, str, str, int]]) -> None:
        """(token_id, run_id, kind, type, keys, since) each; a token has at most one wait."""
        self.c.executemany(
            "INSERT INTO waits(token_id, run_id, kind, type, keys, since) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )

    def find_waits(self, type_: str, keys: str) -> list[tuple[int, str]]:
        """(token_id, run_id) of the waits on (type, keys): an indexed lookup, whatever the
        number of waiting runs."""
        rows = self.c.execute(
            "SELECT token_id, run_id FROM waits WHERE type=? AND keys=? ORDER BY token_id",
            (type_, keys),
        ).fetchall()
        return [(int(t), r) for t, r in rows]

    def take_waits(self, token_ids: Sequence[int]) -> set[int]:
        """Consume these waits; returns the token ids whose wait was still there (each wait is
        consumed once: a timeout or another event that got there first leaves nothing)."""
        taken: set[int] = set()
        for token_id in token_ids:
            row = self.c.execute(
                "DELETE FROM waits WHERE token_id=? RETURNING token_id", (token_id,)
            ).fetchone()
            if row is not None:
                taken.add(int(row[0]))
        return taken

    def delete_waits_of_tokens(self, token_ids: Sequence[int]) -> None:
        self.c.executemany("DELETE FROM waits WHERE token_id=?", [(i,) for i in token_ids])

    def delete_run_waits(self, run_id: str) -> None:
        self.c.execute("DELETE FROM waits WHERE run_id=?", (run_id,))

    # --- flow loop scopes ----------------------------------------------------------------

    def apply_scope_ops(self, run_id: str, ops: Sequence[tuple[str, str, int, Any]]) -> None:
        """In order: ``("put", path, n, data)`` upserts a row, ``("drop", path, 0, None)``
        deletes a loop's rows, ``("sweep", "", 0, None)`` deletes every row of the run."""
        for op, path, n, data in ops:
            if op == "put":
                self.c.execute(
                    "INSERT INTO scopes(run_id, path, n, data) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (run_id, path, n) DO UPDATE SET data=excluded.data",
                    (run_id, path, n, _dumps(data)),
                )
            elif op == "drop":
                self.c.execute("DELETE FROM scopes WHERE run_id=? AND path=?", (run_id, path))
            else:
                self.delete_run_scopes(run_id)

    def scopes(self, run_id: str, path: str) -> dict[int, Any]:
        rows = self.c.execute(
            "SELECT n, data FROM scopes WHERE run_id=? AND path=?", (run_id, path)
        ).fetchall()
        return {int(n): json.loads(data) for n, data in rows}

    def delete_run_scopes(self, run_id: str) -> None:
        self.c.execute("DELETE FROM scopes WHERE run_id=?", (run_id,))

    def add_outbox(
        self,
        channel: str,
        recipient: str,
        subject: str | None,
        body: str | None,
        run_id: str | None,
        step: str | None,
        now: int,
    ) -> int:
        row = self.c.execute(
            "INSERT INTO outbox(channel, recipient, subject, body, run_id, step, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (channel, recipient, subject, body, run_id, step, now),
        ).fetchone()
        return int(row[0])

    def outbox(self) -> list[OutboxRow]:
        rows = self.c.execute(
            "SELECT id, channel, recipient, subject, body, run_id, step, created_at FROM outbox "
            "ORDER BY id"
        ).fetchall()
        return [OutboxRow(*r) for r in rows]

    # --- tasks ------------------------------------------------------------------------------

    _TASK_COLS = (
        "id", "run_id", "token_id", "step", "assignee", "assignee_kind", "form", "actions",
        "fields", "record_entity", "record_id", "status", "created_at", "ended_at", "action",
        "done_by", "data",
    )  # fmt: skip

    def _task(self, row: Sequence[Any]) -> dict[str, Any]:
        """A task row as a dict keyed by column, its JSON columns decoded."""
        task = dict(zip(self._TASK_COLS, row, strict=True))
        task["actions"] = json.loads(task["actions"])
        task["fields"] = json.loads(task["fields"])
        task["data"] = _loads(task["data"])
        return task

    def insert_task(
        self,
        *,
        run_id: str,
        token_id: int,
        step: str,
        assignee: str,
        assignee_kind: str,
        form: str | None,
        actions: Sequence[str],
        fields: Sequence[str],
        record: tuple[str, int] | None,
        now: int,
    ) -> int:
        entity, record_id = record if record is not None else (None, None)
        row = self.c.execute(
            "INSERT INTO tasks(run_id, token_id, step, assignee, assignee_kind, form, actions, "
            "fields, record_entity, record_id, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?) RETURNING id",
            (run_id, token_id, step, assignee, assignee_kind, form, _dumps(list(actions)),
             _dumps(list(fields)), entity, record_id, now),
        ).fetchone()  # fmt: skip
        return int(row[0])

    def task(self, task_id: int, *, lock: bool = False) -> dict[str, Any] | None:
        """The task; ``lock``: locked until commit, so two completions of one task queue up and
        the second finds it closed (PostgreSQL; SQLite's write lock already serialises)."""
        row = self.c.execute(
            f"SELECT {', '.join(self._TASK_COLS)} FROM tasks WHERE id=?"
            + (" FOR UPDATE" if lock and self.dialect == "postgresql" else ""),
            (task_id,),
        ).fetchone()
        return None if row is None else self._task(row)

    def open_tasks(
        self,
        *,
        assignee: str | None = None,
        run_id: str | None = None,
        token_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Open tasks, oldest first, optionally of one assignee, run or token."""
        sql = f"SELECT {', '.join(self._TASK_COLS)} FROM tasks WHERE status='open'"
        args: list[Any] = []
        for column, value in (("assignee", assignee), ("run_id", run_id), ("token_id", token_id)):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(value)
        rows = self.c.execute(sql + " ORDER BY id", args).fetchall()
        return [self._task(r) for r in rows]

    def end_task(
        self,
        task_id: int,
        status: str,
        now: int,
        *,
        action: str | None = None,
        done_by: str | None = None,
        data: Any = None,
    ) -> None:
        """Close an open task: ``completed`` (with action, who, the form data) or ``withdrawn``."""
        self.c.execute(
            "UPDATE tasks SET status=?, ended_at=?, action=?, done_by=?, data=? "
            "WHERE id=? AND status='open'",
            (status, now, action, done_by, _none_or_dumps(data), task_id),
        )

    def find_record_waits(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, str]]:
        """(token_id, run_id) of the record waits on any of the (type, keys) ``pairs``: one
        indexed query for all the ways a written record can belong to a waiting run."""
        if not pairs:
            return []
        where = " OR ".join("(type=? AND keys=?)" for _ in pairs)
        rows = self.c.execute(
            f"SELECT token_id, run_id FROM waits WHERE kind='record' AND ({where}) "
            "ORDER BY token_id",
            [value for pair in pairs for value in pair],
        ).fetchall()
        return [(int(t), r) for t, r in rows]


RunImage = tuple[str, int | None, str, str | None, str | None]


def run_image(run: RunRow) -> RunImage:
    """The run row's rarely changing columns as stored (status, ended_at, state, output, error):
    equal images mean the row needs no rewrite of them."""
    return (
        run.status, run.ended_at, _dumps(run.state), _none_or_dumps(run.output),
        _none_or_dumps(run.error),
    )  # fmt: skip


def _statements(script: str) -> list[str]:
    """The statements of a schema file (no ``;`` inside our statements or comments)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def _none_or_dumps(value: Any) -> str | None:
    return None if value is None else _dumps(value)


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows → one list per column (the arrays a PostgreSQL ``unnest`` statement takes)."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
