"""Fork server for the acceptance tests' ``procflow`` commands: a new process per command, from
an interpreter that has already imported procflow's libraries, never procflow itself.

A command's process spends most of its CPU importing: some 0.15 s on SQLite, 0.35 s on
PostgreSQL (psycopg alone 0.13 s), and the acceptance tests run some thousands of commands. This
server imports the libraries once (click, psycopg, ruamel.yaml, cryptography, ...) and opens
nothing (no connection, no thread); each command is a fork of it with its own pid, its own
environment, folder and arguments, and its stdout and stderr on the pipes the test gave. procflow
is imported anew in each child, so every command still loads what it needs itself, as the
installed command does: a command that forgot to import one of procflow's modules fails here too.

Protocol, on a Unix socket given as the one argument: the client connects, sends one JSON line
``{"argv": [...], "env": {...}, "cwd": "..."}`` with two file descriptors (the write ends of its
stdout and stderr pipes, SCM_RIGHTS); the server answers ``pid PID`` once the child runs and
``exit CODE`` when it ended (CODE as ``subprocess`` has it: ``-9`` for SIGKILL). The server ends
when its stdin closes (the test process is gone).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import traceback


def warm_up() -> None:
    """The libraries procflow's commands import (none of procflow's own modules)."""
    import asyncio
    import concurrent.futures
    import decimal
    import email.utils
    import logging
    import sqlite3
    import uuid
    import zoneinfo

    import click
    import cronsim
    import psycopg
    import psycopg_pool
    import ruamel.yaml
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    del asyncio, concurrent, decimal, email, logging, sqlite3, uuid, zoneinfo  # loaded: enough
    del click, cronsim, psycopg, psycopg_pool, ruamel, hashes, AESGCM, HKDF
    assert not any(name.startswith("procflow") for name in sys.modules), "procflow was imported"


def run_child(request: dict[str, object], out: int, err: int) -> None:
    """In the forked child: become ``procflow ARGV`` and exit with its code."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.chdir(str(request["cwd"]))
        environ = request["env"]
        assert isinstance(environ, dict)
        os.environ.clear()
        os.environ.update(environ)
        argv = request["argv"]
        assert isinstance(argv, list)
        sys.argv = ["procflow", *argv]
        sys.path[0] = os.getcwd()  # as `python -m procflow.cli` has it
        from procflow.cli import _run  # what the installed command's main() exits with

        code = _run(argv)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
    signal.set_wakeup_fd(wake_w)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    waiting: dict[int, socket.socket] = {}  # child pid -> the client to tell its exit code
    while True:
        ready, _, _ = select.select([listener, wake_r, 0], [], [])
        if 0 in ready and not os.read(0, 4096):
            return  # the test process is gone: its children end on their own
        if wake_r in ready:
            os.read(wake_r, 4096)
        if listener in ready:
            start(listener, waiting, [listener.fileno(), wake_r, wake_w])
        reap(waiting)


def start(listener: socket.socket, waiting: dict[int, socket.socket], fds: list[int]) -> None:
    conn, _ = listener.accept()
    message, passed, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    while not message.endswith(b"\n"):
        more = conn.recv(1 << 20)
        if not more:
            break
        message += more
    request = json.loads(message)
    out, err = passed
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        for fd in fds:
            os.close(fd)
        for client in waiting.values():
            client.close()
        conn.close()
        run_child(request, out, err)
    os.close(out)
    os.close(err)
    conn.sendall(f"pid {pid}\n".encode())
    waiting[pid] = conn


def reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        client = waiting.pop(pid, None)
        if client is not None:
            with contextlib.suppress(OSError):  # the test stopped waiting for it
                client.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            client.close()


if __name__ == "__main__":
    warm_up()
    serve(sys.argv[1])
