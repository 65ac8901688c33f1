"""SQLite: one file, WAL mode, one writer at a time.

``BEGIN IMMEDIATE`` takes the write lock when a transaction opens, so writers queue up front and
never deadlock on a lock upgrade; that same lock serialises every read-modify-write, which is why
row locks and advisory locks are no-ops here. There is no ``NOTIFY``: an idle worker sleeps at
most a second, so work another process made ready is seen within it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from procflow.errors import StoreError, UsageError
from procflow.store.backend import schema_script, statements
from procflow.store.url import Dialect, StoreUrl, no_store_here

__all__ = ["SqliteBackend"]


class SqliteBackend:
    """A SQLite database opened for the store (see :class:`procflow.store.backend.Backend`)."""

    dialect: Dialect = "sqlite"
    begin = "BEGIN IMMEDIATE"
    for_update = ""
    skip_locked = ""
    idle_poll_seconds = 1.0
    notifies = False
    key_lock = ""  # BEGIN IMMEDIATE already made the transaction the only writer
    arrays = False
    writes_in_with = False  # SQLite has no data-modifying CTEs (nor round trips to save)

    def __init__(self, url: StoreUrl, *, create: bool = True) -> None:
        """Open the database ``url`` names; without ``create``, only one that holds a store
        (a missing file is refused before SQLite would create it)."""
        if url.sqlite_file is not None:
            _check_file(url, create)
        try:
            self.conn: Any = sqlite3.connect(
                url.sqlite_path,
                isolation_level=None,
                timeout=30.0,
                check_same_thread=False,
                uri=url.sqlite_uri,
            )
        except sqlite3.Error as exc:  # a name the system refuses (too long, say)
            raise _open_error(url, exc) from None
        try:
            # Looked at before the first write (WAL is written into the file): a database
            # that holds no store is left exactly as it was.
            if not create and not self.table_exists("meta"):
                raise no_store_here(url, "the database holds no procflow schema")
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA secure_delete=ON")
            self.conn.execute("PRAGMA foreign_keys=OFF")
        except sqlite3.Error as exc:
            self.conn.close()
            raise _open_error(url, exc) from None
        except BaseException:
            self.conn.close()
            raise

    def batch(
        self,
        row_sql: str,
        array_sql: str,
        rows: Sequence[Sequence[Any]],
        tail: Sequence[Any] = (),
    ) -> int:
        # Row by row: executemany reuses one prepared statement, and SQLite has no arrays.
        if tail:
            rows = [(*row, *tail) for row in rows]
        return int(self.conn.executemany(row_sql, rows).rowcount)

    def advisory_lock(self, key: str, *, wide: bool = False) -> None:
        pass  # BEGIN IMMEDIATE already made this transaction the only writer

    def notify(self) -> None:
        pass  # nothing to send: idle workers poll (idle_poll_seconds)

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def is_conflict(self, exc: BaseException) -> bool:
        return False  # one writer at a time: no deadlock to break

    def is_unavailable(self, exc: BaseException) -> bool:
        return isinstance(exc, (sqlite3.OperationalError, sqlite3.InterfaceError))

    def table_exists(self, name: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
        ).fetchone()
        return row is not None

    def run_schema_script(self, version: int) -> None:
        # Not executescript: it commits first, and the script must run inside BEGIN IMMEDIATE.
        for statement in statements(schema_script(self.dialect, version)):
            self.conn.execute(statement)

    def wait_for_wakeup(self, seconds: float, stop: threading.Event | None) -> bool:
        """Sleep ``seconds`` (or until ``stop`` is set); never woken by a notification."""
        seconds = max(0.0, seconds)
        if stop is not None:
            stop.wait(seconds)
        else:
            time.sleep(seconds)
        return False

    def close(self) -> None:
        self.conn.close()


def _check_file(url: StoreUrl, create: bool) -> None:
    """Refuse a path SQLite cannot use as a store file, naming what is wrong with it."""
    assert url.sqlite_file is not None
    path = url.sqlite_file
    if os.path.isdir(path):
        raise UsageError(f"{url.shown}: {path} is a folder, not a SQLite database file")
    if os.path.exists(path):
        if not create and os.path.getsize(path) == 0:
            raise no_store_here(url, f"{path} is an empty file")
        return
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"{url.shown}: the folder {folder} does not exist")
    if not create:
        raise no_store_here(url, f"{path} does not exist")


def _open_error(url: StoreUrl, exc: sqlite3.Error) -> Exception:
    """A SQLite error met while opening, as a procflow error: the file named is not a database
    (or cannot be opened) is the request's fault; anything else is the database's."""
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_NOTADB":
        return UsageError(f"{url.shown}: {url.sqlite_file} is not a SQLite database")
    if name in ("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH"):
        return UsageError(f"{url.shown}: cannot open the database: {exc}")
    return StoreError(f"{url.shown}: the database cannot be used: {exc}")
