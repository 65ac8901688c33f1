"""A real ``procflow serve`` subprocess for tests, and the token table tests serve with.

:class:`Served` starts ``python -m procflow.cli serve ARGS``, reads its stdout line by line (the
serving line names the base URL) and collects its stderr, on threads, so neither pipe can fill
up and block the server.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from starlette.testclient import TestClient

# A token table: one administrator, one operator (also of the role `ops`), one user with no role.
ADMIN_TOKEN = "admin-token-0123456789abcdef"
OPS_TOKEN = "ops-token-0123456789abcdefgh"
PLAIN_TOKEN = "plain-token-0123456789abcdef"
TOKENS = f"{ADMIN_TOKEN}=ada:admin;{OPS_TOKEN}=olga:ops,operator;{PLAIN_TOKEN}=pat:"

STARTUP_SECONDS = 60.0  # the longest a server may take to print its serving line
STOP_SECONDS = 60.0  # the longest a stopping server may take to exit (a bound, not a target)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def subprocess_env(
    db_env: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a procflow subprocess: none of the caller's procflow or Slack
    settings, the backend's (the PostgreSQL key), then ``extra``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PROCFLOW_", "SLACK_"))}
    return {**base, **db_env, **(extra or {}), "NO_COLOR": "1"}


class Served:
    """A running ``procflow serve``: its base URL, and what it printed."""

    def __init__(self, args: list[str], env: Mapping[str, str], cwd: Path) -> None:
        self.args = args
        self.process = subprocess.Popen(
            [sys.executable, "-m", "procflow.cli", "serve", *args],
            env=dict(env), cwd=cwd, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        self.base_url = ""
        self.stdout: list[str] = []  # the lines read so far
        self._lines: queue.Queue[str | None] = queue.Queue()  # None: stdout closed
        self._closed = False
        self._stderr: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        self._readers = [
            threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._collect, args=(self.process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _collect(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def next_line(self, timeout: float = STARTUP_SECONDS) -> str | None:
        """The next line on stdout; None once stdout closed (the process ended)."""
        if self._closed:
            return None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"procflow serve printed nothing in {timeout}s; stderr: {self.stderr}"
            ) from None
        if line is None:
            self._closed = True
        else:
            self.stdout.append(line)
        return line

    def wait_serving(self) -> str:
        """Reads the serving line; returns the base URL it names."""
        line = self.next_line()
        assert line is not None and line.startswith("serving on http://"), (
            f"expected the serving line, got {line!r}; exit {self.process.poll()}, "
            f"stderr: {self.stderr}"
        )
        self.base_url = line.removeprefix("serving on ")
        return self.base_url

    def wait(self, timeout: float = STOP_SECONDS) -> int:
        """The exit code once the process ended; its output is then read whole."""
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        while self.next_line(timeout=10) is not None:
            pass
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.wait(timeout=30)


StartServer = Callable[..., Served]  # the ``start_server`` fixture
MakeClient = Callable[..., TestClient]  # the ``make_client`` fixture
