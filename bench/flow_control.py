"""Benchmark: flow control — how fast a limited flow's queue drains, and how exactly a throttle
holds its rate.

**Drain** (SQLite and PostgreSQL). A flow of three cheap steps (two ``log.write`` actions and a
``set``) in three forms: without a limit, with ``concurrency: { limit: 50 }``, and with
``concurrency: { limit: 1, key: "{{ k }}" }`` over 100 keys. For each, a fresh store gets N runs
started (``start_flow`` calls, 500 to a transaction; a limited flow's start takes its key's row
lock; over the limit the run is created queued), then one in-process work loop
(``Engine.work(until_idle=True)``) drains them all: every end frees its place and starts the
oldest queued run of its key in the same transaction. The figure is runs/s of the drain (the
starts are timed apart), and the ratio of each limited form to the unlimited one (target: >= 70
%). Forms run alternately, ``--repeat`` times, so that the machine's load falls on each alike.

**Throttle** (PostgreSQL). A flow whose one action step has ``throttle: { limit: 100, per: 1s }``;
enough runs started beforehand to keep the budget saturated; two ``procflow worker`` processes
on the real clock for ``--seconds``. Counted from the store's history: the ``step.started``
instants of that step (the attempt starts). Reported: the most starts in any window of 1 s (exact:
a window opening at every start; must be <= 100), the same over windows sliding by 10 ms, and the
rate over the measured span (first start + 1 s to the end, in whole windows: the first window
holds the burst of the runs already waiting; target >= 99/s).

Run: ``.venv/bin/python bench/flow_control.py [--part drain,throttle] [--n 10000] [--repeat 2]
[--seconds 60] [--pg postgresql://postgres@127.0.0.1:5432/postgres] [--profile FORM]``.
PostgreSQL legs use fresh databases ``procflow_bench_fc_*`` next to ``--pg`` (default
``$PROCFLOW_BENCH_PG``), dropped afterwards; ``--pg ''`` skips them. ``--profile limit50`` drains
that form once (on the first ``--backend``) under cProfile and prints the top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaleout import BENCH_KEY, DEFAULT_ADMIN, drop_database, fresh_database
from throughput import procflow_bin, worker_env

STEPS = """\
steps:
  - a: { log.write: { message: "a {{ k }}" } }
  - b: { log.write: { message: "b {{ k }}" } }
  - c: { set: { done: true } }
"""
INPUTS = "inputs:\n  k: { type: integer, required: true }\n"
FORMS = {
    "unlimited": "flow: drain\n" + INPUTS + STEPS,
    "limit50": "flow: drain\nconcurrency: { limit: 50 }\n" + INPUTS + STEPS,
    "key100x1": 'flow: drain\nconcurrency: { limit: 1, key: "{{ k }}" }\n' + INPUTS + STEPS,
}
KEYS = 100
START_GROUP = 500  # starts to a transaction

THROTTLED = """\
flow: paced
inputs:
  k: { type: integer, required: true }
steps:
  - post:
      log.write: { message: "post {{ k }}" }
      throttle: { limit: 100, per: 1s }
"""
LIMIT, PER = 100, 1_000_000  # µs


# --- drain ------------------------------------------------------------------------------------


def prepare(url: str, project: Path, form: str, n: int) -> float:
    """Deploy ``form`` to the empty store at ``url`` and start ``n`` runs; the starts' seconds."""
    from procflow.runtime.engine import Engine
    from procflow.store.store import Store

    store = Store(url)
    store.init()
    store.close()
    path = project / f"{form}.flow.yaml"
    path.write_text(FORMS[form])
    engine = Engine(url, project_dir=str(project))
    try:
        engine.deploy(str(path))
        engine.latest_flow("drain")  # compiled and cached: not in the timing
        began = time.perf_counter()
        for first in range(0, n, START_GROUP):
            with engine.store.tx():  # the starts join it, as a bulk import's would
                for i in range(first, min(first + START_GROUP, n)):
                    engine.start_flow("drain", {"k": i % KEYS})
        return time.perf_counter() - began
    finally:
        engine.close()


def drain(url: str, project: Path, profile: bool = False) -> float:
    """Seconds for one in-process work loop to run every run to its end."""
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=str(project))
    profiler = cProfile.Profile() if profile else None
    try:
        began = time.perf_counter()
        if profiler is None:
            engine.work(until_idle=True)
        else:  # the loop on this thread, unwatched (the attempts on the slots, unprofiled)
            profiler.enable()
            engine.loop.drive_loop(True, None)
            profiler.disable()
        elapsed = time.perf_counter() - began
    finally:
        engine.close()
    if profiler is not None:
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(35)
            print(f"--- top 35 by {key} ---\n{out.getvalue()}")
    return elapsed


