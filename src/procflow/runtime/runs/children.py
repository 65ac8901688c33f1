"""Child runs: the runs call steps start, written in the commit of the call step's transition
(one multi-row statement a table for every child of a batch), each linked to its parent. A child
of a flow with ``concurrency`` takes its place (or queues) like any start; one its flow refuses
fails the call at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from procflow.errors import LimitReached
from procflow.model.ir import Flow
from procflow.runtime.runs.starts import ChildOf, FlowStarts, insert_flow_run, new_flow_run
from procflow.runtime.transition import ChildStart
from procflow.states import RunStatus, TokenState
from procflow.store.queries.runrows.calls import CallRow
from procflow.store.rows import HistoryRow, RunRow
from procflow.store.store import Tx

__all__ = ["start_children"]


def start_children(
    tx: Tx, calls: list[tuple[RunRow, ChildStart]], now: int, flow_of: Callable[[int], Flow]
) -> None:
    """Start each (parent, child): the child's rows, ``run.started`` naming its parent and call
    step, and the link that the views, cancellation and purge follow. ``flow_of``: a version's
    flow, read only for flows with a concurrency limit (they start one by one)."""
    if not calls:
        return
    starts = FlowStarts()
    links = []
    for parent, child in calls:
        state: dict[str, Any] = {"depth": child.depth}
        if not child.detach:  # its end resumes the parent (runtime/waits/calls.py)
            state["parent"] = parent.id
        step = child.step
        started = {"parent": parent.id, "step": step}
        if child.limited:
            if not _start_limited(
                tx, parent, child, now, flow_of, ChildOf(child.run_id, state, started)
            ):
                continue
        else:
            run = new_flow_run(child.version_id, child.flow, now, None, None, child.run_id)
            run.state.update(state)
            starts.add(run, child.first, child.inputs, started)
        links.append(CallRow(child.run_id, parent.id, step, child.flow, child.detach, child.depth))
    written = starts.write(tx)
    assert written  # no start key: nothing to collide with
    tx.insert_calls(links)


def _start_limited(
    tx: Tx, parent: RunRow, child: ChildStart, now: int, flow_of: Callable[[int], Flow],
    of: ChildOf,
) -> bool:  # fmt: skip
    flow = flow_of(child.version_id)
    try:
        insert_flow_run(tx, child.version_id, flow, child.inputs, now, child=of)
    except LimitReached as exc:
        if not child.detach:
            _refused(tx, parent, child, str(exc), now)
        return False
    return True


def _refused(tx: Tx, parent: RunRow, child: ChildStart, message: str, now: int) -> None:
    """The call's child was refused by its flow's limit: the parent's token, parked on it in
    this very commit, is handed the refusal at once (its call then fails)."""
    token = child.token
    assert token.id is not None
    if tx.take_waiting_token(token.id) is None:
        return
    token.state, token.wait = TokenState.READY, None
    token.data["child"] = {"status": "refused", "output": None, "error": {"message": message}}
    parent.seq += 1
    parent.status = RunStatus.RUNNING
    ended = {"run_id": child.run_id, "flow": child.flow, "status": "refused"}
    entry = HistoryRow(parent.seq, now, "call.ended", token.step, token.path, token.attempt, ended)
    tx.resume_token(parent, token, entry)
