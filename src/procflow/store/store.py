"""The store: the only part of procflow that speaks SQL.

A :class:`Store` opens a database by URL and hands out transactions (:meth:`Store.tx`); a
:class:`Tx` offers one named method per query. The engine composes them, so a state change is
always exactly one transaction. The queries are written once, with ``?`` placeholders; what the
dialects do differently is the backend's (:mod:`procflow.store.backend`).

Module map: ``url`` (store URLs), ``backend`` (the dialect protocol, schema scripts), ``sqlite``
and ``pg`` (the two backends), ``queries/*`` (the queries, one module per group of tables),
``tx`` (:class:`Tx`, all the groups in one), ``rows`` (the plain rows queries return), ``codec``
(JSON columns).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from procflow.config import DEFAULT_DATABASE_URL
from procflow.errors import StoreConflict, StoreError
from procflow.store.backend import SCHEMA_VERSION, Backend
from procflow.store.queries.runrows.runs import RunImage, run_image
from procflow.store.sqlite import SqliteBackend
from procflow.store.tx import Tx
from procflow.store.url import StoreUrl, no_store_here

__all__ = [
    "DEFAULT_URL",
    "SCHEMA_VERSION",
    "RunImage",
    "Store",
    "StoreConflict",
    "StoreError",
    "Tx",
    "open_backend",
    "run_image",
]

DEFAULT_URL = DEFAULT_DATABASE_URL
_VERSION = re.compile(r"[1-9][0-9]{0,8}")  # a schema version as meta stores it


def open_backend(url: StoreUrl, *, create: bool = True) -> Backend:
    """Connect to the database ``url`` names, with the backend of its dialect (``create``: a
    SQLite file may be made; see :class:`Store`)."""
    # The one dialect test outside the backends: which backend to make.
    if url.dialect == "postgresql":
        # Imported on demand: psycopg costs start-up time that a SQLite store never needs.
        from procflow.store.pg import PostgresBackend

        return PostgresBackend(url)
    return SqliteBackend(url, create=create)


class Store:
    """One connection to one database. Not shared between threads: open one per thread.

    With ``create`` (the default) the database may hold no store yet, and a SQLite file that
    does not exist is made, for :meth:`init` to fill. Without it, only a database that holds a
    store opens: anything else is refused (:class:`UsageError`, exit 2) and left untouched.
    """

    def __init__(self, url: str = DEFAULT_URL, *, create: bool = True) -> None:
        self.url = url
        self.location = StoreUrl.parse(url)
        self.backend = open_backend(self.location, create=create)
        if not create and not self.backend.table_exists("meta"):
            self.backend.close()
            raise no_store_here(self.location, "the database holds no procflow schema")
        self.dialect: str = self.backend.dialect
        self.path = self.location.sqlite_path  # "" on PostgreSQL
        self.conn = self.backend.conn
        self._begin = self.backend.begin
        self._queries = Tx(self.backend)  # stateless beyond its connection: one serves all
        self._tx_depth = 0

    def close(self) -> None:
        """Close the connection (and the wake-up listener, if :meth:`wait_for_wakeup` made one)."""
        self.backend.close()

    # --- transactions ---------------------------------------------------------------------

    @contextmanager
    def tx(self) -> Iterator[Tx]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``, one writer at a time); a nested
        ``tx()`` joins the open one."""
        if self._tx_depth:
            yield self._queries
            return
        self.conn.execute(self._begin)
        self._tx_depth = 1
        try:
            yield self._queries
        except BaseException as exc:
            self.backend.rollback()
            if self.backend.is_conflict(exc):
                raise StoreConflict(
                    "a concurrent change to the same run or record conflicted with this one; "
                    "nothing was changed, try again"
                ) from exc
            raise
        else:
            self.backend.commit()
        finally:
            self._tx_depth = 0

    @property
    def in_tx(self) -> bool:
        """Whether a :meth:`tx` is open on this connection (a new one would join it)."""
        return self._tx_depth > 0

    def read(self) -> Tx:
        """Queries outside a transaction (each statement sees the latest commit)."""
        return self._queries

    # --- waiting for work -------------------------------------------------------------------

    def unavailable(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the store is not answering (as opposed to refusing the data):
        a worker hands its runs back and backs off, then tries again."""
        if isinstance(exc, StoreConflict):
            return False
        return isinstance(exc, (StoreError, OSError)) or self.backend.is_unavailable(exc)

    @property
    def notifies(self) -> bool:
        """Whether a commit's wake-up reaches idle workers of other sessions."""
        return self.backend.notifies

    @property
    def idle_poll_seconds(self) -> float:
        """How long an idle worker may sleep without a wake-up before it looks for work again:
        1 s on SQLite (no notifications: the bound on noticing another process's work), 5 s on
        PostgreSQL (NOTIFY wakes it at once; the poll only bounds a lost wake-up)."""
        return self.backend.idle_poll_seconds

    def wait_for_wakeup(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Wait up to ``seconds`` for another transaction's :meth:`Tx.notify` to commit.

        Returns True as soon as a notification arrives, False when the time ran out or ``stop``
        was set (checked at least every 0.2 s). PostgreSQL LISTENs on a connection of its own,
        made by the first call, which returns False at once without waiting: the caller looks
        for work again before its next wait, so work made ready before the listening began is
        found by that look, and work made ready after it wakes the next wait. SQLite has no
        notifications: it sleeps ``seconds`` (or until ``stop``) and returns False. The
        listener lives until :meth:`close`.
        """
        return self.backend.wait_for_wakeup(seconds, stop)

    # --- schema ---------------------------------------------------------------------------

    def schema_version(self) -> int | None:
        """The store's schema version; None when the database holds no store. A version that
        makes no sense (not a whole number from 1, or missing beside the meta table) is a
        damaged store: :class:`StoreError`, before anything reads or writes by it."""
        if not self.backend.table_exists("meta"):
            return None
        got = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        text = None if got is None else str(got[0])
        if text is None or not _VERSION.fullmatch(text):
            raise StoreError(
                f"{self.location.shown}: the store's schema version is "
                f"{'missing' if text is None else f'[{text[:40]}]'}, not a version procflow "
                "knows; the store is damaged (its meta table), so nothing was done"
            )
        return int(text)

    def init(self, *, virtual_clock: bool = False, now: int = 0) -> bool:
        """Create the schema; returns False when it already existed (then nothing changes)."""
        if self.schema_version() is not None:
            return False
        with self.tx() as tx:
            # Workers starting at once on an empty database: one creates the schema (DDL and
            # meta in one transaction), the others wait for its lock and then find it made.
            self.backend.advisory_lock("procflow:schema")
            if self.schema_version() is not None:
                return False
            for version in range(1, SCHEMA_VERSION + 1):
                self.backend.run_schema_script(version)
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
            self.backend.advisory_lock("procflow:schema")
            found = self.schema_version() or current  # another worker may have migrated it
            for version in range(found + 1, SCHEMA_VERSION + 1):
                self.backend.run_schema_script(version)
            tx.meta_set("schema_version", str(SCHEMA_VERSION))
        return current, SCHEMA_VERSION

    def ensure_ready(self, *, create: bool = True) -> None:
        """Migrate an older store; create the schema of a new one (``create``) or refuse it."""
        version = self.schema_version()
        if version is None:
            if not create:
                raise no_store_here(self.location, "the database holds no procflow schema")
            self.init()
        elif version != SCHEMA_VERSION:
            self.upgrade()
