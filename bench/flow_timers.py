"""Benchmark: N flow runs parked on a one-hour timer, then fired by one clock advance.

The flow has two steps: ``wait: { for: 1h }``, then a ``set``. For each N (1,000 and 10,000) a
fresh virtual-clock SQLite store (WAL, ``synchronous=NORMAL``) gets the flow, and:

1. **start**: N ``start_flow`` calls in this process, each its own transaction (start rate);
2. **park**: ``engine.work()`` in this process until every run waits on its timer (all N are due
   at the same virtual instant, start + 1 h);
3. **idle worker**: a ``procflow worker --until-idle`` process over the N waiting runs: nothing
   is due, so it should find nothing and exit. Its peak RSS must not grow with N (printed for an
   empty store, 1k and 10k side by side);
4. **advance**: a ``procflow clock advance 1h`` process fires the N timers and runs each run's
   ``set`` step to completion. Reported: its wall time (process start-up included; the idle
   worker's wall time is about that start-up), timers fired per second (N / wall), its CPU time
   and its peak RSS;
5. every run is checked ``completed`` (and N ``timer.fired`` history entries written).

Peak RSS is each child's own ``ru_maxrss`` (from ``os.wait4``, the per-child form of
``getrusage(RUSAGE_CHILDREN)``). Both subprocesses run with byte-code caching on (as
``bench/throughput.py``), warmed by one idle worker on an empty store first.

Run: ``.venv/bin/python bench/flow_timers.py [--n 1000,10000] [--profile]``.
``--profile`` runs phase 4 in this process under cProfile instead (for the largest N) and prints
the top entries by cumulative and own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import procflow_bin, worker_env

FLOW = """\
flow: timer-bench
steps:
  - pause:
      wait: { for: 1h }
  - after:
      set: { done: true }
"""


@dataclass
class Child:
    wall: float
    cpu: float
    rss_mb: float


def run_child(cmd: list[str], env: dict[str, str]) -> Child:
    """Run ``cmd`` to its end; its wall time, CPU time and peak RSS (its own, via wait4)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()  # small: the worker's one closing line
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited {proc.returncode}: {err.decode()[-2000:]}")
    return Child(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def statuses(url: str) -> dict[str, int]:
    from procflow.store.store import Store

    store = Store(url)
    try:
        rows = store.conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        fired = store.conn.execute(
            "SELECT count(*) FROM history WHERE type='timer.fired'"
        ).fetchone()[0]
        out = {str(status): int(count) for status, count in rows}
        out["timer.fired"] = int(fired)
        return out
    finally:
        store.close()


def new_store(root: Path, name: str, project: Path) -> str:
    from procflow.runtime.engine import Engine

    url = f"sqlite:///{root / f'{name}.db'}"
    engine = Engine.virtual(url, project_dir=str(project))
    try:
        engine.deploy(str(project / "timers.flow.yaml"))
    finally:
        engine.close()
    return url


def start_and_park(url: str, project: Path, n: int) -> tuple[float, float, int]:
    """(start seconds, park seconds, park transitions) for N runs on the store at ``url``."""
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=str(project))
    try:
        engine.latest_flow("timer-bench")  # compiled and cached: not in the timing
        started = time.perf_counter()
        for _ in range(n):
            engine.start_flow("timer-bench", {})
        start_s = time.perf_counter() - started
        started = time.perf_counter()
        transitions = engine.work()
        park_s = time.perf_counter() - started
    finally:
        engine.close()
    return start_s, park_s, transitions


def profile_advance(url: str, project: Path, top: int) -> float:
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=str(project))
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    engine.advance("1h")
    profiler.disable()
    elapsed = time.perf_counter() - started
    engine.close()
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
        print(f"--- top {top} by {key} ---")
        print(out.getvalue())
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", default="1000,10000", help="run counts (1000,10000)")
    parser.add_argument("--profile", action="store_true", help="advance in-process, cProfile")
    parser.add_argument("--top", type=int, default=30, help="profile entries to print")
    args = parser.parse_args()
    counts = [int(x) for x in args.n.split(",")]
    run = procflow_bin()
    lines: list[str] = []
    idle_rss: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="procflow-timers-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        (project / "timers.flow.yaml").write_text(FLOW)
        env = worker_env(root)

        def idle_worker(url: str) -> Child:
            cmd = [*run, "worker", "--until-idle", "--db", url, "--project", str(project)]
            return run_child(cmd, env)

        empty = new_store(root, "empty", project)
        idle_worker(empty)  # warms the byte-code cache
        idle_rss["empty"] = idle_worker(empty).rss_mb
        for n in counts:
            url = new_store(root, f"timers-{n}", project)
            start_s, park_s, parked = start_and_park(url, project, n)
            before = statuses(url)
            if before.get("waiting", 0) != n:
                sys.exit(f"FAILED: expected {n} waiting runs, got {before}")
            idle = idle_worker(url)
            idle_rss[f"{n:,}"] = idle.rss_mb
            after_idle = statuses(url)
            if after_idle != before:
                sys.exit(f"FAILED: the idle worker changed something: {before} -> {after_idle}")
            if args.profile and n == max(counts):
                secs = profile_advance(url, project, args.top)
                adv = Child(secs, float("nan"), float("nan"))
                label = " (in-process, under cProfile)"
            else:
                cmd = [*run, "clock", "advance", "1h", "--db", url, "--project", str(project)]
                adv = run_child(cmd, env)
                label = ""
            final = statuses(url)
            if final.get("completed", 0) != n or final["timer.fired"] != n:
                sys.exit(f"FAILED: expected {n} completed runs and timer.fired entries: {final}")
            lines.append(
                f"{n:>7,}{n / start_s:>10,.0f}{park_s:>8.2f}{n / park_s:>10,.0f}"
                f"{idle.wall:>8.2f}{idle.rss_mb:>8.1f}{adv.wall:>8.2f}{n / adv.wall:>10,.0f}"
                f"{adv.cpu:>7.2f}{adv.rss_mb:>8.1f}  {final['completed']:,} completed{label}"
            )
            print(
                f"N={n:,}: started in {start_s:.2f} s, parked ({parked} transitions) in "
                f"{park_s:.2f} s, idle worker {idle.wall:.2f} s, advance {adv.wall:.2f} s",
                flush=True,
            )
    print()
    print("flow [wait 1h; set] x N on virtual-clock SQLite; rates per second, RSS in MB")
    header = (
        f"{'N':>7}{'start/s':>10}{'park s':>8}{'park/s':>10}{'idle s':>8}{'idleRSS':>8}"
        f"{'adv s':>8}{'fired/s':>10}{'advCPU':>7}{'advRSS':>8}  check"
    )
    print(header)
    print("-" * len(header))
    for line in lines:
        print(line)
    print(
        "idle worker peak RSS: "
        + ", ".join(f"{k} runs waiting {v:.1f} MB" for k, v in idle_rss.items())
        + f" (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