def profile_drain(backend: str, admin: str, form: str, n: int) -> None:
    """Drain ``form`` once on ``backend`` under cProfile, and print the top entries."""
    with tempfile.TemporaryDirectory(prefix="procflow-fc-") as tmp:
        project = Path(tmp)
        name = f"procflow_bench_fc_profile_{form}"
        url = (
            f"sqlite:///{project / 'bench.db'}"
            if backend == "sqlite"
            else fresh_database(admin, name)
        )
        try:
            prepare(url, project, form, n)
            secs = drain(url, project, profile=True)
        finally:
            if backend != "sqlite":
                drop_database(admin, name)
    print(f"{form} on {backend}: {n / secs:,.0f} runs/s under cProfile")


def check_drained(url: str, n: int) -> None:
    """Every run completed, no place left taken."""
    from procflow.store.store import Store

    store = Store(url)
    try:
        c = store.read().c
        rows = c.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        statuses = {str(s): int(k) for s, k in rows}
        taken = c.execute("SELECT coalesce(sum(active), 0) FROM limits").fetchone()[0]
    finally:
        store.close()
    if statuses != {"completed": n} or int(taken) != 0:
        sys.exit(f"FAILED: expected {n} completed runs and no place taken: {statuses}, {taken}")


def drain_leg(
    backend: str, admin: str, root: Path, form: str, n: int, i: int
) -> tuple[float, float]:
    """(starts/s, drained runs/s) of one form on a fresh store."""
    project = root / f"p-{backend}-{form}-{i}"
    project.mkdir()
    if backend == "sqlite":
        url, name = f"sqlite:///{project / 'bench.db'}", ""
    else:
        name = f"procflow_bench_fc_{form}_{i}"
        url = fresh_database(admin, name)
    try:
        start_s = prepare(url, project, form, n)
        drain_s = drain(url, project)
        check_drained(url, n)
    finally:
        if name:
            drop_database(admin, name)
    return n / start_s, n / drain_s


def run_drain(backends: list[str], admin: str, n: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="procflow-fc-") as tmp:
        root = Path(tmp)
        for backend in backends:
            rates: dict[str, list[tuple[float, float]]] = {form: [] for form in FORMS}
            loads: list[float] = []
            for i in range(repeat):
                order = list(FORMS) if i % 2 == 0 else list(reversed(FORMS))
                for form in order:
                    rates[form].append(drain_leg(backend, admin, root, form, n, i))
                    loads.append(os.getloadavg()[0])
                    start_r, drain_r = rates[form][-1]
                    print(
                        f"{backend} {form:>9} #{i + 1}: start {start_r:,.0f}/s, "
                        f"drain {drain_r:,.0f} runs/s (load {loads[-1]:.2f})",
                        flush=True,
                    )
            base = statistics.median(r for _, r in rates["unlimited"])
            print(f"\n{backend}: N={n:,}, 3 steps a run, medians of {repeat} alternated legs")
            print(f"{'form':>10}{'start/s':>10}{'drain/s':>10}{'ratio':>8}  drains")
            for form, got in rates.items():
                med = statistics.median(r for _, r in got)
                print(
                    f"{form:>10}{statistics.median(s for s, _ in got):>10,.0f}{med:>10,.0f}"
                    f"{med / base:>8.0%}  " + ", ".join(f"{r:,.0f}" for _, r in got)
                )
            print(
                f"load average {min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} CPUs\n",
                flush=True,
            )


# --- throttle ---------------------------------------------------------------------------------


def start_paced(url: str, project: Path, n: int) -> None:
    from procflow.runtime.engine import Engine
    from procflow.store.store import Store

    store = Store(url)
    store.init()
    store.close()
    path = project / "paced.flow.yaml"
    path.write_text(THROTTLED)
    engine = Engine(url, project_dir=str(project))
    try:
        engine.deploy(str(path))
        with engine.store.tx():  # one transaction for the lot: the workers find them all
            for i in range(n):
                engine.start_flow("paced", {"k": i})
    finally:
        engine.close()


def attempt_starts(url: str) -> tuple[list[int], int]:
    """The ``step.started`` instants of the throttled step (µs, sorted), and the runs ended."""
    from procflow.store.store import Store

    store = Store(url)
    try:
        c = store.read().c
        rows = c.execute(
            "SELECT at FROM history WHERE type='step.started' AND step='post' ORDER BY at"
        ).fetchall()
        done = c.execute("SELECT count(*) FROM runs WHERE status='completed'").fetchone()[0]
    finally:
        store.close()
    return [int(r[0]) for r in rows], int(done)


