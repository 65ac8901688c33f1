"""PostgreSQL through psycopg 3: several worker processes on several machines share one store.

The store's queries are written once with ``?`` placeholders; :class:`PgConnection` translates
them to psycopg's ``%s`` (cached per statement text) behind the subset of ``sqlite3.Connection``
the store uses. Connections come from a process-wide pool per URL (several worker threads, the
heartbeat and CLI calls share it). Claimers lock with ``FOR UPDATE SKIP LOCKED``, batches go as
one statement over unnested arrays, and idle workers wait on ``LISTEN`` instead of polling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from procflow.errors import MissingExtraError, StoreError, UsageError

# This module is imported only for a PostgreSQL URL (``store.open_backend``): the core installs
# without psycopg, and says which extra brings it.
try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # psycopg, its libpq binding or its pool is not installed
    raise MissingExtraError("PostgreSQL", "postgres") from exc

from procflow.store.backend import schema_script
from procflow.store.url import Dialect, StoreUrl

__all__ = [
    "CONNECT_TIMEOUT", "WAKEUP_CHANNEL", "Listener", "PgConnection", "PostgresBackend",
    "is_conflict", "pool",
]  # fmt: skip

WAKEUP_CHANNEL = "procflow_wakeup"
# Seconds to wait for a server before giving up (libpq's connect_timeout, unless the URL sets
# it): an unreachable host fails a command in seconds, not after the pool's 30 s wait.
CONNECT_TIMEOUT = 5
_WAIT_SLICE = 0.2  # seconds: how soon a listening worker notices a stop request
_CONFLICTS = ("40P01", "40001")  # deadlock_detected, serialization_failure
_pools: dict[str, ConnectionPool[psycopg.Connection[Any]]] = {}
_pools_lock = threading.Lock()


# Both return bytes, the form psycopg parses a query from: the same cached object each time,
# so neither is the text encoded nor its hash computed again on every execution.
@lru_cache(maxsize=512)
def translate(sql: str) -> bytes:
    """``?`` → ``%s`` and ``%`` → ``%%`` (no query of ours has a ``?`` inside a string literal)."""
    return sql.replace("%", "%%").replace("?", "%s").encode()


@lru_cache(maxsize=64)
def translate_binary(sql: str) -> bytes:
    """As :func:`translate`, with every parameter sent in binary (``%b``)."""
    return sql.replace("%", "%%").replace("?", "%b").encode()


def pool(url: str) -> ConnectionPool[psycopg.Connection[Any]]:
    """The process-wide pool of ``url`` (keyed by the URL as given, connecting to its conninfo)."""
    with _pools_lock:
        found = _pools.get(url)
        if found is None:
            location = StoreUrl.parse(url)
            kwargs = connect_options(location)
            # One connection first, in the open: the pool would retry a refused connection in
            # the background and only say "timeout" after 30 s; this says why, at once.
            psycopg_connect(location, kwargs).close()
            found = ConnectionPool(
                location.conninfo, min_size=1, max_size=32, kwargs=kwargs, open=True,
                name="procflow",
            )  # fmt: skip
            _pools[url] = found
        return found


def connect_options(url: StoreUrl) -> dict[str, Any]:
    """psycopg's connection options for ``url``: autocommit, and a connect timeout unless the
    URL gives its own."""
    try:
        given = conninfo_to_dict(url.conninfo)
    except psycopg.Error as exc:
        raise UsageError(f"malformed database URL [{url.shown}]: {exc}") from None
    timeout = {} if "connect_timeout" in given else {"connect_timeout": CONNECT_TIMEOUT}
    return {"autocommit": True, **timeout}


def psycopg_connect(url: StoreUrl, options: dict[str, Any]) -> psycopg.Connection[Any]:
    """A new connection to ``url``, or a one-line error naming the server and why."""
    try:
        return psycopg.connect(url.conninfo, **options)
    except psycopg.Error as exc:
        why = " ".join(str(exc).removeprefix("connection failed:").split())
        if isinstance(exc, psycopg.ProgrammingError):  # libpq refused the URL's options
            raise UsageError(f"malformed database URL [{url.shown}]: {why}") from None
        if 'database "' in why and "does not exist" in why:  # a mistyped name: the request's
            raise UsageError(
                f"no procflow store at {url.shown}: the database does not exist; create it "
                "(CREATE DATABASE), then run `procflow db init`"
            ) from None
        raise StoreError(f"cannot connect to PostgreSQL at {url.shown}: {why}") from exc


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL breaking a deadlock or a serialisation conflict."""
    sqlstate = getattr(getattr(exc, "diag", None), "sqlstate", None) or getattr(
        exc, "sqlstate", None
    )
    return sqlstate in _CONFLICTS


