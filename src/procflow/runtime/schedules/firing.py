"""A due slot fires: it starts its run (or counts why not) and arms the next slot, in one
transaction on the schedule's row.

- Exactly one run per slot: the run carries the start key ``schedule:<key>@<slot>`` (unique in
  the store), so a slot fired twice — two workers at once, or again after a worker died between
  firing and committing — starts its run once.
- Missed slots: a slot firing more than ``grace`` after its nominal instant (on the store's
  clock; a virtual clock steps through every slot on time) was missed, with every slot after it
  up to now: ``latest`` starts the newest, ``all`` each (oldest first, at most
  :data:`MAX_SLOTS`), ``none`` none; the rest are counted missed.
- Overlap: the runs the schedule started that have not ended decide (``skip``, ``allow``,
  ``buffer_one``, ``cancel_previous``). A buffered slot starts when its open run ends
  (:func:`release_buffered`, called where runs end), or at the latest when the next slot fires.
"""

from __future__ import annotations

from procflow.errors import ProcflowError, StoreError
from procflow.model.schedule import Missed, Overlap
from procflow.runtime.data.inputs import check_inputs
from procflow.runtime.operations.lifecycle import cancel_run
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.starts import insert_flow_run
from procflow.runtime.schedules.arming import arm
from procflow.runtime.schedules.slots import MAX_SLOTS, Fired, calendar, is_sweep, not_missed
from procflow.runtime.schedules.sweeps import fire_sweep
from procflow.states import ENDED
from procflow.store.rows import RunRow, ScheduleRow
from procflow.store.store import Tx

__all__ = ["MAX_SLOTS", "Fired", "fire_due", "fire_slot", "release_buffered", "start_slot"]


def fire_due(host: RunHost, now: int, limit: int) -> list[tuple[ScheduleRow, Fired]]:
    """Fire up to ``limit`` due slots, each schedule in a transaction of its own (a slot that
    starts 1,000 runs does not hold the others). A slot that cannot start its run (its flow no
    longer compiles, say) records why on the schedule and arms the next slot: a schedule never
    stops a worker."""
    done: list[tuple[ScheduleRow, Fired]] = []
    while len(done) < limit:
        key: str | None = None
        try:
            with host.store.tx() as tx:
                due = tx.due_schedules(now, 1)
                if not due:
                    break
                row, key = due[0], due[0].key
                fired = fire_slot(host, tx, row, now)
        except ProcflowError as exc:
            if isinstance(exc, StoreError) or key is None:
                raise  # the store's trouble (or a conflict to redo), not this schedule's
            row, fired = _failed(host, key, now, str(exc)), Fired(missed=1)
        done.append((row, fired))
    return done


def _failed(host: RunHost, key: str, now: int, why: str) -> ScheduleRow:
    """Record why ``key``'s due slot started nothing, and arm its next slot."""
    with host.store.tx() as tx:
        row = tx.schedule(key, lock=True)
        assert row is not None
        row.error, row.missed = why, row.missed + 1
        arm(row, max(now, row.next_slot or now))
        tx.save_schedule(row)
        return row


def fire_slot(host: RunHost, tx: Tx, row: ScheduleRow, now: int) -> Fired:
    """Fire ``row``'s armed slot (locked, due by ``now``) and arm the next one; an intent
    schedule's slot does one batch of its sweep (:mod:`~procflow.runtime.schedules.sweeps`)."""
    if is_sweep(row):
        return fire_sweep(host, tx, row, now)
    assert row.next_slot is not None
    slot, spec, fired = row.next_slot, row.spec, Fired(lag=max(0, now - row.next_slot))
    open_runs = _open_runs(tx, row)
    if row.buffered is not None and not open_runs:
        _start(host, tx, row, row.buffered, fired, open_runs)
        row.buffered = None
    if now - slot > int(spec.get("grace") or 0):
        due = [slot, *calendar(spec).slots_between(slot, now, MAX_SLOTS + 1)]
        chosen = not_missed(due, Missed(spec.get("missed") or Missed.LATEST))
        fired.missed += len(due) - len(chosen)
        for late in chosen:
            start_slot(host, tx, row, late, now, fired, open_runs, Overlap(spec["overlap"]))
        arm(row, now)
    else:
        start_slot(host, tx, row, slot, now, fired, open_runs, Overlap(spec["overlap"]))
        arm(row, slot)
    _count(row, fired)
    row.error = None
    tx.save_schedule(row)
    return fired


