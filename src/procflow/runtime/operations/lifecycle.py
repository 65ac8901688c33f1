"""A run's life outside the work loop: the processes a record write triggers, cancelling and
retrying, each inside the caller's transaction.

The record write's other effects on runs (``abortOn``, resuming record waits) are in
``record_waits``; this module fires them after the triggers, so one committed write has all its
effects in its own transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow.errors import NotFoundError, RunStateError
from procflow.expr import evaluate_condition
from procflow.model.ir import Application
from procflow.runtime.data.records import record_json
from procflow.runtime.interpret.intent import eval_context
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.limits import free_places
from procflow.runtime.runs.starts import insert_intent_run, record_start_key
from procflow.runtime.waits.calls import wake_parents
from procflow.runtime.waits.record_waits import on_record_event
from procflow.runtime.waits.tasks import withdraw_tasks
from procflow.states import ENDED, RunStatus, TokenState
from procflow.store.rows import HistoryRow, RunRow
from procflow.store.store import Tx

__all__ = ["cancel_run", "on_record_write", "retry_run"]


def on_record_write(
    host: RunHost,
    tx: Tx,
    event: str,
    app: Application,
    entity: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    now: int,
) -> list[str]:
    """A write of ``entity`` was just made in ``tx``: start every process it triggers (at most
    once per record), then abort and resume the runs it concerns. Returns the runs started."""
    record = after if after is not None else before
    assert record is not None
    decl = app.entity(entity)
    assert decl is not None
    started = []
    for compiled, process in host.catalog.latest_processes(tx):
        trigger = process.trigger
        if trigger is None or trigger.event != event or trigger.entity != entity:
            continue
        env = record_json(decl, dict(record))
        if not all(evaluate_condition(g, env, eval_context(now)) for g in trigger.when):
            continue
        id_ = int(record[decl.primary_key.name])
        key = str(record.get(trigger.business_key)) if trigger.business_key else str(id_)
        run_id = insert_intent_run(
            tx, compiled.version.id, process, now, (entity, id_), key,
            start_key=record_start_key(process.name, entity, id_),
            snapshot=record if event == "onDelete" else None,
        )  # fmt: skip
        if run_id:
            started.append(run_id)
    on_record_event(
        host, tx, event, app, entity,
        dict(before) if before is not None else None, dict(after) if after is not None else None,
        now,
    )  # fmt: skip
    return started


def cancel_run(tx: Tx, run: RunRow, now: int, reason: str, by: str | None = None) -> None:
    """End ``run`` as cancelled: tasks withdrawn, tokens, timers, waits, scopes and vars gone;
    the children its calls wait for are cancelled with it (not the detached ones), and a parent
    waiting for it learns that its call failed. ``by``: the user who asked for it, recorded on
    ``run.cancelled`` when named."""
    run = tx.run_for_update(run.id) or run  # a committing worker may have moved it on
    _end_as_cancelled(tx, run, now, reason, by)
    if run.state.get("limit"):
        free_places(tx, [run], now)
    for child_id in tx.waiting_children(run.id):
        child = tx.run_for_update(child_id)
        if child is not None and child.status not in ENDED:
            cancel_run(tx, child, now, f"its parent run {run.id} was cancelled", by)
    if run.state.get("parent"):
        wake_parents(tx, [run], now)


def _end_as_cancelled(tx: Tx, run: RunRow, now: int, reason: str, by: str | None) -> None:
    names = tx.clear_vars(run.id)
    tx.delete_run_scopes(run.id)
    tx.delete_run_waits(run.id)
    tx.delete_run_timers(run.id)
    tx.delete_run_tokens(run.id)
    history = withdraw_tasks(tx, run, now, "cancelled")  # before run.cancelled, in order
    for name in sorted(names):
        run.seq += 1
        history.append(HistoryRow(run.seq, now, "var.cleared", data={"var": name}))
    run.seq += 1
    cancelled = {"reason": reason} | ({"by": by} if by is not None else {})
    history.append(HistoryRow(run.seq, now, "run.cancelled", data=cancelled))
    run.status, run.ended_at = RunStatus.CANCELLED, now
    tx.append_history(run.id, history)
    tx.save_run(run, None, None)


def cancel_by_operator(tx: Tx, run_id: str, now: int, by: str | None = None) -> None:
    run = _locked_run(tx, run_id)
    if run.status in ENDED:
        raise RunStateError(
            f"run [{run_id}] is already {run.status}; nothing to cancel",
            run_id=run_id, status=run.status,
        )  # fmt: skip
    cancel_run(tx, run, now, reason="cancelled by an operator", by=by)


def retry_run(tx: Tx, run_id: str, now: int, by: str | None = None) -> None:
    """Re-attempt a failed run's failed steps with a fresh retry budget (``by``: as for
    :func:`cancel_run`)."""
    run = _locked_run(tx, run_id)
    if run.status != RunStatus.FAILED:
        raise RunStateError(
            f"run [{run_id}] is {run.status}; only a failed run can be retried",
            run_id=run_id, status=run.status,
        )  # fmt: skip
    tokens = [t for t in tx.tokens(run_id) if t.state == TokenState.FAILED]
    for token in tokens:
        token.state, token.attempt, token.since, token.wait = TokenState.READY, 1, now, None
        token.data["steps"] = 0
    tx.update_tokens(tokens)
    run.status, run.error = RunStatus.RUNNING, None
    run.seq += 1
    first = tokens[0] if tokens else None
    retried = HistoryRow(
        run.seq, now, "run.retried",
        first.step if first else None, first.path if first else None, 1 if first else None,
        {"by": by} if by is not None else None,
    )  # fmt: skip
    tx.append_history(run.id, [retried])
    tx.save_run(run, None, None)
    tx.notify()


def _locked_run(tx: Tx, run_id: str) -> RunRow:
    run = tx.run_for_update(run_id)
    if run is None:
        raise NotFoundError.run(run_id)
    return run
