"""The wheel as a user installs it (docs/operations/deployment.md, "Installing").

Once per session (shared by the xdist workers through a lock), the wheel is built from a copy
of the source (``python -m build --wheel``: nothing is written into the checkout) and installed
into two fresh virtual environments with the pinned versions of ``constraints.txt``: one with
every extra (``[server,postgres,otel]``), one bare. Every command runs from a folder outside the
source tree, on copies of the examples, and the package it imports is checked to be the
installed one.

- the wheel carries the package data: schemas, SQL scripts, connector manifests, the web UI's
  templates and static files;
- with the extras: ``validate``, ``run`` of an example on SQLite, ``serve`` answering
  ``GET /health``, ``completion``;
- bare: ``validate`` and ``run`` work; ``serve`` and a PostgreSQL URL say which extra they
  need (exit 2, one line, no traceback).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
INSTALL_SECONDS = 300  # a bound for one pip install, not a target
ACCOUNTS = {"accounts": [{"name": "Acme", "owner": "@ada", "renews": "2027-02-01"}]}


@dataclass(frozen=True)
class Installed:
    """A virtual environment with the wheel installed, and a work folder outside the source."""

    venv: Path
    work: Path

    @property
    def procflow(self) -> str:
        return str(self.venv / "bin" / "procflow")

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
        env.pop("PYTHONPATH", None)
        return subprocess.run(
            [self.procflow, *args], cwd=self.work, env=env, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip


@dataclass(frozen=True)
class Built:
    wheel: Path
    full: Installed
    bare: Installed


def _sh(*cmd: str, cwd: Path | None = None, timeout: float = INSTALL_SECONDS) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _build_wheel(out: Path) -> Path:
    """The wheel, built from a copy of the project (the build writes beside its sources)."""
    source = out / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", source / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    _sh(sys.executable, "-m", "build", "--wheel", "--outdir", str(out / "dist"), str(source))
    (wheel,) = (out / "dist").glob("procflow-*.whl")
    return wheel


def _install(wheel: Path, venv: Path, extras: str) -> subprocess.Popen[str]:
    """Starts installing ``wheel[extras]`` into a new ``venv``, with the pinned versions (pip
    runs from this environment, ``--python``: the new one needs no pip of its own)."""
    _sh(sys.executable, "-m", "venv", "--without-pip", str(venv))
    requirement = f"{wheel}[{extras}]" if extras else str(wheel)
    return subprocess.Popen(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", "--disable-pip-version-check", "-c", str(ROOT / "constraints.txt"),
         requirement],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _make(base: Path) -> Built:
    wheel = _build_wheel(base)
    installs = {
        "full": _install(wheel, base / "venv-full", "server,postgres,otel"),
        "bare": _install(wheel, base / "venv-bare", ""),
    }
    for name, process in installs.items():  # both at once: mostly waiting on pip's downloads
        output, _ = process.communicate(timeout=INSTALL_SECONDS)
        assert process.returncode == 0, f"installing the {name} wheel:\n{output[-3000:]}"
    places = {}
    for name in installs:
        work = base / f"work-{name}"
        shutil.copytree(EXAMPLES, work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
        places[name] = Installed(base / f"venv-{name}", work)
    return Built(wheel, places["full"], places["bare"])


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """The wheel and its two installations, made once for the whole session: the xdist workers
    share one folder (the parent of their base temp folders) and take turns with a lock."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is a folder of the session's: share that one.
    session = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = session / "procflow-wheel"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = shared / ".done"
            if not done.exists():
                for leftover in shared.iterdir():  # a worker that failed half-way
                    if leftover.name != ".lock":
                        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
                _make(shared)
                done.write_text("ok")
            (wheel,) = (shared / "dist").glob("procflow-*.whl")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    yield Built(
        wheel,
        Installed(shared / "venv-full", shared / "work-full"),
        Installed(shared / "venv-bare", shared / "work-bare"),
    )


# --- the wheel -------------------------------------------------------------------------------


def _package_data(root: Path) -> set[str]:
    """Every file of the package that is not Python source, as a path inside the wheel."""
    package = root / "src" / "procflow"
    return {
        "procflow/" + p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }


