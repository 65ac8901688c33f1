"""Child runs: the runs call steps start, written in the commit of the call step's transition
(one multi-row statement a table for every child of a batch), each linked to its parent."""

from __future__ import annotations

from procflow.runtime.runs.starts import FlowStarts, new_flow_run
from procflow.runtime.transition import ChildStart
from procflow.store.queries.calls import CallRow
from procflow.store.rows import RunRow
from procflow.store.store import Tx

__all__ = ["start_children"]


def start_children(tx: Tx, calls: list[tuple[RunRow, ChildStart]], now: int) -> None:
    """Start each (parent, child): the child's rows, ``run.started`` naming its parent and call
    step, and the link that the views, cancellation and purge follow."""
    if not calls:
        return
    starts = FlowStarts()
    links = []
    for parent, child in calls:
        run = new_flow_run(child.version_id, child.flow, now, None, None, child.run_id)
        run.state["depth"] = child.depth
        if not child.detach:  # its end resumes the parent (runtime/waits/calls.py)
            run.state["parent"] = parent.id
        step = child.step
        starts.add(run, child.first, child.inputs, {"parent": parent.id, "step": step})
        links.append(CallRow(child.run_id, parent.id, step, child.flow, child.detach, child.depth))
    written = starts.write(tx)
    assert written  # no start key: nothing to collide with
    tx.insert_calls(links)
