"""The engine: deploys definitions, writes records, starts runs, and works.

Working is a loop: claim a batch of runs with ready work (leased for a while), run one step of
each, commit the batch's transitions in one database transaction (each run's transition stays
atomic; the fsync is shared), and repeat for those still ready. A run that waits is released:
it costs rows, never a process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Self, TypeVar

from procflow.errors import NotFoundError, UsageError
from procflow.expr import evaluate_condition, parse_duration
from procflow.model.ir import (
    Application,
    EventSpec,
    Flow,
    Process,
    WaitForStep,
)
from procflow.runtime import delivery, faults
from procflow.runtime.clock import from_datetime, micros, system_now
from procflow.runtime.deploy import Deployed, compile_for_deploy, compile_source, deploy
from procflow.runtime.events import (
    Event,
    make_event,
)
from procflow.runtime.flow import FlowCtx, advance_flow
from procflow.runtime.flow_state import INPUTS, FlowIndex, initial_state
from procflow.runtime.inputs import check_inputs
from procflow.runtime.intent import RunCtx, advance, eval_context
from procflow.runtime.records import new_record, patch_record, record_json
from procflow.runtime.secrets import Masker, VarCipher, load_cipher
from procflow.runtime.transition import Transition
from procflow.runtime.views import declared_vars, run_json
from procflow.store.rows import HistoryRow, RunRow, TimerRow, TokenRow, VersionRow
from procflow.store.store import DEFAULT_URL, RunImage, Store, StoreConflict, Tx, run_image

VIRTUAL_EPOCH = "2027-01-01T00:00:00Z"


@dataclass
class Compiled:
    version: VersionRow
    definition: Application | Flow
    project_dir: str
    index: FlowIndex | None = None  # flows: every step by id


_F = TypeVar("_F", bound=Callable[..., Any])


def retry_on_conflict(method: _F) -> _F:
    """Run a user call's transaction again when PostgreSQL broke a deadlock by rolling it back
    (:class:`StoreConflict`: nothing of it was committed). Such calls do all their work inside
    their transaction, so repeating them is safe; after a few tries the conflict is reported."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(CONFLICT_TRIES):
            try:
                return method(*args, **kwargs)
            except StoreConflict:
                if attempt == CONFLICT_TRIES - 1:
                    raise
                time.sleep(0.005 * 2**attempt)  # let the transaction that won finish
        raise AssertionError("unreachable")

    return call  # type: ignore[return-value]


CONFLICT_TRIES = 5


