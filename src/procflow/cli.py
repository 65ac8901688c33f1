"""The ``procflow`` command.

Exit codes (interfaces.md): 0 success, 1 the definition or run is bad or failed, 2 the request is
unusable (bad flag, missing file, unknown name), 3 a run was cancelled or aborted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from procflow.errors import DefinitionError, ProcflowError, UsageError
from procflow.store.store import DEFAULT_URL

if TYPE_CHECKING:
    from procflow.runtime.engine import Engine

EXIT_OK, EXIT_BAD, EXIT_USAGE, EXIT_ABORTED = 0, 1, 2, 3


class Failure(Exception):
    """Ends the command with ``code`` after printing ``message`` on stderr."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _definition_files(paths: tuple[str, ...]) -> Iterator[str]:
    """The files named, with folders expanded to the definition files inside them."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(
                str(f)
                for pattern in ("*.intent", "*.flow.yaml", "*.flow.yml")
                for f in path.rglob(pattern)
                if ".venv" not in f.parts
            )
            if not found:
                raise UsageError(f"{p}: no *.intent or *.flow.yaml files in this folder")
            yield from found
        else:
            yield p


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="procflow")
def cli() -> None:
    """procflow: a durable process engine for declarative YAML."""


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print problems as a JSON array.")
def validate(paths: tuple[str, ...], as_json: bool) -> None:
    """Validate definition files (*.intent, *.flow.yaml) and print every problem."""
    from procflow.model.validate import load_file

    problems: list[Any] = []
    errors = warnings = files = 0
    unusable: list[str] = []
    for path in _definition_files(paths):
        try:
            loaded = load_file(path)
        except UsageError as exc:  # report it, but still report every other file's problems
            unusable.append(str(exc))
            continue
        files += 1
        for d in loaded.diagnostics:
            errors += d.severity == "error"
            warnings += d.severity == "warning"
            if as_json:
                problems.append(d.as_json())
            else:
                click.echo(d.format())
    if as_json:
        click.echo(json.dumps(problems, indent=2))
    else:
        noun = "file" if files == 1 else "files"
        click.echo(f"checked {files} {noun}: {errors} error(s), {warnings} warning(s)", err=True)
    if unusable:
        raise Failure("\n".join(f"error: {m}" for m in unusable), EXIT_USAGE)
    if errors:
        raise Failure("", EXIT_BAD)


@cli.command()
@click.argument("path")
@click.option("--name", help="The process to draw (an intent file may hold several).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mermaid", "dot", "svg"]),
    default="mermaid",
    show_default=True,
)
def graph(path: str, name: str | None, fmt: str) -> None:
    """Draw a process or flow as a Mermaid or Graphviz diagram."""
    from procflow import graph as graphs
    from procflow.model.validate import compile_file

    click.echo(graphs.draw(compile_file(path), name, fmt))


# --- the runtime ---------------------------------------------------------------------------

db_option = click.option(
    "--db",
    "db_url",
    envvar="PROCFLOW_DATABASE_URL",
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    help="The store.",
)
project_option = click.option(
    "--project",
    "project_dir",
    envvar="PROCFLOW_PROJECT",
    show_envvar=True,
    help="Where delegates and connectors live (default: the deployed file's folder).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _engine(db_url: str, project_dir: str | None = None, **kwargs: Any) -> Engine:
    from procflow.runtime.engine import Engine

    return Engine(db_url, project_dir=project_dir, **kwargs)


def _json_arg(text: str | None, what: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise UsageError(f'{what} must be a JSON object, like \'{{"title": "acme"}}\'')
    return value


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


@cli.group()
def db() -> None:
    """Create or migrate the store."""


@db.command("init")
@db_option
@click.option("--virtual-clock", is_flag=True, help="Keep time in the store (tests, demos).")
def db_init(db_url: str, virtual_clock: bool) -> None:
    """Create the store's schema."""
    from procflow.runtime.engine import VIRTUAL_EPOCH, from_iso
    from procflow.store.store import Store

    store = Store(db_url)
    try:
        created = store.init(virtual_clock=virtual_clock, now=from_iso(VIRTUAL_EPOCH))
    finally:
        store.close()
    if not created:
        raise Failure(f"{db_url} already holds a procflow store; nothing changed", EXIT_USAGE)
    clock = f"virtual clock at {VIRTUAL_EPOCH}" if virtual_clock else "system clock"
    click.echo(f"created {db_url} ({clock})")


