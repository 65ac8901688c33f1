"""Accepting events (docs/runtime.md, "Events and wait_for"): one transaction validates, stores
and deduplicates the event, hands it to every token waiting on its correlation values, and starts
the flows it triggers. Also the other half of ``lookback``: an earlier event satisfying a new
wait, resolved in the commit that parks it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from procflow.errors import EventError, ExprError, FlowsChanged, LimitReached
from procflow.expr import evaluate_condition
from procflow.model.ir import ConnectorManifest, EventSpec, Flow
from procflow.runtime.data.events import (
    Event,
    check_payload,
    event_keys,
)
from procflow.runtime.data.inputs import check_inputs, input_env
from procflow.runtime.definitions.catalog import event_retention
from procflow.runtime.interpret.flow import FlowCtx
from procflow.runtime.interpret.intent import eval_context
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.starts import insert_flow_run
from procflow.runtime.transition import Transition
from procflow.states import ENDED, RunStatus, TokenState
from procflow.store.queries.runrows.waits import SeenWait
from procflow.store.rows import HistoryRow, RunRow, TokenRow
from procflow.store.store import Tx


@dataclass(frozen=True)
class CheckedEvent:
    """An event whose type and payload were checked, ready to be stored and delivered."""

    event: Event
    keys: str  # its correlation values
    flows: list[tuple[Flow, int]]  # the latest enabled flows when it was checked: triggers
    by: str | None

    @property
    def lock_order(self) -> str:
        """What :meth:`deliver` locks first, the event's (type, key): calls committed together
        run in this order, so two processes' batches cannot deadlock on their keys."""
        return f"{self.event.type}\n{self.keys}"

    def deliver(self, host: RunHost, tx: Tx) -> dict[str, Any]:
        """Store, deliver and trigger inside ``tx``; the delivery report."""
        event = self.event
        report: dict[str, Any] = {
            "event_id": event.id, "duplicate": False, "resumed": [], "started": [],
        }  # fmt: skip
        now = host.now()
        flow_ids = tx.insert_event(event.id, event.type, self.keys, event.data, now)  # key locked
        if flow_ids is None:
            report["duplicate"] = True
            return report
        if flow_ids != [version_id for _, version_id in self.flows]:
            raise FlowsChanged("the deployed flows changed while the event was checked")
        report["resumed"] = _deliver(host, tx, event, self.keys, now, self.by)
        started, errors = _trigger(host, tx, event, now, self.flows)
        report["started"] = started
        if errors:
            report["errors"] = errors
        if host.catalog.events_prune_due(now):
            tx.prune_events(now - event_retention(tx))
        if report["resumed"] or started:
            tx.notify()
        return report


def checked_event(host: RunHost, event: Event, by: str | None = None) -> CheckedEvent:
    """``event`` checked against its manifest (an :class:`EventError` if it does not fit)."""
    flows = host.catalog.event_flows()  # the manifests, the triggers
    spec = event_spec(host, event.type, flows)
    check_payload(event.type, spec, event.data)
    return CheckedEvent(event, event_keys(spec, event.data), flows, by)


def event_spec(host: RunHost, type_: str, flows: list[tuple[Flow, int]] | None = None) -> EventSpec:
    """The manifest's declaration of ``type_`` (``<connector>.<event>``): from the deployed
    flows' connectors first (``flows``: the latest enabled flows, when already read), then the
    project's and the installed/built-in ones."""
    connector, dot, name = type_.partition(".")
    if not dot or not connector or not name:
        raise EventError(f"event type [{type_}] is not <connector>.<event>")
    if flows is None:
        flows = host.catalog.latest_flows(host.store.read())
    manifest = _deployed_connector(flows, connector)
    if manifest is None:
        from procflow.model.connectors.registry import ConnectorRegistry

        registry = ConnectorRegistry(host.catalog.project_dir or os.getcwd())
        manifest = registry.get(connector)
        if manifest is None:
            from procflow.model.source import suggest

            raise EventError(
                f"unknown event type [{type_}]: no connector [{connector}]"
                f"{suggest(connector, registry.names())}"
            )
    spec = manifest.events.get(name)
    if spec is None:
        from procflow.model.source import suggest

        known = ", ".join(f"{connector}.{e}" for e in sorted(manifest.events)) or "none"
        raise EventError(
            f"unknown event type [{type_}]{suggest(name, manifest.events)} "
            f"(connector [{connector}] declares: {known})"
        )
    return spec


def _deployed_connector(flows: list[tuple[Flow, int]], name: str) -> ConnectorManifest | None:
    for flow, _version in flows:
        if name in flow.connectors:
            return flow.connectors[name]
    return None