class Engine:
    """One engine per thread. ``procflow.Engine("sqlite:///app.db")``."""

    def __init__(
        self,
        url: str | None = None,
        *,
        project_dir: str | None = None,
        worker_id: str | None = None,
        environ: Mapping[str, str] | None = None,
        batch: int = 200,
        lease_seconds: float | None = None,
        create: bool = True,
    ) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.url = url or self.environ.get("PROCFLOW_DATABASE_URL") or DEFAULT_URL
        self.project_dir = project_dir or self.environ.get("PROCFLOW_PROJECT") or None
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        # The lease owner is unique per engine, not just per --id: a frozen process whose id was
        # reused by its replacement must still fail the lease check when it wakes up.
        self.lease_owner = f"{self.worker_id}#{uuid.uuid4().hex[:8]}"
        self.batch = batch
        lease = lease_seconds or float(self.environ.get("PROCFLOW_LEASE_SECONDS", "30"))
        self.lease = int(lease * 1_000_000)
        self.store = Store(self.url)
        if create:
            self.store.ensure_ready()
        if self.store.dialect == "postgresql":
            load_cipher(self.url, self.environ)  # every worker must share the key: refuse early
        self._compiled: dict[int, Compiled] = {}
        self._cipher: VarCipher | None = None
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        self._listener: Any = None

    @classmethod
    def virtual(cls, path_or_url: str, **kwargs: Any) -> Self:
        """An engine on a virtual-clock store (tests, demos): a SQLite file path, or a database
        URL whose store is new or empty (its clock is set to the virtual epoch)."""
        url = path_or_url if "://" in path_or_url else f"sqlite:///{path_or_url}"
        store = Store(url)
        try:
            if not store.init(virtual_clock=True, now=from_iso(VIRTUAL_EPOCH)):
                with store.tx() as tx:
                    tx.meta_set("clock", "virtual")
                    tx.meta_set("clock_now", str(from_iso(VIRTUAL_EPOCH)))
        finally:
            store.close()
        return cls(url, **kwargs)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        self.store.close()

    # --- clock ------------------------------------------------------------------------------

    @property
    def is_virtual(self) -> bool:
        return self.store.read().meta_get("clock") == "virtual"

    def now(self) -> int:
        value = self.store.read().meta_get("clock_now")
        return int(value) if value is not None else system_now()

    def set_clock(self, target: int) -> None:
        """Move a virtual clock forward to ``target``, running what is due at each instant."""
        self._require_virtual()
        now = self.now()
        if target < now:
            raise UsageError("a virtual clock only moves forward")
        while True:
            self.work(until_idle=True)
            due = self.store.read().next_due()
            step_to = due if due is not None and due <= target else target
            self._put_clock(max(step_to, self.now()))
            if step_to >= target:
                self.work(until_idle=True)
                return

    def advance(self, duration: str | timedelta) -> None:
        delta = parse_duration(duration) if isinstance(duration, str) else duration
        if delta < timedelta(0):
            raise UsageError("a virtual clock only moves forward")
        self.set_clock(self.now() + micros(delta))

    def _put_clock(self, value: int) -> None:
        with self.store.tx() as tx:
            tx.meta_set("clock_now", str(value))

    def _require_virtual(self) -> None:
        if not self.is_virtual:
            raise UsageError(
                "this store uses the system clock; only a store created with "
                "`procflow db init --virtual-clock` has a clock to move"
            )

    # --- definitions ------------------------------------------------------------------------

    def deploy(self, path: str) -> list[Deployed]:
        loaded, source = compile_for_deploy(path, self.project_dir)
        definition = loaded.definition
        assert definition is not None
        project = self.project_dir or definition.project_dir
        with self.store.tx() as tx:
            tx.lock_deploys()  # a concurrent deploy waits, then sees this one's versions
            if isinstance(definition, Flow):
                # Runs stay on the version they started with, so the event retention is the
                # longest lookback ever deployed (it only grows), not just the latest one's.
                lookback = longest_lookback(FlowIndex(definition))
                if lookback > delivery.event_retention(tx):
                    tx.meta_set("event_retention", str(lookback))
            return deploy(tx, definition, source, definition.file, project, self.now())

    def compiled(self, version_id: int, tx: Tx | None = None) -> Compiled:
        hit = self._compiled.get(version_id)
        if hit is None:
            version = (tx or self.store.read()).version(version_id)
            project = self.project_dir or version.project_dir
            definition = compile_source(version.source, version.file, project)
            index = FlowIndex(definition) if isinstance(definition, Flow) else None
            hit = Compiled(version, definition, project, index)
            self._compiled[version_id] = hit
        return hit

    def process(self, version_id: int, name: str, tx: Tx | None = None) -> tuple[Compiled, Process]:
        compiled = self.compiled(version_id, tx)
        app = compiled.definition
        assert isinstance(app, Application)
        return compiled, next(p for p in app.processes if p.name == name)

    def _latest_processes(self, tx: Tx) -> list[tuple[Compiled, Process]]:
        out: list[tuple[Compiled, Process]] = []
        for name, dialect, enabled, _latest in tx.definitions():
            if dialect != "intent" or not enabled:
                continue
            version = tx.latest_version(name)
            if version is None:
                continue
            compiled = self.compiled(version.id, tx)
            app = compiled.definition
            if isinstance(app, Application):
                out.extend((compiled, p) for p in app.processes if p.name == name)
        return out

    def application_of(self, entity: str, tx: Tx | None = None) -> Application:
        reader = tx or self.store.read()
        version_id = reader.entity_version(entity)
        if version_id is None:
            known = sorted(reader.entities())
            from procflow.model.source import suggest

            raise NotFoundError(f"unknown entity [{entity}]{suggest(entity, known)}")
        app = self.compiled(version_id, reader).definition
        assert isinstance(app, Application)
        return app

    # --- records ----------------------------------------------------------------------------

    @retry_on_conflict
    def create_record(
        self, entity: str, data: Mapping[str, Any], *, user: str | None = None
    ) -> dict[str, Any]:
        with self.store.tx() as tx:
            app = self.application_of(entity, tx)
            decl = app.entity(entity)
            assert decl is not None
            record = new_record(app, decl, data, exists=tx.record_exists)
            pk = decl.primary_key.name
            tx.lock_record_ids(entity)  # a concurrent create of the same id waits, then is refused
            if record.get(pk) is None:
                record[pk] = tx.next_record_id(entity)
            elif tx.record_exists(entity, record[pk]):
                raise UsageError(f"[{entity}] record {record[pk]} already exists")
            now = self.now()
            tx.insert_record(entity, record[pk], record, user, now)
            self._lifecycle(tx, "onCreate", app, entity, None, record, now)
            return record_json(decl, record)

    @retry_on_conflict
    def update_record(self, entity: str, id_: int, patch: Mapping[str, Any]) -> dict[str, Any]:
        with self.store.tx() as tx:
            app = self.application_of(entity, tx)
            decl = app.entity(entity)
            assert decl is not None
            row = tx.record(entity, id_, lock=True)  # a concurrent write waits: none is lost
            if row is None:
                raise NotFoundError(f"no [{entity}] record with id {id_}")
            record = patch_record(app, decl, row.data, patch, exists=tx.record_exists)
            now = self.now()
            tx.update_record(entity, id_, record, now)
            self._lifecycle(tx, "onUpdate", app, entity, row.data, record, now)
            return record_json(decl, record)

    @retry_on_conflict
    def delete_record(self, entity: str, id_: int) -> None:
        with self.store.tx() as tx:
            app = self.application_of(entity, tx)
            row = tx.record(entity, id_, lock=True)
            if row is None:
                raise NotFoundError(f"no [{entity}] record with id {id_}")
            now = self.now()
            tx.delete_record(entity, id_)
            for run in tx.active_runs_for_record(entity, id_):
                self._cancel(tx, run, now, reason=f"its [{entity}] record {id_} was deleted")
            self._lifecycle(tx, "onDelete", app, entity, row.data, None, now)

    def get_record(self, entity: str, id_: int) -> dict[str, Any]:
        app = self.application_of(entity)
        decl = app.entity(entity)
        assert decl is not None
        row = self.store.read().record(entity, id_)
        if row is None:
            raise NotFoundError(f"no [{entity}] record with id {id_}")
        return record_json(decl, row.data)

    def list_records(self, entity: str) -> list[dict[str, Any]]:
        app = self.application_of(entity)
        decl = app.entity(entity)
        assert decl is not None
        return [record_json(decl, r.data) for r in self.store.read().records(entity)]

    def _lifecycle(
        self,
        tx: Tx,
        event: str,
        app: Application,
        entity: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        now: int,
    ) -> list[str]:
        """Start every process this committed write triggers, in the write's transaction."""
        record = after if after is not None else before
        assert record is not None
        started = []
        for compiled, process in self._latest_processes(tx):
            trigger = process.trigger
            if trigger is None or trigger.event != event or trigger.entity != entity:
                continue
            decl = app.entity(entity)
            assert decl is not None
            env = record_json(decl, record)
            ctx = eval_context(now)
            if not all(evaluate_condition(g, env, ctx) for g in trigger.when):
                continue
            id_ = int(record[decl.primary_key.name])
            key = str(record.get(trigger.business_key)) if trigger.business_key else str(id_)
            run_id = self._start(
                tx, compiled, process, now, entity, id_, key,
                start_key=f"{process.name}/{entity}/{id_}",
                snapshot=record if event == "onDelete" else None,
            )  # fmt: skip
            if run_id:
                started.append(run_id)
        from procflow.runtime.record_waits import on_record_event

        on_record_event(self, tx, event, app, entity, before, after, now)  # abortOn, waits
        return started

    # --- runs -------------------------------------------------------------------------------

    @retry_on_conflict
    def start(self, name: str, *, record: tuple[str, int]) -> str:
        """Start a run of a trigger-less process for a record (``procflow start``)."""
        with self.store.tx() as tx:
            version = tx.latest_version(name)
            if version is None:
                raise NotFoundError(f"no deployed definition named [{name}]")
            if version.dialect == "flow":
                raise UsageError(f"[{name}] is a flow; start it with --input/--inputs")
            if not tx.definition_enabled(name):
                raise UsageError(f"[{name}] is disabled; enable it to start runs")
            compiled, process = self.process(version.id, name, tx)
            entity, id_ = record
            if tx.record(entity, id_) is None:
                raise NotFoundError(f"no [{entity}] record with id {id_}")
            run_id = self._start(tx, compiled, process, self.now(), entity, id_, str(id_))
            assert run_id is not None
            return run_id

    def latest_flow(self, name: str) -> Flow | None:
        """The latest deployed version of flow ``name``; None when ``name`` is not a flow."""
        reader = self.store.read()
        version = reader.latest_version(name)
        if version is None:
            raise NotFoundError(f"no deployed definition named [{name}]")
        if version.dialect != "flow":
            return None
        flow = self.compiled(version.id, reader).definition
        assert isinstance(flow, Flow)
        return flow

    @retry_on_conflict
    def start_flow(self, name: str, inputs: Mapping[str, Any]) -> str:
        """Start a run of a deployed flow with ``inputs`` (checked before anything is stored)."""
        with self.store.tx() as tx:
            version = tx.latest_version(name)
            if version is None:
                raise NotFoundError(f"no deployed definition named [{name}]")
            if version.dialect != "flow":
                raise UsageError(
                    f"[{name}] is an intent process; start it for a record with --record "
                    "ENTITY:ID (flows take --input)"
                )
            if not tx.definition_enabled(name):
                raise UsageError(f"[{name}] is disabled; enable it to start runs")
            compiled = self.compiled(version.id, tx)
            flow = compiled.definition
            assert isinstance(flow, Flow)
            values = check_inputs(flow, inputs)
            run_id = self._start_flow(tx, version.id, flow, values, self.now())
            assert run_id is not None
            return run_id

    def _start_flow(
        self,
        tx: Tx,
        version_id: int,
        flow: Flow,
        values: dict[str, Any],
        now: int,
        start_key: str | None = None,
    ) -> str | None:
        """Insert a new run at the flow's first step; None when ``start_key`` was used before."""
        run = RunRow(
            id=new_run_id(), version_id=version_id, name=flow.name, dialect="flow",
            status="running", started_at=now, start_key=start_key, state=initial_state(),
        )  # fmt: skip
        if not tx.insert_run(run):
            return None
        tx.apply_scope_ops(run.id, [("put", *INPUTS, values)])
        first = flow.steps[0].id
        tx.insert_token(TokenRow(None, run.id, first, first, "ready", 1, now, None, {}))
        run.seq = 1
        tx.append_history(run.id, [HistoryRow(1, now, "run.started")])
        tx.save_run(run, None, None)
        tx.notify()
        return run.id

    # --- events (runtime/delivery.py) ----------------------------------------------------

    def send_event(self, type_: str, data: Any = None, id_: str | None = None) -> dict[str, Any]:
        """Accept an event (see :func:`procflow.runtime.delivery.accept_event`)."""
        return self.accept_event(make_event(type_, data, id_))

    @retry_on_conflict
    def accept_event(self, event: Event) -> dict[str, Any]:
        return delivery.accept_event(self, event)

    def event_spec(self, type_: str) -> EventSpec:
        return delivery.event_spec(self, type_)

    def _start(
        self,
        tx: Tx,
        compiled: Compiled,
        process: Process,
        now: int,
        entity: str,
        id_: int,
        business_key: str,
        start_key: str | None = None,
        snapshot: dict[str, Any] | None = None,
    ) -> str | None:
        run = RunRow(
            id=new_run_id(), version_id=compiled.version.id, name=process.name, dialect="intent",
            status="running", started_at=now, business_key=business_key, record_entity=entity,
            record_id=id_, start_key=start_key, state={"snapshot": snapshot} if snapshot else {},
        )  # fmt: skip
        tx.notify()
        if not tx.insert_run(run):
            return None  # at most once per record, ever
        first = process.steps[0].name
        token = TokenRow(None, run.id, first, first, "ready", 1, now, None, {"visit": 1})
        tx.insert_token(token)
        run.seq = 1
        tx.append_history(run.id, [HistoryRow(1, now, "run.started")])
        tx.save_run(run, None, None)
        return run.id

    @retry_on_conflict
    def cancel(self, run_id: str) -> None:
        with self.store.tx() as tx:
            run = tx.run_for_update(run_id)
            if run is None:
                raise NotFoundError(f"no run with id [{run_id}]")
            if run.status in ("completed", "cancelled", "aborted"):
                raise UsageError(f"run [{run_id}] is already {run.status}; nothing to cancel")
            self._cancel(tx, run, self.now(), reason="cancelled by an operator")

    def _cancel(self, tx: Tx, run: RunRow, now: int, reason: str) -> None:
        run = tx.run_for_update(run.id) or run  # a committing worker may have moved it on
        names = tx.clear_vars(run.id)
        tx.delete_run_scopes(run.id)
        tx.delete_run_waits(run.id)
        tx.delete_run_timers(run.id)
        tx.delete_run_tokens(run.id)
        from procflow.runtime.tasks import withdraw_tasks

        history = withdraw_tasks(tx, run, now, "cancelled")  # before run.cancelled, in order
        for name in sorted(names):
            run.seq += 1
            history.append(HistoryRow(run.seq, now, "var.cleared", data={"var": name}))
        run.seq += 1
        history.append(HistoryRow(run.seq, now, "run.cancelled", data={"reason": reason}))
        run.status, run.ended_at = "cancelled", now
        tx.append_history(run.id, history)
        tx.save_run(run, None, None)

    @retry_on_conflict
    def retry(self, run_id: str) -> None:
        """Re-attempt a failed run's failed step with a fresh retry budget."""
        with self.store.tx() as tx:
            run = tx.run_for_update(run_id)
            if run is None:
                raise NotFoundError(f"no run with id [{run_id}]")
            if run.status != "failed":
                raise UsageError(
                    f"run [{run_id}] is {run.status}; only a failed run can be retried"
                )
            now = self.now()
            tokens = [t for t in tx.tokens(run_id) if t.state == "failed"]
            for token in tokens:
                token.state, token.attempt, token.since, token.wait = "ready", 1, now, None
                token.data["steps"] = 0
            tx.update_tokens(tokens)
            run.status, run.error = "running", None
            run.seq += 1
            step = tokens[0].step if tokens else None
            retried = HistoryRow(run.seq, now, "run.retried", step, step, 1 if step else None)
            tx.append_history(run.id, [retried])
            tx.save_run(run, None, None)
            tx.notify()

    def show(self, run_id: str, history: int | None = None) -> dict[str, Any]:
        """``runs show --json``: the run, its tokens and why they wait, vars masked, history."""
        reader = self.store.read()
        run = reader.run(run_id)
        if run is None:
            raise NotFoundError(f"no run with id [{run_id}]")
        compiled = self.compiled(run.version_id)
        names = declared_vars(compiled.definition, run.name)
        return run_json(reader, run_id, compiled.version.version, names, history)

    def list_runs(self, status: str | None = None, name: str | None = None) -> list[RunRow]:
        return self.store.read().runs(status, name)

    def runs_for_record(self, entity: str, id_: int) -> list[RunRow]:
        return self.store.read().runs_for_record(entity, id_)

    def set_enabled(self, name: str, enabled: bool) -> None:
        """A disabled definition starts no new runs; running ones continue."""
        with self.store.tx() as tx:
            if not tx.set_enabled(name, enabled):
                raise NotFoundError(f"no deployed definition named [{name}]")

    # --- tasks and record waits -------------------------------------------------------------

    def list_tasks(self, assignee: str | None = None) -> list[dict[str, Any]]:
        """Open user tasks, oldest first (``tasks list --json``), optionally of one assignee."""
        from procflow.runtime.tasks import list_tasks

        return list_tasks(self.store.read(), assignee)

    @retry_on_conflict
    def complete_task(
        self,
        task_id: int,
        action: str | None = None,
        data: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> dict[str, Any]:
        """Complete an open task (``user`` None: as an administrator); returns the task."""
        from procflow.runtime.tasks import complete_task

        return complete_task(self, task_id, action, data or {}, user)

    def inline_ctx(self, tx: Tx, run: RunRow) -> RunCtx:
        """An intent run's context as ``tx`` sees it, for a change made outside the worker
        loop (a task completed or timed out, a record event, an abort)."""
        compiled, process = self.process(run.version_id, run.name, tx)
        app = compiled.definition
        assert isinstance(app, Application)
        record = run.state.get("snapshot")
        if record is None and run.record_entity is not None and run.record_id is not None:
            row = tx.record(run.record_entity, run.record_id)
            record = row.data if row is not None else None
        tokens = {t.id: t for t in tx.tokens(run.id) if t.id is not None}

        def related(entity: str, id_: int) -> dict[str, Any] | None:
            row = tx.record(entity, id_)
            return None if row is None else row.data

        return RunCtx(
            run=run, tokens=tokens, app=app, process=process, project_dir=compiled.project_dir,
            record=record, load_vars=lambda: self._load_vars(run.id), load_related=related,
            environ=self.environ,
        )  # fmt: skip

    def apply_inline(self, tx: Tx, rc: RunCtx, tr: Transition) -> None:
        """Commit ``tr`` as part of ``tx``. The run row is saved with its lease released: a
        worker holding the run meanwhile has its commit refused and the run is claimed anew,
        never overwritten with a stale image. The record write goes last, once this run's rows
        are saved, because its lifecycle event may abort or resume this very run."""
        rows = _Rows()
        self._apply(tx, rc, tr, tr.now, rows)  # every row but the record write
        rows.write(tx)
        tx.append_history(rc.run.id, tr.history)
        tx.save_run(rc.run, None, None)
        if rc.run.status == "running":
            tx.notify()
        if tr.record_write is not None:
            self._apply_record_write(tx, tr, tr.now)

    # --- working ----------------------------------------------------------------------------

    def work(self, until_idle: bool = True, stop: threading.Event | None = None) -> int:
        """Advance runs; returns the number of transitions committed.

        ``until_idle``: return once nothing is due now. Otherwise sleep until the next due time
        (at most a second, so work made ready by another process is noticed within one second).
        """
        total = 0
        while stop is None or not stop.is_set():
            done = self.work_batch(stop)
            total += done
            if done:
                continue
            if until_idle:
                return total
            self._idle(stop)
        return total

    def _idle(self, stop: threading.Event | None) -> None:
        """Sleep until the next due time or a wake-up. PostgreSQL: LISTEN, with a bounded
        fallback poll; SQLite: at most a second, so other processes' work is seen within it."""
        due = self.store.read().next_due()
        fallback = 5.0 if self.store.dialect == "postgresql" else 1.0
        wait = fallback
        if due is not None and not self.is_virtual:
            wait = min(wait, max(0.0, (due - system_now()) / 1_000_000))
        expiry = self.store.read().next_lease_expiry()  # a dead worker's runs: take them over
        if expiry is not None:
            wait = min(wait, max(0.0, (expiry - system_now()) / 1_000_000 + 0.01))
        if self.store.dialect == "postgresql":
            if self._listener is None:
                from procflow.store.pg import Listener

                # Listen first, then look for work again: nothing sent meanwhile is missed.
                self._listener = Listener(self.url)
                return
            # Wake at least every 0.2 s to see a stop request; LISTEN ends the wait at once.
            deadline = time.monotonic() + wait
            while (stop is None or not stop.is_set()) and time.monotonic() < deadline:
                if self._listener.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
                    return
            return
        if stop is not None:
            stop.wait(wait)
        else:
            time.sleep(wait)

    def work_batch(self, stop: threading.Event | None = None) -> int:
        """Claim a batch and run it until every run in it waits or ends; returns transitions."""
        virtual = self.is_virtual
        now = self.now()
        wall = system_now()
        with self.store.tx() as tx:
            fired = self._fire_timers(tx, now, wall)
            claimed = tx.claim_runs(self.lease_owner, wall, wall + self.lease, self.batch)
            tokens = tx.tokens_of_runs([r.id for r in claimed])
            records = self._records_of(tx, claimed)
        if not claimed:
            return fired
        faults.point("after_claim")  # leases taken, nothing run: they must expire elsewhere
        with self._held_lock:
            self._held.update(r.id for r in claimed)
        by_run: dict[str, dict[int, TokenRow]] = {r.id: {} for r in claimed}
        for t in tokens:
            assert t.id is not None
            by_run[t.run_id][t.id] = t
        active = [self._run_ctx(run, by_run[run.id], records) for run in claimed]
        for rc in active:
            rc.saved, rc.lease_until = run_image(rc.run), wall + self.lease
        count = fired
        try:
            while active:
                if stop is not None and stop.is_set():
                    self._hand_back([rc.run.id for rc in active])
                    break
                step_now = now if virtual else system_now()
                batch: list[tuple[RunCtx | FlowCtx, Transition]] = []
                for rc in active:
                    token = next((t for t in rc.tokens.values() if t.state == "ready"), None)
                    if token is None:
                        continue
                    if isinstance(rc, FlowCtx):
                        batch.append((rc, advance_flow(rc, token, step_now)))
                    else:
                        batch.append((rc, advance(rc, token, step_now)))
                try:
                    accepted = self._commit(batch, step_now)
                except StoreConflict:
                    # A deadlock with a concurrent record write or event: nothing committed.
                    # Hand the runs back; whoever claims them repeats the attempts (at least
                    # once, as after a crash).
                    self._hand_back([rc.run.id for rc in active])
                    break
                count += len(accepted)
                active = [
                    rc for rc, _ in batch if rc.run.id in accepted and rc.run.status == "running"
                ]
        finally:
            with self._held_lock:
                self._held.difference_update(r.id for r in claimed)
        return count

    def _hand_back(self, run_ids: list[str]) -> None:
        """Graceful stop: release leases now so another worker need not wait for expiry."""
        with self.store.tx() as tx:
            tx.release_leases(self.lease_owner, run_ids)

    def _records_of(self, tx: Tx, runs: list[RunRow]) -> dict[tuple[str, int], dict[str, Any]]:
        """The trigger records of ``runs`` (those not run on a snapshot), one query per entity."""
        wanted: dict[str, list[int]] = {}
        for run in runs:
            entity, id_ = run.record_entity, run.record_id
            if entity is not None and id_ is not None and run.state.get("snapshot") is None:
                wanted.setdefault(entity, []).append(id_)
        return {
            (entity, id_): row.data
            for entity, ids in wanted.items()
            for id_, row in tx.records_by_id(entity, ids).items()
        }

    def _run_ctx(
        self, run: RunRow, tokens: dict[int, TokenRow], records: dict[tuple[str, int], Any]
    ) -> RunCtx | FlowCtx:
        if run.dialect == "flow":
            compiled = self.compiled(run.version_id)
            assert isinstance(compiled.definition, Flow) and compiled.index is not None
            return FlowCtx(
                run=run, tokens=tokens, flow=compiled.definition, index=compiled.index,
                project_dir=compiled.project_dir, environ=self.environ,
                load_scopes=lambda path: self.store.read().scopes(run.id, path),
            )  # fmt: skip
        compiled, process = self.process(run.version_id, run.name)
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
            load_related=self._load_related, environ=self.environ,
        )  # fmt: skip

    def _load_related(self, entity: str, id_: int) -> dict[str, Any] | None:
        row = self.store.read().record(entity, id_)
        return None if row is None else row.data

    @property
    def cipher(self) -> VarCipher:
        if self._cipher is None:
            self._cipher = load_cipher(self.url, self.environ)
        return self._cipher

    def _load_vars(self, run_id: str) -> dict[str, Any]:
        blobs = self.store.read().vars(run_id)
        return {name: self.cipher.decrypt(run_id, name, blob) for name, blob in blobs.items()}

    def masker(self, run_id: str) -> Masker:
        """Masks the run's var values (for anything printed about the run)."""
        return Masker(self._load_vars(run_id).values())

    def _fire_timers(self, tx: Tx, now: int, wall: int) -> int:
        """Fire a batch of due timers: each token becomes ready (``timer.fired``), a statement
        per kind of write for the whole batch. A ``wait_for`` timeout only fires if its wait is
        still there (the event may have won); user task timers have their own effects."""
        timers = tx.due_timers_free(now, wall, self.batch)
        if not timers:
            return 0
        run_ids = list(dict.fromkeys(t.run_id for t in timers))
        runs = tx.runs_by_id(run_ids)
        tokens = {t.id: t for t in tx.tokens_of_runs(run_ids)}
        tx.delete_timers([t.id for t in timers])
        with_tasks = {t.run_id for t in timers if t.kind.startswith("task_")}
        fired, history, ready, touched = 0, [], [], {}
        for timer in timers:
            run, token = runs.get(timer.run_id), tokens.get(timer.token_id)
            if run is None or token is None or run.status in ("completed", "cancelled", "aborted"):
                continue
            assert token.id is not None
            if timer.run_id in with_tasks:  # task timers write straight to the store
                fired += self._fire_task_timer(tx, timer, now)
                continue
            if timer.kind == "timeout" and not tx.take_waits([token.id]):
                continue  # a wait_for's event got there first: exactly one of them wins
            token.state, token.wait = "ready", None
            ready.append(token)
            run.seq += 1
            entry = HistoryRow(run.seq, now, "timer.fired", token.step, token.path, token.attempt)
            history.append((run.id, entry))
            if run.status != "failed":
                run.status = "running"
            touched[run.id] = run
            fired += 1
        tx.update_tokens(ready)
        tx.append_history_many(history)
        tx.save_runs([(run, None, None) for run in touched.values()])
        return fired

    def _fire_task_timer(self, tx: Tx, timer: TimerRow, now: int) -> int:
        """One timer of a run with a user task timer in the batch, read fresh from the store
        (an earlier timer of the same run may have changed it)."""
        from procflow.runtime.tasks import fire_task_timer

        run = tx.run(timer.run_id)
        token = next((t for t in tx.tokens(timer.run_id) if t.id == timer.token_id), None)
        if run is None or token is None or run.status in ("completed", "cancelled", "aborted"):
            return 0
        assert token.id is not None
        if timer.kind.startswith("task_"):
            fire_task_timer(self, tx, timer, run, token, now)
            return 1
        if timer.kind == "timeout" and not tx.take_waits([token.id]):
            return 0
        token.state, token.wait = "ready", None
        tx.update_tokens([token])
        run.seq += 1
        entry = HistoryRow(run.seq, now, "timer.fired", token.step, token.path, token.attempt)
        tx.append_history(run.id, [entry])
        if run.status != "failed":
            run.status = "running"
        tx.save_run(run, None, None)
        return 1

    def _commit(self, batch: list[tuple[RunCtx | FlowCtx, Transition]], now: int) -> set[str]:
        if not batch:
            return set()
        faults.point("before_commit")
        wall = system_now()
        owner, until = self.lease_owner, wall + self.lease
        images = [run_image(rc.run) for rc, _ in batch]
        with self.store.tx() as tx:
            # The lease check is the run rows' update itself, guarded by the lease: when every
            # row matches (the usual case) no separate query is needed; otherwise undo it, find
            # the runs still held, and save only those.
            tx.savepoint("held")
            accepted = {rc.run.id for rc, _ in batch}
            if self._save_runs(tx, batch, images, accepted, wall) != len(batch):
                tx.rollback_to("held")
                accepted = tx.leases_held(accepted, owner, wall)
                self._save_runs(tx, batch, images, accepted, wall)
            history: list[tuple[str, HistoryRow]] = []
            rows = _Rows()
            done = [(rc, tr) for rc, tr in batch if rc.run.id in accepted]  # others: no change
            for rc, tr in done:
                self._apply(tx, rc, tr, now, rows)
                history.extend((rc.run.id, h) for h in tr.history)
            rows.write(tx)
            tx.append_history_many(history)
            # Record writes go last, and their lifecycle effects (abortOn, record waits,
            # triggers) after all of them: those effects may reach runs of this very batch, so
            # they must find every run's rows already written — the batch behaves as if each
            # run's transition had committed first, then each record write.
            events = [self._write_record(tx, tr, now) for _, tr in done if tr.record_write]
            for event in events:
                if event is not None:
                    self._lifecycle(tx, "onUpdate", *event, now)
        for (rc, _), image in zip(batch, images, strict=True):
            if rc.run.id in accepted and (
                rc.saved != image or rc.lease_until - wall <= self.lease // 2
            ):
                rc.saved, rc.lease_until = image, until  # as _save_runs wrote them
        faults.point("after_commit")
        return accepted

    def _save_runs(
        self,
        tx: Tx,
        batch: list[tuple[RunCtx | FlowCtx, Transition]],
        images: list[RunImage],
        accepted: set[str],
        wall: int,
    ) -> int:
        """Write the accepted runs' rows if this worker still holds their leases; returns how
        many it did. A run that still runs keeps its lease; one that waits or ended releases it.
        A row whose only change is ``seq``, with its lease far from expiry, gets a narrow update
        (the heartbeat renews leases of runs held longer)."""
        full: list[tuple[RunRow, RunImage, int | None, str | None]] = []
        seq_only: list[RunRow] = []
        until = wall + self.lease
        for (rc, _), image in zip(batch, images, strict=True):
            if rc.run.id not in accepted:
                continue
            if rc.run.status != "running":
                full.append((rc.run, image, None, None))
            elif image == rc.saved and rc.lease_until - wall > self.lease // 2:
                seq_only.append(rc.run)
            else:
                full.append((rc.run, image, until, self.lease_owner))
        return tx.save_held_runs(full, seq_only, self.lease_owner, wall)

    def _apply(self, tx: Tx, rc: RunCtx | FlowCtx, tr: Transition, now: int, rows: _Rows) -> None:
        run_id = rc.run.id
        if tr.lookbacks and isinstance(rc, FlowCtx) and delivery.resolve_lookbacks(tx, rc, tr):
            # The run row was saved as waiting; it runs on, still held by this worker.
            tx.save_runs([(rc.run, system_now() + self.lease, self.lease_owner)])
            tx.notify()
        for token in tr.tokens_insert:
            tx.insert_token(token)
            assert token.id is not None
            rc.tokens[token.id] = token
        rows.token_updates.extend(t for t in tr.tokens_update if t.id not in tr.tokens_delete)
        rows.token_deletes.extend(tr.tokens_delete)
        rows.timer_drops.extend(tr.timers_drop)
        rows.timers.extend((run_id, t.id, kind, due) for t, kind, due in tr.timers if t.id)
        rows.waits.extend(
            (t.id, run_id, kind, type_, keys, now) for t, kind, type_, keys in tr.waits if t.id
        )
        for name, value in tr.vars_set.items():
            tx.set_var(run_id, name, self.cipher.encrypt(run_id, name, value))
        for name in tr.vars_clear:
            tx.clear_var(run_id, name)
        if tr.vars_sweep:
            tx.clear_vars(run_id)
        if tr.scope_ops:
            tx.apply_scope_ops(run_id, tr.scope_ops)
        for msg in tr.outbox:
            tx.add_outbox(msg.channel, msg.recipient, msg.subject, msg.body, run_id, msg.step, now)

    def _apply_record_write(self, tx: Tx, tr: Transition, now: int) -> None:
        """A step's record write and, at once, its lifecycle event."""
        event = self._write_record(tx, tr, now)
        if event is not None:
            self._lifecycle(tx, "onUpdate", *event, now)

    def _write_record(
        self, tx: Tx, tr: Transition, now: int
    ) -> tuple[Application, str, dict[str, Any], dict[str, Any]] | None:
        """Patch the step's changed fields onto the record as it is now; returns the
        lifecycle event to fire (app, entity, before, after), None if the record is gone."""
        write = tr.record_write
        assert write is not None
        current = tx.record(write.entity, write.id, lock=True)
        if current is None:
            return None  # deleted meanwhile; deleting it cancelled this run, nothing is lost
        changed = {k: v for k, v in write.after.items() if write.before.get(k) != v}
        merged = {**current.data, **changed}
        tx.update_record(write.entity, write.id, merged, now)
        return self.application_of(write.entity, tx), write.entity, current.data, merged

    # --- heartbeats -------------------------------------------------------------------------

    def heartbeat(self, stop: threading.Event) -> threading.Thread:
        """Renew the leases of runs this worker holds while long attempts run."""

        def beat() -> None:
            store: Store | None = None
            try:
                while not stop.wait(self.lease / 3_000_000):
                    with self._held_lock:
                        held = list(self._held)
                    if not held:
                        continue
                    try:
                        store = store or Store(self.url)
                        with store.tx() as tx:
                            tx.renew_leases(self.lease_owner, held, system_now() + self.lease)
                    except Exception:  # a missed beat is made up by the next: never stop beating
                        if store is not None:
                            with contextlib.suppress(Exception):
                                store.close()
                        store = None
            finally:
                if store is not None:
                    store.close()

        thread = threading.Thread(target=beat, name="procflow-heartbeat", daemon=True)
        thread.start()
        return thread


