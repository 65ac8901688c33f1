"""What a committed record write does to runs already going: ``abortOn`` and intent ``wait``.

Both run inside the write's transaction (``Engine._lifecycle``), whoever wrote — a person through
the CLI or API, a completed task's form, or a step of this very run. abortOn goes first: a write
that both aborts a run and satisfies one of its waits aborts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow.errors import ExprError
from procflow.expr import evaluate_condition
from procflow.model.ir import (
    END,
    AbortOn,
    Application,
    Entity,
    ServiceTask,
    SetField,
    SetRelationField,
    WaitRecord,
)
from procflow.runtime.data.records import seeded_names
from procflow.runtime.interpret.intent import (
    RunCtx,
    eval_context,
    record_env,
    resume,
    set_field,
    settle,
    sweep_vars,
    wait_type,
)
from procflow.runtime.runs.host import RunHost
from procflow.runtime.transition import Transition
from procflow.runtime.waits.task_rows import Task
from procflow.runtime.waits.tasks import withdraw
from procflow.states import ENDED, RunStatus
from procflow.store.store import Tx


def on_record_event(
    host: RunHost,
    tx: Tx,
    event: str,
    app: Application,
    entity: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    now: int,
) -> None:
    """A create or update of ``entity`` was just written in ``tx``: abort the runs whose
    abortOn status it entered, then resume the waits it satisfies."""
    decl = app.entity(entity)
    if after is None or decl is None or event == "onDelete":
        return  # a delete cancels the runs about the record (Engine.delete_record)
    if before is not None:
        abort_runs(host, tx, app, decl, before, after, now)
    resume_waits(host, tx, event, app, decl, after, now)


# --- abortOn -----------------------------------------------------------------------------------


def abort_runs(
    host: RunHost,
    tx: Tx,
    app: Application,
    entity: Entity,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    now: int,
) -> None:
    status = entity.status_relation
    if status is None:
        return
    entered = after.get(status.name)
    if entered is None or entered == before.get(status.name):
        return  # only a change *into* a status aborts
    id_ = int(after[entity.primary_key.name])
    for run in tx.active_runs_for_record(entity.name, id_):
        _, process = host.catalog.process(run.version_id, run.name, tx)
        abort_on = process.abort_on
        if abort_on is not None and entered in abort_on.statuses:
            name = _status_name(app, status.to, entered)
            reason = f"[{entity.name}] {id_} entered status [{name}] ({status.name})"
            abort(host, tx, run.id, abort_on, reason, now)


def _status_name(app: Application, setting: str, id_: int) -> str:
    names = {v: k for k, v in seeded_names(app, setting).items()}
    return names.get(id_, str(id_))


def abort(host: RunHost, tx: Tx, run_id: str, abort_on: AbortOn, reason: str, now: int) -> None:
    """Cancel the whole run — open tasks withdrawn, tokens, timers and waits removed — run the
    cleanup step alone, here, in this transaction, sweep the vars, and end the run ``aborted``.
    A worker holding the run meanwhile has its commit refused (the run is no longer running,
    and its lease is released)."""
    run = tx.run_for_update(run_id)
    if run is None or run.status in ENDED:
        return
    rc = host.inline_ctx(tx, run)
    tr = Transition(run, now)
    for row in tx.open_tasks(run_id=run.id):
        withdraw(tx, tr, Task(**row), "aborted")
    tx.delete_run_waits(run.id)
    tx.delete_run_timers(run.id)
    tx.delete_run_tokens(run.id)
    tx.delete_run_scopes(run.id)
    rc.tokens.clear()
    if abort_on.then != END:
        _cleanup(tr, rc, abort_on.then)
    sweep_vars(tr, rc)
    run.status, run.ended_at, run.error = RunStatus.ABORTED, now, None
    tr.add("run.aborted", reason=reason)
    # The cleanup's record write is applied after the run row is saved as aborted, so the
    # lifecycle event it fires in turn cannot abort or resume this run again.
    host.apply_inline(tx, rc, tr)


def _cleanup(tr: Transition, rc: RunCtx, name: str) -> None:
    """The abortOn ``then`` step (validation: a setField/setRelationField serviceTask); its
    ``next`` is not followed: it runs alone."""
    step = rc.process.step(name)
    assert isinstance(step, ServiceTask) and isinstance(step.action, SetField | SetRelationField)
    tr.add("step.started", step.name, step.name, 1)
    if rc.record is not None:
        set_field(tr, rc, step.action)
    tr.add("step.completed", step.name, step.name, 1)


# --- wait --------------------------------------------------------------------------------------


def resume_waits(
    host: RunHost,
    tx: Tx,
    event: str,
    app: Application,
    entity: Entity,
    record: Mapping[str, Any],
    now: int,
) -> None:
    """Resume every token whose ``wait`` this record satisfies: one indexed lookup by (type,
    keys) for the record itself and for each to-one relation it has set, then ``when``."""
    id_ = int(record[entity.primary_key.name])
    pairs = [(wait_type(entity.name, event, None), str(id_))]
    for relation in entity.relations:
        if relation.to_one and record.get(relation.name) is not None:
            pairs.append((wait_type(entity.name, event, relation.name), str(record[relation.name])))
    found = tx.find_record_waits(pairs)
    by_run: dict[str, list[int]] = {}
    for token_id, run_id in found:
        by_run.setdefault(run_id, []).append(token_id)
    described = {"event": event, "record": {"entity": entity.name, "id": id_}}
    for run_id in sorted(by_run):  # runs locked in one order, as event delivery does
        run = tx.run_for_update(run_id)
        if run is None or run.status in ENDED:
            continue
        rc = host.inline_ctx(tx, run)
        tr = Transition(run, now)
        for token_id in by_run[run_id]:
            token = rc.tokens.get(token_id)
            step = rc.process.step(token.step) if token is not None else None
            if token is None or not isinstance(step, WaitRecord):
                continue
            if not _holds(step, entity, record, rc, now) or not tx.take_waits([token_id]):
                continue  # fail-soft: a false or failing guard leaves the token parked
            resume(tr, rc, token, step, **described)
        if tr.history:
            settle(tr, rc)
            host.apply_inline(tx, rc, tr)


def _holds(
    step: WaitRecord, entity: Entity, record: Mapping[str, Any], rc: RunCtx, now: int
) -> bool:
    if step.when is None:
        return True
    try:
        env = record_env(entity, record, step.when, rc.load_related)
        return evaluate_condition(step.when, env, eval_context(now)) is True
    except ExprError:
        return False
