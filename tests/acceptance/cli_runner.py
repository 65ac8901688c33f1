"""`procflow ... --db URL` for acceptance tests: one subprocess per command, as a user runs it,
with the exit code checked and no traceback allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


class Cli:
    """`procflow ARGS --db URL` in a subprocess in ``cwd``, with ``db_env`` and nothing else of
    procflow's from the caller's environment; helpers for JSON output and clean errors."""

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
        command = [sys.executable, "-m", "procflow.cli", *args, "--db", self.url]
        with subprocess.Popen(
            command, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        ) as proc:  # fmt: skip
            try:
                out, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        self.pids.setdefault(" ".join(args[:2]), []).append(proc.pid)
        done = subprocess.CompletedProcess(command, proc.returncode, out, err)
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
