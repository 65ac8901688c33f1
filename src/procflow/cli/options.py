"""Options several commands share.

A flag with an environment twin takes the variable's name and default from
:data:`procflow.config.SETTINGS` and shows the variable in ``--help``; click reads the variable,
so the CLI itself never looks in ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from procflow.config import SETTINGS
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
