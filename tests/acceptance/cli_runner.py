"""`procflow ... --db URL` for acceptance tests: one process per command, as a user runs it,
with the exit code checked and no traceback allowed.

Each command is a fork of a server that has imported procflow's libraries but not procflow
(``cli_forkserver.py``): a process of its own, with its own pid, environment, folder, arguments and
output, that imports procflow as the installed command does, at a third of the CPU of a new
interpreter. ``PROCFLOW_TEST_COLD_CLI=1`` runs each in a new interpreter instead
(``python -m procflow.cli``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cli_forkclient import fork_server


class Cli:
    """`procflow ARGS --db URL` as a process of its own in ``cwd``, with ``db_env`` and nothing
    else of procflow's from the caller's environment; helpers for JSON output and clean errors."""

    def __init__(self, db_url: str, db_env: dict[str, str], cwd: Path) -> None:
        self.url = db_url
        self.db_env = db_env
        self.cwd = cwd
        # Nothing of the caller's procflow or Slack set-up leaks in: senders run in outbox mode.
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PROCFLOW_", "SLACK_"))}
        self.env = {**base, **db_env, "NO_COLOR": "1"}
        # The process ids of each command (keyed by its first two words), to tell which process
        # did what.
        self.pids: dict[str, list[int]] = {}

    def __call__(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        argv = [*args, "--db", self.url]
        done, pid = run_procflow(argv, self.env, self.cwd)
        self.pids.setdefault(" ".join(args[:2]), []).append(pid)
        assert done.returncode == code, (
            f"procflow {' '.join(args)}: exit {done.returncode}, wanted {code}\n"
            f"stdout: {done.stdout}\nstderr: {done.stderr}"
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def json(self, *args: str, code: int = 0) -> Any:
        return json.loads(self(*args, "--json", code=code).stdout)

    def error(self, *args: str) -> str:
        """A rejected request: exit 2, the message on stderr, nothing on stdout."""
        done = self(*args, code=2)
        assert done.stderr.strip(), args
        assert done.stdout == "", done.stdout
        return done.stderr

    def errors(self, *commands: tuple[str, ...]) -> list[str]:
        """Several rejected requests at once (each its own process; they only read or roll back)."""
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            return list(pool.map(lambda args: self.error(*args), commands))

    def show(self, run_id: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("runs", "show", run_id)
        return shown

    def advance(self, duration: str, expect_at: str) -> None:
        assert self("clock", "advance", duration).stdout.strip() == f"clock at {expect_at}"

    def work(self) -> None:
        self("worker", "--until-idle")


def run_procflow(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``procflow ARGV`` as its own process; what it did, and its pid."""
    if os.environ.get("PROCFLOW_TEST_COLD_CLI") == "1":
        command = [sys.executable, "-m", "procflow.cli", *argv]
        with subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        return subprocess.CompletedProcess(command, proc.returncode, out, err), proc.pid
    code, out, err, pid = fork_server().run(argv, env, cwd, timeout)
    return subprocess.CompletedProcess(["procflow", *argv], code, out, err), pid


def live_processes(marker: str) -> list[str]:
    """Command lines of live processes other than this one that mention ``marker``."""
    if not Path("/proc").is_dir():
        return []
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found
