"""Options: a fixed set of values is checked (and completed by the shell); a flag's environment
twin is shown in `--help` and read when the flag is not given."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from procflow.cli import cli
from procflow.config import SETTINGS
from procflow.states import RunStatus

Procflow = Callable[..., subprocess.CompletedProcess[str]]
STATUSES = [s.value for s in RunStatus]
# The flags that stand for a setting: each must take it from its variable.
TWINS = {
    "--db": "PROCFLOW_DATABASE_URL",
    "--project": "PROCFLOW_PROJECT",
    "--max-file-size": "PROCFLOW_MAX_FILE_SIZE",
    "--slots": "PROCFLOW_SLOTS",
    "--step-timeout": "PROCFLOW_STEP_TIMEOUT",
    "--stop-timeout": "PROCFLOW_STOP_TIMEOUT",
    "--log-format": "PROCFLOW_LOG_FORMAT",
}


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command under ``group`` (``("runs", "list")``, ...)."""
    ctx = click.Context(group)  # the top group imports its commands on demand: ask it
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


def command_at(path: tuple[str, ...]) -> click.Command:
    found: click.Command = cli
    for name in path:
        assert isinstance(found, click.Group)
        command = found.get_command(click.Context(found), name)
        assert command is not None, name
        found = command
    return found


def env_twins(command: click.Command) -> dict[str, str]:
    """Each option of ``command`` that has an environment variable: its flag → the variable."""
    twins = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar:
            assert isinstance(param.envvar, str), param.envvar
            twins[param.opts[0]] = param.envvar
    return twins


def test_every_flag_with_an_env_twin_shows_the_variable_in_help() -> None:
    seen: set[str] = set()
    for path in commands(cli):
        command = command_at(path)
        twins = env_twins(command)
        flags = {p.opts[0] for p in command.params if isinstance(p, click.Option)}
        for flag in flags & TWINS.keys():
            assert twins.get(flag) == TWINS[flag], (path, flag)
        if not twins:
            continue
        shown = CliRunner().invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0, (path, shown.output)
        help_text = " ".join(shown.output.split())  # undo the wrapping of long lines
        for flag, variable in twins.items():
            assert variable in SETTINGS, (path, flag, variable)
            assert f"env var: {variable}" in help_text, (path, flag, help_text)
            seen.add(variable)
    assert seen == set(TWINS.values())


def test_help_of_the_real_command_names_the_variables(procflow: Procflow) -> None:
    shown = procflow("deploy", "--help")
    assert shown.returncode == 0, shown.stderr
    help_text = " ".join(shown.stdout.split())
    assert "env var: PROCFLOW_DATABASE_URL" in help_text
    assert "env var: PROCFLOW_PROJECT" in help_text
    assert "default: sqlite:///./procflow.db" in help_text  # the setting's declared default


def test_the_store_comes_from_the_variable_when_no_db_flag_is_given(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "db", "init", "--virtual-clock"],
        cwd=tmp_path, env={**env, "PROCFLOW_DATABASE_URL": url}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"created {url} ")
    assert (tmp_path / "from-env.db").is_file()
    assert not (tmp_path / "procflow.db").exists()


def test_an_unknown_run_status_is_refused_naming_the_valid_ones(procflow: Procflow) -> None:
    done = procflow("runs", "list", "--status", "bogus")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Invalid value for '--status': 'bogus' is not one of" in done.stderr
    for status in STATUSES:
        assert f"'{status}'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_shell_completes_fixed_values(tmp_path: Path) -> None:
    def complete(*words: str) -> list[str]:
        env = {
            **os.environ,
            "_PROCFLOW_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(("procflow", *words)),
            "COMP_CWORD": str(len(words)),
        }
        done = subprocess.run(
            [sys.executable, "-m", "procflow.cli"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [line.partition(",")[2] for line in done.stdout.splitlines()]

    assert complete("runs", "list", "--status", "") == STATUSES
    assert complete("runs", "list", "--status", "c") == ["completed", "cancelled"]
    assert complete("schema", "") == ["intent", "flow"]
    assert complete("graph", "x.intent", "--format", "") == ["mermaid", "dot", "svg", "bpmn"]
