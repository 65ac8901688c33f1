"""An intent schedule's slot (a sweep): the records of its entity that match ``where`` at the
slot's instant, each acted on once, a batch of records per transaction.

A sweep keeps its place in the schedule row's ``sweep`` column, committed with each batch's
actions: the slots still to sweep (``queue``, oldest first), the highest record id when the
slot began (``bound``: records created meanwhile, its own ``generate`` output included, wait for
the next slot) and the last id done (``cursor``). A worker that dies mid-slot leaves the row
due with its place as the last committed batch left it, so whoever fires it next goes on from
there: no record is notified, generated for or started twice for one slot, and none is
skipped. While a slot is being swept its row stays due; the last batch records the slot's
outcome (records matched, done, skipped, failed) and arms the next slot.

Missed slots (``missed``, ``grace``) are decided as for a flow's schedule when a calendar slot
begins: ``latest`` sweeps once at the newest, ``all`` each (at most 1,000), ``none`` none; the
rest are counted missed. ``trigger`` queues a sweep at the current instant and works it off at
once, one batch per transaction.
"""

from __future__ import annotations

from typing import Any

from procflow.errors import NotFoundError, UsageError
from procflow.model.ir import Application
from procflow.model.schedule import IntentSchedule
from procflow.runtime import faults
from procflow.runtime.clock import iso
from procflow.runtime.runs.host import RunHost
from procflow.runtime.schedules.arming import arm
from procflow.runtime.schedules.slots import Fired, is_late, late_slots
from procflow.runtime.schedules.sweep_actions import Sweeper
from procflow.runtime.schedules.sweep_match import Matcher
from procflow.store.rows import ScheduleRow
from procflow.store.store import Tx

__all__ = ["ROWS_PER_BATCH", "fire_sweep", "sweep_json", "trigger_sweep"]

ROWS_PER_BATCH = 100  # matching records acted on in one transaction
SCAN_PER_BATCH = 2_000  # records read (matching or not) in one transaction
_PAGE = 500
RECENT = 10  # slot outcomes kept for `schedules show`
_COUNTS = ("matched", "done", "skipped", "failed")


def fire_sweep(host: RunHost, tx: Tx, row: ScheduleRow, now: int) -> Fired:
    """One batch of ``row``'s sweep (locked, due by ``now``): the slot it is working through,
    or the armed slot it begins."""
    state = row.sweep or {}
    fired = Fired()
    progress = state.get("progress") or _begin(row, now, fired)
    if progress is not None:
        schedule, app = _compiled(host, tx, row)
        sweeper = Sweeper(host, tx, row.key, app, schedule, progress["queue"][0], now)
        _batch(sweeper, progress, fired)
        state = row.sweep or {}  # _begin may have armed it anew
        _after_batch(row, state, progress, now, fired)
    row.missed += fired.missed
    tx.save_schedule(row)
    return fired


def _begin(row: ScheduleRow, now: int, fired: Fired) -> dict[str, Any] | None:
    """The armed slot is due: the slots to sweep (as for a flow's missed slots), or None when
    none is (the next slot is armed)."""
    slot, spec = row.next_slot, row.spec
    assert slot is not None
    if is_late(row.due_at, slot, spec, now):
        chosen, missed = late_slots(spec, slot, now)
        fired.missed += missed
        after = now
    else:
        chosen, after = [slot], slot
    swept = {o["slot"] for o in _recent(row)}  # by trigger, at the instant of a slot
    chosen = [s for s in chosen if s not in swept]
    if not chosen:
        arm(row, after)
        return None
    return {"queue": chosen, "after": after, "bound": None}


def _compiled(host: RunHost, tx: Tx, row: ScheduleRow) -> tuple[IntentSchedule, Application]:
    """The schedule as its application's newest deploy compiled it."""
    app = host.catalog.application_of(row.spec["entity"], tx)
    schedule = next((s for s in app.schedules if s.name == row.name), None)
    if schedule is None or app.name != row.flow:
        raise UsageError(f"[{row.key}] is no longer a schedule of [{row.flow}]")
    return schedule, app


def _batch(sweeper: Sweeper, progress: dict[str, Any], fired: Fired) -> None:
    """Act on the next matching records of the slot ``queue[0]``, at most a batch of them."""
    tx, entity = sweeper.tx, sweeper.schedule.entity
    if progress["bound"] is None:  # the slot's first batch
        progress.update(dict.fromkeys(_COUNTS, 0), bound=tx.highest_record_id(entity), cursor=0)
        progress.update(began=sweeper.now, error=None)
        fired.lag = max(0, sweeper.now - sweeper.slot)
    matcher = Matcher(sweeper.schedule.where, sweeper.slot, sweeper.schedule.timezone)
    cursor, bound, acted, scanned = progress["cursor"], progress["bound"], 0, 0
    while cursor < bound and acted < ROWS_PER_BATCH and scanned < SCAN_PER_BATCH:
        page = tx.records_between(entity, cursor, bound, _PAGE)
        if not page:
            cursor = bound
            break
        for record in page:
            cursor, scanned = record.id, scanned + 1
            if not matcher.matches(record):
                continue
            done = sweeper.act(record)
            faults.point("after_sweep_action")  # acted on, not committed: a crash test dies here
            acted += 1
            progress["matched"] += 1
            progress[done.outcome] += 1
            if done.why and done.outcome == "failed" and progress["error"] is None:
                progress["error"] = done.why
            if done.run_id:
                fired.started.append(done.run_id)
            if acted >= ROWS_PER_BATCH:
                break
    progress["cursor"] = cursor


