"""What the outside world brings and gets: `records ...`, `events send`, `tasks ...`, `outbox`."""

from __future__ import annotations

from typing import Any

import click

from procflow.cli import _engine
from procflow.cli.options import as_option, db_option, json_option, page_options, project_option
from procflow.cli.output import echo_json, echo_page, json_arg, more_line, one_line, whole_number
from procflow.errors import UsageError

# --- records ---------------------------------------------------------------------------------


@click.group()
def records() -> None:
    """Entity records (a write fires its lifecycle event)."""


@records.command("create")
@click.argument("entity")
@click.option("--data", required=True, help="The record's fields as JSON.")
@as_option("NAME becomes the record's owner (read by assignee: personal).")
@db_option
@project_option
@json_option
def records_create(
    entity: str, data: str, user: str | None, db_url: str, project_dir: str | None, as_json: bool
) -> None:
    """Create a record of ENTITY."""
    with _engine.engine_at(db_url, project_dir) as engine:
        record = engine.create_record(entity, json_arg(data, "--data"), user=user)
    echo_json(record) if as_json else click.echo(f"created {entity} {one_line(record)}")


@records.command("update")
@click.argument("entity")
@click.argument("id_text", metavar="ID")
@click.option("--data", required=True, help="The fields to change, as JSON.")
@as_option("A record keeps who created it, not who changed it.")
@db_option
@project_option
@json_option
def records_update(
    entity: str,
    id_text: str,
    data: str,
    user: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Change fields of the record ENTITY ID."""
    record_id = whole_number(id_text, "record")
    with _engine.engine_at(db_url, project_dir) as engine:
        record = engine.update_record(entity, record_id, json_arg(data, "--data"), user=user)
    echo_json(record) if as_json else click.echo(f"updated {entity} {one_line(record)}")


@records.command("delete")
@click.argument("entity")
@click.argument("id_text", metavar="ID")
@as_option("NAME is the `by` of the runs the delete cancels.")
@db_option
@project_option
@json_option
def records_delete(
    entity: str, id_text: str, user: str | None, db_url: str, project_dir: str | None, as_json: bool
) -> None:
    """Delete the record ENTITY ID."""
    record_id = whole_number(id_text, "record")
    with _engine.engine_at(db_url, project_dir) as engine:
        engine.delete_record(entity, record_id, user=user)
    if as_json:
        echo_json({"entity": entity, "id": record_id, "deleted": True})
    else:
        click.echo(f"deleted {entity} {record_id}")


@records.command("get")
@click.argument("entity")
@click.argument("id_text", metavar="ID")
@as_option("NAME must be allowed to read ENTITY's records.")
@db_option
@json_option
def records_get(entity: str, id_text: str, user: str | None, db_url: str, as_json: bool) -> None:
    """The record ENTITY ID."""
    record_id = whole_number(id_text, "record")
    with _engine.engine_at(db_url) as engine:
        record = engine.get_record(entity, record_id, user=user)
    echo_json(record) if as_json else click.echo(one_line(record))


@records.command("list")
@click.argument("entity")
@page_options("records", int)
@as_option("NAME must be allowed to read ENTITY's records.")
@db_option
@json_option
def records_list(
    entity: str, limit: int, before: int | None, user: str | None, db_url: str, as_json: bool
) -> None:
    """ENTITY's records, newest first, a page at a time."""
    with _engine.engine_at(db_url) as engine:
        page = engine.records_page(entity, limit=limit, before=before, user=user)
    echo_page(page.items, more_line("records", page.next_key), as_json, one_line)


# --- events ----------------------------------------------------------------------------------


@click.group()
def events() -> None:
    """Events from the outside world (delivered to waiting runs, starting triggered flows)."""


@events.command("send")
@click.argument("type_", metavar="TYPE", required=False)
@click.option("--data", help="The payload, as a JSON object.")
@click.option("--id", "event_id", help="The event id (a repeated id is acknowledged, ignored).")
@click.option("--envelope", help="A whole event: {type, data, id} or a CloudEvents JSON object.")
@click.option("--slack-payload", help="A Slack interactivity payload → a slack.approval event.")
@as_option(
    "NAME needs the role operator, and is the `by` of the event.received entries of the runs "
    "it resumes."
)
@db_option
@project_option
@json_option
def events_send(
    type_: str | None,
    data: str | None,
    event_id: str | None,
    envelope: str | None,
    slack_payload: str | None,
    user: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
) -> None:
    """Accept an event; print the delivery report (runs resumed, runs started)."""
    if sum(x is not None for x in (type_, envelope, slack_payload)) != 1:
        raise UsageError(
            "give exactly one of TYPE (with --data/--id), --envelope or --slack-payload"
        )
    _refuse_ignored(data, event_id, envelope, slack_payload)
    if envelope is not None:
        event = _engine.event_from_envelope(json_arg(envelope, "--envelope"))
    elif slack_payload is not None:
        event = _engine.slack_approval(json_arg(slack_payload, "--slack-payload"), event_id)
    else:
        assert type_ is not None
        event = _engine.event_of(type_, json_arg(data, "--data") if data else {}, event_id)
    with _engine.engine_at(db_url, project_dir) as engine:
        report = engine.accept_event(event, user=user)
    echo_json(report) if as_json else _print_delivery(report)


def _refuse_ignored(
    data: str | None, event_id: str | None, envelope: str | None, slack_payload: str | None
) -> None:
    """A flag the chosen form would ignore is refused: the user meant it to count."""
    if data is not None and envelope is not None:
        raise UsageError("--data is for an event given by TYPE; an --envelope carries its own data")
    if data is not None and slack_payload is not None:
        raise UsageError(
            "--data is for an event given by TYPE; a --slack-payload makes its own data"
        )
    if event_id is not None and envelope is not None:
        raise UsageError(
            "--id is for an event given by TYPE or --slack-payload; an --envelope carries its "
            "own id"
        )


def _print_delivery(report: dict[str, Any]) -> None:
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


# --- tasks -----------------------------------------------------------------------------------


@click.group()
def tasks() -> None:
    """User tasks (intent userTask steps): list the open ones, complete one."""


@tasks.command("list")
@click.option("--assignee", help="Only tasks assigned to this user or role.")
@page_options("tasks", int)
@db_option
@json_option
def tasks_list(
    assignee: str | None, limit: int, before: int | None, db_url: str, as_json: bool
) -> None:
    """Open tasks, newest first, a page at a time."""
    with _engine.engine_at(db_url) as engine:
        page = engine.tasks_page(assignee, limit=limit, before=before)
    echo_page(page.items, more_line("tasks", page.next_key), as_json, _task_line, "no open tasks")


def _task_line(t: dict[str, Any]) -> str:
    record = f"  {t['record']['entity']} {t['record']['id']}" if t["record"] else ""
    form = f"  form {t['form']} [{'|'.join(t['actions'])}]" if t["form"] else ""
    return (
        f"{t['id']:>5}  {t['step']:<16} → {t['assignee']}{record}{form}  run {t['run_id']}  "
        f"since {t['created_at']}"
    )


@tasks.command("complete")
@click.argument("id_text", metavar="ID")
@click.option(
    "--action", help="One of the form's actions (without a form: free text, default complete)."
)
@click.option("--data", help="The form's fields to write to the record, as JSON.")
@as_option(
    "Only the task's assigned user, a member of its assigned role, or an administrator may "
    "complete it; NAME is its `by`."
)
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
    task_id = whole_number(id_text, "task")
    with _engine.engine_at(db_url, project_dir) as engine:
        done = engine.complete_task(task_id, action, json_arg(data, "--data"), user)
    if as_json:
        echo_json(done)
    else:
        click.echo(
            f"completed task {done['id']} ({done['step']}): {done['action']}, by {done['by']}"
        )


# --- the outbox ------------------------------------------------------------------------------


@click.group()
def outbox() -> None:
    """Messages kept by unconfigured senders (notify, email.send, slack.post)."""


@outbox.command("list")
@page_options("outbox", int)
@db_option
@json_option
def outbox_list(limit: int, before: int | None, db_url: str, as_json: bool) -> None:
    """Kept messages, newest first, a page at a time."""
    with _engine.engine_at(db_url) as engine:
        page = engine.outbox_page(limit=limit, before=before)
    more = more_line("outbox", page.next_key)
    echo_page(page.items, more, as_json, _message_lines, "the outbox is empty")


def _message_lines(m: dict[str, Any]) -> str:
    about = f"  {m['subject']}" if m["subject"] else ""
    head = f"{m['id']:>5} {m['created_at']} {m['channel']:<5} → {m['to']}{about}"
    return f"{head}\n      {m['body']}" if m["body"] else head


COMMANDS: list[click.Command] = [records, events, tasks, outbox]
