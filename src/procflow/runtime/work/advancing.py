"""Advancing one run by one step, as a worker does it, so that no run can take the worker down.

Each attempt runs on a slot thread (``runtime/work/slots.py``) with its own read connection, under
an attempt clock. Whatever it raises is caught and becomes the run's incident, built on the loop's
thread from the run's rows as last committed (``runtime/work/incidents.py``). An attempt whose call
overran its deadline is advanced again without the call, which then fails as a timeout.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from procflow.errors import CallRefused
from procflow.model.ir import Application
from procflow.runtime.clock import store_now
from procflow.runtime.interpret.deadlines import AttemptClock, watching
from procflow.runtime.interpret.flow import FlowCtx, advance_flow
from procflow.runtime.interpret.flow_call import CallTarget
from procflow.runtime.interpret.intent import RunCtx, advance
from procflow.runtime.operations.conflicts import retry_on_conflict
from procflow.runtime.runs.host import RunHost
from procflow.runtime.transition import Transition
from procflow.runtime.work.incidents import IncidentCtx, describe, incident
from procflow.runtime.work.observe import NO_OBSERVER, Observer, observed_attempt
from procflow.runtime.work.tracing import enabled as tracing_enabled
from procflow.runtime.work.tracing import traced_attempt
from procflow.states import TokenState
from procflow.store.rows import RunRow, TokenRow
from procflow.store.store import Store, Tx, run_image

__all__ = ["Advancer", "Ctx", "Failed", "Outcome"]

log = logging.getLogger("procflow.worker")

Ctx = RunCtx | FlowCtx | IncidentCtx


@dataclass(frozen=True)
class Failed:
    """An attempt that raised: the run's incident, once the loop builds it."""

    error: BaseException
    token_id: int | None


Outcome = Transition | Failed


