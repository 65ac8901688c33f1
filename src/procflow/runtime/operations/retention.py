"""Retention: deleting runs that have ended, with everything that belongs to them.

Only runs that are completed, cancelled or aborted are ever deleted: a waiting or running run
still moves, and a failed one awaits ``runs retry`` or ``runs cancel``. The cut-off is an
instant, given as a timestamp or as a duration counted back from the store's clock (virtual or
system). Deleting goes in batches, each its own short transaction, so a large purge never holds
the store's write lock (SQLite) or many row locks (PostgreSQL) for long; workers and callers
go on between batches.

Every face calls :func:`purge`: ``procflow runs purge``, ``engine.runs.purge`` and the periodic
job of ``--retain`` (:class:`RetentionJob`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from procflow.errors import DurationError, ExprError, UsageError
from procflow.expr import parse_duration
from procflow.runtime.clock import from_datetime, from_iso, iso, micros, store_now
from procflow.store.store import Store

__all__ = ["BATCH", "PurgeReport", "RetentionJob", "cutoff", "purge", "retention"]

log = logging.getLogger("procflow.retention")

BATCH = 500  # runs per transaction: a few thousand rows deleted, milliseconds of lock
PURGE_EVERY = 600.0  # seconds between two purges of the periodic job
# Seconds before its first purge: a process refused at start (a bad flag, a port in use) has
# stopped by then, so it changes nothing.
FIRST_PURGE_AFTER = 10.0

Cutoff = str | datetime | timedelta


@dataclass(frozen=True)
class PurgeReport:
    """What a purge did (or, with ``dry_run``, would do)."""

    runs: int
    ended_before: int
    dry_run: bool
    rows: dict[str, int] = field(default_factory=dict)  # rows deleted per table

    def to_json(self) -> dict[str, Any]:
        return {
            "purged": self.runs,
            "dry_run": self.dry_run,
            "ended_before": iso(self.ended_before),
            "rows": dict(sorted(self.rows.items())),
        }


def cutoff(given: Cutoff, now: int) -> int:
    """The instant ``given`` names: an ISO-8601 timestamp with a zone, or a duration (``30d``,
    ``PT12H``) counted back from ``now``; a :class:`datetime` or :class:`timedelta` likewise."""
    if isinstance(given, datetime):
        return from_datetime(given)
    if isinstance(given, timedelta):
        return _ago(given, now, str(given))
    text = given.strip()
    if not text:
        raise UsageError("give the cut-off: a timestamp (2027-01-01T00:00:00Z) or a duration (30d)")
    if text[:1].isdigit() and ("-" in text or ":" in text):
        try:
            return from_iso(text)
        except ExprError as exc:
            raise UsageError(f"[{text}] is not an ISO-8601 timestamp with a zone: {exc}") from None
    try:
        return _ago(parse_duration(text), now, text)
    except DurationError as exc:
        raise UsageError(
            f"[{text}] is neither a timestamp (2027-01-01T00:00:00Z) nor a duration (30d, "
            f"PT12H): {exc}"
        ) from None


def _ago(duration: timedelta, now: int, shown: str) -> int:
    if duration < timedelta(0):
        raise UsageError(f"the duration [{shown}] must not be negative: it counts back from now")
    return now - micros(duration)


def purge(
    store: Store, ended_before: Cutoff, *, dry_run: bool = False, batch: int = BATCH
) -> PurgeReport:
    """Delete (``dry_run``: count) the runs completed, cancelled or aborted before
    ``ended_before``, with their rows in every table."""
    before = cutoff(ended_before, store_now(store.read()))
    if dry_run:
        return PurgeReport(store.read().count_ended_runs_before(before), before, True)
    rows: dict[str, int] = {}
    while True:
        with store.tx() as tx:
            deleted = tx.delete_runs(tx.ended_runs_before(before, batch))
        if not deleted:
            break
        for table, count in deleted.items():
            rows[table] = rows.get(table, 0) + count
    return PurgeReport(rows.get("runs", 0), before, False, rows)


def retention(text: str) -> timedelta:
    """``--retain DURATION``: how long ended runs are kept (positive)."""
    try:
        kept = parse_duration(text)
    except DurationError as exc:
        raise UsageError(f"--retain must be a duration like 30d or P30D: {exc}") from None
    if kept <= timedelta(0):
        raise UsageError(f"--retain must be longer than zero, not [{text}]")
    return kept


class RetentionJob:
    """``--retain``: purge, ``first`` seconds after start and then every ``every`` seconds, the
    runs that ended longer than ``keep`` ago, on a store connection of its own. A failed purge
    is logged and tried again at the next turn; it never stops the process."""

    def __init__(
        self,
        url: str,
        keep: timedelta,
        every: float = PURGE_EVERY,
        first: float = FIRST_PURGE_AFTER,
    ) -> None:
        self.url = url
        self.keep = keep
        self.every = every
        self.first = first
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="procflow-retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def run_once(self) -> PurgeReport:
        store = Store(self.url, create=False)
        try:
            return purge(store, self.keep)
        finally:
            store.close()

    def _run(self) -> None:
        self._stop.wait(self.first)
        while not self._stop.is_set():
            try:
                done = self.run_once()
            except Exception as exc:  # the store may be away for a while: try at the next turn
                log.error("retention purge failed: %s", exc)
            else:
                if done.runs:
                    log.info(
                        "retention purged %d runs that ended before %s", done.runs,
                        iso(done.ended_before),
                    )  # fmt: skip
            self._stop.wait(self.every)
