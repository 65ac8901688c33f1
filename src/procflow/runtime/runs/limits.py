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
from procflow.store.queries.runrows.limits import Key
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
    """``runs`` ended in ``tx``: each that held a place frees it, and the oldest runs queued on
    its key start in their stead, as many as the key's limit (the newest version's) has room
    for. Returns the runs started.

    One pass for the lot: every key's row locked once (in key order, so two workers freeing
    places of several keys never deadlock), the heads of every key's queue read, locked and
    started with a statement per kind of write, whatever the number of runs that ended."""
    freed: dict[Key, int] = {}
    ended_at = now
    for run in runs:
        place = run.state.get("limit")
        if not place or not place.get("holds") or run.status not in ENDED:
            continue
        place["holds"] = False  # freed once, whatever saves the row later
        key = (run.name, place["key"])
        freed[key] = freed.get(key, 0) + 1
        ended_at = max(ended_at, run.ended_at or now)
    if not freed:
        return []
    held = tx.lock_held_places(sorted(freed))
    rooms: dict[Key, int] = {}
    for key, n in freed.items():
        active, limit = held.get(key, (n, None))
        room = n if limit is None else limit - (active - n)  # a lowered limit: fewer, or none
        if room > 0:
            rooms[key] = room
    taken = _fill(tx, rooms, ended_at)
    deltas = [(len(taken.get(key, [])) - n, *key) for key, n in freed.items()]
    tx.add_places_many([d for d in deltas if d[0] != 0])
    return _notified(tx, taken)


def relimit(tx: Tx, flow: Flow, now: int) -> list[str]:
    """A new version of ``flow`` was deployed: its limit (none: no limit) governs every key from
    now on; a raised one starts, at once, the queued runs it has room for."""
    limit = flow.concurrency.limit if flow.concurrency is not None else None
    keys = [(flow.name, key) for key in tx.set_limit(flow.name, limit)]
    if not keys:
        return []
    held = tx.lock_held_places(sorted(keys))
    rooms: dict[Key, int] = {}
    for key in keys:
        room = UNLIMITED if limit is None else limit - held.get(key, (0, None))[0]
        if room > 0:
            rooms[key] = room
    taken = _fill(tx, rooms, now)
    tx.add_places_many([(len(ids), *key) for key, ids in taken.items() if ids])
    return _notified(tx, taken)


UNLIMITED = 1 << 30  # the room of a key whose flow has no limit any more


def _notified(tx: Tx, taken: dict[Key, list[str]]) -> list[str]:
    started = [run_id for ids in taken.values() for run_id in ids]
    if started:
        tx.notify()
    return started


def _fill(tx: Tx, rooms: dict[Key, int], freed_at: int) -> dict[Key, list[str]]:
    """Start up to ``rooms[key]`` of the oldest runs queued on each key; the runs started, by
    key. Each try consumes the waits it looked at: a stale one (its run cancelled) never blocks
    the queue, and a key is done when its room is taken or its queue is empty."""
    taken: dict[Key, list[str]] = {key: [] for key in rooms}
    wanted = dict(rooms)
    while wanted:
        queued = tx.queued_of(wanted)
        begun = _start_queued(tx, [q for found in queued.values() for q in found], freed_at)
        for key, found in queued.items():
            taken[key] += [run_id for _, run_id in found if run_id in begun]
        wanted = {
            key: rooms[key] - len(taken[key])
            for key, found in queued.items()
            if len(found) == wanted[key] and len(taken[key]) < rooms[key]
        }
    return taken


def _start_queued(tx: Tx, queued: list[tuple[int, str]], freed_at: int) -> set[str]:
    """Start the queued runs whose wait is still there (each run locked first, then its wait
    consumed), stamped no earlier than the ends that freed their places nor than any cancel
    this transaction waited for; returns their ids. The others' waits are consumed all the
    same."""
    if not queued:
        return set()
    runs = tx.runs_for_update([run_id for _, run_id in queued])
    tokens = tx.take_waiting_tokens([token_id for token_id, _ in queued])
    now = max(freed_at, store_now(tx))
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
        entry = HistoryRow(run.seq, now, "run.dequeued", token.step, token.path, token.attempt)
        history.append((run.id, entry))
        saved.append((run, None, None))
    if ready:
        tx.update_tokens(ready)  # a queued token has no timer: nothing else of it to drop
        tx.append_history_many(history)
        tx.save_runs(saved)
    return {run.id for run, _, _ in saved}
