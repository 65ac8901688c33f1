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

from itertools import takewhile

from procflow.errors import LimitReached, ProcflowError, StoreError
from procflow.model.schedule import Overlap
from procflow.runtime import faults
from procflow.runtime.operations.lifecycle import cancel_run
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.starts import FlowStarts, insert_flow_run, insert_run_of, new_flow_run
from procflow.runtime.schedules.arming import arm
from procflow.runtime.schedules.slots import MAX_SLOTS, Fired, is_late, is_sweep, late_slots
from procflow.runtime.schedules.sweeps import fire_sweep
from procflow.states import ENDED
from procflow.store.rows import RunRow, ScheduleRow
from procflow.store.store import Tx

__all__ = [
    "MAX_SLOTS", "Fired", "fire_due", "fire_slot", "open_runs_of", "release_buffered",
    "start_slot",
]  # fmt: skip


GROUP = 250  # due slots fired in one transaction (10,000 aligned slots: 40 commits, not 10,000)


def fire_due(host: RunHost, now: int, limit: int) -> list[tuple[ScheduleRow, Fired]]:
    """Fire up to ``limit`` due slots, :data:`GROUP` schedules to a transaction. A slot that
    cannot start its run (its flow no longer compiles, say) rolls its group back; the group is
    then fired one schedule to a transaction, and that slot records why on its schedule and arms
    the next: a schedule never stops a worker, nor holds up the others."""
    done: list[tuple[ScheduleRow, Fired]] = []
    while len(done) < limit:
        try:
            fired = _fire_group(host, now, min(GROUP, limit - len(done)))
        except _StartKeyTaken:  # rolled back: the slots go one by one, each by its own key
            alone = _fire_alone(host, now)
            fired = [alone] if alone is not None else []
        except ProcflowError as exc:
            if isinstance(exc, StoreError):
                raise  # the store's trouble (or a conflict to redo), not a schedule's
            alone = _fire_alone(host, now)
            fired = [alone] if alone is not None else []
        if not fired:
            break
        done += fired
    return done


def _fire_group(host: RunHost, now: int, size: int) -> list[tuple[ScheduleRow, Fired]]:
    with host.store.tx() as tx:
        rows = tx.due_schedules(now, size)
        if rows and is_sweep(rows[0]):
            rows = rows[:1]  # a sweep's batch is a transaction of its own
        else:
            rows = list(takewhile(lambda r: not is_sweep(r), rows))
        # The runs each schedule last started that are still open, read once for the group
        # (one statement, not one a slot): most have ended by the next slot.
        known = tx.live_runs_by_id([i for row in rows for i in row.open_runs])
        starts = FlowStarts()  # the group's runs, written together
        out = [(row, fire_slot(host, tx, row, now, known, starts)) for row in rows]
        if not starts.write(tx):
            raise _StartKeyTaken  # a slot's run is there already: undo the group
        tx.save_fired([row for row, _ in out])
        if out:
            faults.point("slot_fired")  # their runs inserted, nothing committed
        return out


class _StartKeyTaken(Exception):
    """A run of a group's slot was started already (by another firing of a stale row): the
    group is rolled back and its slots fired one by one, each seeing its own key taken."""


def _fire_alone(host: RunHost, now: int) -> tuple[ScheduleRow, Fired] | None:
    """The first due schedule in a transaction of its own (None: none is due any more); when
    its slot fails, why is recorded on it and the next slot armed."""
    key: str | None = None
    try:
        with host.store.tx() as tx:
            due = tx.due_schedules(now, 1)
            if not due:
                return None
            row, key = due[0], due[0].key
            return row, fire_slot(host, tx, row, now)
    except ProcflowError as exc:
        if isinstance(exc, StoreError) or key is None:
            raise
        return _failed(host, key, now, str(exc)), Fired(missed=1)


def _failed(host: RunHost, key: str, now: int, why: str) -> ScheduleRow:
    """Record why ``key``'s due slot started nothing, and arm its next slot."""
    with host.store.tx() as tx:
        row = tx.schedule(key, lock=True)
        assert row is not None
        row.error, row.missed = why, row.missed + 1
        arm(row, max(now, row.next_slot or now))
        tx.save_schedule(row)
        return row


def fire_slot(
    host: RunHost, tx: Tx, row: ScheduleRow, now: int, known: dict[str, RunRow] | None = None,
    starts: FlowStarts | None = None,
) -> Fired:  # fmt: skip
    """Fire ``row``'s armed slot (locked, due by ``now``) and arm the next one; an intent
    schedule's slot does one batch of its sweep (:mod:`~procflow.runtime.schedules.sweeps`).
    ``known``: the runs of its ``open_runs`` as already read in this transaction. ``starts``:
    where its runs are gathered to be written with a group's, and the row saved with them (None:
    written now)."""
    if is_sweep(row):
        return fire_sweep(host, tx, row, now)
    assert row.next_slot is not None
    slot, spec, fired = row.next_slot, row.spec, Fired(lag=max(0, now - row.next_slot))
    open_runs = open_runs_of(tx, row, known)
    if row.buffered is not None and not open_runs:
        _start(host, tx, row, row.buffered, fired, open_runs, starts=starts)
        row.buffered = None
    if is_late(row.due_at, slot, spec, now):
        chosen, missed = late_slots(spec, slot, now)
        fired.missed += missed
        earlier = set(fired.started)
        for late in chosen:  # caught up together: overlap looks only at runs open before
            catching_up = set(fired.started) - earlier
            start_slot(
                host, tx, row, late, now, fired, open_runs, Overlap(spec["overlap"]),
                exempt=catching_up, starts=starts,
            )  # fmt: skip
        arm(row, now)
    else:
        overlap = Overlap(spec["overlap"])
        start_slot(host, tx, row, slot, now, fired, open_runs, overlap, starts=starts)
        arm(row, slot)
    _count(row, fired)
    row.error = None
    if starts is None:
        tx.save_schedule(row)
    return fired


