"""Intent user tasks: opening, listing, completing and withdrawing them, and their timers.

A token entering a ``userTask`` parks on an immediate ``task_open`` timer (``intent.py``); firing
it opens the task: the assignee is resolved, the row inserted, the task's ``timeout`` and
``expire`` timers armed on the token. Completing a task is one transaction: the form's fields
and the step's ``setField``/``setRelationField`` are written to the record (firing its lifecycle
event), the task's timers are disarmed, and the token moves on with ``action`` in its data.
Only the assigned user, a member of the assigned role or an administrator may complete a task
(the caller is an :class:`~procflow.runtime.data.identity.Actor`; its roles come from the token
table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from procflow.errors import ForbiddenError, NotFoundError, TaskError, TaskNotOpenError
from procflow.model.ir import END, Application, Assignee, Entity, UserTask
from procflow.model.source import suggest
from procflow.runtime.clock import from_datetime, micros
from procflow.runtime.data.identity import Actor
from procflow.runtime.data.records import patch_record, record_json
from procflow.runtime.data.user_json import json_problems, text_problem
from procflow.runtime.interpret.intent import (
    TASK_OPEN,
    RunCtx,
    move,
    resume,
    set_field,
    settle,
    write_record,
)
from procflow.runtime.runs.host import RunHost
from procflow.runtime.transition import Transition
from procflow.runtime.waits.task_rows import Task, refusal, task_json
from procflow.states import ENDED, RunStatus, TokenState
from procflow.store.rows import HistoryRow, RunRow, TimerRow, TokenRow
from procflow.store.store import Tx

TASK_TIMEOUT, TASK_EXPIRE = "task_timeout", "task_expire"
# The role of a ``personal`` task whose record has no owner (created without a user): only an
# administrator can complete it, since no user is its owner.
UNASSIGNED = "unassigned"
DEFAULT_ACTION = "complete"


# --- timers ------------------------------------------------------------------------------------


def fire_task_timer(
    host: RunHost, tx: Tx, timer: TimerRow, run: RunRow, token: TokenRow, now: int
) -> None:
    """``task_open`` (the token entered a userTask: open its task), ``task_timeout`` (a second
    token starts at ``then``, the task stays open) or ``task_expire`` (the task is withdrawn and
    the token continues at ``then``)."""
    _, process = host.catalog.process(run.version_id, run.name, tx)
    step = process.step(token.step)
    if not isinstance(step, UserTask):
        return  # the token moved on; its task's timers went with it, so this is only a guard
    if timer.kind == TASK_OPEN:
        open_task(host, tx, run, token, step, now)
        return
    found = tx.open_tasks(token_id=token.id)
    if not found:
        return  # completed or withdrawn in the meantime (which disarms these timers anyway)
    task = Task(**found[0])
    if timer.kind == TASK_TIMEOUT and step.timeout is not None:
        _fork(tx, run, token, task, step.timeout.then, now)
    elif timer.kind == TASK_EXPIRE and step.expire is not None:
        _expire(host, tx, run, token, task, step.expire.then, now)


def open_task(
    host: RunHost, tx: Tx, run: RunRow, token: TokenRow, step: UserTask, now: int
) -> None:
    compiled, _ = host.catalog.process(run.version_id, run.name, tx)
    app = compiled.definition
    assert isinstance(app, Application) and token.id is not None
    record, owner = _trigger_record(tx, run)
    entity = app.entity(run.record_entity) if run.record_entity else None
    assignee, kind = resolve_assignee(tx, app, step.assignee, entity, record, owner)
    form = app.form(step.form) if step.form else None
    task_id = tx.insert_task(
        run_id=run.id, token_id=token.id, step=step.name, assignee=assignee,
        assignee_kind=kind, form=form.name if form else None,
        actions=form.actions if form else (), fields=form.fields if form else (),
        record=(run.record_entity, run.record_id) if run.record_entity and run.record_id else None,
        now=now,
    )  # fmt: skip
    timers = []
    if step.timeout is not None:
        timers.append((run.id, token.id, TASK_TIMEOUT, now + micros(step.timeout.after)))
    expires = expiry(record.get(step.expire.field)) if step.expire and record else None
    if expires is not None:
        timers.append((run.id, token.id, TASK_EXPIRE, expires))
    if timers:
        tx.insert_timers(timers)
        tx.notify()
    token.wait = {"kind": "task", "task_id": task_id, "assignee": assignee}
    tx.update_tokens([token])
    run.seq += 1
    created = {"task_id": task_id, "assignee": assignee}
    entry = HistoryRow(run.seq, now, "task.created", step.name, token.path, token.attempt, created)
    tx.append_history(run.id, [entry])
    tx.save_run(run, None, None)


def _trigger_record(tx: Tx, run: RunRow) -> tuple[dict[str, Any] | None, str | None]:
    """The run's record (its snapshot for an onDelete run) and the record's owner."""
    snapshot = run.state.get("snapshot")
    if snapshot is not None:
        return snapshot, None
    if run.record_entity is None or run.record_id is None:
        return None, None
    row = tx.record(run.record_entity, run.record_id)
    return (row.data, row.owner) if row is not None else (None, None)


def resolve_assignee(
    tx: Tx,
    app: Application,
    assignee: Assignee,
    entity: Entity | None,
    record: Mapping[str, Any] | None,
    owner: str | None,
) -> tuple[str, str]:
    """(name, ``role``|``user``) at task creation: a role; ``personal`` → the record's owner;
    a path → the user name found by walking to-one relations, else the fallback role."""
    if assignee.kind == "role":
        assert assignee.role is not None
        return assignee.role, "role"
    if assignee.kind == "personal":
        return (owner, "user") if owner else (UNASSIGNED, "role")
    assert assignee.role is not None
    name = _walk(tx, app, entity, record, assignee.path)
    if isinstance(name, str) and name.strip():
        return name, "user"
    return assignee.role, "role"


def _walk(
    tx: Tx,
    app: Application,
    entity: Entity | None,
    record: Mapping[str, Any] | None,
    path: tuple[str, ...],
) -> Any:
    """The value at ``relation.….field`` from ``record``; None where a hop is empty."""
    *hops, last = path
    for hop in hops:
        relation = entity.relation(hop) if entity is not None else None
        related_id = record.get(hop) if record is not None else None
        if relation is None or related_id is None:
            return None
        row = tx.record(relation.to, related_id)
        entity, record = app.entity(relation.to), row.data if row is not None else None
    return record.get(last) if record is not None else None


def expiry(value: Any) -> int | None:
    """When a task expires, from the ``expire.until`` field's value: a date names the last
    valid day (so the start of the next day, UTC), a timestamp that instant, null never."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == 10:
        day = date.fromisoformat(value) + timedelta(days=1)
        return from_datetime(datetime(day.year, day.month, day.day, tzinfo=UTC))
    return from_datetime(datetime.fromisoformat(value))


