"""What the commands print: JSON for `--json`, words for people, and how a command gives up."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

import click

from procflow.cursors import encode_cursor
from procflow.errors import UsageError
from procflow.store.codec import depth_problem

EXIT_OK, EXIT_BAD, EXIT_USAGE, EXIT_ABORTED = 0, 1, 2, 3


def fail(message: str, code: int) -> NoReturn:
    """End the command with exit ``code``, after ``message`` (if any) on stderr."""
    if message:
        click.echo(message, err=True)
    raise click.exceptions.Exit(code)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def echo_page(
    items: list[dict[str, Any]],
    more: str | None,
    as_json: bool,
    line: Callable[[dict[str, Any]], str],
    empty: str = "",
) -> None:
    """A page of a list: ``--json`` prints the items as a JSON array; otherwise ``line`` of each
    (``empty`` when there is none). ``more``: the line saying the next page's ``--cursor``,
    last on stdout, and on stderr with ``--json`` (stdout stays one JSON array)."""
    if as_json:
        echo_json(items)
    else:
        if not items and empty:
            click.echo(empty)
        for item in items:
            click.echo(line(item))
    if more is not None:
        click.echo(more, err=as_json)


def more_line(list_name: str, next_key: int | str | None) -> str | None:
    """``-- more runs: --cursor C`` when a page has a next one (``next_key``), else None."""
    if next_key is None:
        return None
    return f"-- more {list_name}: --cursor {encode_cursor(list_name, next_key)}"


def json_arg(text: str | None, what: str) -> dict[str, Any]:
    """A JSON object given on the command line (``{}`` when not given)."""
    if text is None:
        return {}
    too_deep = depth_problem(text)
    if too_deep is not None:  # before parsing: the parser recurses once per level
        raise UsageError(f"{what} is {too_deep}")
    try:
        value = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:  # NaN, Infinity: Python's json reads them, JSON has no such value
        raise UsageError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f'{what} must be a JSON object, like \'{{"title": "acme"}}\'')
    return value


MAX_ID = 2**63 - 1  # the largest id a store holds (a signed 64-bit integer column)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


def whole_number(id_text: str | None, what: str) -> int:
    """An id from the command line: digits, no larger than any id a store can hold (SQLite
    cannot even compare a larger integer with its ids)."""
    shown = id_text if id_text is None or len(id_text) <= 40 else f"{id_text[:37]}..."
    if id_text is None or not (id_text.isascii() and id_text.isdigit()):
        raise UsageError(f"a {what} id must be a whole number, got [{shown}]")
    if len(id_text) > len(str(MAX_ID)) or int(id_text) > MAX_ID:
        raise UsageError(f"a {what} id must be at most {MAX_ID}, got [{shown}]")
    return int(id_text)


def one_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)


# --- a run in words --------------------------------------------------------------------------


def trail(history: list[dict[str, Any]]) -> str:
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


def print_run(shown: dict[str, Any], with_history: bool = False) -> None:
    """A run in the `runs show` shape, for people."""
    click.echo(f"run {shown['id']}  {shown['name']} v{shown['version']}  {shown['status']}")
    if shown.get("record"):
        click.echo(f"  record   {shown['record']['entity']} {shown['record']['id']}")
    ended = f"   ended {shown['ended_at']}" if shown["ended_at"] else ""
    click.echo(f"  started  {shown['started_at']}{ended}")
    _print_calls(shown)
    for token in shown["tokens"]:
        _print_token(token)
    steps = trail(shown["history"])
    if steps:
        click.echo(f"  steps    {steps}")
    if shown["error"]:
        click.echo(f"  error    step [{shown['error']['step']}]: {shown['error']['message']}")
    if shown["output"] is not None:
        click.echo(f"  output   {json.dumps(shown['output'])}")
    for name, var in shown["vars"].items():
        click.echo(f"  var      {name}: {'set (***)' if var['set'] else 'not set'}")
    if with_history:
        for entry in shown["history"]:
            _print_history_entry(entry)


def _print_calls(shown: dict[str, Any]) -> None:
    """The run that called this one, and the runs this one called (absent from an older shape)."""
    parent = shown.get("parent")
    if parent:
        detached = ", detached" if parent.get("detached") else ""
        click.echo(f"  parent   {parent['run_id']} (step {parent['step']}{detached})")
    for child in shown.get("children", ()):
        detached = ", detached" if child.get("detached") else ""
        click.echo(
            f"  child    {child['run_id']}  {child['flow']} {child['status']} "
            f"(step {child['step']}{detached})"
        )


def _print_token(token: dict[str, Any]) -> None:
    where = token.get("path", token["step"])
    wait = token.get("waiting_for")
    if wait and wait.get("kind") == "call":  # the child's own wait follows, down the chain
        # Imported here: `procflow --help` imports this module and none of the runtime.
        from procflow.runtime.operations.views import why_line

        click.echo(f"  waiting  {why_line(where, wait)}")
    elif wait:
        detail = ", ".join(
            f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}"
            for k, v in wait.items()
            if k != "kind"
        )
        click.echo(f"  waiting  {where}: {wait['kind']} ({detail})")
    elif token["state"] != "ready":
        click.echo(f"  token    {where}: {token['state']}")


def _print_history_entry(entry: dict[str, Any]) -> None:
    extra = {k: v for k, v in entry.items() if k not in ("seq", "at", "type", "step", "path")}
    where = f" {entry['step']}" if "step" in entry else ""
    more = f" {json.dumps(extra, ensure_ascii=False)}" if extra else ""
    click.echo(f"  {entry['seq']:>4} {entry['at']} {entry['type']}{where}{more}")