def start_slot(
    host: RunHost, tx: Tx, row: ScheduleRow, slot: int, now: int, fired: Fired,
    open_runs: list[RunRow], overlap: Overlap, *, exempt: set[str] | frozenset[str] = frozenset(),
    keyed: bool = True, starts: FlowStarts | None = None,
) -> None:  # fmt: skip
    """Start ``slot``'s run unless the schedule's open runs (``open_runs``, kept up to date
    here; those in ``exempt`` do not count) and ``overlap`` say otherwise. ``keyed``: the run
    takes the slot's start key (a slot starts one run); a trigger by hand takes none."""
    blocking = [r for r in open_runs if r.id not in exempt]
    if blocking and overlap is Overlap.SKIP:
        fired.skipped += 1
        return
    if blocking and overlap is Overlap.BUFFER_ONE:
        if row.buffered is None:
            row.buffered = slot
            fired.buffered += 1
        else:
            fired.skipped += 1  # one slot waits at most; a later one arriving meanwhile is skipped
        return
    if blocking and overlap is Overlap.CANCEL_PREVIOUS:
        for run in blocking:
            reason = f"cancelled by its schedule [{row.key}]: the next slot started"
            cancel_run(tx, run, now, reason=reason)
        open_runs[:] = [r for r in open_runs if r not in blocking]
    _start(host, tx, row, slot, fired, open_runs, keyed, starts)


def _start(
    host: RunHost, tx: Tx, row: ScheduleRow, slot: int, fired: Fired, open_runs: list[RunRow],
    keyed: bool = True, starts: FlowStarts | None = None,
) -> None:  # fmt: skip
    plan = row.plan  # the newest version's, kept by the deploy: firing compiles nothing
    key = slot_key(row.key, slot) if keyed else None
    run: RunRow | None
    if plan.get("limited"):  # the flow's concurrency decides: a run at a time
        run = _start_limited(host, tx, row, slot, key, fired)
    elif starts is not None:  # written with its group, which is undone if the key was taken
        run = new_flow_run(plan["version_id"], row.flow, host.now(), key, (row.key, slot))
        starts.add(run, plan["first"], plan["inputs"])
    else:
        run = insert_run_of(
            tx, plan["version_id"], row.flow, plan["first"], plan["inputs"], host.now(),
            start_key=key, schedule=(row.key, slot),
        )  # fmt: skip
    if run is None:
        return  # this slot has its run already: exactly one per slot
    open_runs.append(run)
    row.open_runs = [r.id for r in open_runs]
    if row.last_slot is None or slot >= row.last_slot:  # a backfilled older slot is not last
        row.last_slot, row.last_run = slot, run.id
    fired.started.append(run.id)


def _start_limited(
    host: RunHost, tx: Tx, row: ScheduleRow, slot: int, key: str | None, fired: Fired
) -> RunRow | None:
    plan = row.plan
    _, flow = host.catalog.flow(plan["version_id"], tx)
    try:
        return insert_flow_run(
            tx, plan["version_id"], flow, plan["inputs"], host.now(), start_key=key,
            schedule=(row.key, slot),
        )  # fmt: skip
    except LimitReached:  # concurrency.on_limit: refuse
        fired.skipped += 1
        return None


def slot_key(key: str, slot: int) -> str:
    """The start key of the run of ``slot`` of the schedule ``key``: unique in the store."""
    return f"schedule:{key}@{slot}"


def open_runs_of(tx: Tx, row: ScheduleRow, known: dict[str, RunRow] | None = None) -> list[RunRow]:
    """The runs ``row`` started that have not ended (the row's list pruned of ended ones).
    ``known``: at least those of them still open, as already read in this transaction."""
    if known is None:
        known = tx.live_runs_by_id(row.open_runs)
    runs = known
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
        seen = tx.schedule(key)  # no lock unless a slot waits: most schedules buffer nothing
        if seen is None or seen.buffered is None or seen.paused or seen.disabled:
            continue
        # The row lock is taken after this transaction's run rows; a worker firing the
        # schedule takes them the other way round: skip it then (the firing, or the next
        # one, starts the buffered slot itself) rather than wait and deadlock.
        row = tx.schedule(key, lock=True, skip_locked=True)
        if row is None or row.buffered is None:
            continue
        open_runs = open_runs_of(tx, row)
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
