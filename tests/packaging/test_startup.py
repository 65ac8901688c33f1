"""Start-up: each command imports what it needs, when it runs (``procflow.cli.lazy``).

Timings are ``bench/startup.py``'s business (a shared machine makes them noisy); these tests pin
the cause instead: which modules a command loads. And the command list ``procflow --help``
shows without importing the commands must be the commands' own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from procflow.cli import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "provisioning" / "app.intent"

# What no short command other than `serve`, `graph` and `test` needs.
HEAVY = (
    "procflow.server", "procflow.graph", "procflow.cli.test_cmd", "starlette", "uvicorn",
    "jinja2", "psycopg", "opentelemetry",
)  # fmt: skip


def loaded_by(*argv: str, cwd: Path) -> tuple[int, set[str]]:
    """The exit code of ``procflow *argv`` run in a fresh interpreter, and the modules it
    imported (procflow's, and its optional dependencies')."""
    probe = (
        "import json, sys\n"
        "from procflow.cli import _run\n"
        f"code = _run({list(argv)!r})\n"
        "sys.stdout.flush()\n"
        "print('\\n' + json.dumps([code, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    code, modules = json.loads(done.stdout.splitlines()[-1])
    return code, set(modules)


def heavy(modules: set[str], *allowed: str) -> list[str]:
    return sorted(
        m for m in modules
        if any(m == h or m.startswith(h + ".") for h in HEAVY)
        and not any(m == a or m.startswith(a + ".") for a in allowed)
    )  # fmt: skip


def test_help_imports_no_command(tmp_path: Path) -> None:
    code, modules = loaded_by("--help", cwd=tmp_path)
    assert code == 0
    commands = sorted(m for m in modules if m.startswith("procflow.cli.") and m != "procflow.cli")
    assert commands == ["procflow.cli.lazy", "procflow.cli.output"]
    assert not [m for m in modules if m.startswith(("procflow.model", "procflow.runtime"))]


def test_validate_imports_the_compiler_and_nothing_of_the_engine(tmp_path: Path) -> None:
    code, modules = loaded_by("validate", str(EXAMPLE), cwd=tmp_path)
    assert code == 0
    assert "procflow.model.validate" in modules
    assert heavy(modules) == []
    engine = [m for m in modules if m.startswith(("procflow.runtime", "procflow.store.store"))]
    assert engine == []


def test_an_idle_worker_imports_neither_the_server_nor_drawing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'idle.db'}"
    assert loaded_by("db", "init", "--db", db, cwd=tmp_path)[0] == 0
    code, modules = loaded_by("worker", "--until-idle", "--db", db, cwd=tmp_path)
    assert code == 0
    assert "procflow.runtime.commands.worker" in modules
    assert heavy(modules) == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_its_commands_own(name: str) -> None:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, name)
    assert command is not None and command.name == name
    listed = click.Command(name, help=COMMANDS[name].summary)
    for width in (30, 45, 60, 80, 200):
        assert listed.get_short_help_str(width) == command.get_short_help_str(width), width


def test_every_command_of_every_module_is_listed() -> None:
    modules = {id(entry.load): entry.load for entry in COMMANDS.values()}
    found = {command.name for load in modules.values() for command in load()}
    assert found == set(COMMANDS)


def test_a_mistyped_command_is_answered_with_the_close_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from procflow.cli import _run

    assert _run(["valdate", "x.intent"]) == 2
    err = capsys.readouterr().err
    assert "No such command 'valdate'. Did you mean 'validate'?" in err
