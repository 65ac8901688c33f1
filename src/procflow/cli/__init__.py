"""The ``procflow`` command.

Exit codes: 0 success, 1 the definition or run is bad or failed, 2 the request is unusable (bad
flag, missing file, unknown name), 3 a run was cancelled or aborted. An error procflow raises on
purpose carries its own exit code (``ProcflowError.exit_code``); :func:`main` prints it as one
line on stderr (an invalid definition: one line per problem) and exits with that code. No
traceback ever reaches a user: anything else that escapes a command is a bug in procflow, and is
still one line (exit 1).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from procflow.cli import definitions, records, runs, serve
from procflow.cli.output import EXIT_BAD, EXIT_OK, EXIT_USAGE
from procflow.errors import DefinitionError, ProcflowError

__all__ = ["cli", "main"]

INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C
_LONGEST = 2000  # characters of one error line


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="procflow")
def cli() -> None:
    """procflow: a durable process engine for declarative YAML."""


for command in (*definitions.COMMANDS, *runs.COMMANDS, *records.COMMANDS, *serve.COMMANDS):
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
    except click.exceptions.NoArgsIsHelpError as exc:  # `procflow records`: the group's help
        exc.show()
        return EXIT_USAGE
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}{_help_hint(exc)}", err=True)
        return EXIT_USAGE
    except DefinitionError as exc:
        for d in exc.diagnostics:
            click.echo(d.format(), err=True)
        return exc.exit_code
    except ProcflowError as exc:
        click.echo(f"error: {_one_line(str(exc))}", err=True)
        return exc.exit_code
    except BrokenPipeError:  # `procflow runs list | head -1`: the reader left; nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BAD
    except Exception as exc:  # the last line of defence: never a traceback
        name = type(exc).__name__
        click.echo(
            f"error: unexpected {name}: {_one_line(str(exc))} (a bug in procflow; please "
            "report it)",
            err=True,
        )
        return EXIT_BAD
    # A command that ends early (`fail`, `--help`, `--version`) returns its exit code here.
    return returned if isinstance(returned, int) else EXIT_OK


def _one_line(message: str) -> str:
    """A message as one line of bounded length: a message listing several problems, one per
    line, lists them separated by ``;`` (and a huge value must not flood the terminal)."""
    flat = ""
    for line in message.splitlines():
        part = " ".join(line.split())
        if part:
            flat += (" " if not flat or flat.endswith(":") else "; ") + part
    flat = flat.strip()
    return flat if len(flat) <= _LONGEST else flat[: _LONGEST - 1] + "…"


def _help_hint(exc: click.ClickException) -> str:
    ctx = getattr(exc, "ctx", None)
    return f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
