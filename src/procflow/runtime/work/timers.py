"""Firing due timers: a retry delay, a wait, a poll interval, a ``wait_for`` timeout, a user
task's open, timeout and expiry.

Timers fire in bulk, a statement per kind of write for the whole batch: each token becomes ready
with ``timer.fired`` in its history. A ``wait_for`` timeout fires only if its wait is still there
(the event may have won: exactly one of them does). Runs with a user task timer in the batch go
one timer at a time, read fresh, since a task timer writes its own rows.
"""

from __future__ import annotations

from procflow.errors import StoreError
from procflow.runtime.runs.host import RunHost
from procflow.runtime.waits.tasks import fire_task_timer
from procflow.runtime.work.incidents import IncidentCtx, describe, incident
from procflow.states import ENDED, RunStatus, TokenState
from procflow.store.rows import HistoryRow, RunRow, TimerRow, TokenRow
from procflow.store.store import Tx

__all__ = ["fire_due_timers"]


def fire_due_timers(host: RunHost, tx: Tx, now: int, wall: int, limit: int) -> int:
    """Fire up to ``limit`` timers due at ``now`` whose runs no other worker holds at ``wall``;
    returns how many fired."""
    timers = tx.due_timers_free(now, wall, limit)
    if not timers:
        return 0
    run_ids = list(dict.fromkeys(t.run_id for t in timers))
    runs = tx.runs_by_id(run_ids)
    tokens = {t.id: t for t in tx.tokens_of_runs(run_ids)}
    tx.delete_timers([t.id for t in timers])
    with_tasks = {t.run_id for t in timers if t.kind.startswith("task_")}
    fired, history, ready, touched = 0, [], [], {}
    for timer in timers:
        run, token = runs.get(timer.run_id), tokens.get(timer.token_id)
        if run is None or token is None or run.status in ENDED:
            continue
        if timer.run_id in with_tasks:  # task timers write straight to the store
            fired += _fire_one(host, tx, timer, now)
            continue
        if timer.kind == "timeout" and not tx.take_waits([_id(token)]):
            continue  # a wait_for's event got there first: exactly one of them wins
        token.state, token.wait = TokenState.READY, None
        ready.append(token)
        history.append((run.id, _fired(run, token, now)))
        touched[run.id] = run
        fired += 1
    tx.update_tokens(ready)
    tx.append_history_many(history)
    tx.save_runs([(run, None, None) for run in touched.values()])
    return fired


def _fire_one(host: RunHost, tx: Tx, timer: TimerRow, now: int) -> int:
    """One timer of a run with a user task timer in the batch, read fresh from the store
    (an earlier timer of the same run may have changed it)."""
    run = tx.run(timer.run_id)
    token = next((t for t in tx.tokens(timer.run_id) if t.id == timer.token_id), None)
    if run is None or token is None or run.status in ENDED:
        return 0
    if timer.kind.startswith("task_"):
        tx.savepoint("task_timer")
        try:
            fire_task_timer(host, tx, timer, run, token, now)
        except StoreError:
            raise  # the store's trouble, not the run's: the round is handed back
        except Exception as exc:  # this run's incident; the other timers still fire
            tx.rollback_to("task_timer")
            _fail(tx, run, token, now, exc)
        return 1
    if timer.kind == "timeout" and not tx.take_waits([_id(token)]):
        return 0
    token.state, token.wait = TokenState.READY, None
    tx.update_tokens([token])
    tx.append_history(run.id, [_fired(run, token, now)])
    tx.save_run(run, None, None)
    return 1


def _fired(run: RunRow, token: TokenRow, now: int) -> HistoryRow:
    """``timer.fired``, numbered on; the run moves again (a failed run's other tokens still do
    not: it stays failed until retried)."""
    run.seq += 1
    if run.status != RunStatus.FAILED:
        run.status = RunStatus.RUNNING
    return HistoryRow(run.seq, now, "timer.fired", token.step, token.path, token.attempt)


def _fail(tx: Tx, run: RunRow, token: TokenRow, now: int, exc: Exception) -> None:
    tr = incident(IncidentCtx(run, {_id(token): token}), token, now, describe(exc))
    tx.update_tokens(tr.tokens_update)
    tx.append_history(run.id, tr.history)
    tx.save_run(run, None, None)


def _id(token: TokenRow) -> int:
    assert token.id is not None
    return token.id
