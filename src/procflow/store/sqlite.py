"""SQLite: one file, WAL mode, one writer at a time.

``BEGIN IMMEDIATE`` takes the write lock when a transaction opens, so writers queue up front and
never deadlock on a lock upgrade; that same lock serialises every read-modify-write, which is why
row locks and advisory locks are no-ops here. There is no ``NOTIFY``: an idle worker sleeps at
most a second, so work another process made ready is seen within it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from procflow.store.backend import schema_script, statements
from procflow.store.url import Dialect, StoreUrl

__all__ = ["SqliteBackend"]


class SqliteBackend:
    """A SQLite database opened for the store (see :class:`procflow.store.backend.Backend`)."""

    dialect: Dialect = "sqlite"
    begin = "BEGIN IMMEDIATE"
    for_update = ""
    skip_locked = ""
    idle_poll_seconds = 1.0

    def __init__(self, url: StoreUrl) -> None:
        self.conn: Any = sqlite3.connect(
            url.sqlite_path,
            isolation_level=None,
            timeout=30.0,
            check_same_thread=False,
            uri=url.sqlite_uri,
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA secure_delete=ON")
        self.conn.execute("PRAGMA foreign_keys=OFF")

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

    def is_conflict(self, exc: BaseException) -> bool:
        return False  # one writer at a time: no deadlock to break

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
