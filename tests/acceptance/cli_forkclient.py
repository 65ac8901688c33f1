"""The client of ``cli_forkserver.py``: one server per test process, started on first use and
gone with the process (its stdin is the test process's pipe)."""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SERVER = Path(__file__).with_name("cli_forkserver.py")
_lock = threading.Lock()
_servers: list[ForkServer] = []


class ForkServer:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="procflow-cli-")
        atexit.register(shutil.rmtree, self.folder, True)
        self.path = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), self.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == "ready\n", f"the fork server did not start: {line!r}"

    def run(
        self, argv: list[str], env: dict[str, str], cwd: Path, timeout: float
    ) -> tuple[int, str, str, int]:
        """``procflow ARGV`` in a child of the server: exit code, stdout, stderr, pid."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.path)
                request = (json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}) + "\n").encode()
                sent = socket.send_fds(conn, [request], [out_w, err_w])
                conn.sendall(request[sent:])  # a stream socket may take a long request in parts
                os.close(out_w)
                os.close(err_w)
                out_w = err_w = -1
                replies = conn.makefile("r")
                pid = int(replies.readline().removeprefix("pid "))
                try:
                    out, err = _read_both(out_r, err_r, timeout)
                except subprocess.TimeoutExpired:
                    os.kill(pid, signal.SIGKILL)
                    raise
                ended = replies.readline()
                assert ended.startswith("exit "), f"the fork server said {ended!r}"
                return int(ended.removeprefix("exit ")), out, err, pid
        finally:
            for fd in (out_r, err_r, out_w, err_w):
                if fd >= 0:
                    os.close(fd)


def _read_both(out: int, err: int, timeout: float) -> tuple[str, str]:
    """Both pipes read to their end within ``timeout`` seconds in all, as ``communicate`` does
    (a child filling one while the other is read never blocks)."""
    read: dict[int, bytearray] = {out: bytearray(), err: bytearray()}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in read:
            selector.register(fd, selectors.EVENT_READ)
        open_fds = len(read)
        while open_fds:
            events = selector.select(max(0.0, deadline - time.monotonic()))
            if not events:
                raise subprocess.TimeoutExpired("procflow", timeout)
            for key, _ in events:
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    read[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
                    open_fds -= 1
    return _text(read[out]), _text(read[err])


def _text(data: bytes) -> str:
    """As ``subprocess`` with ``text=True`` reads it: UTF-8, universal newlines."""
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


def fork_server() -> ForkServer:
    """This test process's fork server (one per xdist worker)."""
    with _lock:
        if not _servers:
            _servers.append(ForkServer())
        return _servers[0]
