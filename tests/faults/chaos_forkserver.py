"""Fork server for the chaos test: starts ``procflow worker`` processes from a warm interpreter.

A worker killed every ~200 ms must be replaced as fast, and a fresh interpreter needs ~0.5 s of
CPU to import procflow, psycopg and cryptography: on a 2-core machine four workers restarted at
that rate would spend all the CPU importing. This server imports all that once, opens nothing
(no connection, no thread), and forks: each child is a new process with its own pid that runs
exactly ``procflow worker --id ID [ARG...]`` (``procflow.cli.main``), with its own fault plan
(``PROCFLOW_FAULTS``) and its output in its own log file. The environment (database URL, key,
lease) is inherited from the server's.

Protocol, one tab-separated line each way:
  stdin:  ``ID<TAB>FAULTS<TAB>LOG[<TAB>ARG...]`` start a worker (FAULTS may be empty; ARGs
          are more ``procflow worker`` options)
  stdout: ``pid<TAB>ID<TAB>PID`` it started; ``exit<TAB>PID<TAB>CODE`` it ended (CODE as
          ``subprocess`` has it: ``-9`` for SIGKILL).
When stdin closes, the server SIGTERMs the workers left (graceful stop), reaps them, and exits.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import traceback


def warm_up() -> None:
    import psycopg_pool

    import procflow.cli
    import procflow.cli.runs  # the worker command: the CLI imports its commands lazily
    import procflow.runtime.commands.worker
    import procflow.runtime.engine
    import procflow.store.pg
    from procflow.runtime.data.secrets import load_cipher

    del procflow, psycopg_pool  # imported for their side effect: loaded modules
    load_cipher("postgresql://warm-up", {"PROCFLOW_SECRET_KEY": "w" * 32})  # loads cryptography


def spawn(worker_id: str, faults: str, log: str, args: list[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        from procflow import cli
        from procflow.runtime import faults as fault_points

        os.environ["PROCFLOW_FAULTS"] = faults
        fault_points.configure(faults)
        try:
            cli.main(["worker", "--id", worker_id, *args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    warm_up()
    children: set[int] = set()
    stdin_open = True
    pending = b""

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    while stdin_open or children:
        ready, _, _ = select.select([0] if stdin_open else [], [], [], 0.01)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:
                stdin_open = False
                for pid in children:  # the driver is gone: stop what is left, gracefully
                    os.kill(pid, signal.SIGTERM)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                worker_id, faults, log, *args = line.decode().split("\t")
                pid = spawn(worker_id, faults, log, args)
                children.add(pid)
                say(f"pid\t{worker_id}\t{pid}")
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            say(f"exit\t{pid}\t{os.waitstatus_to_exitcode(status)}")


if __name__ == "__main__":
    main()