def test_the_wheel_carries_every_data_file_of_the_package(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line.removeprefix("Requires-Dist: ")
            for line in wheel.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist: ")
        ]
    expected = _package_data(ROOT)
    assert expected, "the package has no data files?"
    assert expected <= names, sorted(expected - names)
    for kind in ("schemas/", "store/sql/", "connectors/builtin/", "server/web/templates/"):
        assert any(n.startswith(f"procflow/{kind}") for n in names), kind
    # The core needs neither psycopg nor the server nor OpenTelemetry; the extras bring them.
    core = [r for r in requires if "extra ==" not in r]
    assert not any(r.startswith(("psycopg", "starlette", "uvicorn", "opentelemetry")) for r in core)
    for extra, package in (("postgres", "psycopg"), ("server", "starlette"), ("otel", "opentel")):
        assert any(r.startswith(package) and f'extra == "{extra}"' in r for r in requires), extra


# --- with every extra ------------------------------------------------------------------------


def test_the_installed_package_is_the_one_that_runs(built: Built) -> None:
    for place in (built.full, built.bare):
        done = subprocess.run(
            [str(place.venv / "bin" / "python"), "-c", "import procflow; print(procflow.__file__)"],
            cwd=place.work, capture_output=True, text=True, check=True,
        )  # fmt: skip
        where = Path(done.stdout.strip()).resolve()
        assert where.is_relative_to(place.venv.resolve()), where
        assert not where.is_relative_to(ROOT), where


def test_validate_and_run_an_example_from_the_installed_wheel(built: Built, tmp_path: Path) -> None:
    place = built.full
    done = place.run("validate", "examples")
    assert done.returncode == 0, done.stderr
    db = f"sqlite:///{tmp_path / 'full.db'}"
    assert place.run("db", "init", "--virtual-clock", "--db", db).returncode == 0
    done = place.run(
        "run", "examples/reminders/reminders.flow.yaml", "--db", db, "--wait",
        "--inputs", json.dumps(ACCOUNTS), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


def test_serve_from_the_installed_wheel_answers_health(built: Built, tmp_path: Path) -> None:
    place = built.full
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    assert place.run("db", "init", "--db", db).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    server = subprocess.Popen(
        [place.procflow, "serve", "--port", "0", "--db", db], cwd=place.work, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline().strip()
        assert line.startswith("serving on http://"), (line, server.poll())
        base = line.removeprefix("serving on ").split()[0]
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "no answer from /health"
                time.sleep(0.1)
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_completion_scripts_come_from_the_installed_command(built: Built) -> None:
    markers = {
        "bash": "_PROCFLOW_COMPLETE=bash_complete",
        "zsh": "#compdef procflow",
        "fish": "_PROCFLOW_COMPLETE=fish_complete",
    }
    for shell, marker in markers.items():
        done = built.bare.run("completion", shell)
        assert done.returncode == 0, done.stderr
        assert marker in done.stdout, (shell, done.stdout[:300])


# --- bare: no extras ---------------------------------------------------------------------------


def test_the_bare_wheel_validates_and_runs_on_sqlite(built: Built, tmp_path: Path) -> None:
    place = built.bare
    assert place.run("--help").returncode == 0
    done = place.run("validate", "examples")
    assert done.returncode == 0, done.stderr
    db = f"sqlite:///{tmp_path / 'bare.db'}"
    assert place.run("db", "init", "--virtual-clock", "--db", db).returncode == 0
    done = place.run(
        "run", "examples/reminders/reminders.flow.yaml", "--db", db, "--wait",
        "--inputs", json.dumps(ACCOUNTS), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    done = place.run("worker", "--until-idle", "--db", db)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("serve", "--port", "0"),
            "error: procflow serve needs the server extra: pip install 'procflow[server]'",
        ),
        (
            ("worker", "--until-idle", "--db", "postgresql://nobody@127.0.0.1:1/none"),
            "error: PostgreSQL needs the postgres extra: pip install 'procflow[postgres]'",
        ),
        (
            ("db", "init", "--db", "postgresql://nobody@127.0.0.1:1/none"),
            "error: PostgreSQL needs the postgres extra: pip install 'procflow[postgres]'",
        ),
    ],
    ids=["serve", "worker-on-a-pg-url", "db-init-on-a-pg-url"],
)
def test_the_bare_wheel_names_the_extra_a_command_needs(
    built: Built, args: tuple[str, ...], message: str
) -> None:
    done = built.bare.run(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == message
