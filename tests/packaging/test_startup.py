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
FLOW = ROOT / "examples" / "reminders" / "reminders.flow.yaml"
INTENT = ROOT / "examples" / "orders" / "orders.intent"

# What no short command other than `serve`, `graph` and `test` needs.
HEAVY = (
    "procflow.server", "procflow.graph", "procflow.cli.test_cmd", "starlette", "uvicorn",
    "jinja2", "psycopg", "opentelemetry",
)  # fmt: skip


# What a command that reads runs or tasks never runs: deploying, YAML reading, the compilers,
# event delivery, the work loop, PostgreSQL's driver on SQLite, HTTP, encryption.
NOT_FOR_READING = (
    "procflow.runtime.definitions.deploy", "procflow.model.reading.yamlsrc", "ruamel",
    "procflow.model.intent", "procflow.model.flow", "procflow.runtime.waits.delivery",
    "procflow.runtime.work.loop", "psycopg", "httpx", "cryptography",
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


def among(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are, or are inside, one of ``names``."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


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


@pytest.fixture(scope="module")
def store_with_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """(folder, SQLite URL, flow run id, intent run id) of a store holding a reminders run
    waiting on its timer and an orders run waiting on its open user task."""
    folder = tmp_path_factory.mktemp("reading")
    db = f"sqlite:///{folder / 'runs.db'}"
    subprocess.run([sys.executable, "-m", "procflow", "db", "init", "--virtual-clock", "--db", db],
                   check=True, capture_output=True, cwd=folder)  # fmt: skip
    ids = []
    for path, start in (
        (
            FLOW,
            [
                "--inputs",
                json.dumps(
                    {"accounts": [{"name": "Acme", "owner": "@ada", "renews": "2027-02-01"}]}
                ),
            ],
        ),
        (INTENT, ["--record", json.dumps({"total": 250})]),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "procflow", "run", str(path), "--db", db, "--json", *start],
            check=True, capture_output=True, text=True, cwd=folder,
        )  # fmt: skip
        ids.append(json.loads(done.stdout)["id"])
    return folder, db, ids[0], ids[1]


@pytest.mark.parametrize(
    "argv",
    [
        ("runs", "list"),
        ("runs", "list", "--json"),
        ("runs", "show", "FLOW_RUN"),
        ("runs", "show", "FLOW_RUN", "--json"),
        ("runs", "show", "INTENT_RUN"),
        ("runs", "show", "INTENT_RUN", "--json"),
        ("tasks", "list"),
        ("tasks", "list", "--json"),
        ("definitions", "list"),
        ("outbox", "list"),
    ],
    ids=" ".join,
)
def test_a_command_that_reads_imports_nothing_it_does_not_run(
    store_with_runs: tuple[Path, str, str, str], argv: tuple[str, ...]
) -> None:
    folder, db, flow_run, intent_run = store_with_runs
    args = [{"FLOW_RUN": flow_run, "INTENT_RUN": intent_run}.get(a, a) for a in argv]
    code, modules = loaded_by(*args, "--db", db, cwd=folder)
    assert code == 0
    offending = among(modules, NOT_FOR_READING)
    assert offending == [], f"`procflow {' '.join(argv)}` imported {', '.join(offending)}"