@db.command("upgrade")
@db_option
def db_upgrade(db_url: str) -> None:
    """Migrate the store to this version's schema."""
    from procflow.store.store import Store

    store = Store(db_url)
    try:
        before, after = store.upgrade()
    finally:
        store.close()
    click.echo(
        f"schema version {before} → {after}" if before != after else f"schema is current ({after})"
    )


@cli.command("deploy")
@click.argument("paths", nargs=-1, required=True)
@db_option
@project_option
def deploy_cmd(paths: tuple[str, ...], db_url: str, project_dir: str | None) -> None:
    """Validate files and store new versions of their definitions."""
    engine = _engine(db_url, project_dir)
    for path in paths:
        for d in engine.deploy(path):
            note = "" if d.created else " (unchanged)"
            click.echo(f"{d.name} → version {d.version}{note}")


input_options = [
    click.option(
        "--input", "input_pairs", multiple=True, metavar="K=V",
        help="A flow input, converted by its declared type (repeatable).",
    ),
    click.option("--inputs", "inputs_json", help="All flow inputs at once, as a JSON object."),
]  # fmt: skip


def with_inputs(fn: Any) -> Any:
    for option in reversed(input_options):
        fn = option(fn)
    return fn


@cli.command("run")
@click.argument("path")
@click.option("--record", "record_json", help="The trigger record to create, as JSON.")
@with_inputs
@click.option("--process", "process_name", help="Which process (default: the only triggered one).")
@click.option("--wait", is_flag=True, help="Keep working until the run ends.")
@db_option
@project_option
@json_option
def run_cmd(
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
    from procflow.runtime.oneshot import FlowStart, run_once

    engine = _engine(db_url, project_dir)
    if path.endswith(".flow.yaml") or path.endswith(".flow.yml"):
        if record_json is not None or process_name is not None:
            raise UsageError("--record and --process are for intent files; a flow takes --input")
        start: FlowStart | dict[str, Any] = FlowStart(list(input_pairs), inputs_json)
    else:
        if input_pairs or inputs_json is not None:
            raise UsageError("--input/--inputs are for flows; an intent run takes --record JSON")
        start = _json_arg(record_json, "--record")
    shown = run_once(engine, path, start, process_name, wait=wait)
    if as_json:
        _echo_json(shown)
    else:
        _print_run(shown)
    status = shown["status"]
    if status == "failed":
        raise Failure("", EXIT_BAD)
    if status in ("cancelled", "aborted"):
        raise Failure("", EXIT_ABORTED)


@cli.command("start")
@click.argument("name")
@click.option("--record", "record_ref", help="ENTITY:ID of the record (intent processes).")
@with_inputs
@db_option
@project_option
def start_cmd(
    name: str,
    record_ref: str | None,
    input_pairs: tuple[str, ...],
    inputs_json: str | None,
    db_url: str,
    project_dir: str | None,
) -> None:
    """Start a run of a deployed flow (with inputs) or of a trigger-less process for a record;
    print its id."""
    engine = _engine(db_url, project_dir)
    flow = engine.latest_flow(name)
    if flow is not None:
        if record_ref is not None:
            raise UsageError(f"[{name}] is a flow; it takes --input/--inputs, not --record")
        from procflow.runtime.inputs import cli_inputs

        click.echo(engine.start_flow(name, cli_inputs(flow, input_pairs, inputs_json)))
        return
    if input_pairs or inputs_json is not None:
        raise UsageError(f"[{name}] is an intent process; it takes --record ENTITY:ID, not inputs")
    if record_ref is None:
        raise UsageError(f"[{name}] is an intent process: give the record with --record ENTITY:ID")
    entity, _, id_text = record_ref.partition(":")
    if not entity or not id_text.isdigit():
        raise UsageError(f"--record [{record_ref}] must be ENTITY:ID, like TenantApplication:1")
    click.echo(engine.start(name, record=(entity, int(id_text))))


@cli.group()
def records() -> None:
    """Entity records (a write fires its lifecycle event)."""


def _record_id(id_text: str | None) -> int:
    if id_text is None or not id_text.isdigit():
        raise UsageError(f"a record id must be a whole number, got [{id_text}]")
    return int(id_text)


@records.command("create")
@click.argument("entity")
@click.option("--data", required=True, help="The record's fields as JSON.")
@click.option("--as", "user", help="The creating user (the record's owner).")
@db_option
@project_option
@json_option
def records_create(
    entity: str, data: str, user: str | None, db_url: str, project_dir: str | None, as_json: bool
) -> None:
    record = _engine(db_url, project_dir).create_record(
        entity, _json_arg(data, "--data"), user=user
    )
    _echo_json(record) if as_json else click.echo(f"created {entity} {record_summary(record)}")


@records.command("update")
@click.argument("entity")
@click.argument("id_text", metavar="ID")
@click.option("--data", required=True, help="The fields to change, as JSON.")
@db_option
@project_option
@json_option
def records_update(
    entity: str, id_text: str, data: str, db_url: str, project_dir: str | None, as_json: bool
) -> None:
    engine = _engine(db_url, project_dir)
    record = engine.update_record(entity, _record_id(id_text), _json_arg(data, "--data"))
    _echo_json(record) if as_json else click.echo(f"updated {entity} {record_summary(record)}")


@records.command("delete")
@click.argument("entity")
@click.argument("id_text", metavar="ID")
@db_option
@project_option
def records_delete(entity: str, id_text: str, db_url: str, project_dir: str | None) -> None:
    _engine(db_url, project_dir).delete_record(entity, _record_id(id_text))
    click.echo(f"deleted {entity} {id_text}")


@records.command("get")
@click.argument("entity")
@click.argument("id_text", metavar="ID")
@db_option
@json_option
def records_get(entity: str, id_text: str, db_url: str, as_json: bool) -> None:
    record = _engine(db_url).get_record(entity, _record_id(id_text))
    _echo_json(record) if as_json else click.echo(record_summary(record))


@records.command("list")
@click.argument("entity")
@db_option
@json_option
def records_list(entity: str, db_url: str, as_json: bool) -> None:
    rows = _engine(db_url).list_records(entity)
    if as_json:
        _echo_json(rows)
    else:
        for record in rows:
            click.echo(record_summary(record))


def record_summary(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)


@cli.group()
def runs() -> None:
    """List, show, cancel and retry runs."""


@runs.command("list")
@click.option("--status", help="Only runs with this status.")
@click.option("--name", help="Only runs of this definition.")
@db_option
@json_option
def runs_list(status: str | None, name: str | None, db_url: str, as_json: bool) -> None:
    from procflow.runtime.views import run_summary_json

    rows = [run_summary_json(r) for r in _engine(db_url).list_runs(status, name)]
    if as_json:
        _echo_json(rows)
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
    shown = _engine(db_url).show(run_id, history)
    _echo_json(shown) if as_json else _print_run(shown, with_history=True)


@runs.command("cancel")
@click.argument("run_id")
@db_option
def runs_cancel(run_id: str, db_url: str) -> None:
    _engine(db_url).cancel(run_id)
    click.echo(f"cancelled {run_id}")


@runs.command("retry")
@click.argument("run_id")
@db_option
def runs_retry(run_id: str, db_url: str) -> None:
    _engine(db_url).retry(run_id)
    click.echo(f"retrying {run_id}: its failed step runs again with a fresh retry budget")


def _trail(history: list[dict[str, Any]]) -> str:
    """The path a run took, from its history: ``a → b (3 attempts) → c (failed: …)``."""
    parts = []
    for h in history:
        if h["type"] == "step.completed":
            tries = f" ({h['attempt']} attempts)" if h.get("attempt", 1) > 1 else ""
            parts.append(f"{h.get('path') or h['step']}{tries}")
        elif h["type"] == "step.failed":
            where = h.get("path") or h["step"]
            parts.append(f"{where} (failed after {h.get('attempt', 1)}: {h.get('message')})")
    return " → ".join(parts)


def _print_run(shown: dict[str, Any], with_history: bool = False) -> None:
    click.echo(f"run {shown['id']}  {shown['name']} v{shown['version']}  {shown['status']}")
    if shown.get("record"):
        click.echo(f"  record   {shown['record']['entity']} {shown['record']['id']}")
    click.echo(f"  started  {shown['started_at']}" + (
        f"   ended {shown['ended_at']}" if shown["ended_at"] else ""))  # fmt: skip
    for token in shown["tokens"]:
        wait = token.get("waiting_for")
        if wait:
            detail = ", ".join(
                f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}"
                for k, v in wait.items()
                if k != "kind"
            )
            click.echo(f"  waiting  {token.get('path', token['step'])}: {wait['kind']} ({detail})")
        elif token["state"] != "ready":
            click.echo(f"  token    {token.get('path', token['step'])}: {token['state']}")
    trail = _trail(shown["history"])
    if trail:
        click.echo(f"  steps    {trail}")
    if shown["error"]:
        click.echo(f"  error    step [{shown['error']['step']}]: {shown['error']['message']}")
    if shown["output"] is not None:
        click.echo(f"  output   {json.dumps(shown['output'])}")
    for name, var in shown["vars"].items():
        click.echo(f"  var      {name}: {'set (***)' if var['set'] else 'not set'}")
    if with_history:
        for h in shown["history"]:
            extra = {k: v for k, v in h.items() if k not in ("seq", "at", "type", "step", "path")}
            where = f" {h['step']}" if "step" in h else ""
            more = f" {json.dumps(extra, ensure_ascii=False)}" if extra else ""
            click.echo(f"  {h['seq']:>4} {h['at']} {h['type']}{where}{more}")


