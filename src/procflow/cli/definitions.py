"""Definitions: `validate`, `deploy`, `graph`, `schema`, and `definitions list|disable|enable`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from procflow.cli import _engine
from procflow.cli.options import (
    as_option,
    db_option,
    json_option,
    max_file_size_option,
    page_options,
    project_option,
)
from procflow.cli.output import EXIT_BAD, EXIT_USAGE, echo_json, echo_page, fail, more_line
from procflow.errors import UsageError
from procflow.model.validate import Loaded, check_calls_together, compile_file, load_file
from procflow.schemas import DIALECTS, schema_text

DEFINITION_PATTERNS = ("*.intent", "*.flow.yaml", "*.flow.yml")


def definition_files(paths: tuple[str, ...]) -> Iterator[str]:
    """The files named, with folders expanded to the definition files inside them.

    A file named is read whatever it is (and refused when it is not a regular file); in a
    folder, an entry named like a definition that is not a regular file (a named pipe, a device,
    a folder, a broken link) is skipped with a note on stderr.
    """
    for p in paths:
        path = Path(p)
        if not _is_folder(path):
            yield p
            continue
        entries = sorted(
            f for pattern in DEFINITION_PATTERNS for f in path.rglob(pattern)
            if ".venv" not in f.parts
        )  # fmt: skip
        found = [str(f) for f in entries if f.is_file()]
        for skipped in sorted({str(f) for f in entries} - set(found)):
            click.echo(f"note: skipped {skipped}: not a regular file", err=True)
        if not found:
            raise UsageError(f"{p}: no *.intent or *.flow.yaml files in this folder")
        yield from found


def _is_folder(path: Path) -> bool:
    """Whether ``path`` names a folder; a name the system cannot look up (too long, say) names
    none, and reading it as a file then says why."""
    try:
        return path.is_dir()
    except OSError:
        return False


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print problems as a JSON array.")
@max_file_size_option
def validate(paths: tuple[str, ...], as_json: bool, max_file_size: int) -> None:
    """Validate definition files (*.intent, *.flow.yaml) and print every problem. A flow's
    calls are checked against the flows of all the files validated together."""
    files: list[Loaded] = []
    unusable: list[str] = []
    for path in definition_files(paths):
        try:
            files.append(load_file(path, max_size=max_file_size))
        except UsageError as exc:  # report it, but still report every other file's problems
            unusable.append(str(exc))
    diagnostics = [d for loaded in check_calls_together(files) for d in loaded.diagnostics]
    if not as_json:
        for d in diagnostics:
            click.echo(d.format())
    errors = sum(d.severity == "error" for d in diagnostics)
    if as_json:
        echo_json([d.as_json() for d in diagnostics])
    else:
        warnings = len(diagnostics) - errors
        checked = f"{len(files)} file" + ("" if len(files) == 1 else "s")
        click.echo(f"checked {checked}: {errors} error(s), {warnings} warning(s)", err=True)
    if unusable:
        fail("\n".join(f"error: {m}" for m in unusable), EXIT_USAGE)
    if errors:
        fail("", EXIT_BAD)


@click.command("deploy")
@click.argument("paths", nargs=-1, required=True)
@as_option("NAME needs the role deployer.")
@db_option
@project_option
@json_option
@max_file_size_option
def deploy(
    paths: tuple[str, ...],
    user: str | None,
    db_url: str,
    project_dir: str | None,
    as_json: bool,
    max_file_size: int,
) -> None:
    """Validate files and store new versions of their definitions. All or none are stored; a
    flow's calls may name a flow of these files or one already deployed."""
    with _engine.engine_at(db_url, project_dir, max_file_size=max_file_size) as engine:
        deployed = [_engine.deployed_json(d) for d in engine.deploy(*paths, user=user)]
    if as_json:
        echo_json({"deployed": deployed})
        return
    for d in deployed:
        unchanged = " (unchanged)" if d["unchanged"] else ""
        click.echo(f"{d['name']} → version {d['version']}{unchanged}")


@click.command()
@click.argument("path")
@click.option("--name", help="The process to draw (an intent file may hold several).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mermaid", "dot", "svg", "bpmn"]),
    default="mermaid",
    show_default=True,
)
@max_file_size_option
def graph(path: str, name: str | None, fmt: str, max_file_size: int) -> None:
    """Draw a process or flow as a Mermaid or Graphviz diagram, or write it as BPMN 2.0 XML."""
    from procflow import graph as graphs  # here: `validate` and `deploy` never draw

    click.echo(graphs.draw(compile_file(path, max_size=max_file_size), name, fmt))


@click.command()
@click.argument("dialect", metavar="DIALECT", type=click.Choice(DIALECTS))
def schema(dialect: str) -> None:
    """Print the JSON Schema of DIALECT's files, for editors: intent (*.intent) or flow
    (*.flow.yaml)."""
    click.echo(schema_text(dialect).rstrip("\n"))


# --- deployed definitions --------------------------------------------------------------------


@click.group()
def definitions() -> None:
    """Deployed definitions and their versions."""


@definitions.command("list")
@page_options("definitions", int)
@db_option
@json_option
def definitions_list(limit: int, before: int | None, db_url: str, as_json: bool) -> None:
    """Deployed definitions, the most recently first deployed first, a page at a time: each
    one's latest version and the active runs of each version."""
    with _engine.engine_at(db_url) as engine:
        page = engine.definitions_page(limit=limit, before=before)
    echo_page(page.items, more_line("definitions", page.next_key), as_json, _definition_line)


def _definition_line(r: dict[str, Any]) -> str:
    active = ", ".join(f"v{v['version']}: {v['active_runs']} active" for v in r["versions"])
    state = "" if r["enabled"] else "  (disabled)"
    return f"{r['name']:<28} {r['dialect']:<7} latest v{r['latest']}  [{active}]{state}"


@definitions.command("disable")
@click.argument("name")
@as_option("NAME needs the role deployer.")
@db_option
@json_option
def definitions_disable(name: str, user: str | None, db_url: str, as_json: bool) -> None:
    """Start no new runs of NAME; its running ones continue."""
    _set_enabled(name, False, user, db_url, as_json)


@definitions.command("enable")
@click.argument("name")
@as_option("NAME needs the role deployer.")
@db_option
@json_option
def definitions_enable(name: str, user: str | None, db_url: str, as_json: bool) -> None:
    """Start new runs of NAME again."""
    _set_enabled(name, True, user, db_url, as_json)


def _set_enabled(name: str, enabled: bool, user: str | None, db_url: str, as_json: bool) -> None:
    with _engine.engine_at(db_url) as engine:
        engine.set_enabled(name, enabled, user=user)
    if as_json:
        echo_json({"name": name, "enabled": enabled})
    elif enabled:
        click.echo(f"enabled {name}")
    else:
        click.echo(f"disabled {name}: no new runs; running ones continue")


COMMANDS: list[click.Command] = [validate, deploy, graph, schema, definitions]
