"""The ``procflow`` command.

Exit codes (interfaces.md): 0 success, 1 the definition or run is bad or failed, 2 the request is
unusable (bad flag, missing file, unknown name), 3 a run was cancelled or aborted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from procflow.errors import DefinitionError, ProcflowError, UsageError

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
    for path in _definition_files(paths):
        loaded = load_file(path)
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
