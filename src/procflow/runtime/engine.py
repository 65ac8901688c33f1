"""The engine: where the runtime is wired together, and the calls every face makes.

It owns one store connection, the definition catalog, the var cipher and one work loop, and
hands the modules that change runs a narrow view of itself (:class:`~procflow.runtime.runs.host.
RunHost`). Every user call is one transaction, repeated when PostgreSQL breaks a deadlock by
rolling it back (:func:`~procflow.runtime.operations.conflicts.retry_on_conflict`).

What only some calls use is imported and built when first used: the work loop and its committer,
deploying, event delivery, record writes. A command that reads runs (``runs list``, ``tasks
list``) makes an engine in a fraction of the time, and never imports a compiler or YAML reading
(``tests/packaging/test_startup.py`` holds the list).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self

from procflow.config import Config
from procflow.errors import (
    ConfigError,
    DurationError,
    FlowsChanged,
    NotFoundError,
    ProcflowError,
    UsageError,
)
from procflow.expr import parse_duration
from procflow.runtime.clock import LATEST, VIRTUAL_EPOCH, from_iso, micros, store_now
from procflow.runtime.data.access import Action, authorize
from procflow.runtime.data.identity import ADMINISTRATOR, Actor, TokenTable, checked_name
from procflow.runtime.data.secrets import Masker, VarCipher, check_secret_key, load_cipher
from procflow.runtime.definitions.catalog import Catalog
from procflow.runtime.operations import listing
from procflow.runtime.operations.conflicts import retry_on_conflict
from procflow.runtime.operations.grouping import TxGroup
from procflow.runtime.operations.listing import Page
from procflow.runtime.operations.listing_calls import ListingCalls
from procflow.runtime.operations.views import declared_vars, run_json
from procflow.runtime.waits.task_rows import completion_refusal, list_tasks
from procflow.runtime.work.lease import Lease
from procflow.store.rows import RunRow
from procflow.store.store import Store, Tx

if TYPE_CHECKING:
    from procflow.model.ir import Application, EventSpec, Flow
    from procflow.runtime.data.events import Event
    from procflow.runtime.definitions.deploy import Deployed
    from procflow.runtime.interpret.intent import RunCtx
    from procflow.runtime.operations.record_calls import RecordCalls
    from procflow.runtime.operations.retention import Cutoff
    from procflow.runtime.schedules.calls import ScheduleCalls
    from procflow.runtime.transition import Transition
    from procflow.runtime.work.commit import Committer
    from procflow.runtime.work.loop import WorkLoop

__all__ = ["VIRTUAL_EPOCH", "Engine", "from_iso"]


class Engine(ListingCalls):
    """One engine per thread. ``Engine("sqlite:///app.db")``; tests: ``Engine.virtual(path)``."""

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
        slots: int | None = None,
        step_timeout: str | None = None,
        stop_timeout: str | None = None,
    ) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self._clock_kind: str | None = None  # "virtual" or "system", once read (is_virtual)
        self.config = Config.from_environ(self.environ)
        self.url = url or self.config.database_url
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        # ``create``: a database with no store gets one; without it, only an existing store
        # opens (a mistyped path is refused, not made into a new, empty store).
        self.store = Store(self.url, create=create)
        try:
            self.store.ensure_ready(create=create)
            if self.store.dialect == "postgresql":
                check_secret_key(self.url, self.environ)  # every worker must share the key
        except BaseException:
            self.store.close()
            raise
        self.catalog = Catalog(self.store, project_dir or self.config.project_dir)
        self.max_file_size = self.config.max_file_size  # the largest definition file deployed
        self._cipher: VarCipher | None = None
        # The lease owner is unique per engine, not just per --id: a frozen process whose id was
        # reused by its replacement must still fail the lease check when it wakes up.
        self.lease = Lease(
            f"{self.worker_id}#{uuid.uuid4().hex[:8]}",
            int((lease_seconds or self.config.lease_seconds) * 1_000_000),
        )
        # Checked now, so a bad setting is refused at once, not by the first call that works.
        self._loop_settings = _LoopSettings(
            batch, slots or self.config.slots,
            _seconds(step_timeout or self.config.step_timeout, "step timeout"),
            _seconds(stop_timeout or self.config.stop_timeout, "stop timeout"),
        )  # fmt: skip
        # Short user calls of many threads share transactions through this (procflow serve
        # gives its engines one group); alone, an engine's calls are batches of one.
        self.writes = TxGroup()

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
        if "loop" in self.__dict__:  # built: an engine that only read has none to close
            self.loop.close()
        self.store.close()

    @property
    def project_dir(self) -> str | None:
        return self.catalog.project_dir

    @property
    def lease_owner(self) -> str:
        return self.lease.owner

    # --- collaborators built on first use (what they import is most of the runtime) --------

    @functools.cached_property
    def committer(self) -> Committer:
        from procflow.runtime.work.commit import Committer

        return Committer(self, self.lease, lambda: self.cipher)

    @functools.cached_property
    def loop(self) -> WorkLoop:
        from procflow.runtime.work.loop import WorkLoop

        given = self._loop_settings
        return WorkLoop(
            self, self.committer, url=self.url, batch=given.batch, load_vars=self._load_vars,
            is_virtual=lambda: self.is_virtual, slots=given.slots,
            step_timeout=given.step_timeout, stop_timeout=given.stop_timeout,
        )  # fmt: skip

    @functools.cached_property
    def record_calls(self) -> RecordCalls:
        from procflow.runtime.operations.record_calls import RecordCalls

        return RecordCalls(self)

    # --- clock ------------------------------------------------------------------------------

    @property
    def is_virtual(self) -> bool:
        # A store's clock kind is fixed when the store is made (``db init``, Engine.virtual on
        # an empty one): read once, not in every transaction (a round trip on PostgreSQL).
        if self._clock_kind is None:
            self._clock_kind = self.store.read().meta_get("clock")
        return self._clock_kind == "virtual"

    def now(self) -> int:
        return store_now(self.store.read() if self.is_virtual else None)

    def set_clock(self, target: int) -> None:
        """Move a virtual clock forward to ``target``, running what is due at each instant."""
        self._require_virtual()
        if target < self.now():
            raise UsageError("a virtual clock only moves forward")
        if target > LATEST:
            raise UsageError("a clock cannot move past 9999-12-31T23:59:59Z")
        while True:
            self.work(until_idle=True)
            due = self.store.read().next_due()
            step_to = due if due is not None and due <= target else target
            with self.store.tx() as tx:
                tx.meta_set("clock_now", str(max(step_to, self.now())))
            if step_to >= target:
                self.work(until_idle=True)
                return

    def advance(self, duration: str | timedelta) -> None:
        delta = parse_duration(duration) if isinstance(duration, str) else duration
        if delta < timedelta(0):
            raise UsageError("a virtual clock only moves forward")
        target = self.now() + micros(delta)
        if target > LATEST:
            raise UsageError(f"advancing by {duration} would move the clock past year 9999")
        self.set_clock(target)

    def _require_virtual(self) -> None:
        if not self.is_virtual:
            raise UsageError(
                "this store uses the system clock; only a store created with "
                "`procflow db init --virtual-clock` has a clock to move"
            )

    # --- definitions ------------------------------------------------------------------------

    def deploy(self, *paths: str, user: Actor | str | None = None) -> list[Deployed]:
        """Validate the files at ``paths`` (their calls across them and the deployed flows),
        then store them all or none. ``user`` (here and on every call that changes something):
        who asks, refused unless the role table allows it (:meth:`acting`)."""
        from procflow.runtime.definitions.deploy import deploy_paths

        self.acting(user, Action.DEPLOY)
        now = self.now()
        return deploy_paths(self.catalog, paths, now, self.max_file_size, *self._arming(now))

    def latest_flow(self, name: str) -> Flow | None:
        """The latest deployed version of flow ``name``; None when ``name`` is not a flow."""
        return self.catalog.latest_flow(name)

    def set_enabled(self, name: str, enabled: bool, *, user: Actor | str | None = None) -> None:
        """A disabled definition starts no new runs (its schedules fire no slot); running ones
        continue."""
        from procflow.runtime.schedules.arming import set_disabled

        self.acting(user, Action.ENABLE)
        with self.store.tx() as tx:
            if not tx.set_enabled(name, enabled):
                raise NotFoundError.definition(name)
            set_disabled(tx, name, not enabled, self.now())

    @staticmethod
    def _arming(now: int) -> tuple[Callable[[Tx, Flow], None], Callable[[Tx, Application], None]]:
        """What a deploy of a flow, and of an intent file, does besides storing it: their
        schedules follow it; a flow's concurrency limit governs its keys from now on."""
        from procflow.runtime.runs.limits import relimit
        from procflow.runtime.schedules.arming import sync_app_schedules, sync_schedules

        def on_flow(tx: Tx, flow: Flow) -> None:
            sync_schedules(tx, flow.name, flow, now)
            relimit(tx, flow, now)

        return on_flow, lambda tx, app: sync_app_schedules(tx, app, now)

    @functools.cached_property
    def schedules(self) -> ScheduleCalls:
        """Flow schedules: list, show, pause, resume, trigger, backfill."""
        from procflow.runtime.schedules.calls import ScheduleCalls

        return ScheduleCalls(self, self.acting)

    # --- records ----------------------------------------------------------------------------

    @retry_on_conflict
    def create_record(
        self, entity: str, data: Mapping[str, Any], *, user: Actor | str | None = None
    ) -> dict[str, Any]:
        """Record calls follow the application's ``permissions:`` (``record_access``)."""
        return self.record_calls.create(entity, data, self.actor(user), named=user is not None)

    @retry_on_conflict
    def update_record(
        self, entity: str, id_: int, patch: Mapping[str, Any], *, user: Actor | str | None = None
    ) -> dict[str, Any]:
        return self.record_calls.update(entity, id_, patch, self.actor(user))

    @retry_on_conflict
    def delete_record(self, entity: str, id_: int, *, user: Actor | str | None = None) -> None:
        """``user``, when named: recorded on the runs the delete cancels."""
        self.record_calls.delete(entity, id_, self.actor(user), named=user is not None)

    def get_record(
        self, entity: str, id_: int, *, user: Actor | str | None = None
    ) -> dict[str, Any]:
        return self.record_calls.get(entity, id_, self.actor(user))

    def list_records(self, entity: str, *, user: Actor | str | None = None) -> list[dict[str, Any]]:
        """Every record of ``entity``, oldest first (tests, ``procflow test``); the faces page
        them (:meth:`records_page`)."""
        return self.record_calls.list(entity, self.actor(user))

    # --- runs -------------------------------------------------------------------------------

    @retry_on_conflict
    def start(
        self,
        name: str,
        *,
        record: tuple[str, int],
        again: bool = False,
        user: Actor | str | None = None,
    ) -> str:
        """Start a run of an intent process for a record (``procflow start``): a record of its
        trigger's entity (without a trigger: of an entity of its application). A triggered
        process runs at most once per record unless ``again`` (see ``RecordCalls.start``).
        ``user`` (here and on the other run calls): who asked, recorded as the history's ``by``."""
        by = self.acting(user, Action.START)
        return self.record_calls.start(name, record, again=again, user=by)

    @retry_on_conflict
    def start_flow(
        self, name: str, inputs: Mapping[str, Any], *, user: Actor | str | None = None
    ) -> str:
        """Start a run of a deployed flow with ``inputs`` (checked before anything is stored).
        The run is stored in a transaction shared with other threads' calls (:attr:`writes`)."""
        from procflow.runtime.data.inputs import check_inputs
        from procflow.runtime.runs.starts import insert_flow_run

        by = self.acting(user, Action.START)
        reader = self.store.read()
        hint = (
            f"[{name}] is an intent process; start it for a record with --record "
            "ENTITY:ID (flows take --input)"
        )
        version = self.catalog.startable(reader, name, "flow", hint)
        _, flow = self.catalog.flow(version.id, reader)
        values = check_inputs(flow, inputs)

        def insert(host: Engine, tx: Tx) -> str:
            run = insert_flow_run(tx, version.id, flow, values, host.now(), by=by)
            assert run is not None  # no start key: nothing to collide with
            return run.id

        return self.writes.run(self, insert)

    @retry_on_conflict
    def cancel(self, run_id: str, *, user: Actor | str | None = None) -> None:
        from procflow.runtime.operations.lifecycle import cancel_by_operator
        from procflow.runtime.schedules.firing import release_buffered

        by = self.acting(user, Action.CANCEL)
        with self.store.tx() as tx:
            cancel_by_operator(tx, run_id, self.now(), by)
            cancelled = tx.run(run_id)
            if cancelled is not None and cancelled.state.get("schedule"):
                release_buffered(self, tx, [cancelled])  # a slot waited for it

    @retry_on_conflict
    def retry(self, run_id: str, *, user: Actor | str | None = None) -> None:
        """Re-attempt a failed run's failed step with a fresh retry budget."""
        from procflow.runtime.operations.lifecycle import retry_run

        by = self.acting(user, Action.RETRY)
        with self.store.tx() as tx:
            retry_run(tx, run_id, self.now(), by)

    def purge(
        self, ended_before: Cutoff, *, dry_run: bool = False, user: Actor | str | None = None
    ) -> dict[str, Any]:
        """Delete (``dry_run``: count) the runs completed, cancelled or aborted before
        ``ended_before``, with all their rows: ``runs purge --json``'s report."""
        from procflow.runtime.operations.retention import purge

        self.acting(user, Action.PURGE)
        return purge(self.store, ended_before, dry_run=dry_run).to_json()

    def show(self, run_id: str, history: int | None = None) -> dict[str, Any]:
        """``runs show --json``: the run, its tokens and why they wait, vars masked, history."""
        if history is not None and history < 0:
            raise UsageError(f"the number of history entries must be 0 or more, not {history}")
        reader = self.store.read()
        run = reader.run(run_id)
        if run is None:
            raise NotFoundError.run(run_id)
        version = reader.version(run.version_id)
        if run.dialect != "intent":  # only an intent process declares vars: nothing to compile
            return run_json(reader, run, version.version, [], history)
        if version.vars is not None:  # kept when it was deployed: nothing to compile either
            return run_json(reader, run, version.version, json.loads(version.vars), history)
        try:  # a version stored before schema 6 keeps no var names: compile it for them
            compiled = self.catalog.compiled(run.version_id)
        except ProcflowError:  # its definition no longer compiles (that may be its incident)
            return run_json(reader, run, version.version, [], history)
        names = declared_vars(compiled.app, run.name)
        return run_json(reader, run, compiled.version.version, names, history)

    def list_runs(self, status: str | None = None, name: str | None = None) -> list[RunRow]:
        """Every run's row, oldest first (tests, tools); the faces page them (:meth:`runs_page`)."""
        return self.store.read().runs(status, name)

    def runs_for_record(self, entity: str, id_: int) -> list[RunRow]:
        return self.store.read().runs_for_record(entity, id_)

    def records_page(
        self, entity: str, *, limit: int = 50, before: int | None = None,
        user: Actor | str | None = None,
    ) -> Page[int]:  # fmt: skip
        """Record JSON of ``entity``'s records after the one with id ``before``."""
        return self.record_calls.page(entity, limit, before, self.actor(user))

    def record_key(self, entity: str) -> str:
        """The field holding the id of ``entity``'s records (its primary key)."""
        return listing.record_key(self.store.read(), self.catalog, entity)

    def definition_version(self, name: str, version: int | None = None) -> Application | Flow:
        """The definition ``name`` at ``version`` (None: the latest) as compiled, to draw it
        (an intent process: the application declaring it)."""
        reader = self.store.read()
        row = listing.version_row(reader, name, version)
        return self.catalog.compiled(row.id, reader).definition

    def deploy_text(
        self, text: str, file: str, *, user: Actor | str | None = None
    ) -> dict[str, Any]:
        """Deploy a definition file's text, sent as the file named ``file`` (the HTTP API), with
        this engine's project folder (else the working directory); the report: ``{deployed:
        [...], warnings: [...]}``."""
        from procflow.runtime.definitions.deploy import deploy_sent

        self.acting(user, Action.DEPLOY)
        now = self.now()
        done, loaded = deploy_sent(
            self.catalog, text, file, now, self.max_file_size, *self._arming(now)
        )
        return listing.deploy_report_json(done, loaded.diagnostics)

    # --- events and tasks -------------------------------------------------------------------

    def send_event(
        self,
        type_: str,
        data: Any = None,
        id_: str | None = None,
        *,
        user: Actor | str | None = None,
    ) -> dict[str, Any]:
        """Accept an event (see :meth:`accept_event`)."""
        from procflow.runtime.data.events import make_event

        return self.accept_event(make_event(type_, data, id_), user=user)

    @retry_on_conflict
    def accept_event(self, event: Event, *, user: Actor | str | None = None) -> dict[str, Any]:
        """Accept an event in one transaction: check it against its manifest, store it (a
        repeated id does nothing), deliver it to every matching waiting run, start the flows it
        triggers. Returns the delivery report ``{event_id, duplicate, resumed, started}`` (plus
        ``errors``: triggers whose guard could not be evaluated). ``user``: who sent it,
        recorded on the ``event.received`` of the runs it resumes. Calls made at once by
        several threads sharing :attr:`writes` are committed together (``runtime.grouping``)."""
        from procflow.runtime.waits.delivery import checked_event

        accepted = checked_event(self, event, self.acting(user, Action.SEND_EVENT))
        try:
            return self.writes.run(self, accepted.deliver, accepted.lock_order)
        except FlowsChanged:
            self.catalog.forget_event_flows()  # the call is made again, checked anew
            raise

    def event_spec(self, type_: str) -> EventSpec:
        from procflow.runtime.waits.delivery import event_spec

        return event_spec(self, type_)

    def list_tasks(self, assignee: str | None = None) -> list[dict[str, Any]]:
        """Every open user task, oldest first, optionally of one assignee (``procflow test``);
        the faces page them (:meth:`tasks_page`)."""
        return list_tasks(self.store.read(), assignee)

    @retry_on_conflict
    def complete_task(
        self,
        task_id: int,
        action: str | None = None,
        data: Mapping[str, Any] | None = None,
        user: Actor | str | None = None,
    ) -> dict[str, Any]:
        """Complete an open task as ``user`` (see :meth:`actor`); returns the task. Only its
        assigned user, a member of its assigned role or an administrator may: anyone else is
        refused with a :class:`~procflow.errors.ForbiddenError`, and nothing changes."""
        from procflow.runtime.waits.tasks import complete_task

        return complete_task(self, task_id, action, data or {}, self._actor_of(user))

    def task_refusal(self, task_id: int, user: Actor | str | None) -> str | None:
        """Why ``user`` may not complete the task ``task_id`` (the UI's disabled buttons say
        it); None when it may."""
        return completion_refusal(self.store.read(), task_id, self._actor_of(user))

    def actor(self, user: Actor | str | None) -> Actor:
        """Who acts: an :class:`Actor` as given (the HTTP face's caller); a name with exactly
        the roles the token table gives it (none when it is not listed, or there is no table);
        None, the administrator (the CLI without ``--as``, the Python API without ``user=``)."""
        if isinstance(user, str):
            checked_name(user)
        return self._actor_of(user)

    def _actor_of(self, user: Actor | str | None) -> Actor:
        """:meth:`actor` without refusing an empty name: completing a task says it its own way."""
        if user is None:
            return ADMINISTRATOR
        if isinstance(user, Actor):
            return user
        table = self.token_table
        return table.actor_for_user(user) if table is not None else Actor(user)

    def acting(self, user: Actor | str | None, action: Action) -> str | None:
        """Who asks for ``action`` (see :meth:`actor`), refused unless the role table allows it
        (``runtime/data/access.py``); returns the name the history records as ``by`` (None for
        the unnamed administrator)."""
        actor = self.actor(user)
        authorize(actor, action)
        return None if user is None else actor.user

    @functools.cached_property
    def token_table(self) -> TokenTable | None:
        """``PROCFLOW_API_TOKENS`` (or ``_FILE``) of this engine's environment, read when first
        needed: a command that never names a user is not refused for a bad table."""
        return TokenTable.from_config(self.config)

    # --- RunHost: changing runs inside a user call's transaction ----------------------------

    def inline_ctx(self, tx: Tx, run: RunRow) -> RunCtx:
        """An intent run's context as ``tx`` sees it, for a change made outside the worker
        loop (a task completed or timed out, a record event, an abort)."""
        from procflow.runtime.interpret.intent import RunCtx

        compiled, process = self.catalog.process(run.version_id, run.name, tx)
        record = run.state.get("snapshot")
        if record is None and run.record_entity is not None and run.record_id is not None:
            row = tx.record(run.record_entity, run.record_id)
            record = row.data if row is not None else None
        tokens = {t.id: t for t in tx.tokens(run.id) if t.id is not None}

        def related(entity: str, id_: int) -> dict[str, Any] | None:
            row = tx.record(entity, id_)
            return None if row is None else row.data

        app = compiled.app
        assert app is not None
        return RunCtx(
            run=run, tokens=tokens, app=app, process=process, project_dir=compiled.project_dir,
            record=record, load_vars=lambda: self._load_vars(run.id), load_related=related,
            environ=self.environ,
        )  # fmt: skip

    def apply_inline(self, tx: Tx, rc: RunCtx, tr: Transition) -> None:
        self.committer.commit_inline(tx, rc, tr)

    # --- working ----------------------------------------------------------------------------

    def work(self, until_idle: bool = True, stop: threading.Event | None = None) -> int:
        """Advance runs; returns the number of transitions committed (see ``WorkLoop.work``)."""
        return self.loop.work(until_idle, stop)

    def work_batch(self, stop: threading.Event | None = None) -> int:
        return self.loop.work_batch(stop)

    def heartbeat(self, stop: threading.Event) -> threading.Thread:
        """Renew the leases of runs this worker holds while long attempts run."""
        return self.loop.heartbeat(stop, self.url)

    # --- vars -------------------------------------------------------------------------------

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


@dataclass(frozen=True)
class _LoopSettings:
    """What the work loop is built with, when first needed."""

    batch: int
    slots: int
    step_timeout: float
    stop_timeout: float


def _seconds(text: str, what: str) -> float:
    """A duration setting (``5m``, ``PT30S``, ``90s``) in seconds."""
    try:
        seconds = parse_duration(text).total_seconds()
    except DurationError as exc:
        raise ConfigError(f"the {what} [{text}] is not a duration: {exc}") from None
    if seconds <= 0:
        raise ConfigError(f"the {what} must be longer than zero, not [{text}]")
    return seconds
