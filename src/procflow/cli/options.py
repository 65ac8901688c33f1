"""Options several commands share.

A flag with an environment twin takes the variable's name and default from
:data:`procflow.config.SETTINGS` and shows the variable in ``--help``; click reads the variable,
so the CLI itself never looks in ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from procflow.config import SETTINGS, parse_size
from procflow.cursors import DEFAULT_PAGE, MAX_PAGE, decode_cursor, page_limit
from procflow.errors import ConfigError
from procflow.states import RunStatus

F = TypeVar("F", bound=Callable[..., Any])

_DATABASE = SETTINGS["PROCFLOW_DATABASE_URL"]
_PROJECT = SETTINGS["PROCFLOW_PROJECT"]

db_option = click.option(
    "--db",
    "db_url",
    envvar=_DATABASE.env,
    default=_DATABASE.default,
    show_default=True,
    show_envvar=True,
    help="The store (sqlite:/// or postgresql://).",
)
project_option = click.option(
    "--project",
    "project_dir",
    envvar=_PROJECT.env,
    show_envvar=True,
    help="Where delegates, custom/ and connectors/ live (default: the deployed file's folder).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _user_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("give a user name (without --as: an administrator)")
    return value


def as_option(effect: str) -> Callable[[F], F]:
    """``--as NAME`` on every command that writes or completes: the command acts as user NAME,
    with exactly the roles the token table (``PROCFLOW_API_TOKENS``) gives NAME, none when it
    is not listed; without it, as an administrator. ``effect``: what NAME does here."""
    return click.option(
        "--as",
        "user",
        metavar="NAME",
        callback=_user_name,
        help="Act as user NAME, with the roles PROCFLOW_API_TOKENS(_FILE) gives NAME (none if "
        f"not listed); default: an administrator. {effect}",
    )


run_status_choice = click.Choice([s.value for s in RunStatus])
"""The statuses a run can be in (checked, and offered by shell completion)."""


def with_inputs(command: F) -> F:
    """``--input K=V`` (repeatable) and ``--inputs JSON``: a flow's inputs."""
    pairs = click.option(
        "--input", "input_pairs", multiple=True, metavar="K=V",
        help="A flow input, converted by its declared type (repeatable).",
    )  # fmt: skip
    whole = click.option(
        "--inputs", "inputs_json", help="All flow inputs at once, as a JSON object."
    )
    return pairs(whole(command))


def worker_options(command: F) -> F:
    """``--slots``, ``--step-timeout``, ``--stop-timeout``: how a worker keeps any one run from
    holding it up (each with its environment variable)."""
    slots, step, stop = (
        SETTINGS[name]
        for name in ("PROCFLOW_SLOTS", "PROCFLOW_STEP_TIMEOUT", "PROCFLOW_STOP_TIMEOUT")
    )
    options = [
        click.option(
            "--slots",
            type=click.IntRange(1, 256),
            envvar=slots.env,
            default=slots.default,
            show_default=True,
            show_envvar=True,
            help="Threads the runs queued behind a slow attempt move to: a call that blocks "
            "holds one thread, never the worker.",
        ),
        click.option(
            "--step-timeout",
            envvar=step.env,
            default=step.default,
            show_default=True,
            show_envvar=True,
            help="The longest one attempt may run (90s, 5m, PT5M); a flow step's own timeout "
            "overrides it. Past it the attempt fails as a timeout (retry and onError apply).",
        ),
        click.option(
            "--stop-timeout",
            envvar=stop.env,
            default=stop.default,
            show_default=True,
            show_envvar=True,
            help="How long a graceful stop (SIGTERM, SIGINT) waits for attempts in flight "
            "before it hands every run back and exits.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class _Size(click.ParamType[int]):
    """A size in bytes: ``4096``, ``512KiB``, ``10MiB``, ``2MB``."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value), "size")
        except ConfigError:
            self.fail(f"[{value}] is not a size; give bytes or a size like 10MiB or 512KiB")


_MAX_FILE_SIZE = SETTINGS["PROCFLOW_MAX_FILE_SIZE"]
max_file_size_option = click.option(
    "--max-file-size",
    "max_file_size",
    type=_Size(),
    envvar=_MAX_FILE_SIZE.env,
    default=_MAX_FILE_SIZE.default,
    show_default=True,
    show_envvar=True,
    help="Refuse a definition file larger than this (bytes, or KiB/MiB).",
)


def page_options(
    list_name: str, kind: type[int] | type[str], order: str = "newest first"
) -> Callable[[F], F]:
    """``--limit N`` and ``--cursor C`` of a list command, as ``?limit=`` and ``?cursor=`` of the
    HTTP list: the command receives ``limit`` and ``before`` (the key the cursor carries, None
    without one). ``list_name`` and ``kind``: the list the cursor must belong to, and its key;
    ``order``: how the list is sorted, as its help says it."""

    def checked_limit(ctx: click.Context, param: click.Parameter, value: str | None) -> int:
        # An empty --limit is refused: only leaving the option out asks for the default.
        limit = DEFAULT_PAGE if value is None else page_limit(value) if value else None
        if limit is None:
            raise click.BadParameter(
                f"must be a whole number from 1 to {MAX_PAGE}, not [{_shown(value or '')}]"
            )
        return limit

    def checked_cursor(
        ctx: click.Context, param: click.Parameter, value: str | None
    ) -> int | str | None:
        if value is None:
            return None
        key = decode_cursor(value, list_name, kind)
        if key is None:
            raise click.BadParameter(
                f"is not a cursor of this list (take it from the `-- more {list_name}: --cursor "
                "C` line of a page of the same list, or leave it out to start from the newest)"
            )
        return key

    limit = click.option(
        "--limit", metavar="N", callback=checked_limit,
        help=f"How many items, {order} (default {DEFAULT_PAGE}, at most {MAX_PAGE}).",
    )  # fmt: skip
    cursor = click.option(
        "--cursor", "before", metavar="C", callback=checked_cursor,
        help="Where the previous page ended: the C of its last line `-- more ...: --cursor C` "
        "(give the same filters again).",
    )  # fmt: skip

    def both(command: F) -> F:
        return limit(cursor(command))

    return both


def _shown(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:37]}..."