@dataclass
class _Rows:
    """Token and timer writes of a commit's transitions, gathered to be written a statement per
    kind for the whole batch (each run's tokens and timers are its own: the order between runs
    does not matter; within a run, old timers are dropped before new ones are armed)."""

    token_updates: list[TokenRow] = field(default_factory=list)
    token_deletes: list[int] = field(default_factory=list)
    timer_drops: list[int] = field(default_factory=list)
    timers: list[tuple[str, int, str, int]] = field(default_factory=list)
    waits: list[tuple[int, str, str, str, str, int]] = field(default_factory=list)

    def write(self, tx: Tx) -> None:
        tx.update_tokens(self.token_updates)
        if self.token_deletes:
            tx.delete_tokens(self.token_deletes)
            tx.delete_waits_of_tokens(self.token_deletes)
        if self.waits:
            tx.insert_waits(self.waits)
        if self.timer_drops:
            tx.delete_timers_of_tokens(self.timer_drops)
        if self.timers:
            tx.insert_timers(self.timers)
            tx.notify()  # an idle worker may be sleeping until a later due time


def longest_lookback(index: FlowIndex) -> int:
    """The longest ``wait_for`` lookback of a flow, in microseconds (0: none)."""
    steps = index.steps.values()
    return max(
        (micros(s.lookback) for s in steps if isinstance(s, WaitForStep) and s.lookback),
        default=0,
    )


def new_run_id() -> str:
    """Time-ordered, unique across machines: 12 hex digits of milliseconds + 20 random."""
    return f"{time.time_ns() // 1_000_000:012x}{uuid.uuid4().hex[:20]}"


def from_iso(text: str) -> int:
    from procflow.expr import parse_timestamp

    return from_datetime(parse_timestamp(text))
