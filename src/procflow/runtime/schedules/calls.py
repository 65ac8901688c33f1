"""What the faces ask of schedules, each call one transaction: list and show them, pause and
resume one, trigger one by hand, backfill a window; and the one JSON shape every face shows.

A schedule is addressed as its flow's name (a lone schedule) or ``FLOW/NAME``. Bad input — an
unknown schedule, a backfill window that is empty, unbounded or holds too many slots, a trigger on
a disabled flow — is a :class:`~procflow.errors.UsageError` (or ``NotFoundError``) and changes
nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from datetime import datetime
from typing import Any

from procflow.errors import ExprError, NotFoundError, StateConflictError, UsageError
from procflow.model.schedule import Overlap
from procflow.runtime.clock import from_datetime, from_iso, iso
from procflow.runtime.data.access import Action
from procflow.runtime.operations.conflicts import retry_on_conflict
from procflow.runtime.operations.listing import Page, check_limit
from procflow.runtime.runs.host import RunHost
from procflow.runtime.schedules.arming import arm, drop_buffered
from procflow.runtime.schedules.firing import (
    MAX_SLOTS,
    Fired,
    open_runs_of,
    slot_key,
    start_slot,
)
from procflow.runtime.schedules.slots import calendar, is_sweep
from procflow.runtime.schedules.sweeps import sweep_json, trigger_sweep
from procflow.store.rows import ScheduleRow
from procflow.store.store import Tx

__all__ = [
    "MAX_NOTE",
    "Instant",
    "ScheduleCalls",
    "backfill",
    "locked",
    "pause",
    "resume",
    "schedule_json",
    "trigger",
]


MAX_NOTE = 500  # characters of a pause note: a line beside the state, not a document

Instant = int | str | datetime
"""A backfill window's bound: an ISO-8601 timestamp with a zone (``2027-01-01T00:00:00Z``) or a
date (its 00:00Z), a datetime (naive: UTC), or microseconds since the epoch."""


def instant(value: Instant, what: str) -> int:
    """``value`` (the window's ``from`` or ``to``) in microseconds; UsageError naming ``what``."""
    if isinstance(value, datetime):
        return from_datetime(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise UsageError(f"backfill {what} must be a timestamp, not {type(value).__name__}")
    try:
        return from_iso(value)
    except ExprError as exc:
        raise UsageError(f"backfill {what}: {exc}") from None


def checked_note(note: str | None) -> str | None:
    """A pause note as kept: one line of at most :data:`MAX_NOTE` characters (blank: none)."""
    if note is None or not note.strip():
        return None
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in note):
        raise UsageError("the note must be one line of text, without control characters")
    if len(note) > MAX_NOTE:
        raise UsageError(f"the note holds {len(note)} characters; at most {MAX_NOTE} are kept")
    return note.strip()


def locked(tx: Tx, key: str) -> ScheduleRow:
    """The schedule ``key``, locked for a change; NotFoundError naming the known ones."""
    row = tx.schedule(key, lock=True)
    if row is None:
        raise NotFoundError(f"no schedule [{key}]{_known(tx, key)}", kind="schedule", key=key)
    return row


def _known(tx: Tx, key: str) -> str:
    flow = key.split("/", 1)[0]
    names = [r.key for r in tx.schedules_of_flow(flow)]
    return f"; [{flow}] has {', '.join(names)}" if names else ""


def pause(tx: Tx, key: str, note: str | None) -> ScheduleRow:
    """Stop ``key`` firing (nothing armed, no slot counted missed) until :func:`resume`."""
    row = locked(tx, key)
    row.paused, row.note = True, checked_note(note)
    drop_buffered(row)
    arm(row, 0)
    tx.save_schedule(row)
    return row


def resume(tx: Tx, key: str, now: int) -> ScheduleRow:
    """Arm ``key``'s first slot after ``now`` again."""
    row = locked(tx, key)
    if not row.paused:
        raise StateConflictError(f"schedule [{key}] is not paused; nothing to resume")
    row.paused, row.note = False, None
    arm(row, now)
    tx.save_schedule(row)
    tx.notify()  # an idle worker looks at its due time
    return row


def trigger(host: RunHost, tx: Tx, key: str, now: int, *, allow_overlap: bool) -> Fired:
    """Start one run now, as a slot at ``now`` (overlap applies unless ``allow_overlap``)."""
    row = locked(tx, key)
    if row.disabled:
        raise UsageError(f"[{row.flow}] is disabled; enable it to start runs")
    fired = Fired()
    overlap = Overlap.ALLOW if allow_overlap else Overlap(row.spec["overlap"])
    start_slot(host, tx, row, now, now, fired, open_runs_of(tx, row), overlap, keyed=False)
    _add(row, fired)
    tx.save_schedule(row)
    return fired


def backfill(
    host: RunHost, tx: Tx, key: str, from_: int, to: int, now: int, *, dry_run: bool
) -> list[dict[str, Any]]:
    """One run for every slot of ``key`` in [``from_``, ``to``] (the schedule as it is now)
    that has none yet, oldest first, overlap ignored; ``dry_run``: only list them. Each slot:
    ``{slot, run_id, started}`` (``run_id`` of the run it has, or got)."""
    row = locked(tx, key)
    if is_sweep(row):
        raise UsageError(
            f"[{key}] is an intent schedule: backfill starts a flow's runs; sweep it now with "
            "trigger"
        )
    if row.disabled:
        raise UsageError(f"[{row.flow}] is disabled; enable it to start runs")
    if to < from_:
        raise UsageError(f"the backfill window ends ({iso(to)}) before it begins ({iso(from_)})")
    if to > now:
        raise UsageError(f"the backfill window ends after the current instant ({iso(now)})")
    slots = calendar(row.spec).slots_between(from_ - 1, to, MAX_SLOTS + 1)
    if len(slots) > MAX_SLOTS:
        count = len(slots) + len(calendar(row.spec).slots_between(slots[-1], to, 100_000))
        shown = f"{count:,}" if count <= 100_000 else "more than 100,000"
        raise UsageError(
            f"the window holds {shown} slots of [{key}], more than the {MAX_SLOTS:,} one "
            "backfill starts; backfill a shorter one"
        )
    out: list[dict[str, Any]] = []
    fired = Fired()
    # The runs open now stay open runs of the schedule beside the ones the window starts (a
    # later slot's overlap rule sees them all); ALLOW only lets the window start regardless.
    open_runs = open_runs_of(tx, row)
    for slot in slots:
        existing = tx.run_by_start_key(slot_key(key, slot))
        if existing is not None or dry_run:
            out.append({"slot": iso(slot), "run_id": existing, "started": False})
            continue
        before = len(fired.started)
        start_slot(host, tx, row, slot, now, fired, open_runs, Overlap.ALLOW)
        run_id = fired.started[-1] if len(fired.started) > before else None
        out.append({"slot": iso(slot), "run_id": run_id, "started": run_id is not None})
    _add(row, fired)
    tx.save_schedule(row)
    return out


def _add(row: ScheduleRow, fired: Fired) -> None:
    row.started += len(fired.started)
    row.skipped += fired.skipped
    row.buffers += fired.buffered


def schedule_json(row: ScheduleRow, next_count: int = 3) -> dict[str, Any]:
    """A schedule as every face shows it (``schedules list --json`` items, ``show``)."""
    upcoming: list[str | None] = []
    if row.next_slot is not None:
        upcoming.append(iso(row.next_slot))
        cal, slot = calendar(row.spec), row.next_slot
        while len(upcoming) < next_count:
            following = cal.next_after(slot)
            if following is None:
                break
            upcoming.append(iso(following))
            slot = following
    shown: dict[str, Any] = {
        "name": row.key, "flow": row.flow, "schedule": row.name,
        "kind": "intent" if is_sweep(row) else "flow",
        "spec": calendar(row.spec).describe(), "state": _state(row), "note": row.note,
        "overlap": row.spec.get("overlap"), "missed": row.spec.get("missed"),
        "next": upcoming, "due_at": iso(row.due_at) if row.due_at is not None else None,
        "buffered": iso(row.buffered) if row.buffered is not None else None,
        "last": (
            {"slot": iso(row.last_slot), "run_id": row.last_run}
            if row.last_slot is not None else None
        ),
        "counts": {
            "started": row.started, "skipped": row.skipped, "missed": row.missed,
            "buffered": row.buffers,
        },
        "error": row.error,  # why its last slot could not start its run
    }  # fmt: skip
    if is_sweep(row):
        shown["sweep"] = sweep_json(row)
    return shown


def _state(row: ScheduleRow) -> str:
    if row.disabled:
        return "disabled"
    if row.paused:
        return "paused"
    return "active" if row.next_slot is not None else "ended"


Acting = Callable[[Any, Action], "str | None"]
"""The engine's ``acting``: who asks, refused unless the role table allows the action."""


class ScheduleCalls:
    """``engine.schedules``: every face's schedule calls, one transaction each. ``user`` (an
    Actor, a name or None) is checked against the role table: trigger needs ``operator``;
    pause, resume and backfill ``deployer``."""

    def __init__(self, host: RunHost, acting: Acting) -> None:
        self.host, self.acting = host, acting

    def page(self, *, limit: int = 50, after: str | None = None) -> Page[str]:
        """Schedules by name (``FLOW`` or ``FLOW/NAME``), after the one named ``after``."""
        check_limit(limit)
        rows = self.host.store.read().schedules_after(after, limit + 1)
        kept = rows[:limit]
        more = len(rows) > limit
        return Page([schedule_json(r) for r in kept], kept[-1].key if more else None)

    def show(self, key: str, next_count: int = 3) -> dict[str, Any]:
        if not 1 <= next_count <= MAX_SLOTS:
            raise UsageError(f"the next slots shown are 1 to {MAX_SLOTS}, not {next_count}")
        row = self.host.store.read().schedule(key)
        if row is None:
            raise NotFoundError(
                f"no schedule [{key}]{_known(self.host.store.read(), key)}",
                kind="schedule", key=key,
            )  # fmt: skip
        return schedule_json(row, next_count)

    @retry_on_conflict
    def pause(self, key: str, note: str | None = None, *, user: Any = None) -> dict[str, Any]:
        self.acting(user, Action.PAUSE_SCHEDULE)
        with self.host.store.tx() as tx:
            return schedule_json(pause(tx, key, note))

    @retry_on_conflict
    def resume(self, key: str, *, user: Any = None) -> dict[str, Any]:
        self.acting(user, Action.PAUSE_SCHEDULE)
        with self.host.store.tx() as tx:
            return schedule_json(resume(tx, key, self.host.now()))

    @retry_on_conflict
    def trigger(self, key: str, *, allow_overlap: bool = False, user: Any = None) -> dict[str, Any]:
        """One run now, as a slot at the current instant: ``{name, started, skipped,
        buffered}`` (``started``: the run ids). An intent schedule sweeps now, and adds the
        slot's outcome as ``sweep``."""
        self.acting(user, Action.TRIGGER_SCHEDULE)
        found = self.host.store.read().schedule(key)
        if found is not None and is_sweep(found):
            return trigger_sweep(self.host, key, self.host.now())
        with self.host.store.tx() as tx:
            fired = trigger(self.host, tx, key, self.host.now(), allow_overlap=allow_overlap)
        return {
            "name": key, "started": fired.started, "skipped": fired.skipped,
            "buffered": fired.buffered,
        }  # fmt: skip

    @retry_on_conflict
    def backfill(
        self, key: str, from_: Instant, to: Instant, *, dry_run: bool = False, user: Any = None
    ) -> dict[str, Any]:
        """``{name, dry_run, slots: [{slot, run_id, started}]}`` (see :func:`backfill`)."""
        self.acting(user, Action.BACKFILL_SCHEDULE)
        start, end = instant(from_, "from"), instant(to, "to")
        with self.host.store.tx() as tx:
            slots = backfill(self.host, tx, key, start, end, self.host.now(), dry_run=dry_run)
        return {"name": key, "dry_run": dry_run, "slots": slots}
