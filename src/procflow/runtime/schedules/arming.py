"""What changes a schedule row outside firing: a deploy (new, changed, removed schedules), the
flow's enable and disable, pause and resume.

A schedule belongs to its flow's name and follows the newest version: a deploy that changes its
spec re-arms it from the current instant on (nothing retroactive), one that removes it deletes
its row. A disabled flow's schedules and a paused schedule have nothing armed, so no slot fires
and none is counted missed; enabling or resuming arms the first slot after the current instant.

An intent file's schedules (sweeps) are rows of the same table, keyed ``APP/NAME`` with the
application's name in the ``flow`` column and ``kind: intent`` in their spec; they follow the
file's newest deploy the same way. Arming a row anew abandons a sweep it was working through
(the records it acted on stay done; the abandoned slot acts on no more).
"""

from __future__ import annotations

from typing import Any

from procflow.errors import DeployError
from procflow.model.ir import Application, Flow
from procflow.runtime.data.inputs import check_inputs
from procflow.runtime.schedules.slots import calendar, due_time, is_sweep
from procflow.store.rows import ScheduleRow
from procflow.store.store import Tx

__all__ = [
    "arm", "drop_buffered", "schedule_key", "set_disabled", "start_plan", "sweep_key",
    "sync_app_schedules", "sync_schedules",
]  # fmt: skip


def schedule_key(flow: Flow, name: str) -> str:
    """How commands address a schedule: ``FLOW`` for a lone one, else ``FLOW/NAME``."""
    return flow.name if name == flow.name else f"{flow.name}/{name}"


def sweep_key(app: Application, name: str) -> str:
    """How commands address an intent schedule: ``APP/NAME``."""
    return f"{app.name}/{name}"


def arm(row: ScheduleRow, after: int) -> None:
    """Arm ``row``'s first slot after the instant ``after`` (nothing while it is paused or its
    flow disabled, or once its calendar has ended)."""
    slot = None if row.paused or row.disabled else calendar(row.spec).next_after(after)
    row.next_slot = slot
    row.due_at = None if slot is None else due_time(row.spec, slot)
    if row.sweep is not None and row.sweep.get("progress") is not None:
        row.sweep = {**row.sweep, "progress": None}


def sync_schedules(tx: Tx, flow_name: str, flow: Flow | None, now: int) -> None:
    """Bring the schedule rows of ``flow_name`` in line with ``flow``, its newest version (None:
    the name is no longer a flow): new ones armed, changed ones re-armed from ``now``, removed
    ones deleted; unchanged ones keep their armed slot and counts."""
    existing = {
        row.key: row for row in tx.schedules_of_flow(flow_name, lock=True) if not is_sweep(row)
    }
    wanted = {schedule_key(flow, s.name): s for s in flow.schedules} if flow is not None else {}
    for key in existing.keys() - wanted.keys():
        tx.delete_schedule(key)
    if flow is None or not wanted:
        return
    disabled, plan = _disabled(tx, flow_name), start_plan(tx, flow)
    for key, schedule in wanted.items():
        spec = schedule.spec()
        row = existing.get(key)
        if row is None:
            _refuse_taken(tx, key, flow_name)
            row = ScheduleRow(key, flow_name, schedule.name, spec, plan, disabled=disabled)
            arm(row, now)
            tx.insert_schedule(row)
        elif row.spec != spec or row.plan != plan:
            if row.spec != spec:
                row.spec, row.buffered = spec, None
                arm(row, now)
            row.plan = plan
            tx.save_schedule(row)
    tx.notify()  # an idle worker looks at the due times again


def start_plan(tx: Tx, flow: Flow) -> dict[str, Any]:
    """What a slot needs to start a run of the newest version of ``flow`` without compiling it:
    the version, the first step, the inputs (every one has a default)."""
    version = tx.latest_version(flow.name)
    assert version is not None  # the deploy storing it is this transaction
    inputs = check_inputs(flow, {})
    plan = {"version_id": version.id, "first": flow.steps[0].id, "inputs": inputs}
    if flow.concurrency is not None:  # its starts take places: firing reads the flow
        plan["limited"] = True
    return plan


def sync_app_schedules(tx: Tx, app: Application, now: int) -> None:
    """The same for the ``schedules:`` of an intent file just deployed: the rows keyed
    ``APP/NAME`` follow ``app``."""
    existing = {row.key: row for row in tx.schedules_of_flow(app.name, lock=True) if is_sweep(row)}
    wanted = {sweep_key(app, s.name): s for s in app.schedules}
    for key in existing.keys() - wanted.keys():
        tx.delete_schedule(key)
    for key, schedule in wanted.items():
        spec = schedule.spec(app.name)
        row = existing.get(key)
        if row is None:
            _refuse_taken(tx, key, app.name)
            row = ScheduleRow(key, app.name, schedule.name, spec, {})  # a sweep starts no run
            arm(row, now)
            tx.insert_schedule(row)
        elif row.spec != spec:
            row.spec = spec
            arm(row, now)
            tx.save_schedule(row)


def _refuse_taken(tx: Tx, key: str, owner: str) -> None:
    """A flow named like an application may have a schedule of the same key: the deploy that
    would take it over is refused (the deployed one keeps firing)."""
    taken = tx.schedule(key)
    if taken is None:
        return
    kind = "the intent file" if is_sweep(taken) else "the flow"
    raise DeployError(
        f"schedule [{key}] is already a schedule of {kind} [{taken.flow}]; rename one of them",
        definition=owner,
    )


def set_disabled(tx: Tx, flow_name: str, disabled: bool, now: int) -> None:
    """The flow ``flow_name`` was disabled (nothing armed) or enabled (armed from ``now``).
    An intent file's schedules belong to no one process, so disabling a process leaves them."""
    for row in tx.schedules_of_flow(flow_name, lock=True):
        if row.disabled == disabled or is_sweep(row):
            continue
        row.disabled = disabled
        if disabled:
            drop_buffered(row)
        arm(row, now)
        tx.save_schedule(row)
    tx.notify()  # an idle worker looks at the due times again


def drop_buffered(row: ScheduleRow) -> None:
    """A slot waiting for its open run (``buffer_one``) is skipped: its schedule is paused, or
    its flow disabled, and no slot fires then."""
    if row.buffered is not None:
        row.buffered, row.skipped = None, row.skipped + 1


def _disabled(tx: Tx, name: str) -> bool:
    found = tx.latest_version_enabled(name)
    return found is not None and not found[1]