def most_in_window(starts: list[int], per: int) -> int:
    """The most starts in any window [t, t + per): one opening at each start is enough."""
    return max((bisect_left(starts, s + per) - i for i, s in enumerate(starts)), default=0)


def sliding(starts: list[int], per: int, step: int, first: int, last: int) -> list[int]:
    """Starts in [t, t + per) for t from ``first`` by ``step`` while t + per <= ``last``."""
    out, t = [], first
    while t + per <= last:
        out.append(bisect_left(starts, t + per) - bisect_left(starts, t))
        t += step
    return out


def run_throttle(admin: str, seconds: float, workers: int) -> None:
    n = int(LIMIT * (seconds + 15))  # more than the budget can start in the time
    name = "procflow_bench_fc_throttle"
    url = fresh_database(admin, name)
    try:
        with tempfile.TemporaryDirectory(prefix="procflow-fc-") as tmp:
            root = Path(tmp)
            project = root / "project"
            project.mkdir()
            start_paced(url, project, n)
            env = worker_env(root)
            cmd = [*procflow_bin(), "worker", "--db", url, "--project", str(project)]
            procs = [
                subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
                for _ in range(workers)
            ]
            cpu0 = os.times()
            time.sleep(seconds + 3)  # start-up, then the measured span
            load = os.getloadavg()[0]
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                _, err = proc.communicate(timeout=60)
                if proc.returncode != 0:
                    sys.exit(f"FAILED: a worker exited {proc.returncode}: {err.decode()[-2000:]}")
            cpu1 = os.times()
        starts, done = attempt_starts(url)
    finally:
        drop_database(admin, name)
    report_throttle(starts, done, seconds, workers, load, cpu1.children_user - cpu0.children_user)


def report_throttle(
    starts: list[int], done: int, seconds: float, workers: int, load: float, cpu: float
) -> None:
    if not starts:
        sys.exit("FAILED: no attempt started")
    first = starts[0] + PER  # after the first window: the runs waiting at start-up burst
    last = min(starts[-1], first + int(seconds * 1_000_000))
    span = [s for s in starts if first <= s < last]
    windows = sliding(starts, PER, 10_000, first, last)
    exact = most_in_window(starts, PER)
    rate = len(span) / ((last - first) / 1_000_000)
    print(
        f"throttle {LIMIT}/1s, {workers} workers on PostgreSQL, real clock: {len(starts):,} "
        f"attempts started ({done:,} runs completed)"
    )
    print(f"  most starts in any 1 s window (exact): {exact} (limit {LIMIT})")
    print(
        f"  1 s windows sliding by 10 ms over {(last - first) / 1e6:.1f} s: max {max(windows)}, "
        f"min {min(windows)}, median {statistics.median(windows):.0f}"
    )
    print(f"  rate over the span: {rate:.2f}/s ({rate / LIMIT:.2%} of the budget)")
    print(f"  workers' user CPU {cpu:.1f} s; load average {load:.2f} on {os.cpu_count()} CPUs")
    if exact > LIMIT:
        sys.exit(f"FAILED: {exact} attempts started within one window of 1 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", default="drain,throttle", help="drain,throttle")
    parser.add_argument("--n", type=int, default=10_000, help="runs per drain (10,000)")
    parser.add_argument("--repeat", type=int, default=2, help="alternated legs per form (2)")
    parser.add_argument("--backend", default="sqlite,postgresql", help="drain backends")
    parser.add_argument("--seconds", type=float, default=60.0, help="throttle span (60)")
    parser.add_argument("--workers", type=int, default=2, help="throttle workers (2)")
    parser.add_argument("--pg", default=os.environ.get("PROCFLOW_BENCH_PG", DEFAULT_ADMIN))
    parser.add_argument("--profile", choices=list(FORMS), help="drain FORM under cProfile")
    args = parser.parse_args()
    os.environ.setdefault("PROCFLOW_SECRET_KEY", BENCH_KEY)  # PostgreSQL's workers share one
    parts = args.part.split(",")
    backends = [b for b in args.backend.split(",") if b == "sqlite" or args.pg]
    if args.profile:
        profile_drain(backends[0], args.pg, args.profile, args.n)
        return
    if "drain" in parts:
        run_drain(backends, args.pg, args.n, args.repeat)
    if "throttle" in parts and args.pg:
        run_throttle(args.pg, args.seconds, args.workers)


if __name__ == "__main__":
    main()