def _fork(tx: Tx, run: RunRow, token: TokenRow, task: Task, then: str, now: int) -> None:
    """The non-cancelling timeout: a second token starts at ``then``; the task stays open."""
    run.seq += 1
    entries = [HistoryRow(run.seq, now, "timer.fired", token.step, token.path, token.attempt)]
    if then != END:
        forked = TokenRow(None, run.id, then, then, "ready", 1, now, None, {"visit": 1})
        forked.data["fork"] = task.id  # its steps' idempotency keys differ per task
        tx.insert_token(forked)
        run.seq += 1
        forked_from = {"from": token.step, "task_id": task.id}
        entries.append(HistoryRow(run.seq, now, "token.forked", then, then, 1, forked_from))
        if run.status != RunStatus.FAILED:
            run.status = RunStatus.RUNNING
        tx.notify()
    tx.append_history(run.id, entries)
    tx.save_run(run, None, None)


def _expire(
    host: RunHost, tx: Tx, run: RunRow, token: TokenRow, task: Task, then: str, now: int
) -> None:
    """The cancelling expiry: the task is withdrawn, its other timers disarmed, and the token
    continues at ``then``."""
    assert token.id is not None
    token_id = token.id
    rc = host.inline_ctx(tx, run)
    token = rc.tokens[token_id]  # as this transaction sees it
    tr = Transition(rc.run, now)
    tr.add("timer.fired", token.step, token.path, token.attempt)
    withdraw(tx, tr, task, "expired")
    token.state, token.wait = TokenState.READY, None
    tr.timers_drop.append(token_id)
    move(tr, rc, token, then)
    settle(tr, rc)
    host.apply_inline(tx, rc, tr)


