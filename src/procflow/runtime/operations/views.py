"""What runs look like from outside: the stable JSON shapes of docs/reference/cli.md, and
summaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.runtime.clock import iso
from procflow.states import TokenState
from procflow.store.rows import HistoryRow, RunRow, RunSummary, TokenRow
from procflow.store.store import Tx

if TYPE_CHECKING:
    from procflow.model.ir import Application

_TIME_KEYS = ("due", "timeout_at")
MAX_CHAIN = 16
"""How many calls down why-waiting follows a parent's chain of waiting children (calls nest at
most 16 deep, so this follows every real chain; it bounds the reads whatever the store holds)."""


def waiting_for(token: TokenRow) -> dict[str, Any] | None:
    if token.state != TokenState.WAITING or token.wait is None:
        return None
    out = dict(token.wait)
    for key in _TIME_KEYS:
        if isinstance(out.get(key), int):
            out[key] = iso(out[key])
    return out


def token_json(token: TokenRow, tx: Tx | None = None, depth: int = 1) -> dict[str, Any]:
    """A token in the ``runs show`` shape; with ``tx``, a token waiting for a call adds what the
    child waits for (``waiting_for.child``), down the chain."""
    out: dict[str, Any] = {"step": token.step, "state": token.state}
    if token.path != token.step:
        out["path"] = token.path
    wait = waiting_for(token)
    if wait is not None:
        if tx is not None and wait.get("kind") == "call" and depth <= MAX_CHAIN:
            wait["child"] = _child_waits(tx, str(wait["run_id"]), depth)
        if tx is not None and wait.get("kind") == "queue":
            wait.update(_queue_facts(tx, token, str(wait.get("key", ""))))
        out["waiting_for"] = wait
        out["since"] = iso(token.since)
    return out


def _child_waits(tx: Tx, child_id: str, depth: int) -> dict[str, Any] | None:
    """``{status, waiting}`` of the child a call waits for: its status and its waiting tokens
    (each ``{step, path?, waiting_for}``, a call's with its own child, ``depth`` calls down)."""
    child = tx.run(child_id)
    if child is None:
        return None
    waiting = []
    for token in tx.tokens(child_id):
        shown = token_json(token, tx, depth + 1)
        if "waiting_for" in shown:
            waiting.append({k: v for k, v in shown.items() if k not in ("state", "since")})
    return {"status": str(child.status), "waiting": waiting}


SHOWN_HOLDERS = 3  # the runs named as holding the places a queued run waits for


def _queue_facts(tx: Tx, token: TokenRow, key: str) -> dict[str, Any]:
    """What a run queued on its flow's limit waits behind: ``places`` (the limit), ``taken``,
    up to :data:`SHOWN_HOLDERS` ``holders`` (``{run_id, status}``) and the runs ``ahead``."""
    run = tx.run(token.run_id)
    if run is None or token.id is None:
        return {}
    taken, places = tx.places(run.name, key)
    holders = tx.place_holders(run.name, key, SHOWN_HOLDERS)
    return {
        "places": places, "taken": taken,
        "holders": [{"run_id": i, "status": status} for i, status in holders],
        "ahead": tx.queue_position(run.name, key, token.id),
    }  # fmt: skip


def parent_json(tx: Tx, run_id: str) -> dict[str, Any] | None:
    """``{run_id, step}`` of the run whose call step started ``run_id`` (``detached``: true when
    it went on at once); None for a run no call started."""
    link = tx.parent_of(run_id)
    if link is None:
        return None
    out: dict[str, Any] = {"run_id": link.parent_id, "step": link.step}
    if link.detached:
        out["detached"] = True
    return out


def children_json(tx: Tx, run_id: str) -> list[dict[str, Any]]:
    """``{run_id, flow, status, step}`` of each run ``run_id``'s call steps started, oldest
    first (``detached``: true for those it did not wait for)."""
    out = []
    for link in tx.children_of(run_id):
        child: dict[str, Any] = {
            "run_id": link.child_id, "flow": link.flow, "status": link.status, "step": link.step,
        }  # fmt: skip
        if link.detached:
            child["detached"] = True
        out.append(child)
    return out


def history_json(entry: HistoryRow) -> dict[str, Any]:
    out: dict[str, Any] = {"seq": entry.seq, "at": iso(entry.at), "type": entry.type}
    if entry.step is not None:
        out["step"] = entry.step
        out["path"] = entry.path
        if entry.attempt is not None:
            out["attempt"] = entry.attempt
    if entry.data:
        out.update(entry.data)
    return out


def run_summary_json(run: RunRow | RunSummary) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "dialect": run.dialect,
        "status": run.status,
        "started_at": iso(run.started_at),
        "ended_at": iso(run.ended_at),
        "business_key": run.business_key,
    }