def start_slot(
    host: RunHost, tx: Tx, row: ScheduleRow, slot: int, now: int, fired: Fired,
    open_runs: list[RunRow], overlap: Overlap,
) -> None:  # fmt: skip
    """Start ``slot``'s run unless the schedule's open runs (``open_runs``, kept up to date
    here) and ``overlap`` say otherwise."""
    if open_runs and overlap is Overlap.SKIP:
        fired.skipped += 1
        return
    if open_runs and overlap is Overlap.BUFFER_ONE:
        if row.buffered is None:
            row.buffered = slot
            fired.buffered += 1
        else:
            fired.skipped += 1  # one slot waits at most; a later one arriving meanwhile is skipped
        return
    if open_runs and overlap is Overlap.CANCEL_PREVIOUS:
        for run in open_runs:
            reason = f"cancelled by its schedule [{row.key}]: the next slot started"
            cancel_run(tx, run, now, reason=reason)
        open_runs.clear()
    _start(host, tx, row, slot, fired, open_runs)


def _start(
    host: RunHost, tx: Tx, row: ScheduleRow, slot: int, fired: Fired, open_runs: list[RunRow]
) -> None:
    hint = f"[{row.flow}] is not a flow"
    version = host.catalog.startable(tx, row.flow, "flow", hint)
    _, flow = host.catalog.flow(version.id, tx)
    values = check_inputs(flow, {})  # a scheduled flow's inputs all have defaults
    run_id = insert_flow_run(
        tx, version.id, flow, values, host.now(), start_key=slot_key(row.key, slot),
        schedule=(row.key, slot),
    )  # fmt: skip
    if run_id is None:
        return  # this slot has its run already: exactly one per slot
    run = tx.run(run_id)
    assert run is not None
    open_runs.append(run)
    row.open_runs = [r.id for r in open_runs]
    row.last_slot, row.last_run = slot, run_id
    fired.started.append(run_id)


def slot_key(key: str, slot: int) -> str:
    """The start key of the run of ``slot`` of the schedule ``key``: unique in the store."""
    return f"schedule:{key}@{slot}"


def _open_runs(tx: Tx, row: ScheduleRow) -> list[RunRow]:
    """The runs ``row`` started that have not ended (the row's list pruned of ended ones)."""
    runs = tx.runs_by_id(row.open_runs) if row.open_runs else {}
    live = [runs[i] for i in row.open_runs if i in runs and runs[i].status not in ENDED]
    row.open_runs = [r.id for r in live]
    return live


def _count(row: ScheduleRow, fired: Fired) -> None:
    row.started += len(fired.started)
    row.skipped += fired.skipped
    row.missed += fired.missed
    row.buffers += fired.buffered


def release_buffered(host: RunHost, tx: Tx, ended: list[RunRow]) -> list[str]:
    """Runs of ``ended`` that a schedule started have ended: a slot their schedule buffered
    (``buffer_one``) starts now, in the same transaction. Returns the runs started."""
    keys = {r.state["schedule"]["name"] for r in ended if r.state.get("schedule")}
    started: list[str] = []
    for key in sorted(keys):
        row = tx.schedule(key, lock=True)
        if row is None or row.buffered is None:
            continue
        open_runs = _open_runs(tx, row)
        if open_runs:
            tx.save_schedule(row)
            continue
        fired = Fired()
        _start(host, tx, row, row.buffered, fired, open_runs)
        row.buffered = None
        _count(row, fired)
        tx.save_schedule(row)
        started += fired.started
    return started