# --- withdrawing -------------------------------------------------------------------------------


def withdraw(tx: Tx, tr: Transition, task: Task, reason: str) -> None:
    tx.end_task(task.id, "withdrawn", tr.now)
    tr.add("task.withdrawn", task.step, task.step, 1, task_id=task.id, reason=reason)


def withdraw_tasks(tx: Tx, run: RunRow, now: int, reason: str) -> list[HistoryRow]:
    """Withdraw every open task of ``run`` (it is cancelled or aborted): their history
    entries, numbered on from ``run.seq``."""
    tr = Transition(run, now)
    for row in tx.open_tasks(run_id=run.id):
        withdraw(tx, tr, Task(**row), reason)
    return tr.history


# --- completing --------------------------------------------------------------------------------


def complete_task(
    host: RunHost,
    task_id: int,
    action: str | None,
    data: Mapping[str, Any],
    actor: Actor,
) -> dict[str, Any]:
    """Complete an open task in one transaction as ``actor``; returns the completed task's JSON.
    Bad input raises a :class:`~procflow.errors.UsageError` (an actor who may not complete the
    task: :class:`~procflow.errors.ForbiddenError`) and changes nothing."""
    _check_given(task_id, action, data, actor.user)
    with host.store.tx() as tx:
        run = _lock(tx, task_id)
        task = _open_task(tx, task_id)
        _check_actor(task, actor)
        action = _check_action(task, action)
        _check_fields(task, data)
        if run is None or run.status in ENDED:  # ending a run withdraws its tasks: a guard
            raise _not_open(task, f"task [{task_id}] belongs to a run that has ended")
        now = host.now()
        rc = host.inline_ctx(tx, run)
        step = rc.process.step(task.step)
        assert isinstance(step, UserTask) and task.token_id is not None
        token = rc.tokens[task.token_id]
        tr = Transition(run, now)
        # Validated like any record write (a bad value changes nothing); the task keeps the
        # values as the record stores them.
        written = _write(tr, rc, step, data)
        by = actor.user
        tx.end_task(task.id, "completed", now, action=action, done_by=by, data=written)
        token.data["action"] = action  # decisions read it (docs/reference/intent.md)
        tr.add("task.completed", step.name, token.path, token.attempt,
               task_id=task.id, action=action, by=by)  # fmt: skip
        resume(tr, rc, token, step)
        settle(tr, rc)
        host.apply_inline(tx, rc, tr)
        done = tx.task(task.id)
        assert done is not None
        return task_json(Task(**done))


def _lock(tx: Tx, task_id: int) -> RunRow | None:
    """Lock the task's record, its run, then the task — the order of a record update that
    aborts or resumes runs (PostgreSQL), so the two never wait on each other; returns the run."""
    row = tx.task(task_id)
    if row is None:
        raise NotFoundError(f"no task with id [{task_id}]", kind="task", key=task_id)
    if row["record_entity"] is not None and row["record_id"] is not None:
        tx.record(row["record_entity"], row["record_id"], lock=True)
    return tx.run_for_update(row["run_id"])