def run_json(
    tx: Tx,
    run: RunRow,
    version: int,
    declared_vars: list[str],
    history_limit: int | None = None,
) -> dict[str, Any]:
    """``runs show --json`` of ``run`` (as just read by ``tx``)."""
    run_id = run.id
    stored = tx.vars(run_id)
    if history_limit is None:
        history = tx.history(run_id)
    else:  # only the last entries are read: a run's history may be very long
        history = tx.history_before(run_id, None, history_limit)[::-1] if history_limit else []
    out = run_summary_json(run)
    out["version"] = version
    out = (
        {k: out[k] for k in ("id", "name", "dialect")}
        | {"version": version}
        | {k: out[k] for k in ("status", "started_at", "ended_at", "business_key")}
    )
    out["record"] = (
        {"entity": run.record_entity, "id": run.record_id} if run.record_entity else None
    )
    schedule = run.state.get("schedule")  # the schedule and slot that started it
    if schedule is not None:
        out["schedule"] = {"name": schedule["name"], "slot": iso(int(schedule["slot"]))}
    out["parent"] = parent_json(tx, run_id)
    out["children"] = children_json(tx, run_id)
    out["tokens"] = [token_json(t, tx) for t in tx.tokens(run_id)]
    out["bindings"] = run.state.get("bindings", {}) if run.dialect == "flow" else {}
    # A var's value never leaves the store: only whether it is set.
    out["vars"] = {
        name: {"set": True, "value": "***"} if name in stored else {"set": False, "value": None}
        for name in declared_vars
    }
    out["output"] = run.output
    out["error"] = run.error
    out["history"] = [history_json(h) for h in history]
    return out


def declared_vars(app: Application | None, name: str) -> list[str]:
    """The vars process ``name`` of ``app`` declares (none for a flow's run: ``app`` None)."""
    if app is not None:
        for process in app.processes:
            if process.name == name:
                return [v.name for v in process.vars]
    return []


def why_waiting(token: TokenRow) -> str:
    wait = waiting_for(token)
    if wait is None:
        return f"{token.step}: {token.state}"
    return why_line(token.step, wait)


def why_line(step: str, wait: dict[str, Any]) -> str:
    """Why a token at ``step`` waits, in one line, from its ``waiting_for`` (the CLI's
    ``runs show`` and the web UI's run page say the same)."""
    kind = wait.get("kind")
    if kind == "retry":
        return (
            f"{step}: retry {wait['attempt']} of {wait['of']} due {wait['due']} "
            f"(last error: {wait['last_error']})"
        )
    if kind == "timer":
        return f"{step}: timer due {wait['due']}"
    if kind == "event":
        return f"{step}: event {wait['type']} {wait['match']} (timeout {wait['timeout_at']})"
    if kind == "poll":
        return f"{step}: poll iteration {wait['iteration']} of {wait['of']} due {wait['due']}"
    if kind == "task":
        if wait.get("task_id") is None:  # parked on entry; the task is opened in the next claim
            return f"{step}: user task being opened"
        return f"{step}: user task {wait['task_id']} for {wait['assignee']}"
    if kind == "record":
        via = f" via [{wait['via']}]" if wait.get("via") else ""
        when = f" where {wait['when']}" if wait.get("when") else ""
        return f"{step}: a [{wait['entity']}] record of this run's record{via}{when}"
    if kind == "call":
        return _call_line(step, wait)
    if kind == "queue":
        return _queue_line(step, wait)
    if kind == "join":
        return f"{step}: join waiting for branches {', '.join(wait['branches'])}"
    if kind == "throttle":
        return f"{step}: throttled until {wait['due']} (budget {wait['budget']}{_key(wait)})"
    return f"{step}: waiting for {kind}"


def _key(wait: dict[str, Any]) -> str:
    return f", key {wait['key']}" if wait.get("key") else ""


def _queue_line(step: str, wait: dict[str, Any]) -> str:
    """``queued: 1 of 1 places for key 42 taken by run ID; 3 runs ahead``; a failed holder is
    said to keep its place."""
    key = f" for key {wait['key']}" if wait.get("key") else ""
    places = wait.get("places")
    line = f"{step}: queued: {wait.get('taken', '?')} of {places if places is not None else '?'}"
    line += f" places{key} taken"
    holders = wait.get("holders") or []
    if holders:
        named = [
            f"run {h['run_id']}"
            + (" (failed: it keeps its place until retried to an end or cancelled)"
               if h["status"] == "failed" else "")
            for h in holders
        ]  # fmt: skip
        more = int(wait.get("taken") or 0) - len(holders)
        line += " by " + ", ".join(named) + (f" and {more} more" if more > 0 else "")
    ahead = int(wait.get("ahead") or 0)
    return line + f"; {ahead} {'run' if ahead == 1 else 'runs'} ahead"


def _call_line(step: str, wait: dict[str, Any]) -> str:
    """``step: waiting for run ID (flow NAME) to end``, then what that run waits for, each
    waiting token of each run down the chain after a ``; ``."""
    timeout = f" (timeout {wait['timeout_at']})" if wait.get("timeout_at") else ""
    line = f"{step}: waiting for run {wait['run_id']} (flow {wait['flow']}) to end{timeout}"
    child = wait.get("child") or {}
    for token in child.get("waiting", ()):
        line += "; " + why_line(token.get("path") or token["step"], token["waiting_for"])
    return line