class PgConnection:
    """The subset of ``sqlite3.Connection`` the store uses, on a pooled psycopg connection."""

    def __init__(self, url: str) -> None:
        self._pool = pool(url)
        self.conn = self._pool.getconn()
        # One cursor for every statement, as sqlite3's connection-level execute would not:
        # a new psycopg cursor copies the adapters and looks up each parameter's dumper anew
        # (a quarter of the client's CPU of a small statement). The store reads each result
        # before its next statement on the connection, which is what makes sharing it sound.
        self._cursor = self.conn.cursor()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self._cursor.execute(translate(sql), params)

    def execute_binary(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[Any]:
        """Parameters in binary: the store's batch statements pass arrays (``unnest``), and an
        array of text in binary needs no escaping (some 20 times cheaper to build than text)."""
        return self._cursor.execute(translate_binary(sql), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        cur = self.conn.cursor()
        batch = list(rows)
        if batch:
            cur.executemany(translate(sql), batch)
        return cur

    def executescript(self, script: str) -> None:
        # Without parameters psycopg sends the text as one simple query: many statements at once
        # (never prepared: a prepared statement holds one).
        self._cursor.execute(script.encode(), prepare=False)

    def close(self) -> None:
        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self.conn.rollback()
        self._pool.putconn(self.conn)


class Listener:
    """A dedicated connection that LISTENs, so an idle worker sleeps until woken."""

    def __init__(self, url: str) -> None:
        location = StoreUrl.parse(url)
        # psycopg's own errors here, not psycopg_connect's: a worker tells a database that is
        # down for a while (it backs off and listens again) by them.
        self.conn = psycopg.connect(location.conninfo, **connect_options(location))
        self.conn.execute(f"LISTEN {WAKEUP_CHANNEL}")

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when woken by a notification."""
        woken = False
        for _ in self.conn.notifies(timeout=timeout, stop_after=1):
            woken = True
        if woken:  # one wake-up is enough: drain the rest without blocking
            for _ in self.conn.notifies(timeout=0):
                pass
        return woken

    def close(self) -> None:
        self.conn.close()


class PostgresBackend:
    """A PostgreSQL database opened for the store (see :class:`procflow.store.backend.Backend`)."""

    dialect: Dialect = "postgresql"
    begin = "BEGIN"
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    # NOTIFY wakes idle workers at once; the poll only bounds the damage of a lost wake-up.
    idle_poll_seconds = 5.0
    notifies = True
    key_lock = "pg_advisory_xact_lock(hashtextextended(?, 0))"
    arrays = True
    writes_in_with = True

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        self.conn: Any = PgConnection(url.url)
        self._listener: Listener | None = None
        self._notify_at_commit = False

    def batch(
        self,
        row_sql: str,
        array_sql: str,
        rows: Sequence[Sequence[Any]],
        tail: Sequence[Any] = (),
    ) -> int:
        # One statement for the whole batch (arrays unnested), not one round trip per row.
        if not rows:
            return 0
        if len(rows) == 1:  # the row's own statement: about half the cost of arrays of one
            return int(self.conn.execute(row_sql, (*rows[0], *tail)).rowcount)
        columns = [list(column) for column in zip(*rows, strict=True)]
        return int(self.conn.execute_binary(array_sql, (*columns, *tail)).rowcount)

    def advisory_lock(self, key: str, *, wide: bool = False) -> None:
        if wide:
            self.conn.execute(f"SELECT {self.key_lock}", (key,))
        else:
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (key,))

    def notify(self) -> None:
        # PostgreSQL sends a notification at commit whenever it was asked for in the
        # transaction: asking with the COMMIT itself saves a round trip.
        if self.conn.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            self.conn.execute(f"NOTIFY {WAKEUP_CHANNEL}")
        else:
            self._notify_at_commit = True

    def commit(self) -> None:
        if self._notify_at_commit:
            self._notify_at_commit = False
            self.conn.executescript(f"NOTIFY {WAKEUP_CHANNEL}; COMMIT")
        else:
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self._notify_at_commit = False
        self.conn.execute("ROLLBACK")

    def is_conflict(self, exc: BaseException) -> bool:
        return is_conflict(exc)

    def is_unavailable(self, exc: BaseException) -> bool:
        import psycopg
        from psycopg_pool import PoolTimeout

        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout))

    def table_exists(self, name: str) -> bool:
        # A catalog query, not to_regclass(): that reads the backend's name cache, which still
        # says "no such table" after another session's schema commit seen mid-transaction.
        row = self.conn.execute(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
            "AND tablename = ?",
            (name,),
        ).fetchone()
        return row is not None

    def run_schema_script(self, version: int) -> None:
        self.conn.executescript(schema_script(self.dialect, version))

    def wait_for_wakeup(self, seconds: float, stop: threading.Event | None) -> bool:
        if self._listener is None:
            # Listen first, then let the caller look for work again before it sleeps: a
            # notification sent meanwhile is then either seen by that look or queued here.
            self._listener = Listener(self.url.url)
            return False
        deadline = time.monotonic() + seconds
        while stop is None or not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            # In slices, so a stop request is noticed within one; a notification ends it at once.
            if self._listener.wait(min(_WAIT_SLICE, left)):
                return True
        return False

    def close(self) -> None:
        try:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        finally:
            self.conn.close()
