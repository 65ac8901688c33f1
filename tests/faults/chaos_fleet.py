"""The fleet of the chaos tests: ``procflow worker`` processes on one PostgreSQL store, forked by
chaos_forkserver.py from a warm interpreter, SIGKILLed at random by a driver and replaced at once.

Half of the new workers also carry a fault plan (``PROCFLOW_FAULTS``) that kills them at a named
point, so kills land exactly there too. Any worker exit that is neither a kill by the driver nor
one at its planned fault point is a crash (a bug), kept in :attr:`Figures.crashes`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FORKSERVER = Path(__file__).parent / "chaos_forkserver.py"


@dataclass
class Worker:
    id: str
    pid: int
    faults: str
    killed: bool = False


@dataclass
class Figures:
    kills: int = 0  # SIGKILLs sent by the driver
    fault_kills: int = 0  # workers that killed themselves at a fault point
    starts: int = 0
    crashes: list[str] = field(default_factory=list)  # exits that were neither: bugs


@dataclass(frozen=True)
class FleetPlan:
    """How many workers, where their fault plans may kill them, and what they are given."""

    workers: int
    points: tuple[str, ...]  # the fault points a worker's plan may name
    max_hit: int  # a plan kills at the n-th hit of its point, n in 1..max_hit
    env: dict[str, str]  # PROCFLOW_DATABASE_URL, the secret key, the lease...


class Fleet:
    """``plan.workers`` worker processes; any that dies is replaced at once (by :meth:`reap`)."""

    def __init__(self, plan: FleetPlan, logs: Path, seed: int) -> None:
        self.plan = plan
        self.logs = logs
        self.random = random.Random(seed)
        self.workers: list[Worker | None] = [None] * plan.workers
        self.figures = Figures()
        self.pids: dict[str, int] = {}
        self.exits: dict[int, int] = {}
        self.changed = threading.Condition()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
        env.update(plan.env)
        self.server = subprocess.Popen(
            [sys.executable, str(FORKSERVER)], env=env, text=True, bufsize=1,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self.listener = threading.Thread(target=self._listen, daemon=True)
        self.listener.start()

    def _listen(self) -> None:
        assert self.server.stdout is not None
        with self.server.stdout:  # closed at the fork server's end of output
            for line in self.server.stdout:
                kind, key, value = line.rstrip("\n").split("\t")
                with self.changed:
                    if kind == "pid":
                        self.pids[key] = int(value)
                    else:
                        self.exits[int(key)] = int(value)
                    self.changed.notify_all()

    def _await(self, ready: Callable[[], bool], what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(ready, timeout=30):
                raise AssertionError(f"the fork server did not report {what} within 30s")

    def start_all(self) -> None:
        for slot in range(self.plan.workers):
            self.start(slot)

    def start(self, slot: int) -> None:
        self.figures.starts += 1
        worker_id = f"chaos-{slot}-{self.figures.starts}"
        faults = ""
        if self.random.random() < 0.5:  # half die at a named point instead of a random one
            point = self.random.choice(self.plan.points)
            faults = f"{point}={self.random.randint(1, self.plan.max_hit)}"
        # Odd slots run two worker threads (two ids, one pool and process): a kill takes both.
        args = "\t--concurrency\t2" if slot % 2 else ""
        assert self.server.stdin is not None
        self.server.stdin.write(f"{worker_id}\t{faults}\t{self.logs / worker_id}.log{args}\n")
        self.server.stdin.flush()
        self._await(lambda: worker_id in self.pids, f"worker {worker_id}")
        self.workers[slot] = Worker(worker_id, self.pids[worker_id], faults)

    def reap(self) -> None:
        """Replace the workers that died on their own (a fault plan, or a bug)."""
        for slot, worker in enumerate(self.workers):
            if worker is None or worker.pid not in self.exits:
                continue
            code = self.exits[worker.pid]
            if worker.killed:
                self.figures.kills += 1
            elif code == -signal.SIGKILL and worker.faults:
                self.figures.fault_kills += 1
            else:
                tail = (self.logs / f"{worker.id}.log").read_text()[-3000:]
                self.figures.crashes.append(
                    f"{worker.id} exited {code} (faults {worker.faults!r}):\n{tail}"
                )
            self.start(slot)

    def kill_one(self) -> None:
        worker = self.workers[self.random.randrange(self.plan.workers)]
        assert worker is not None
        if worker.pid not in self.exits:
            worker.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            self._await(lambda: worker.pid in self.exits, f"the end of {worker.id}")
        self.reap()

    def stop(self) -> list[tuple[str, int | None]]:
        """SIGTERM every worker (graceful); returns (id, exit code) of each."""
        live = [w for w in self.workers if w is not None and w.pid not in self.exits]
        for worker in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGTERM)
        with self.changed:
            self.changed.wait_for(lambda: all(w.pid in self.exits for w in live), timeout=30)
        assert self.server.stdin is not None
        self.server.stdin.close()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        self.listener.join(timeout=10)
        return [(w.id, self.exits.get(w.pid)) for w in live]

    def tracebacks(self) -> dict[str, str]:
        """The worker logs holding a traceback (a thread that died does not end its worker)."""
        return {p.name: p.read_text() for p in self.logs.iterdir() if "Traceback" in p.read_text()}
