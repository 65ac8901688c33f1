"""Runs and what moves them: `run`, `start`, `runs ...`, `worker`, `clock ...`, `db ...`."""

from __future__ import annotations

from typing import Any

import click

from procflow.cli import _engine, ops
from procflow.cli.options import (
    as_option,
    db_option,
    json_option,
    max_file_size_option,
    page_options,
    project_option,
    run_status_choice,
    with_inputs,
    worker_options,
)
from procflow.cli.output import (
    EXIT_ABORTED,
    EXIT_BAD,
    echo_json,
    echo_page,
    fail,
    json_arg,
    more_line,
    print_run,
    whole_number,
)
from procflow.errors import DurationError, ExprError, UsageError
from procflow.runtime.operations.listing import WAIT_KINDS
from procflow.states import RunStatus


@click.command("run")
@click.argument("path")
@click.option("--record", "record_json", help="The trigger record to create, as JSON.")
@with_inputs
@click.option("--process", "process_name", help="Which process (default: the only triggered one).")
@click.option("--wait", is_flag=True, help="Keep working until the run ends.")
@as_option(
    "NAME deploys (role deployer); intent: NAME owns the trigger record; flow: NAME is the "
    "run's `by`."
)
@db_option
@project_option
@json_option
@max_file_size_option
def run(
    path: str,
    record_json: str | None,
    input_pairs: tuple[str, ...],
    inputs_json: str | None,
    process_name: str | None,
    wait: bool,
    user: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
    max_file_size: int,
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
    # The file and a flow's inputs are checked before any store is opened (or made), so a
    # refused file or input leaves the store as it was. Imported here: only `run` compiles.
    from procflow.model.ir import Flow
    from procflow.model.validate import compile_file

    definition = compile_file(path, project_dir, max_size=max_file_size)
    if isinstance(definition, Flow):
        _engine.flow_inputs(definition, input_pairs, inputs_json)
    if _engine.store_for_run(db_url):  # said, so a mistyped --db does not pass unnoticed
        click.echo(f"created a new store at {db_url} (system clock)", err=True)
    with _engine.engine_at(db_url, project_dir, max_file_size=max_file_size) as engine:
        shown = _engine.run_file(engine, path, start, process_name, wait=wait, user=user)
    echo_json(shown) if as_json else print_run(shown)
    if shown["status"] == RunStatus.FAILED:
        fail("", EXIT_BAD)
    if shown["status"] in (RunStatus.CANCELLED, RunStatus.ABORTED):
        fail("", EXIT_ABORTED)


@click.command("start")
@click.argument("name")
@click.option("--record", "record_ref", help="ENTITY:ID of the record (intent processes).")
@click.option(
    "--again", is_flag=True,
    help="Start a triggered process for a record it already ran for (at most once otherwise).",
)  # fmt: skip
@with_inputs
@as_option("NAME needs the role operator, and is the run's `by` (on run.started).")
@db_option
@project_option
@json_option
def start(
    name: str,
    record_ref: str | None,
    again: bool,
    input_pairs: tuple[str, ...],
    inputs_json: str | None,
    user: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Start a run of a deployed flow (with inputs) or of an intent process for a record (of
    its trigger's entity; a triggered one at most once per record unless --again); print its
    id."""
    with _engine.engine_at(db_url, project_dir) as engine:
        flow = _engine.flow_named(engine, name)
        if flow is not None:
            if record_ref is not None:
                raise UsageError(f"[{name}] is a flow; it takes --input/--inputs, not --record")
            if again:
                raise UsageError(
                    f"[{name}] is a flow; --again is for intent processes (a flow starts any "
                    "number of runs)"
                )
            inputs = _engine.flow_inputs(flow, input_pairs, inputs_json)
            run_id = engine.start_flow(name, inputs, user=user)
        else:
            if input_pairs or inputs_json is not None:
                raise UsageError(
                    f"[{name}] is an intent process; it takes --record ENTITY:ID, not inputs"
                )
            ref = _record_ref(name, record_ref)
            run_id = engine.start(name, record=ref, again=again, user=user)
        shown = engine.show(run_id) if as_json else None
    echo_json(shown) if shown is not None else click.echo(run_id)


def _record_ref(name: str, ref: str | None) -> tuple[str, int]:
    if ref is None:
        raise UsageError(f"[{name}] is an intent process: give the record with --record ENTITY:ID")
    entity, _, id_text = ref.partition(":")
    if not entity or not id_text.isdigit():
        raise UsageError(
            f"--record [{_printable(ref)}] must be ENTITY:ID, like TenantApplication:1"
        )
    return entity, whole_number(id_text, "record")


# --- runs ------------------------------------------------------------------------------------


@click.group()
def runs() -> None:
    """List, show, cancel, retry and purge runs."""


@runs.command("list")
@click.option("--status", type=run_status_choice, help="Only runs with this status.")
@click.option("--name", help="Only runs of this definition.")
@click.option(
    "--waiting-for", "waiting", type=click.Choice(WAIT_KINDS),
    help="Only runs with a token waiting for this (queue: over a concurrency limit; throttle: "
    "over a step's throttle).",
)  # fmt: skip
@click.option("--parent", metavar="ID", help="Only the runs that run ID started by call.")
@page_options("runs", str)
@db_option
@json_option
def runs_list(
    status: str | None, name: str | None, waiting: str | None, parent: str | None, limit: int,
    before: str | None,
    db_url: str, as_json: bool,
) -> None:  # fmt: skip
    """Runs, newest first, a page at a time."""
    with _engine.engine_at(db_url) as engine:
        page = engine.runs_page(
            status, name, limit=limit, before=before, waiting=waiting, parent=parent
        )
    echo_page(page.items, more_line("runs", page.next_key), as_json, _run_line)


def _run_line(r: dict[str, Any]) -> str:
    key = f"key={r['business_key']}  " if r["business_key"] is not None else ""
    return f"{r['id']}  {r['name']:<24} {r['status']:<10} {key}started {r['started_at']}"


@runs.command("show")
@click.argument("run_id")
@click.option("--history", "history", metavar="N", help="Keep the last N history entries.")
@db_option
@json_option
def runs_show(run_id: str, history: str | None, db_url: str, as_json: bool) -> None:
    """One run: its tokens and why they wait, its output or error, and its history."""
    keep = _history_count(history)
    with _engine.engine_at(db_url) as engine:
        shown = engine.show(run_id, keep)
    echo_json(shown) if as_json else print_run(shown, with_history=True)


def _history_count(text: str | None) -> int | None:
    """``--history N``: a whole number, 0 or more (a negative count would drop entries from the
    wrong end)."""
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise UsageError(
            "--history N keeps the last N history entries: N must be a whole number (0 or "
            f"more), got [{_printable(text)}]"
        )
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else None  # more than any run holds: keep all


def _printable(text: str) -> str:
    """Command-line text as a message shows it: short, a lone surrogate (undecodable bytes in
    an argument) escaped so it can be printed."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= 40 else f"{safe[:37]}..."


@runs.command("cancel")
@click.argument("run_id")
@as_option("NAME needs the role operator, and is the `by` of run.cancelled.")
@db_option
@json_option
def runs_cancel(run_id: str, user: str | None, db_url: str, as_json: bool) -> None:
    """End a run that has not ended: its waits, timers and open tasks are withdrawn."""
    with _engine.engine_at(db_url) as engine:
        engine.cancel(run_id, user=user)
        shown = engine.show(run_id) if as_json else None
    echo_json(shown) if shown is not None else click.echo(f"cancelled {run_id}")


@runs.command("retry")
@click.argument("run_id")
@as_option("NAME needs the role operator, and is the `by` of run.retried.")
@db_option
@json_option
def runs_retry(run_id: str, user: str | None, db_url: str, as_json: bool) -> None:
    """Run a failed run's failed step again, with a fresh retry budget."""
    with _engine.engine_at(db_url) as engine:
        engine.retry(run_id, user=user)
        shown = engine.show(run_id) if as_json else None
    if shown is not None:
        echo_json(shown)
    else:
        click.echo(f"retrying {run_id}: its failed step runs again with a fresh retry budget")


@click.command("worker")
@click.option("--until-idle", is_flag=True, help="Exit once nothing is due now.")
@click.option("--id", "worker_id", help="This worker's id (default: host:pid).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Work loops, each on its own connection.")  # fmt: skip
@worker_options
@ops.metrics_options
@ops.operations_options
@click.option("--verbose", is_flag=True, help="Log debug lines too (each claim of runs).")
@db_option
@project_option
def worker(
    until_idle: bool,
    worker_id: str | None,
    concurrency: int,
    slots: int,
    step_timeout: str,
    stop_timeout: str,
    metrics_port: int | None,
    metrics_host: str,
    log_format: str,
    retain: str | None,
    verbose: bool,
    db_url: str,
    project_dir: str | None,
) -> None:
    """Advance runs: claim due work, run it, commit; sleep until the next due time."""
    limits = _engine.WorkLimits(slots, step_timeout, stop_timeout)
    metrics = (metrics_host, metrics_port) if metrics_port is not None else None
    with ops.operations(
        db_url, log_format=log_format, retain=retain, metrics=metrics, verbose=verbose
    ) as running:
        count = _engine.work(
            db_url, project_dir, worker_id, until_idle, concurrency, limits, running.observer
        )
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
        raise UsageError(f"{db_url} already holds a procflow store; nothing changed")
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


runs.add_command(ops.purge)

COMMANDS: list[click.Command] = [run, start, runs, worker, clock, db]
