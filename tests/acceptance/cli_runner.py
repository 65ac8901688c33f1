"""`procflow ... --db URL` for acceptance tests: one subprocess per command, as a user runs it,
with the exit code checked and no traceback allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


class Cli:
    def __init__(self, db_url: str, db_env: dict[str, str], cwd: Path) -> None:
        self.url = db_url
        self.db_env = db_env
        self.cwd = cwd
        # Nothing of the caller's procflow or Slack set-up leaks in: senders run in outbox mode.
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PROCFLOW_", "SLACK_"))}
        self.env = {**base, **db_env, "NO_COLOR": "1"}

    def __call__(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "procflow.cli", *args, "--db", self.url],
            cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
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

    def show(self, run_id: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("runs", "show", run_id)
        return shown

    def advance(self, duration: str, expect_at: str) -> None:
        assert self("clock", "advance", duration).stdout.strip() == f"clock at {expect_at}"

    def work(self) -> None:
        self("worker", "--until-idle")