def _after_batch(
    row: ScheduleRow, state: dict[str, Any], progress: dict[str, Any], now: int, fired: Fired
) -> None:
    """Keep the place, or finish the slot: its outcome kept, the next slot of the queue (or of
    the calendar) up."""
    if progress["cursor"] < progress["bound"]:
        row.sweep = {**state, "progress": progress}
        fired.partial = True
        return
    queue = progress["queue"]
    outcome = {"slot": queue[0], "began": progress["began"], "ended": now}
    outcome.update({k: progress[k] for k in _COUNTS}, error=progress["error"])
    totals = state.get("totals") or dict.fromkeys(_COUNTS, 0)
    recent = [outcome, *(state.get("recent") or [])][:RECENT]
    totals = {k: totals.get(k, 0) + progress[k] for k in _COUNTS}
    row.started, row.last_slot, row.error = row.started + 1, queue[0], progress["error"]
    row.last_run = fired.started[-1] if fired.started else row.last_run
    fired.swept += 1
    rest = queue[1:]
    if rest:
        row.sweep = {"progress": {**progress, "queue": rest, "bound": None}, "recent": recent,
                     "totals": totals}  # fmt: skip
        return
    row.sweep = {"progress": None, "recent": recent, "totals": totals}
    arm(row, progress["after"])


def trigger_sweep(host: RunHost, key: str, now: int) -> dict[str, Any]:
    """Sweep ``key`` now, as a slot at the current instant, batch after batch (each its own
    transaction; a worker may take over the rest), and return that slot's outcome."""
    with host.store.tx() as tx:
        row = tx.schedule(key, lock=True)
        if row is None:
            raise NotFoundError(f"no schedule [{key}]", kind="schedule", key=key)
        _queue(row, now)
        tx.save_schedule(row)
    started: list[str] = []
    while True:
        with host.store.tx() as tx:
            row = tx.schedule(key, lock=True)
            progress = (row.sweep or {}).get("progress") if row is not None else None
            if row is None or progress is None or now not in progress["queue"]:
                break
            started += fire_sweep(host, tx, row, now).started
    outcome = next((o for o in _recent(row) if o["slot"] == now), None)
    return {"name": key, "started": started, "skipped": 0, "buffered": 0, "sweep": _shown(outcome)}


def _queue(row: ScheduleRow, now: int) -> None:
    """Queue a sweep at ``now``; the armed slot stays armed behind it."""
    state = dict(row.sweep or {})
    progress = state.get("progress")
    if progress is None:
        after = now if row.next_slot is None else row.next_slot - 1
        progress = {"queue": [], "after": after, "bound": None}
    if now in progress["queue"] or any(o["slot"] == now for o in _recent(row)):
        raise UsageError(f"[{row.key}] has swept (or is sweeping) a slot at {iso(now)} already")
    progress["queue"].append(now)
    state["progress"] = progress
    row.sweep = state
    row.due_at = now if row.due_at is None else min(row.due_at, now)


def _recent(row: ScheduleRow | None) -> list[dict[str, Any]]:
    return list(((row.sweep if row is not None else None) or {}).get("recent") or [])


def _shown(outcome: dict[str, Any] | None) -> dict[str, Any] | None:
    """A slot's outcome as the faces show it (instants as ISO-8601)."""
    if outcome is None:
        return None
    instants = {k: iso(outcome[k]) for k in ("slot", "began", "ended")}
    return {**outcome, **instants}


def sweep_json(row: ScheduleRow) -> dict[str, Any]:
    """What ``schedules show`` adds for an intent schedule: what it sweeps and does, the slot
    it is working through, its last slots' outcomes and the totals."""
    spec, state = row.spec, row.sweep or {}
    progress = state.get("progress")
    working = None
    if progress is not None and progress.get("bound") is not None:
        working = {"slot": iso(progress["queue"][0]), "queued": len(progress["queue"]) - 1}
        working.update({k: progress[k] for k in _COUNTS})
    return {
        "app": spec.get("app"), "entity": spec.get("entity"), "where": spec.get("where"),
        "action": spec.get("action"), "sweeping": working,
        "last": [_shown(o) for o in state.get("recent") or []],
        "totals": state.get("totals") or dict.fromkeys(_COUNTS, 0),
    }  # fmt: skip