@cli.group()
def definitions() -> None:
    """Deployed definitions and their versions."""


@definitions.command("list")
@db_option
@json_option
def definitions_list(db_url: str, as_json: bool) -> None:
    engine = _engine(db_url)
    reader = engine.store.read()
    rows: list[dict[str, Any]] = []
    for name, dialect, enabled, latest in reader.definitions():
        versions = [
            {"version": v, "active_runs": active} for v, _, active in reader.versions_of(name)
        ]
        rows.append(
            {"name": name, "dialect": dialect, "enabled": enabled, "latest": latest,
             "versions": versions}
        )  # fmt: skip
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        active = ", ".join(f"v{v['version']}: {v['active_runs']} active" for v in r["versions"])
        state = "" if r["enabled"] else "  (disabled)"
        click.echo(f"{r['name']:<28} {r['dialect']:<7} latest v{r['latest']}  [{active}]{state}")


@definitions.command("disable")
@click.argument("name")
@db_option
def definitions_disable(name: str, db_url: str) -> None:
    _engine(db_url).set_enabled(name, False)
    click.echo(f"disabled {name}: no new runs; running ones continue")


@definitions.command("enable")
@click.argument("name")
@db_option
def definitions_enable(name: str, db_url: str) -> None:
    _engine(db_url).set_enabled(name, True)
    click.echo(f"enabled {name}")


