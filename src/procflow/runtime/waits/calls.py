"""A child run's end resumes its parent, inside the transaction that ends the child.

The parent's token waits on the child with a wait of kind ``call`` keyed by the child's id: the
child's final commit takes that wait (so a call's timeout, which takes the same wait, and the
child's end never both win) and hands the token the child's outcome. A child whose parent's call
already ended (it timed out, failed, or the parent was cancelled) finds no wait and wakes
nothing: a child retried by hand after its parent's call failed never resumes that parent.
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
    woken = []
    for child in children:
        if not child.state.get("parent"):
            continue
        for seen in tx.waiting_runs_for_update("call", child.id):
            token = tx.take_waiting_token(seen.token_id)
            if token is None:  # the call's timeout took the wait first
                continue
            entry = _handed(seen.run, token, child, now)
            tx.wake_token(seen.run, token, entry)
            faults.point("parent_woken")
            woken.append(seen.run.id)
    if woken:
        tx.notify()
    return woken


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