class Advancer:
    """Builds run contexts and makes attempts for one work loop."""

    observer: Observer = NO_OBSERVER  # a face's metrics (runtime/work/observe.py)

    def __init__(
        self,
        host: RunHost,
        url: str,
        *,
        load_vars: Callable[[str], dict[str, Any]],
        step_timeout: float,
        owner: str,
    ) -> None:
        self.host = host
        self.owner = owner  # the lease owner, named in log lines
        self.url = url
        self.step_timeout = step_timeout
        self._load_vars = load_vars
        self._local = threading.local()  # a slot thread's own read connection
        self._stores: list[Store] = []
        self._stores_lock = threading.Lock()
        self._loop_thread: threading.Thread | None = None
        # A round's call steps resolve each called flow once: name -> its target, or why not.
        self._targets: dict[str, CallTarget | CallRefused] = {}

    # --- contexts ---------------------------------------------------------------------------

    def contexts(
        self,
        claimed: list[RunRow],
        tokens: list[TokenRow],
        records: dict[tuple[str, int], dict[str, Any]],
        lease_until: int,
        now: int,
    ) -> list[tuple[Ctx, Outcome | None]]:
        """A context per claimed run; a run whose context cannot be built (its definition no
        longer compiles, say) comes with its incident already decided."""
        self._loop_thread = threading.current_thread()
        by_run: dict[str, dict[int, TokenRow]] = {r.id: {} for r in claimed}
        for t in tokens:
            assert t.id is not None
            by_run[t.run_id][t.id] = t
        out: list[tuple[Ctx, Outcome | None]] = []
        for run in claimed:
            ctx: Ctx
            try:
                ctx = self._run_ctx(run, by_run[run.id], records)
                outcome: Outcome | None = None
            except Exception as exc:
                ctx = IncidentCtx(run, by_run[run.id])
                outcome = Failed(exc, _ready_id(ctx))
            ctx.saved, ctx.lease_until = run_image(run), lease_until
            out.append((ctx, outcome))
        return out

    def _run_ctx(
        self, run: RunRow, tokens: dict[int, TokenRow], records: dict[tuple[str, int], Any]
    ) -> RunCtx | FlowCtx:
        catalog = self.host.catalog
        if run.dialect == "flow":
            compiled, flow = catalog.flow(run.version_id)
            assert compiled.index is not None
            return FlowCtx(
                run=run, tokens=tokens, flow=flow, index=compiled.index,
                project_dir=compiled.project_dir, environ=self.host.environ,
                load_scopes=lambda path: self.reader().scopes(run.id, path),
                load_row=lambda path, n: self.reader().scope_row(run.id, path, n),
                resolve_call=self.call_target, reserve=self.reserve,
            )  # fmt: skip
        compiled, process = catalog.process(run.version_id, run.name)
        app = compiled.definition
        assert isinstance(app, Application)
        record = None
        if run.record_entity is not None and run.record_id is not None:
            snapshot = run.state.get("snapshot")
            row = records.get((run.record_entity, run.record_id))
            record = snapshot if snapshot is not None else row
        return RunCtx(
            run=run, tokens=tokens, app=app, process=process, project_dir=compiled.project_dir,
            record=record, load_vars=lambda: self._load_vars(run.id),
            load_related=self._load_related, environ=self.host.environ,
        )  # fmt: skip

    def call_target(self, name: str) -> CallTarget:
        """The newest enabled version of flow ``name``, for a call step starting now: read once
        a round (the round's steps are made at one instant), not once for each child."""
        found = self._targets.get(name)
        if found is None:
            try:
                found = self._read_target(name)
            except CallRefused as exc:
                found = exc
            self._targets[name] = found
        if isinstance(found, CallRefused):
            raise CallRefused(str(found))
        return found

    def _read_target(self, name: str) -> CallTarget:
        reader = self.reader()
        found = reader.latest_version_id(name)
        if found is None:
            raise CallRefused(f"no flow [{name}] is deployed")
        version_id, dialect, enabled = found
        if dialect != "flow":
            raise CallRefused(f"[{name}] is an intent process; call starts flows")
        if not enabled:
            raise CallRefused(f"flow [{name}] is disabled; enable it to start runs")
        return CallTarget(version_id, self.host.catalog.flow(version_id, reader)[1])

    def _load_related(self, entity: str, id_: int) -> dict[str, Any] | None:
        row = self.reader().record(entity, id_)
        return None if row is None else row.data

    def adopt_thread(self) -> None:
        """The calling thread drives the loop now (reads on the loop's connection); the one it
        replaces, left with a hung call, reads on a connection of its own from here on."""
        self._loop_thread = threading.current_thread()

    def reader(self) -> Tx:
        """A read view on this thread's own connection (slot threads never share the loop's)."""
        return self._thread_store().read()

    def _thread_store(self) -> Store:
        if threading.current_thread() is self._loop_thread:
            return self.host.store
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = Store(self.url)
            with self._stores_lock:
                self._stores.append(store)
        return store

    @retry_on_conflict
    def reserve(self, budget: str, key: str, limit: int, per: int, now: int) -> tuple[bool, int]:
        """Take a start of a throttle's budget for ``key``, committed before the attempt is
        made: ``(True, instant)`` when taken (the attempt starts then: the store's clock once
        the row was locked, never before ``now``), else ``(False, when to come back)``. The
        budget's row is locked, so the starts of every worker count: at most ``limit`` starts
        in any ``per`` µs.

        The row keeps the latest ``limit`` starts whatever their age (a worker's ``now`` may be
        older than another's). A refused attempt is told to come back at the first free start
        or after the one promised to the attempt refused before it, ``per / limit`` later: the
        waiters come back spread at the budget's own rate rather than all at once (each is
        checked again when it comes)."""
        with self._thread_store().tx() as tx:
            starts, promised = tx.lock_budget(budget, key)
            starts = sorted(starts)[-limit:]
            at = max(now, store_now(tx))
            if len(starts) < limit or starts[0] <= at - per:
                tx.save_budget(budget, key, sorted([*starts, at])[-limit:], promised)
                return True, at
            due = max(starts[0] + per, promised)
            tx.save_budget(budget, key, starts, due + max(1, per // limit))
            return False, due

    def close(self) -> None:
        with self._stores_lock:
            stores, self._stores = self._stores, []
        for store in stores:
            store.close()

    # --- attempts ---------------------------------------------------------------------------

    @observed_attempt  # metrics: the observer is told of the attempt as it ends
    @traced_attempt  # a span per attempt when OpenTelemetry is configured; else nothing
    def attempt(self, ctx: Ctx, now: int) -> Outcome:
        """Advance ``ctx`` by one step at ``now``; whatever is raised is the outcome."""
        return self.plain_attempt(ctx, now)

    def attempt_for_batch(self, now: int) -> Callable[[Ctx], Outcome]:
        """What a batch's attempts at ``now`` call: :meth:`attempt`, or while neither metrics
        nor traces are on, :meth:`plain_attempt` (chosen once a batch: two calls less per
        attempt, on the path every transition takes; a partial adds no Python frame)."""
        self._targets = {}  # a new round: deploys and disables since then are seen
        observer = self.observer
        if (observer is NO_OBSERVER or not observer.wants_attempts) and not tracing_enabled():
            return functools.partial(self.plain_attempt, now=now)
        return functools.partial(self.attempt, now=now)

    def plain_attempt(self, ctx: Ctx, now: int) -> Outcome:
        """:meth:`attempt` without metrics or traces (the path every transition takes: kept
        to as few operations as it can be)."""
        token = None
        for candidate in ctx.tokens.values():  # the ready token (a loop, not a generator)
            if candidate.state == TokenState.READY:
                token = candidate
                break
        try:
            if token is None or isinstance(ctx, IncidentCtx):
                raise AssertionError("a run was advanced without a ready token, or an incident")
            if isinstance(ctx, FlowCtx):
                return advance_flow(ctx, token, now)
            return advance(ctx, token, now)
        except Exception as exc:
            return Failed(exc, None if token is None else token.id)
        except (SystemExit, KeyboardInterrupt) as exc:  # from code under the step: its incident
            return Failed(exc, None if token is None else token.id)

    def settle(self, ctx: Ctx, outcome: Outcome, now: int) -> tuple[Ctx, Transition]:
        """The transition to commit for ``outcome`` (an incident for a failed attempt)."""
        if isinstance(outcome, Transition):
            return ctx, outcome
        return self._incident(ctx, outcome, now)

    def replay(self, ctx: Ctx, now: int, limit: float) -> tuple[Ctx, Transition]:
        """The attempt of ``ctx`` whose call overran ``limit`` seconds, made again from the
        committed rows without the call: it fails as a timeout (retry and onError apply)."""
        message = f"the attempt ran longer than {limit:g}s and was abandoned"
        log.warning(
            message,
            extra={"run_id": ctx.run.id, "definition": ctx.run.name, "worker": self.owner},
        )
        try:
            fresh = self._fresh(ctx)
        except Exception as exc:
            return self._incident(ctx, Failed(exc, _ready_id(ctx)), now)
        with watching(AttemptClock.replay(self.step_timeout, message)):
            outcome = self.attempt(fresh, now)
        return self.settle(fresh, outcome, now)

    def _fresh(self, ctx: Ctx) -> RunCtx | FlowCtx:
        """``ctx`` rebuilt from the store (the abandoned attempt may still change the old one)."""
        tx = self.host.store.read()
        run = tx.run(ctx.run.id)
        assert run is not None
        tokens = {t.id: t for t in tx.tokens(run.id) if t.id is not None}
        records: dict[tuple[str, int], Any] = {}
        if run.record_entity is not None and run.record_id is not None:
            row = tx.record(run.record_entity, run.record_id)
            if row is not None:
                records[(run.record_entity, run.record_id)] = row.data
        fresh = self._run_ctx(run, tokens, records)
        fresh.saved, fresh.lease_until = run_image(run), ctx.lease_until
        return fresh

    def _incident(self, ctx: Ctx, failed: Failed, now: int) -> tuple[Ctx, Transition]:
        message = describe(failed.error)
        tx = self.host.store.read()
        run = tx.run(ctx.run.id) or ctx.run
        tokens = {t.id: t for t in tx.tokens(run.id) if t.id is not None}
        fresh = IncidentCtx(run, tokens, run_image(run), ctx.lease_until)
        token = tokens.get(failed.token_id) if failed.token_id is not None else None
        try:
            secrets = list(self._load_vars(run.id).values())
        except Exception:  # the vars themselves may be what failed: mask what can be
            secrets = []
        failing = incident(fresh, token, now, message, secrets)
        log.error(  # the message as the run keeps it: masked, never a var's value
            "run failed with an incident: %s", (run.error or {}).get("message", ""),
            extra={"run_id": run.id, "definition": run.name, "worker": self.owner,
                   "step": token.step if token is not None else None},
        )  # fmt: skip
        return fresh, failing


def _ready_id(ctx: Ctx) -> int | None:
    for token_id, token in ctx.tokens.items():  # a loop: this runs once per attempt
        if token.state == TokenState.READY:
            return token_id
    return None
