"""The CLI's one door to the runtime and the store: every command reaches them through here.

The runtime is imported inside each function, not at the top: `validate`, `graph`, `schema` and
`--help` never touch a store, and importing the runtime (store drivers, connectors) would more
than double their start-up time. Keeping the imports in this one module also leaves a single place
to repoint when the runtime's modules move.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from procflow.model.ir import Flow
    from procflow.runtime.data.events import Event as Event
    from procflow.runtime.definitions.deploy import Deployed
    from procflow.runtime.engine import Engine as Engine
    from procflow.runtime.work.observe import Observer


@contextmanager
def engine_at(
    db_url: str, project_dir: str | None = None, *, max_file_size: int | None = None
) -> Iterator[Engine]:
    """An engine on the store at ``db_url``, closed when the command is done with it. Only an
    existing store opens: a URL with no store behind it is refused (exit 2), never created.
    ``max_file_size``: the largest definition file it deploys (--max-file-size)."""
    from procflow.runtime.engine import Engine

    engine = Engine(db_url, project_dir=project_dir, create=False)
    if max_file_size is not None:
        engine.max_file_size = max_file_size
    try:
        yield engine
    finally:
        engine.close()


# --- the store's schema ----------------------------------------------------------------------


@dataclass(frozen=True)
class StoreCreated:
    """What `db init` made: ``created`` is False when a store was already there."""

    created: bool
    schema_version: int
    virtual: bool
    now: int


def init_store(db_url: str, virtual_clock: bool) -> StoreCreated:
    from procflow.runtime.clock import VIRTUAL_EPOCH, system_now
    from procflow.runtime.engine import from_iso
    from procflow.store.store import SCHEMA_VERSION, Store

    epoch = from_iso(VIRTUAL_EPOCH)
    store = Store(db_url)
    try:
        created = store.init(virtual_clock=virtual_clock, now=epoch)
    finally:
        store.close()
    return StoreCreated(
        created, SCHEMA_VERSION, virtual_clock, epoch if virtual_clock else system_now()
    )


def store_for_run(db_url: str) -> bool:
    """`procflow run`, the one-shot job, makes the store (system clock) when there is none;
    True when it did."""
    from procflow.store.store import Store

    store = Store(db_url)
    try:
        return store.init()
    finally:
        store.close()


def require_store(db_url: str) -> None:
    """Refuse (exit 2) a URL with no store behind it, as :func:`engine_at` does, for commands
    that open the store their own way (`worker`)."""
    from procflow.store.store import Store

    store = Store(db_url, create=False)
    try:
        store.ensure_ready(create=False)
    finally:
        store.close()


def upgrade_store(db_url: str) -> tuple[int | None, int]:
    """(the schema version before, after); before is None when there was no store to migrate."""
    from procflow.store.store import Store

    store = Store(db_url)
    try:
        return store.upgrade()
    finally:
        store.close()


# --- starting runs ---------------------------------------------------------------------------


def run_file(
    engine: Engine,
    path: str,
    start: dict[str, Any] | tuple[list[str], str | None],
    process_name: str | None,
    *,
    wait: bool,
    user: str | None = None,
) -> dict[str, Any]:
    """`procflow run`: ``start`` is the trigger record (intent) or (--input pairs, --inputs);
    ``user`` (--as) owns the trigger record, or is the flow run's ``by``."""
    from procflow.runtime.commands.oneshot import FlowStart, run_once

    given = FlowStart(*start) if isinstance(start, tuple) else start
    return run_once(engine, path, given, process_name, wait=wait, user=user)


def flow_named(engine: Engine, name: str) -> Flow | None:
    """The latest deployed version of flow ``name``; None when ``name`` is an intent process."""
    return engine.latest_flow(name)


def flow_inputs(flow: Flow, pairs: tuple[str, ...], inputs_json: str | None) -> dict[str, Any]:
    """``--input``/``--inputs`` converted by the flow's declared types and checked."""
    from procflow.runtime.data.inputs import cli_inputs

    return cli_inputs(flow, pairs, inputs_json)


@dataclass(frozen=True)
class WorkLimits:
    """What keeps one run from holding a worker up (``worker --slots/--step-timeout/...``)."""

    slots: int
    step_timeout: str
    stop_timeout: str


def work(
    db_url: str,
    project_dir: str | None,
    worker_id: str | None,
    until_idle: bool,
    concurrency: int,
    limits: WorkLimits,
    observer: Observer | None = None,
) -> int:
    """Run a worker until stopped (or idle); the number of transitions it committed.
    ``observer``: told of every attempt (``--metrics-port``)."""
    from procflow.runtime.commands.worker import run_worker

    require_store(db_url)
    return run_worker(
        db_url, project_dir, worker_id, until_idle=until_idle, concurrency=concurrency,
        slots=limits.slots, step_timeout=limits.step_timeout, stop_timeout=limits.stop_timeout,
        observer=observer,
    )  # fmt: skip


# --- events ----------------------------------------------------------------------------------


def event_of(type_: str, data: dict[str, Any], event_id: str | None) -> Event:
    from procflow.runtime.data.events import make_event

    return make_event(type_, data, event_id)


def event_from_envelope(whole: dict[str, Any]) -> Event:
    from procflow.runtime.data.events import envelope

    return envelope(whole)


def slack_approval(payload: dict[str, Any], event_id: str | None) -> Event:
    from procflow.connectors.builtin.slack_events import approval_event
    from procflow.runtime.data.events import make_event

    data, key = approval_event(payload)
    return make_event("slack.approval", data, event_id or key)


# --- time ------------------------------------------------------------------------------------


def iso(micros: int) -> str:
    """An instant of the store's clock as ISO-8601 UTC."""
    from procflow.runtime.clock import iso as to_iso

    text = to_iso(micros)
    assert text is not None
    return text


def instant(text: str) -> int:
    """An ISO-8601 timestamp with a zone as the store's clock counts (ExprError if it is not)."""
    from procflow.runtime.engine import from_iso

    return from_iso(text)


def virtual_epoch() -> str:
    from procflow.runtime.clock import VIRTUAL_EPOCH

    return VIRTUAL_EPOCH


def deployed_json(done: Deployed) -> dict[str, Any]:
    """``deploy --json``'s item, as the HTTP face answers it (one serializer for both)."""
    from procflow.runtime.operations.listing import deployed_json as shape

    return shape(done)