@cli.command("worker")
@click.option("--until-idle", is_flag=True, help="Exit once nothing is due now.")
@click.option("--id", "worker_id", help="This worker's id (default: host:pid).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Runs advanced at once (several processes scale further).")  # fmt: skip
@db_option
@project_option
def worker_cmd(
    until_idle: bool, worker_id: str | None, concurrency: int, db_url: str, project_dir: str | None
) -> None:
    """Advance runs: claim due work, run it, commit; sleep until the next due time."""
    from procflow.runtime.worker import run_worker

    count = run_worker(
        db_url, project_dir, worker_id, until_idle=until_idle, concurrency=concurrency
    )
    click.echo(f"worker stopped after {count} transitions", err=True)


@cli.group()
def events() -> None:
    """Events from the outside world (delivered to waiting runs, starting triggered flows)."""


@events.command("send")
@click.argument("type_", metavar="TYPE", required=False)
@click.option("--data", help="The payload, as a JSON object.")
@click.option("--id", "event_id", help="The event id (a repeated id is acknowledged, ignored).")
@click.option("--envelope", help="A whole event: {type, data, id} or a CloudEvents JSON object.")
@click.option("--slack-payload", help="A Slack interactivity payload → a slack.approval event.")
@db_option
@project_option
@json_option
def events_send(
    type_: str | None,
    data: str | None,
    event_id: str | None,
    envelope: str | None,
    slack_payload: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Accept an event; print the delivery report (runs resumed, runs started)."""
    from procflow.runtime.events import envelope as parse_envelope
    from procflow.runtime.events import make_event

    engine = _engine(db_url, project_dir)
    given = [x for x in (type_, envelope, slack_payload) if x is not None]
    if len(given) != 1:
        raise UsageError(
            "give exactly one of TYPE (with --data/--id), --envelope or --slack-payload"
        )
    if envelope is not None:
        event = parse_envelope(_json_arg(envelope, "--envelope"))
    elif slack_payload is not None:
        from procflow.connectors.builtin.slack_events import approval_event

        payload, key = approval_event(_json_arg(slack_payload, "--slack-payload"))
        event = make_event("slack.approval", payload, event_id or key)
    else:
        assert type_ is not None
        event = make_event(type_, _json_arg(data, "--data") if data else {}, event_id)
    report = engine.accept_event(event)
    if as_json:
        _echo_json(report)
        return
    if report["duplicate"]:
        click.echo(f"event {report['event_id']}: a duplicate; nothing done")
        return
    click.echo(
        f"event {report['event_id']}: resumed {len(report['resumed'])} run(s), "
        f"started {len(report['started'])}"
    )
    for run_id in report["resumed"]:
        click.echo(f"  resumed {run_id}")
    for run_id in report["started"]:
        click.echo(f"  started {run_id}")
    for problem in report.get("errors", []):
        click.echo(f"  not started: flow [{problem['flow']}]: {problem['message']}", err=True)


@cli.group()
def tasks() -> None:
    """User tasks (intent userTask steps): list the open ones, complete one."""


@tasks.command("list")
@click.option("--assignee", help="Only tasks assigned to this user or role.")
@db_option
@json_option
def tasks_list(assignee: str | None, db_url: str, as_json: bool) -> None:
    """Open tasks, oldest first."""
    rows = _engine(db_url).list_tasks(assignee)
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo("no open tasks")
    for t in rows:
        record = f"  {t['record']['entity']} {t['record']['id']}" if t["record"] else ""
        form = f"  form {t['form']} [{'|'.join(t['actions'])}]" if t["form"] else ""
        click.echo(
            f"{t['id']:>5}  {t['step']:<16} → {t['assignee']}{record}{form}  run {t['run_id']}  "
            f"since {t['created_at']}"
        )


def _task_id(id_text: str) -> int:
    if not id_text.isdigit():
        raise UsageError(f"a task id must be a whole number, got [{id_text}]")
    return int(id_text)


@tasks.command("complete")
@click.argument("id_text", metavar="ID")
@click.option(
    "--action", help="One of the form's actions (without a form: free text, default complete)."
)
@click.option("--data", help="The form's fields to write to the record, as JSON.")
@click.option("--as", "user", help="Complete as this user (default: as an administrator).")
@db_option
@project_option
@json_option
def tasks_complete(
    id_text: str,
    action: str | None,
    data: str | None,
    user: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Complete an open task: write its form's fields, and move its run on."""
    engine = _engine(db_url, project_dir)
    done = engine.complete_task(_task_id(id_text), action, _json_arg(data, "--data"), user)
    if as_json:
        _echo_json(done)
    else:
        click.echo(
            f"completed task {done['id']} ({done['step']}): {done['action']}, by {done['by']}"
        )


@cli.group()
def outbox() -> None:
    """Messages kept by unconfigured senders (notify, email.send, slack.post)."""


@outbox.command("list")
@db_option
@json_option
def outbox_list(db_url: str, as_json: bool) -> None:
    from procflow.runtime.clock import iso

    rows = _engine(db_url).store.read().outbox()
    shown = [
        {
            "id": r.id, "channel": r.channel, "to": r.recipient, "subject": r.subject,
            "body": r.body, "run_id": r.run_id, "step": r.step, "created_at": iso(r.created_at),
        }
        for r in rows
    ]  # fmt: skip
    if as_json:
        _echo_json(shown)
        return
    if not shown:
        click.echo("the outbox is empty")
    for m in shown:
        about = f"  {m['subject']}" if m["subject"] else ""
        click.echo(f"{m['id']:>5} {m['created_at']} {m['channel']:<5} → {m['to']}{about}")
        if m["body"]:
            click.echo(f"      {m['body']}")


@cli.group()
def clock() -> None:
    """Show or move a virtual clock (stores created with --virtual-clock)."""


@clock.command("show")
@db_option
def clock_show(db_url: str) -> None:
    from procflow.runtime.clock import iso

    engine = _engine(db_url)
    kind = "virtual" if engine.is_virtual else "system"
    click.echo(f"{iso(engine.now())} ({kind} clock)")


@clock.command("advance")
@click.argument("duration")
@db_option
@project_option
def clock_advance(duration: str, db_url: str, project_dir: str | None) -> None:
    """Step through every due time up to now + DURATION, running what is due at each."""
    from procflow.errors import DurationError
    from procflow.runtime.clock import iso

    engine = _engine(db_url, project_dir)
    try:
        engine.advance(duration)
    except DurationError as exc:
        raise UsageError(str(exc)) from None
    click.echo(f"clock at {iso(engine.now())}")


@clock.command("set")
@click.argument("timestamp")
@db_option
@project_option
def clock_set(timestamp: str, db_url: str, project_dir: str | None) -> None:
    """Move forward to TIMESTAMP the same way."""
    from procflow.errors import ExprError
    from procflow.runtime.clock import iso
    from procflow.runtime.engine import from_iso

    engine = _engine(db_url, project_dir)
    try:
        target = from_iso(timestamp)
    except ExprError as exc:
        raise UsageError(f"[{timestamp}] is not an ISO-8601 timestamp with a zone: {exc}") from None
    engine.set_clock(target)
    click.echo(f"clock at {iso(engine.now())}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the command and turns every procflow error into a message + exit code."""
    try:
        cli.main(args=argv, prog_name="procflow", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except Failure as exc:
        if exc.message:
            click.echo(exc.message, err=True)
        sys.exit(exc.code)
    except DefinitionError as exc:
        for d in exc.diagnostics:
            click.echo(d.format(), err=True)
        sys.exit(EXIT_BAD)
    except UsageError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except ProcflowError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
