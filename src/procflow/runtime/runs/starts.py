"""Creating runs: the rows a new run starts with, written inside the caller's transaction.

Every way a run begins — ``procflow start``, a record write that triggers a process, an event
that triggers a flow, ``runs.start`` — ends here, so a run always starts the same way: one run row,
one ready token at the first step, ``run.started`` in its history, and a wake-up for idle workers.
A ``start_key`` makes the start happen at most once (per record, per event).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from procflow.model.ir import Flow, Process
from procflow.runtime.interpret.flow_state import INPUTS, initial_state
from procflow.runtime.runs.limits import Place, take_place
from procflow.runtime.transition import new_run_id
from procflow.states import RunStatus, TokenState
from procflow.store.rows import HistoryRow, RunRow, TokenRow
from procflow.store.store import Tx

__all__ = ["ChildOf", "insert_flow_run", "insert_intent_run", "new_run_id", "record_start_key"]


def record_start_key(process: str, entity: str, id_: int) -> str:
    """The start key that keeps a triggered process to one run per record, however started."""
    return f"{process}/{entity}/{id_}"


def insert_intent_run(
    tx: Tx,
    version_id: int,
    process: Process,
    now: int,
    record: tuple[str, int],
    business_key: str,
    start_key: str | None = None,
    snapshot: Mapping[str, Any] | None = None,
    by: str | None = None,
    schedule: tuple[str, int] | None = None,
) -> str | None:
    """A run of ``process`` about ``record``; None when ``start_key`` was used before. ``by``:
    the user who started it by hand, recorded on ``run.started``. ``schedule``: as for
    :func:`insert_flow_run` (an intent schedule's ``start``)."""
    entity, id_ = record
    state: dict[str, Any] = {"snapshot": dict(snapshot)} if snapshot else {}
    if schedule is not None:
        state["schedule"] = {"name": schedule[0], "slot": schedule[1]}
    run = RunRow(
        id=new_run_id(), version_id=version_id, name=process.name, dialect="intent",
        status=RunStatus.RUNNING, started_at=now, business_key=business_key,
        record_entity=entity, record_id=id_, start_key=start_key, state=state, seq=1,
    )  # fmt: skip
    tx.notify()
    if not tx.insert_run(run):
        return None  # at most once per record, ever
    first = process.steps[0].name
    token = TokenRow(None, run.id, first, first, TokenState.READY, 1, now, None, {"visit": 1})
    _begin(tx, run, token, by)
    return run.id


def insert_flow_run(
    tx: Tx,
    version_id: int,
    flow: Flow,
    inputs: Mapping[str, Any],
    now: int,
    start_key: str | None = None,
    by: str | None = None,
    schedule: tuple[str, int] | None = None,
    *,
    child: ChildOf | None = None,
) -> RunRow | None:
    """A run of ``flow`` with checked ``inputs``; None when ``start_key`` was used before.
    ``by``: as for :func:`insert_intent_run`. ``schedule``: the schedule and slot that start
    it (kept in the run's state: ``runs show`` and ``run.scheduled_at`` read it). ``child``: a
    call step's child. A flow with ``concurrency`` takes a place or queues the run
    (``runtime/runs/limits.py``); one that refuses raises :class:`LimitReached`."""
    first = flow.steps[0].id
    place = take_place(tx, flow, inputs, now) if flow.concurrency is not None else None
    run = insert_run_of(
        tx, version_id, flow.name, first, inputs, place.at if place is not None else now,
        start_key, by, schedule, place=place, child=child,
    )  # fmt: skip
    if run is None and place is not None and place.holds:
        tx.add_places(flow.name, place.key, -1)  # the start key was taken: no run, no place
    return run


@dataclass(frozen=True)
class ChildOf:
    """What a child run started by a call step carries of its parent."""

    run_id: str
    state: dict[str, Any]  # depth, and the parent to resume
    started: dict[str, Any]  # what its ``run.started`` says


def new_flow_run(
    version_id: int, name: str, now: int, start_key: str | None,
    schedule: tuple[str, int] | None, run_id: str | None = None,
) -> RunRow:  # fmt: skip
    """The row of a new flow run (``seq`` 1: its ``run.started`` comes with it)."""
    state = initial_state()
    if schedule is not None:
        state["schedule"] = {"name": schedule[0], "slot": schedule[1]}
    return RunRow(
        id=run_id or new_run_id(), version_id=version_id, name=name, dialect="flow",
        status=RunStatus.RUNNING, started_at=now, start_key=start_key, state=state, seq=1,
    )  # fmt: skip


class FlowStarts:
    """New flow runs written together: every table one multi-row statement, not one statement
    a run (a group of schedule slots: a few round trips to PostgreSQL instead of a thousand).
    :meth:`write` says whether every run went in; one whose start key was taken means the
    caller's transaction must be rolled back and its starts made one by one."""

    def __init__(self) -> None:
        self.runs: list[RunRow] = []
        self.scopes: list[tuple[str, str, int, Any]] = []
        self.tokens: list[TokenRow] = []
        self.history: list[tuple[str, HistoryRow]] = []

    def add(
        self, run: RunRow, first: str, inputs: Mapping[str, Any],
        started: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """``started``: what ``run.started`` says of how (a parent run and its call step)."""
        now = run.started_at
        self.runs.append(run)
        self.scopes.append((run.id, *INPUTS, dict(inputs)))
        self.tokens.append(TokenRow(None, run.id, first, first, TokenState.READY, 1, now, None, {}))
        self.history.append((run.id, HistoryRow(1, now, "run.started", data=started)))

    def write(self, tx: Tx) -> bool:
        if not self.runs:
            return True
        inserted = tx.insert_started_runs(self.runs, self.scopes, self.tokens, self.history)
        if len(inserted) != len(self.runs):
            return False
        tx.notify()
        return True


def insert_run_of(
    tx: Tx, version_id: int, name: str, first: str, inputs: Mapping[str, Any], now: int,
    start_key: str | None = None, by: str | None = None,
    schedule: tuple[str, int] | None = None, *, place: Place | None = None,
    child: ChildOf | None = None,
) -> RunRow | None:  # fmt: skip
    """:func:`insert_flow_run` from what a start needs of the flow: its name and first step (a
    schedule keeps them, so firing a slot compiles nothing). ``place``: the run's place in its
    flow's concurrency limit (a run without one is queued at its first step)."""
    run_id = child.run_id if child is not None else None
    run = new_flow_run(version_id, name, now, start_key, schedule, run_id)
    token = TokenRow(None, run.id, first, first, TokenState.READY, 1, now, None, {})
    started = dict(child.started) if child is not None else {}
    if child is not None:
        run.state.update(child.state)
    if place is not None:
        run.state["limit"] = {"key": place.key, "holds": place.holds}
        if not place.holds:
            run.status, token.state = RunStatus.WAITING, TokenState.WAITING
            token.wait = {"kind": "queue", "key": place.key}
            started["queued"] = True
    if not tx.insert_run(run):
        return None
    tx.apply_scope_ops(run.id, [("put", *INPUTS, dict(inputs))])
    _begin(tx, run, token, by, started)
    if token.wait is not None:
        assert token.id is not None
        tx.insert_waits([(token.id, run.id, "queue", f"queue:{name}", token.wait["key"], now)])
    tx.notify()
    return run


def _begin(
    tx: Tx, run: RunRow, token: TokenRow, by: str | None, started: dict[str, Any] | None = None
) -> None:
    """The first token and ``run.started`` of a run just inserted (with ``seq`` 1 already: its
    row needs no second write)."""
    tx.insert_token(token)
    data = dict(started or {}) | ({"by": by} if by is not None else {})
    tx.append_history(run.id, [HistoryRow(1, token.since, "run.started", data=data or None)])
