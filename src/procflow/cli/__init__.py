"""The ``procflow`` command.

Exit codes: 0 success, 1 the definition or run is bad or failed, 2 the request is unusable (bad
flag, missing file, unknown name), 3 a run was cancelled or aborted. An error procflow raises on
purpose carries its own exit code (``ProcflowError.exit_code``); :func:`main` prints it as one
line on stderr (an invalid definition: one line per problem) and exits with that code.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from procflow.cli import definitions, records, runs
from procflow.cli.output import EXIT_OK, EXIT_USAGE
from procflow.errors import DefinitionError, ProcflowError

__all__ = ["cli", "main"]

INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="procflow")
def cli() -> None:
    """procflow: a durable process engine for declarative YAML."""


for command in (*definitions.COMMANDS, *runs.COMMANDS, *records.COMMANDS):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: runs the command and turns every procflow error into a message + exit code."""
    sys.exit(_run(argv))


def _run(argv: list[str] | None) -> int:
    try:
        # Not standalone: click's own errors come back here to get procflow's exit codes.
        returned = cli.main(args=argv, prog_name="procflow", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except DefinitionError as exc:
        for d in exc.diagnostics:
            click.echo(d.format(), err=True)
        return exc.exit_code
    except ProcflowError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    # A command that ends early (`fail`, `--help`, `--version`) returns its exit code here.
    return returned if isinstance(returned, int) else EXIT_OK
