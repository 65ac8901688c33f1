"""Flow schedules and intent schedules (sweeps): `schedules list|show|pause|resume|trigger|
backfill`."""

from __future__ import annotations

from typing import Any

import click

from procflow.cli import _engine
from procflow.cli.options import as_option, db_option, json_option, page_options
from procflow.cli.output import echo_json, echo_page, more_line
from procflow.runtime.schedules.firing import MAX_SLOTS

NAME = "NAME"  # FLOW (a lone schedule), FLOW/SCHEDULE, or APP/SCHEDULE (an intent file's)


@click.group()
def schedules() -> None:
    """Flow schedules: when each fires next, pause, resume, trigger and backfill."""


@schedules.command("list")
@page_options("schedules", str, order="by name")
@db_option
@json_option
def schedules_list(limit: int, before: str | None, db_url: str, as_json: bool) -> None:
    """Every schedule, by name, a page at a time: its spec, state, next slots, last run and
    counts."""
    with _engine.engine_at(db_url) as engine:
        page = engine.schedules.page(limit=limit, after=before)
    echo_page(page.items, more_line("schedules", page.next_key), as_json, _line, "no schedules")


def _line(s: dict[str, Any]) -> str:
    state = s["state"] + (f" ({s['note']})" if s.get("note") else "")
    upcoming = ", ".join(s["next"]) or "—"
    last = s["last"]
    last_text = f"{last['slot']} → {last['run_id']}" if last else "—"
    if s.get("sweep"):
        swept = s["sweep"]["last"]
        last_text = f"{swept[0]['slot']} → {_outcome(swept[0])}" if swept else "—"
    counts = s["counts"]
    return (
        f"{s['name']:<28} {s['spec']:<32} {state:<10} next {upcoming}  last {last_text}  "
        f"started {counts['started']} skipped {counts['skipped']} missed {counts['missed']}"
    )


def _outcome(o: dict[str, Any]) -> str:
    """A sweep's slot in words: ``2 matched: 2 done, 0 skipped, 0 failed``."""
    text = f"{o['matched']} matched: {o['done']} done, {o['skipped']} skipped, {o['failed']} failed"
    return text + (f" ({o['error']})" if o.get("error") else "")


@schedules.command("show")
@click.argument("name", metavar=NAME)
@click.option(
    "--next", "next_count", type=click.IntRange(1, MAX_SLOTS), default=3, show_default=True,
    help=f"How many next slots (1 to {MAX_SLOTS}).",
)  # fmt: skip
@db_option
@json_option
def schedules_show(name: str, next_count: int, db_url: str, as_json: bool) -> None:
    """One schedule: FLOW for a lone one, FLOW/SCHEDULE in a list of triggers."""
    with _engine.engine_at(db_url) as engine:
        shown = engine.schedules.show(name, next_count)
    if as_json:
        echo_json(shown)
        return
    click.echo(_line({**shown, "next": shown["next"][:1]}))
    for slot in shown["next"]:
        click.echo(f"  next {slot}")
    if shown["buffered"]:
        click.echo(f"  buffered {shown['buffered']} (starts when its open run ends)")
    if shown["error"]:
        click.echo(f"  error {shown['error']}")
    sweep = shown.get("sweep")
    if sweep and sweep["sweeping"]:
        click.echo(f"  sweeping {sweep['sweeping']['slot']}: {_outcome(sweep['sweeping'])} so far")
    for outcome in sweep["last"] if sweep else []:
        click.echo(f"  swept {outcome['slot']}: {_outcome(outcome)}")


@schedules.command("pause")
@click.argument("name", metavar=NAME)
@click.option("--note", help="Why it is paused (shown with its state).")
@as_option("NAME needs the role deployer.")
@db_option
@json_option
def schedules_pause(
    name: str, note: str | None, user: str | None, db_url: str, as_json: bool
) -> None:
    """Stop a schedule firing (its flow stays enabled); no slot is counted missed meanwhile."""
    with _engine.engine_at(db_url) as engine:
        shown = engine.schedules.pause(name, note, user=user)
    echo_json(shown) if as_json else click.echo(f"paused {name}")


@schedules.command("resume")
@click.argument("name", metavar=NAME)
@as_option("NAME needs the role deployer.")
@db_option
@json_option
def schedules_resume(name: str, user: str | None, db_url: str, as_json: bool) -> None:
    """Arm a paused schedule's first slot after now."""
    with _engine.engine_at(db_url) as engine:
        shown = engine.schedules.resume(name, user=user)
    if as_json:
        echo_json(shown)
    else:
        click.echo(f"resumed {name}: next {shown['next'][0] if shown['next'] else '—'}")


@schedules.command("trigger")
@click.argument("name", metavar=NAME)
@click.option("--overlap", type=click.Choice(["allow"]), help="Start even while its runs are open.")
@as_option("NAME needs the role operator.")
@db_option
@json_option
def schedules_trigger(
    name: str, overlap: str | None, user: str | None, db_url: str, as_json: bool
) -> None:
    """Start one run now, as a slot at the current instant (the schedule's overlap applies)."""
    with _engine.engine_at(db_url) as engine:
        report = engine.schedules.trigger(name, allow_overlap=overlap == "allow", user=user)
    if as_json:
        echo_json(report)
    elif report.get("sweep"):
        click.echo(f"swept {report['sweep']['slot']}: {_outcome(report['sweep'])}")
    elif report["started"]:
        click.echo(report["started"][0])
    else:
        click.echo(f"started nothing: {_why_not(report)}")


def _why_not(report: dict[str, Any]) -> str:
    """A trigger starts its run unless the schedule's overlap rule skips or buffers it."""
    if report["buffered"]:
        return "buffered until its open run ends (overlap)"
    return "skipped: its run is still open (overlap)"


@schedules.command("backfill")
@click.argument("name", metavar=NAME)
@click.option("--from", "from_", required=True, metavar="TIMESTAMP", help="The window's start.")
@click.option("--to", "to", required=True, metavar="TIMESTAMP", help="The window's end.")
@click.option("--dry-run", is_flag=True, help="List the slots; start nothing.")
@as_option("NAME needs the role deployer.")
@db_option
@json_option
def schedules_backfill(
    name: str, from_: str, to: str, dry_run: bool, user: str | None, db_url: str,
    as_json: bool,
) -> None:  # fmt: skip
    """One run for every slot in [--from, --to] that has none yet, oldest first (the schedule
    as it is now; at most 1000 slots, none after the current instant)."""
    with _engine.engine_at(db_url) as engine:
        report = engine.schedules.backfill(name, from_, to, dry_run=dry_run, user=user)
    if as_json:
        echo_json(report)
        return
    for slot in report["slots"]:
        click.echo(f"{slot['slot']}  {_slot_mark(slot)}  {slot['run_id'] or ''}".rstrip())
    slots = report["slots"]
    if dry_run:
        fresh = sum(s["run_id"] is None for s in slots)
        click.echo(f"{len(slots)} slots, {fresh} would start a run (dry run)", err=True)
    else:
        click.echo(f"{len(slots)} slots, {sum(s['started'] for s in slots)} runs started", err=True)


def _slot_mark(slot: dict[str, Any]) -> str:
    if slot["started"]:
        return "started"
    return "has run" if slot["run_id"] else "would start"


COMMANDS: list[click.Command] = [schedules]
