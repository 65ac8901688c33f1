"""Runs and what moves them: `run`, `start`, `runs ...`, `worker`, `clock ...`, `db ...`."""

from __future__ import annotations

from typing import Any

import click

from procflow.cli import _engine
from procflow.cli.options import (
    db_option,
    json_option,
    project_option,
    run_status_choice,
    with_inputs,
)
from procflow.cli.output import (
    EXIT_ABORTED,
    EXIT_BAD,
    EXIT_USAGE,
    echo_json,
    fail,
    json_arg,
    print_run,
)
from procflow.errors import DurationError, ExprError, UsageError
from procflow.states import RunStatus


@click.command("run")
@click.argument("path")
@click.option("--record", "record_json", help="The trigger record to create, as JSON.")
@with_inputs
@click.option("--process", "process_name", help="Which process (default: the only triggered one).")
@click.option("--wait", is_flag=True, help="Keep working until the run ends.")
@db_option
@project_option
@json_option
def run(
    path: str,
    record_json: str | None,
    input_pairs: tuple[str, ...],
    inputs_json: str | None,
    process_name: str | None,
    wait: bool,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Deploy PATH, start one run, work until it ends (or only waits on the future)."""
    start: dict[str, Any] | tuple[list[str], str | None]
    if path.endswith((".flow.yaml", ".flow.yml")):
        if record_json is not None or process_name is not None:
            raise UsageError("--record and --process are for intent files; a flow takes --input")
        start = (list(input_pairs), inputs_json)
    else:
        if input_pairs or inputs_json is not None:
            raise UsageError("--input/--inputs are for flows; an intent run takes --record JSON")
        start = json_arg(record_json, "--record")
    with _engine.engine_at(db_url, project_dir) as engine:
        shown = _engine.run_file(engine, path, start, process_name, wait=wait)
    echo_json(shown) if as_json else print_run(shown)
    if shown["status"] == RunStatus.FAILED:
        fail("", EXIT_BAD)
    if shown["status"] in (RunStatus.CANCELLED, RunStatus.ABORTED):
        fail("", EXIT_ABORTED)


@click.command("start")
@click.argument("name")
@click.option("--record", "record_ref", help="ENTITY:ID of the record (intent processes).")
@with_inputs
@db_option
@project_option
@json_option
def start(
    name: str,
    record_ref: str | None,
    input_pairs: tuple[str, ...],
    inputs_json: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Start a run of a deployed flow (with inputs) or of a trigger-less process for a record;
    print its id."""
    with _engine.engine_at(db_url, project_dir) as engine:
        flow = _engine.flow_named(engine, name)
        if flow is not None:
            if record_ref is not None:
                raise UsageError(f"[{name}] is a flow; it takes --input/--inputs, not --record")
            run_id = engine.start_flow(name, _engine.flow_inputs(flow, input_pairs, inputs_json))
        else:
            if input_pairs or inputs_json is not None:
                raise UsageError(
                    f"[{name}] is an intent process; it takes --record ENTITY:ID, not inputs"
                )
            run_id = engine.start(name, record=_record_ref(name, record_ref))
        shown = engine.show(run_id) if as_json else None
    echo_json(shown) if shown is not None else click.echo(run_id)


def _record_ref(name: str, ref: str | None) -> tuple[str, int]:
    if ref is None:
        raise UsageError(f"[{name}] is an intent process: give the record with --record ENTITY:ID")
    entity, _, id_text = ref.partition(":")
    if not entity or not id_text.isdigit():
        raise UsageError(f"--record [{ref}] must be ENTITY:ID, like TenantApplication:1")
    return entity, int(id_text)


# --- runs ------------------------------------------------------------------------------------


@click.group()
def runs() -> None:
    """List, show, cancel and retry runs."""


@runs.command("list")
@click.option("--status", type=run_status_choice, help="Only runs with this status.")
@click.option("--name", help="Only runs of this definition.")
@db_option
@json_option
def runs_list(status: str | None, name: str | None, db_url: str, as_json: bool) -> None:
    """Runs, oldest first."""
    with _engine.engine_at(db_url) as engine:
        rows = _engine.run_summaries(engine, status, name)
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        key = f"key={r['business_key']}  " if r["business_key"] is not None else ""
        click.echo(f"{r['id']}  {r['name']:<24} {r['status']:<10} {key}started {r['started_at']}")


@runs.command("show")
@click.argument("run_id")
@click.option("--history", "history", type=int, help="Keep the last N history entries.")
@db_option
@json_option
def runs_show(run_id: str, history: int | None, db_url: str, as_json: bool) -> None:
    """One run: its tokens and why they wait, its output or error, and its history."""
    with _engine.engine_at(db_url) as engine:
        shown = engine.show(run_id, history)
    echo_json(shown) if as_json else print_run(shown, with_history=True)


@runs.command("cancel")
@click.argument("run_id")
@db_option
@json_option
def runs_cancel(run_id: str, db_url: str, as_json: bool) -> None:
    """End a run that has not ended: its waits, timers and open tasks are withdrawn."""
    with _engine.engine_at(db_url) as engine:
        engine.cancel(run_id)
        shown = engine.show(run_id) if as_json else None
    echo_json(shown) if shown is not None else click.echo(f"cancelled {run_id}")


@runs.command("retry")
@click.argument("run_id")
@db_option
@json_option
def runs_retry(run_id: str, db_url: str, as_json: bool) -> None:
    """Run a failed run's failed step again, with a fresh retry budget."""
    with _engine.engine_at(db_url) as engine:
        engine.retry(run_id)
        shown = engine.show(run_id) if as_json else None
    if shown is not None:
        echo_json(shown)
    else:
        click.echo(f"retrying {run_id}: its failed step runs again with a fresh retry budget")


@click.command("worker")
@click.option("--until-idle", is_flag=True, help="Exit once nothing is due now.")
@click.option("--id", "worker_id", help="This worker's id (default: host:pid).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Runs advanced at once (several processes scale further).")  # fmt: skip
@db_option
@project_option
def worker(
    until_idle: bool, worker_id: str | None, concurrency: int, db_url: str, project_dir: str | None
) -> None:
    """Advance runs: claim due work, run it, commit; sleep until the next due time."""
    count = _engine.work(db_url, project_dir, worker_id, until_idle, concurrency)
    click.echo(f"worker stopped after {count} transitions", err=True)


# --- the clock -------------------------------------------------------------------------------


@click.group()
def clock() -> None:
    """Show or move a virtual clock (stores created with --virtual-clock)."""


@clock.command("show")
@db_option
@json_option
def clock_show(db_url: str, as_json: bool) -> None:
    """The store's time, and whether its clock is virtual."""
    with _engine.engine_at(db_url) as engine:
        now, virtual = _engine.iso(engine.now()), engine.is_virtual
    if as_json:
        echo_json({"now": now, "virtual": virtual})
    else:
        click.echo(f"{now} ({'virtual' if virtual else 'system'} clock)")


@clock.command("advance")
@click.argument("duration")
@db_option
@project_option
@json_option
def clock_advance(duration: str, db_url: str, project_dir: str | None, as_json: bool) -> None:
    """Step through every due time up to now + DURATION, running what is due at each."""
    with _engine.engine_at(db_url, project_dir) as engine:
        try:
            engine.advance(duration)
        except DurationError as exc:
            raise UsageError(str(exc)) from None
        _print_clock(_engine.iso(engine.now()), as_json)


@clock.command("set")
@click.argument("timestamp")
@db_option
@project_option
@json_option
def clock_set(timestamp: str, db_url: str, project_dir: str | None, as_json: bool) -> None:
    """Move forward to TIMESTAMP the same way."""
    try:
        target = _engine.instant(timestamp)
    except ExprError as exc:
        raise UsageError(f"[{timestamp}] is not an ISO-8601 timestamp with a zone: {exc}") from None
    with _engine.engine_at(db_url, project_dir) as engine:
        engine.set_clock(target)
        _print_clock(_engine.iso(engine.now()), as_json)


def _print_clock(now: str, as_json: bool) -> None:
    """After a move: only a virtual clock moves, so the clock is virtual."""
    echo_json({"now": now, "virtual": True}) if as_json else click.echo(f"clock at {now}")


# --- the store -------------------------------------------------------------------------------


@click.group()
def db() -> None:
    """Create or migrate the store."""


@db.command("init")
@db_option
@click.option("--virtual-clock", is_flag=True, help="Keep time in the store (tests, demos).")
@json_option
def db_init(db_url: str, virtual_clock: bool, as_json: bool) -> None:
    """Create the store's schema."""
    made = _engine.init_store(db_url, virtual_clock)
    if not made.created:
        fail(f"{db_url} already holds a procflow store; nothing changed", EXIT_USAGE)
    if as_json:
        echo_json(
            {"created": True, "schema_version": made.schema_version, "virtual": made.virtual,
             "now": _engine.iso(made.now)}
        )  # fmt: skip
        return
    kind = f"virtual clock at {_engine.iso(made.now)}" if made.virtual else "system clock"
    click.echo(f"created {db_url} ({kind})")


@db.command("upgrade")
@db_option
@json_option
def db_upgrade(db_url: str, as_json: bool) -> None:
    """Migrate the store to this version's schema (or create it when there is none)."""
    before, after = _engine.upgrade_store(db_url)
    if as_json:
        echo_json({"schema_version": after, "from": before, "to": after})
    elif before is None:
        click.echo(f"created the schema (version {after})")
    elif before != after:
        click.echo(f"schema version {before} → {after}")
    else:
        click.echo(f"schema is current ({after})")


COMMANDS: list[click.Command] = [run, start, runs, worker, clock, db]
