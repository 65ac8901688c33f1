"""What differs between the SQL dialects, behind one object per backend.

The queries (``procflow.store.queries``) are written once, with ``?`` placeholders, and hold no
dialect test: where PostgreSQL and SQLite need different SQL, they ask the backend, which is
either a SQL fragment (``for_update``, ``skip_locked``, ``key_lock``), an operation (``batch``,
``advisory_lock``, ``notify``) or what the SQL may do (``arrays``, ``writes_in_with``). The
backend also owns the connection, the schema scripts, how a transaction ends, how a conflict is
recognised and how an idle worker waits for a wake-up.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any, Protocol

from procflow.store.url import Dialect

__all__ = ["SCHEMA_VERSION", "Backend", "schema_script", "statements"]

SCHEMA_VERSION = 9  # schema_<dialect>_1.sql creates; each later file migrates one step


class Backend(Protocol):
    """One open database of one dialect. Not shared between threads, like the store."""

    dialect: Dialect
    conn: Any
    """The connection: ``execute(sql, params)`` and ``executemany`` with ``?`` placeholders."""
    begin: str
    """The statement that opens a write transaction."""
    for_update: str
    """Appended to a ``SELECT``: lock the rows read until commit (for a read-modify-write)."""
    skip_locked: str
    """Appended to a ``SELECT``: lock the rows read, skipping those another transaction holds
    (concurrent claimers pass each other instead of queueing)."""
    idle_poll_seconds: float
    """How long an idle worker may sleep before looking for work again without a wake-up."""
    notifies: bool
    """Whether :meth:`notify` reaches idle workers in other sessions (PostgreSQL's ``NOTIFY``):
    a worker then need not look for work it would be woken for."""
    key_lock: str
    """A SQL expression of one parameter, the key, that takes ``advisory_lock(key, wide=True)``
    inside the statement it is part of (so the lock costs no round trip of its own); empty
    where that lock is a no-op."""
    arrays: bool
    """Whether a statement may take a list as one array parameter (``= ANY(?)``, ``unnest``):
    its text then stays the same whatever the list's length. Else the list is spelled out,
    ``IN (?, ?, ...)``."""
    writes_in_with: bool
    """Whether a ``WITH`` clause may hold ``INSERT``, ``UPDATE`` and ``DELETE`` (PostgreSQL's
    data-modifying CTEs): several writes, or a write and a read after it, then go to the
    database as one statement, one round trip. Where a statement costs no round trip (SQLite,
    in the process) they go one by one."""

    def batch(
        self,
        row_sql: str,
        array_sql: str,
        rows: Sequence[Sequence[Any]],
        tail: Sequence[Any] = (),
    ) -> int:
        """Run a statement for every row; returns the rows changed. ``row_sql`` takes one row's
        values then ``tail``; ``array_sql`` takes the whole batch at once, one array per column
        (``unnest``), then ``tail``. A backend runs whichever form is faster for it."""
        ...

    def advisory_lock(self, key: str, *, wide: bool = False) -> None:
        """Serialise the transactions that take ``key`` until commit (``wide``: a 64-bit hash
        of the key, for keys many and varied). A no-op where one writer at a time already
        serialises them."""
        ...

    def notify(self) -> None:
        """Wake idle workers when the current transaction commits (outside a transaction: at
        once)."""
        ...

    def commit(self) -> None:
        """Commit the open transaction (and send the wake-up :meth:`notify` asked for)."""
        ...

    def rollback(self) -> None:
        """Roll the open transaction back (and forget the wake-up :meth:`notify` asked for)."""
        ...

    def is_conflict(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the database rolled the transaction back to break a deadlock
        or a serialisation conflict (so repeating it is safe)."""
        ...

    def is_unavailable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the database failing (unreachable, locked, out of disk) rather
        than something about the data: a worker backs off and tries again."""
        ...

    def table_exists(self, name: str) -> bool: ...

    def run_schema_script(self, version: int) -> None:
        """Run the schema script of ``version`` inside the open transaction."""
        ...

    def wait_for_wakeup(self, seconds: float, stop: threading.Event | None) -> bool:
        """See :meth:`procflow.store.store.Store.wait_for_wakeup`."""
        ...

    def close(self) -> None: ...


def schema_script(dialect: Dialect, version: int) -> str:
    """The text of ``schema_<dialect>_<version>.sql``: version 1 creates the schema, each later
    one migrates it one step."""
    name = f"schema_{dialect}_{version}.sql"
    return resources.files("procflow.store.sql").joinpath(name).read_text()


def statements(script: str) -> list[str]:
    """The statements of a schema file (no ``;`` inside our statements or comments)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
