"""A child run's end resumes its parent, inside the transaction that ends the child.

The parent's token waits on the child with a wait of kind ``call`` keyed by the child's id: the
child's final commit takes that wait (so a call's timeout, which takes the same wait, and the
child's end never both win) and hands the token the child's outcome. A child whose parent's call
already ended (it timed out, failed, or the parent was cancelled) finds no wait and wakes
nothing: a child retried by hand after its parent's call failed never resumes that parent.

The children that end in one commit wake their parents together: a statement a table for all of
them (the parents locked in one, their waits taken in another), not a few round trips each.
"""

from __future__ import annotations

from typing import Any

from procflow.runtime import faults
from procflow.states import RunStatus, TokenState
from procflow.store.rows import HistoryRow, RunRow, TokenRow
from procflow.store.store import Tx

__all__ = ["child_outcome", "wake_parents"]


def wake_parents(tx: Tx, children: list[RunRow], now: int) -> list[str]:
    """Resume the parents waiting on these runs, which ended (or failed) in ``tx``; returns the
    parents resumed."""
    by_id = {child.id: child for child in children if child.state.get("parent")}
    found = tx.take_call_waits(sorted(by_id))
    if not found:
        return []
    woken = [
        (run, token, _handed(run, token, by_id[child_id], now)) for child_id, run, token in found
    ]
    tx.update_tokens([token for _, token, _ in woken])
    tx.delete_timers_of_tokens([token.id for _, token, _ in woken if token.id is not None])
    tx.append_history_many([(run.id, entry) for run, _, entry in woken])
    runs = {run.id: run for run, _, _ in woken}  # a parent woken twice is saved once
    tx.save_runs([(run, None, None) for run in runs.values()])
    for _ in woken:
        faults.point("parent_woken")
    tx.notify()
    return list(runs)


def child_outcome(child: RunRow) -> dict[str, Any]:
    """What a call step learns of its child's end."""
    return {"status": str(child.status), "output": child.output, "error": child.error}


def _handed(run: RunRow, token: TokenRow, child: RunRow, now: int) -> HistoryRow:
    token.state, token.wait = TokenState.READY, None
    token.data["child"] = child_outcome(child)
    run.seq += 1
    if run.status != RunStatus.FAILED:
        run.status = RunStatus.RUNNING
    data = {"run_id": child.id, "flow": child.name, "status": str(child.status)}
    return HistoryRow(run.seq, now, "call.ended", token.step, token.path, token.attempt, data)