def _open_task(tx: Tx, task_id: int) -> Task:
    row = tx.task(task_id, lock=True)
    assert row is not None  # tasks are never deleted
    task = Task(**row)
    if task.status != "open":
        raise _not_open(
            task, f"task [{task_id}] is {task.status}, not open; only an open task completes"
        )
    return task


def _not_open(task: Task, message: str) -> TaskNotOpenError:
    return TaskNotOpenError(message, task_id=task.id, run_id=task.run_id, step=task.step)


def _task_error(task: Task, message: str, field: str | None = None) -> TaskError:
    return TaskError(message, task_id=task.id, run_id=task.run_id, step=task.step, field=field)


def _check_given(task_id: int, action: str | None, data: Mapping[str, Any], user: str) -> None:
    """Refuse text that is not valid Unicode and numbers JSON cannot hold, before any other
    check: those checks' messages would show them, and the task row would store them."""
    if not user.strip():  # "no user" is the administrator, and must be asked for as such
        raise TaskError(f"task [{task_id}]: the user name is empty", task_id=task_id)
    for what, text in (("the action", action), ("the user name", user)):
        problem = text_problem(text) if text is not None else None
        if problem is not None:
            message = f"task [{task_id}]: {what} is text that is not valid Unicode ({problem})"
            raise TaskError(message, task_id=task_id)
    found = json_problems(data, strict=False)
    if found:
        message = f"task [{task_id}]: " + "; ".join(
            f"data field [{p.where}] {p.problem}" for p in found
        )
        raise TaskError(message, task_id=task_id, field=found[0].where)


def _check_actor(task: Task, actor: Actor) -> None:
    """The assigned user, a member of the assigned role, or an administrator (``Actor``)."""
    message = refusal(task, actor)
    if message is not None:
        raise ForbiddenError(
            message, user=actor.user, task_id=task.id, run_id=task.run_id, step=task.step
        )


def _check_action(task: Task, action: str | None) -> str:
    if not task.form:
        if action is not None and not action.strip():
            raise _task_error(task, f"task [{task.id}]: the action must not be empty", "action")
        return action or DEFAULT_ACTION
    allowed = ", ".join(task.actions)
    if action is None:
        message = f"task [{task.id}] has form [{task.form}]: give an action, one of {allowed}"
        raise _task_error(task, message, "action")
    if action not in task.actions:
        raise _task_error(
            task,
            f"task [{task.id}]: action [{action}] is not allowed by form [{task.form}]"
            + (suggest(action, task.actions) or f" (allowed: {allowed})"),
            "action",
        )
    return action


def _check_fields(task: Task, data: Mapping[str, Any]) -> None:
    extra = [key for key in data if key not in task.fields]
    if not extra:
        return
    if not task.form:
        raise _task_error(
            task,
            f"task [{task.id}] has no form, so completing it writes no fields; "
            f"got [{', '.join(extra)}]",
            extra[0],
        )
    listed = ", ".join(task.fields) or "none"
    raise _task_error(
        task,
        f"task [{task.id}]: field [{extra[0]}] is not in form [{task.form}]"
        + (suggest(extra[0], task.fields) or f" (its fields: {listed})"),
        extra[0],
    )


def _write(tr: Transition, rc: RunCtx, step: UserTask, data: Mapping[str, Any]) -> dict[str, Any]:
    """The form's fields, then the step's own setField/setRelationField, as one record write;
    returns the form's fields as written (the record's stored form)."""
    entity = rc.entity
    if entity is None or rc.record is None or (not data and step.on_complete is None):
        return dict(data)
    after = patch_record(rc.app, entity, rc.record, data, exists=_exists(rc)) if data else None
    before = record_json(entity, rc.record)
    if after is not None:
        write_record(tr, rc, entity, before, after)
    if step.on_complete is not None:
        set_field(tr, rc, step.on_complete)
    return {key: after[key] for key in data} if after is not None else {}


def _exists(rc: RunCtx) -> Callable[[str, int], bool]:
    return lambda entity, id_: rc.load_related(entity, id_) is not None