def _deliver(host: RunHost, tx: Tx, event: Event, keys: str, now: int, by: str | None) -> list[str]:
    """Hand ``event`` to every token waiting on (type, keys), each wait consumed once."""
    waits = tx.waiting_runs_for_update(event.type, keys)  # the runs locked first, in one order
    runs: dict[str, RunRow] = {}
    for seen in waits:
        if seen.run.status not in ENDED:
            runs.setdefault(seen.run.id, seen.run)  # one row per run, whatever its waits
    resumed = []
    for seen in waits:
        run = runs.get(seen.run.id)
        if run is None:
            continue
        if not _hand_to_seen(tx, run, seen, event, now, by):
            # The token is read again under its run's lock, its wait confirmed.
            token = tx.take_waiting_token(seen.token_id)
            if token is None:  # a timeout or another event took the wait first
                continue
            tx.deliver_to_token(event.id, run, token, _handed(run, token, event, now, by))
        resumed.append(run.id)
    return list(dict.fromkeys(resumed))


def _hand_to_seen(
    tx: Tx, run: RunRow, seen: SeenWait, event: Event, now: int, by: str | None
) -> bool:
    """Hand ``event`` to the token as the locking statement read it, in one statement that
    takes the wait only if neither it nor the token changed since (PostgreSQL); False, and
    ``run`` as it was, when that could not be done."""
    if seen.token is None or seen.stamp is None:
        return False
    before = run.seq, run.status
    entry = _handed(run, seen.token, event, now, by)
    if tx.deliver_to_seen_token(event.id, run, seen.token, entry, seen.stamp):
        return True
    run.seq, run.status = before
    return False


def _handed(run: RunRow, token: TokenRow, event: Event, now: int, by: str | None) -> HistoryRow:
    """``token`` made ready with ``event`` in its data and ``run`` running: the run's
    ``event.received`` entry, to be written with them."""
    assert token.id is not None
    token.state, token.wait = TokenState.READY, None
    token.data["event"] = {"id": event.id, "data": event.data}
    run.seq += 1
    received: dict[str, Any] = {"event_type": event.type, "event_id": event.id}
    if by is not None:
        received["by"] = by
    if run.status != RunStatus.FAILED:
        run.status = RunStatus.RUNNING
    return HistoryRow(
        run.seq, now, "event.received", token.step, token.path, token.attempt, received
    )


def _trigger(
    host: RunHost, tx: Tx, event: Event, now: int, flows: list[tuple[Flow, int]]
) -> tuple[list[str], list[dict[str, str]]]:
    """Start one run of every enabled flow (of ``flows``) triggered by this event type whose
    guard holds (at most one per flow and event id, even if the event is delivered again)."""
    started: list[str] = []
    errors: list[dict[str, str]] = []
    for flow, version_id in flows:
        trigger = flow.trigger
        if trigger is None or trigger.event != event.type:
            continue
        values = check_inputs(flow, {trigger.as_: event.data})
        if trigger.when is not None:
            try:
                env = input_env(flow, values)
                expr = trigger.when.single
                assert expr is not None
                if not evaluate_condition(expr, env, eval_context(now)):
                    continue
            except ExprError as exc:
                errors.append({"flow": flow.name, "message": f"when: {exc.message}"})
                continue
        key = f"{flow.name}/event/{event.id}"
        try:
            run = insert_flow_run(tx, version_id, flow, values, now, start_key=key)
        except LimitReached as exc:  # concurrency.on_limit: refuse, reported like a guard error
            errors.append({"flow": flow.name, "message": str(exc)})
            continue
        if run is not None:
            started.append(run.id)
    return started, errors


def resolve_lookbacks(tx: Tx, rc: FlowCtx, tr: Transition) -> bool:
    """New waits with a lookback: an earlier matching event not yet delivered to the run
    satisfies the wait at once (inside the commit, under the key's lock, so an event being
    accepted concurrently is either seen here or sees the wait). True if one did."""
    hit = False
    for token, type_, keys, since in tr.lookbacks:
        tx.lock_key(type_, keys)
        found = tx.lookback_event(type_, keys, since, rc.run.id)
        if found is None:
            continue
        event_id, data = found
        tr.waits[:] = [w for w in tr.waits if w[0] is not token]
        tr.timers[:] = [t for t in tr.timers if t[0] is not token]
        token.state, token.wait = TokenState.READY, None
        token.data["event"] = {"id": event_id, "data": data}
        tx.insert_delivery(event_id, rc.run.id)
        tr.add("event.received", token.step, token.path, token.attempt,
               event_type=type_, event_id=event_id, lookback=True)  # fmt: skip
        rc.run.status = RunStatus.RUNNING
        hit = True
    return hit
