"""A flow's ``concurrency``: places per key, taken when a run starts and freed when it ends, both
inside the caller's transaction under the key's row lock (exact across workers).

A run over the limit is created waiting at its first step (a wait of kind ``queue``); the end
that frees a place starts the oldest queued run of the key in the same transaction. A failed
run keeps its place until it is retried to an end or cancelled. ``state["limit"]`` of a limited
run: ``{"key": K, "holds": bool}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from procflow.errors import ExprError, InputError, LimitReached
from procflow.expr import EvalContext, render, render_text
from procflow.model.ir import Concurrency, Flow
from procflow.runtime.clock import to_datetime
from procflow.runtime.data.inputs import input_env
from procflow.states import ENDED, RunStatus, TokenState
from procflow.store.queries.limits import Key
from procflow.store.rows import HistoryRow, RunRow
from procflow.store.store import Tx

__all__ = ["Place", "free_places", "limit_key", "take_place"]


@dataclass(frozen=True)
class Place:
    """Where a new run of a limited flow stands: its key, and whether it holds a place now."""

    key: str
    holds: bool


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
    taken = tx.lock_places(flow.name, key)
    if taken < limit.limit:
        tx.add_places(flow.name, key, 1)
        return Place(key, True)
    if limit.on_limit == "refuse":
        of_key = f" for key {key}" if limit.key is not None else ""
        raise LimitReached(
            f"flow [{flow.name}] has {taken} of {limit.limit} places taken{of_key}; "
            "it refuses starts over its limit (concurrency.on_limit: refuse)",
            flow=flow.name, key=key,
        )  # fmt: skip
    return Place(key, False)


def free_places(tx: Tx, runs: list[RunRow], now: int) -> list[str]:
    """``runs`` ended in ``tx``: each that held a place frees it, and the oldest run queued on
    its key starts in its stead. Returns the runs started.

    One pass for the lot: every key's row locked once (in key order), the queued runs of every
    key read, locked and started with a statement per kind of write, whatever the number of
    runs that ended in the batch."""
    freed: dict[Key, int] = {}
    for run in runs:
        place = run.state.get("limit")
        if not place or not place.get("holds") or run.status not in ENDED:
            continue
        place["holds"] = False  # freed once, whatever saves the row later
        freed[(run.name, place["key"])] = freed.get((run.name, place["key"]), 0) + 1
    if not freed:
        return []
    tx.lock_held_places(sorted(freed))
    started: list[str] = []
    taken = dict.fromkeys(freed, 0)
    wanted = dict(freed)
    # Each try consumes the waits it looked at: a stale one (its run gone) never blocks the
    # queue, and a key is done when its places are taken again or its queue is empty.
    while wanted:
        queued = tx.queued_of(wanted)
        begun = _start_queued(tx, [q for found in queued.values() for q in found], now)
        for key, found in queued.items():
            runs_begun = [run_id for _, run_id in found if run_id in begun]
            started.extend(runs_begun)
            taken[key] += len(runs_begun)
        wanted = {
            key: freed[key] - taken[key]
            for key, found in queued.items()
            if len(found) == wanted[key] and taken[key] < freed[key]
        }
    tx.add_places_many([(taken[key] - n, *key) for key, n in freed.items() if taken[key] != n])
    if started:
        tx.notify()
    return started


def _start_queued(tx: Tx, queued: list[tuple[int, str]], now: int) -> set[str]:
    """Start the queued runs whose wait is still there (each run locked first, then its wait
    consumed); returns their ids. The others' waits are consumed all the same."""
    if not queued:
        return set()
    runs = tx.runs_for_update([run_id for _, run_id in queued])
    tokens = tx.take_waiting_tokens([token_id for token_id, _ in queued])
    ready, history, saved = [], [], []
    for token_id, run_id in queued:
        run, token = runs.get(run_id), tokens.get(token_id)
        if run is None or token is None or run.status in ENDED:
            continue
        token.state, token.wait, token.since = TokenState.READY, None, now
        run.state.setdefault("limit", {})["holds"] = True
        run.status = RunStatus.RUNNING
        run.seq += 1
        ready.append(token)
        history.append(
            (run.id, HistoryRow(run.seq, now, "run.dequeued", token.step, token.path,
                                token.attempt))
        )  # fmt: skip
        saved.append((run, None, None))
    if ready:
        tx.update_tokens(ready)  # a queued token has no timer: nothing else of it to drop
        tx.append_history_many(history)
        tx.save_runs(saved)
    return {run.id for run, _, _ in saved}
