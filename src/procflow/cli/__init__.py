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
from collections.abc import Sequence
from typing import NoReturn

import click

from procflow.cli.lazy import LazyGroup, Listed
from procflow.cli.output import EXIT_BAD, EXIT_OK, EXIT_USAGE
from procflow.errors import DefinitionError, ProcflowError

__all__ = ["cli", "main"]

INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C
_LONGEST = 2000  # characters of one error line


# The command modules, imported only by the command that needs one (start-up time: see
# procflow.cli.lazy).


def _definitions() -> Sequence[click.Command]:
    from procflow.cli import definitions

    return definitions.COMMANDS


def _runs() -> Sequence[click.Command]:
    from procflow.cli import runs

    return runs.COMMANDS


def _records() -> Sequence[click.Command]:
    from procflow.cli import records

    return records.COMMANDS


def _schedules() -> Sequence[click.Command]:
    from procflow.cli import schedules

    return schedules.COMMANDS


def _serve() -> Sequence[click.Command]:
    from procflow.cli import serve

    return serve.COMMANDS


def _test() -> Sequence[click.Command]:
    from procflow.cli import test_cmd

    return test_cmd.COMMANDS


def _completion() -> Sequence[click.Command]:
    from procflow.cli import completion

    return completion.COMMANDS


# Every command: its module, and the first sentence of its help (what `procflow --help` shows).
COMMANDS = {
    "validate": Listed(_definitions, "Validate definition files (*.intent, *.flow.yaml) and print "
                       "every problem."),
    "deploy": Listed(_definitions, "Validate files and store new versions of their definitions."),
    "graph": Listed(_definitions, "Draw a process or flow as a Mermaid or Graphviz diagram, or "
                    "write it as BPMN 2.0 XML."),
    "schema": Listed(_definitions, "Print the JSON Schema of DIALECT's files, for editors: intent "
                     "(*.intent) or flow (*.flow.yaml)."),
    "definitions": Listed(_definitions, "Deployed definitions and their versions."),
    "run": Listed(_runs, "Deploy PATH, start one run, work until it ends (or only waits on the "
                  "future)."),
    "start": Listed(_runs, "Start a run of a deployed flow (with inputs) or of an intent process "
                    "for a record (of its trigger's entity; a triggered one at most once per "
                    "record unless --again); print its id."),
    "runs": Listed(_runs, "List, show, cancel, retry and purge runs."),
    "worker": Listed(_runs, "Advance runs: claim due work, run it, commit; sleep until the next "
                     "due time."),
    "clock": Listed(_runs, "Show or move a virtual clock (stores created with --virtual-clock)."),
    "db": Listed(_runs, "Create or migrate the store."),
    "schedules": Listed(_schedules, "Flow schedules: when each fires next, pause, resume, "
                        "trigger and backfill."),
    "records": Listed(_records, "Entity records (a write fires its lifecycle event)."),
    "events": Listed(_records, "Events from the outside world (delivered to waiting runs, "
                     "starting triggered flows)."),
    "tasks": Listed(_records, "User tasks (intent userTask steps): list the open ones, complete "
                    "one."),
    "outbox": Listed(_records, "Messages kept by unconfigured senders (notify, email.send, "
                     "slack.post)."),
    "serve": Listed(_serve, "Serve the HTTP API until SIGTERM or SIGINT (then finish in-flight "
                    "work and exit 0)."),
    "test": Listed(_test, "Run the scenarios of the *.test.yaml files in PATH (files, or folders "
                   "searched below; default: the current folder)."),
    "completion": Listed(_completion, "Print the shell completion script for SHELL (bash, zsh "
                         "or fish)."),
}  # fmt: skip


@click.group(
    cls=LazyGroup, listed=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="procflow")
def cli() -> None:
    """procflow: a durable process engine for declarative YAML."""


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
