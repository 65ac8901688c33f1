"""A flow's ``concurrency``: places per key, taken when a run starts and freed when it ends, both
inside the caller's transaction under the key's row lock (exact across workers).

A run over the limit is created waiting at its first step (a wait of kind ``queue``); the end
that frees a place starts the oldest queued run of the key in the same transaction. A failed
run keeps its place until it is retried to an end or cancelled. ``state["limit"]`` of a limited
run: ``{"key": K, "holds": bool}``.

A start and a dequeue are stamped with the store's clock read once the key's row is locked, not
with the instant their caller read before (which may be older than the end its lock waited
for): the history of a key then tells its runs' order as the lock gave it — runs queue in the
order of their ``run.started`` instants, and no run is shown taking a place before the end that
freed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from procflow.errors import ExprError, InputError, LimitReached
from procflow.expr import EvalContext, render, render_text
from procflow.model.ir import Concurrency, Flow
from procflow.runtime.clock import store_now, to_datetime
from procflow.runtime.data.inputs import input_env
from procflow.states import ENDED, RunStatus, TokenState
from procflow.store.rows import HistoryRow, RunRow
from procflow.store.store import Tx

__all__ = ["Place", "free_places", "limit_key", "relimit", "take_place"]


@dataclass(frozen=True)
class Place:
    """Where a new run of a limited flow stands: its key, whether it holds a place now, and the
    instant it starts (the store's clock once the key was locked)."""

    key: str
    holds: bool
    at: int


def limit_key(flow: Flow, limit: Concurrency, inputs: Mapping[str, Any], now: int) -> str:
    """The key value of a run with ``inputs`` ("" without a key); an expression error refuses
    the start."""
    if limit.key is None:
        return ""
    try:
        moment = to_datetime(now)
        value = render(limit.key, input_env(flow, inputs), EvalContext(now=lambda: moment))
        return str(render_text(value)) if not isinstance(value, str) else value
    except ExprError as exc:
        raise InputError(flow.name, [f"concurrency.key: {exc.message}"]) from None


def take_place(tx: Tx, flow: Flow, inputs: Mapping[str, Any], now: int) -> Place:
    """Take a place for a new run of ``flow``, or say it queues; :class:`LimitReached` when the
    flow refuses starts over its limit (nothing is written then)."""
    limit = flow.concurrency
    assert limit is not None
    key = limit_key(flow, limit, inputs, now)
    taken, newest = tx.lock_places(flow.name, key, limit.limit)
    limit_now = limit.limit if newest is None else newest  # the newest version's governs
    at = max(now, store_now(tx))
    if taken < limit_now:
        tx.add_places(flow.name, key, 1)
        return Place(key, True, at)
    if limit.on_limit == "refuse":
        of_key = f" for key {key}" if limit.key is not None else ""
        raise LimitReached(
            f"flow [{flow.name}] has {taken} of {limit_now} places taken{of_key}; "
            "it refuses starts over its limit (concurrency.on_limit: refuse)",
            flow=flow.name, key=key,
        )  # fmt: skip
    return Place(key, False, at)


def free_places(tx: Tx, runs: list[RunRow], now: int) -> list[str]:
    """``runs`` ended in ``tx``: each that held a place frees it, and the oldest run queued on
    its key starts in its stead. Returns the runs started."""
    started: list[str] = []
    for run in runs:
        place = run.state.get("limit")
        if not place or not place.get("holds") or run.status not in ENDED:
            continue
        place["holds"] = False  # freed once, whatever saves the row later
        key = place["key"]
        taken, limit = tx.lock_places(run.name, key)
        tx.add_places(run.name, key, -1)
        room = 1 if limit is None else limit - (taken - 1)  # a lowered limit: none, or fewer
        started += _fill(tx, run.name, key, room, max(now, run.ended_at or now))
    if started:
        tx.notify()
    return started


def relimit(tx: Tx, flow: Flow, now: int) -> list[str]:
    """A new version of ``flow`` was deployed: its limit (none: no limit) governs every key from
    now on; a raised one starts the queued runs it has room for, at once."""
    limit = flow.concurrency.limit if flow.concurrency is not None else None
    started: list[str] = []
    for key in tx.set_limit(flow.name, limit):
        taken, _ = tx.lock_places(flow.name, key)
        room = len(tx.queued(flow.name, key, 1 << 30)) if limit is None else limit - taken
        started += _fill(tx, flow.name, key, room, now)
    if started:
        tx.notify()
    return started


def _fill(tx: Tx, flow: str, key: str, room: int, freed_at: int) -> list[str]:
    """Start up to ``room`` of the oldest runs queued on (``flow``, ``key``). Each try consumes
    the wait it looked at: a stale one (its run gone) never blocks the queue."""
    started: list[str] = []
    while len(started) < room and (queued := tx.queued(flow, key, 1)):
        token_id, run_id = queued[0]
        if _start_queued(tx, token_id, run_id, freed_at):
            tx.add_places(flow, key, 1)
            started.append(run_id)
    return started


def _start_queued(tx: Tx, token_id: int, run_id: str, freed_at: int) -> bool:
    """Start the queued run if it is still there (not cancelled meanwhile), stamped no earlier
    than the end that freed its place, nor than any cancel this transaction waited for."""
    queued = tx.run_for_update(run_id)
    token = tx.take_waiting_token(token_id)
    if queued is None or token is None or queued.status in ENDED:
        tx.delete_waits_of_tokens([token_id])
        return False
    now = max(freed_at, store_now(tx))
    token.state, token.wait, token.since = TokenState.READY, None, now
    queued.state.setdefault("limit", {})["holds"] = True
    queued.status = RunStatus.RUNNING
    queued.seq += 1
    entry = HistoryRow(queued.seq, now, "run.dequeued", token.step, token.path, token.attempt)
    tx.resume_token(queued, token, entry)
    return True
