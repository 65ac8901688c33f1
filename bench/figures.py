"""The figures of a load phase: requests a second, latency percentiles, the servers' own time
(``Server-Timing``), and where the phase's CPU went — the clients (this process), the servers
(their process ids) and the database (every process named ``postgres`` on this machine: a local
server) — read from ``/proc`` before and after the phase, with how much of the machine stood idle.

The CPU is divided per request, and each process's share also by the clients' (whose work per
request is the same in every phase): what a request costs each process, with the machine's
speed divided out — a 2-core machine shared with other sessions drifts by a fifth within
seconds. Linux only: without ``/proc`` no split is printed.
"""

from __future__ import annotations

import os
import time
from dataclasses import astuple, dataclass, field
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PROC = Path("/proc")


@dataclass
class Split:
    """CPU seconds of a phase (or several, added), and the machine's idle seconds."""

    clients: float = 0.0
    servers: float = 0.0
    database: float = 0.0
    idle: float = 0.0
    wall: float = 0.0

    def __add__(self, other: Split) -> Split:
        return Split(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __sub__(self, other: Split) -> Split:
        return Split(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def describe(self, requests: int) -> str:
        per = 1000 / requests
        idle = self.idle / (self.wall * (os.cpu_count() or 1)) if self.wall else 0.0
        database = f", database {self.database * per:.2f}" if self.database else ""
        against = f"servers {self.servers / self.clients:.2f}" if self.clients else ""
        if self.clients and self.database:
            against += f", database {self.database / self.clients:.2f}"
        return (f"CPU ms/request: clients {self.clients * per:.2f}, servers "
                f"{self.servers * per:.2f}{database} ({against} x the clients'); "
                f"machine idle {idle:.0%}")  # fmt: skip


def _process_cpu(pid: int) -> float:
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime, every thread's


def _database_pids() -> list[int]:
    pids = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:  # the process ended meanwhile
                continue
    return pids


def _idle() -> float:
    return int((_PROC / "stat").read_text().split("\n", 1)[0].split()[4]) / _TICK


class Meter:
    """Started at once: :meth:`stop` gives the :class:`Split` since (None without ``/proc``).
    The database's processes are the ones running at the start (its connections are open by
    then: each phase is warmed up)."""

    def __init__(self, server_pids: list[int], database: bool) -> None:
        available = (_PROC / "stat").exists()
        self.server_pids = server_pids
        self.database_pids = _database_pids() if database and available else []
        self.start = self._now() if available else None

    def _now(self) -> Split:
        return Split(
            time.process_time(),
            sum(_process_cpu(pid) for pid in self.server_pids),
            sum(_process_cpu(pid) for pid in self.database_pids),
            _idle(),
            time.perf_counter(),
        )

    def stop(self) -> Split | None:
        return None if self.start is None else self._now() - self.start


def _added(splits: list[Split | None]) -> Split | None:
    known = [split for split in splits if split is not None]
    return sum(known, Split()) if len(known) == len(splits) else None


# --- figures ----------------------------------------------------------------------------------


@dataclass
class Figure:
    label: str
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_p50_ms: float  # from the responses' Server-Timing: the server's own time
    server_p99_ms: float
    latencies: list[float] = field(default_factory=list, repr=False)  # seconds, sorted
    server_times: list[float] = field(default_factory=list, repr=False)  # ms, sorted
    cpu: Split | None = None  # where the phase's CPU went (Linux)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def figure(
    label: str,
    seconds: float,
    latencies: list[float],
    server_ms: list[float],
    cpu: Split | None = None,
) -> Figure:
    ordered, server = sorted(latencies), sorted(server_ms)
    p50 = ordered[len(ordered) // 2] * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    server_p50 = server[len(server) // 2]
    server_p99 = server[min(len(server) - 1, int(len(server) * 0.99))]
    return Figure(label, len(ordered), seconds, p50, p99, server_p50, server_p99, ordered, server,
                  cpu)  # fmt: skip


def merged(label: str, slices: list[Figure]) -> Figure:
    """The slices of one kind as one figure: their requests over the sum of their seconds."""
    return figure(label, sum(f.seconds for f in slices),
                  [x for f in slices for x in f.latencies],
                  [x for f in slices for x in f.server_times],
                  _added([f.cpu for f in slices]))  # fmt: skip


def say(
    figure: Figure, base: Figure, target: float | None = None, p50_under_ms: float | None = None
) -> None:
    ratio = figure.rate / base.rate
    verdict = ""
    if target is not None:
        verdict = f"  (target >= {target:.0%}: {'met' if ratio >= target else 'MISSED'})"
    if p50_under_ms is not None:
        met = figure.server_p50_ms < p50_under_ms
        verdict = f"  (target server p50 < {p50_under_ms:g} ms: {'met' if met else 'MISSED'})"
    print(
        f"  {figure.label:<40} {figure.rate:8,.0f} req/s  {ratio:6.0%} of /health  "
        f"p50 {figure.p50_ms:6.2f} ms  p99 {figure.p99_ms:7.2f} ms  "
        f"server p50 {figure.server_p50_ms:5.2f} ms p99 {figure.server_p99_ms:6.2f} ms  "
        f"({figure.requests:,} in {figure.seconds:.1f} s){verdict}",
        flush=True,
    )
    if figure.cpu is not None:
        print(f"  {'':<40} {figure.cpu.describe(figure.requests)}", flush=True)
