"""Benchmark: 10,000 flows, each with an ``every: 1m`` schedule, on one worker and the real clock.

Phases:
1. deploy N one-step flows, each ``trigger: { schedule: { every: 1m } }`` (all slots fall on the
   same minute boundaries: the worst case, every schedule due at once);
2. the idle cost: the query plans of what a worker asks to find due work (one probe of each
   due-time index, whatever the number of armed schedules), and how many statements an idle
   worker makes while nothing is due;
3. ``procflow worker`` (a subprocess, real clock), started 10 s before a minute boundary, for
   ``--minutes`` boundaries: the lag of every slot, fired − nominal instant (the run's
   ``started_at`` − its slot), p50/p99 of each boundary (the first one after the worker started
   apart) and of them all;
4. the cost of a slot against a plain start, in-process: N due slots fired (the work loop's
   ``fire_due``) against N ``start_flow`` calls of the same flow, runs not worked.

Targets (issue 3/6): p99 lag < 1 s with jitter 0; a slot costs at most twice a plain start.
Run: ``.venv/bin/python bench/schedules.py [--n 10000] [--minutes 3] [--db URL]`` (default: a
fresh SQLite file; a ``postgresql://`` URL names a database that is emptied first).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOW = """\
flow: f{i}
trigger:
  schedule: {{ every: 1m }}
steps:
  - s: {{ set: {{ x: 1 }} }}
"""


def fresh_store(url: str | None, folder: Path) -> str:
    from procflow.store.store import Store

    if url is None:
        url = f"sqlite:///{folder}/bench.db"
    elif url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
    store = Store(url)
    store.init()
    store.close()
    return url


def deploy(url: str, folder: Path, n: int) -> float:
    from procflow.runtime.engine import Engine

    for i in range(n):
        (folder / f"f{i}.flow.yaml").write_text(FLOW.format(i=i))
    engine = Engine(url, project_dir=str(folder))
    began = time.perf_counter()
    for i in range(n):
        engine.deploy(str(folder / f"f{i}.flow.yaml"))
    engine.close()
    return time.perf_counter() - began


def plans(url: str) -> list[str]:
    """The plans of the statement a worker asks on every look for work."""
    from procflow.store.queries.runrows.timers import FIRST_SCHEDULE, FIRST_TIMER
    from procflow.store.store import Store

    store = Store(url)
    conn = store.read().c
    out = []
    for sql in (FIRST_TIMER, FIRST_SCHEDULE):
        if store.dialect == "sqlite":
            rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
            out.append(f"{sql}\n    " + "\n    ".join(str(r[-1]) for r in rows))
        else:
            rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}").fetchall()
            out.append(f"{sql}\n    " + "\n    ".join(str(r[0]) for r in rows))
    store.close()
    return out


LEAD = 10.0  # seconds the worker is up before the first slot it is measured on


def lags(url: str, minutes: int, env: dict[str, str]) -> tuple[list[float], int]:
    """Run a worker over ``minutes`` slot boundaries; the lag of each slot fired (seconds).

    The worker starts :data:`LEAD` seconds before a boundary, so its first boundary measures a
    fresh worker, not a slot that fell before it ran: started after an armed boundary, a worker
    fires that slot on start, its lag the time no worker ran (the first figures of this bench,
    1.5 s at p50, were that). Slots armed before that boundary (the deploy ended too close to
    its first boundary, or after it) fire on start and are reported apart."""
    from procflow.runtime.engine import Engine

    engine = Engine(url, create=False)
    first = engine.store.read().next_due()
    engine.close()
    assert first is not None
    boundary = max(first / 1e6, math.ceil((time.time() + LEAD) / 60) * 60)
    time.sleep(max(0.0, boundary - LEAD - time.time()))
    started = time.time()
    worker = subprocess.Popen(
        [sys.executable, "-m", "procflow.cli", "worker", "--db", url], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(boundary + (minutes - 1) * 60 + 5 - time.time())
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=120)
    engine = Engine(url, create=False)
    by_slot: dict[int, list[float]] = {}
    for run in engine.list_runs():
        slot = run.state.get("schedule", {}).get("slot")
        if slot is not None:
            by_slot.setdefault(int(slot), []).append((run.started_at - int(slot)) / 1e6)
    engine.close()
    measured: list[float] = []
    for slot, found in sorted(by_slot.items()):
        found.sort()
        up = slot / 1e6 - started
        what = "fell before the worker started, fired on start" if up < 0 else (
            "first boundary after the worker started" if slot / 1e6 < boundary + 1
            else "a running worker"
        )  # fmt: skip
        print(
            f"  slot {time.strftime('%H:%M', time.localtime(slot / 1e6))} (worker up {up:+.1f} s,"
            f" {what}): {len(found)} runs, lag p50 {statistics.median(found):.3f} s, p99 "
            f"{found[int(len(found) * 0.99)]:.3f} s"
        )
        if up >= 0:
            measured += found
    return measured, sum(1 for slot in by_slot if slot / 1e6 >= started)


def slot_cost(url: str, folder: Path, n: int) -> tuple[float, float]:
    """Seconds per slot fired and per plain start, for ``n`` of each (runs not worked)."""
    from procflow.runtime.engine import Engine
    from procflow.runtime.schedules.firing import fire_due

    engine = Engine(url, project_dir=str(folder))
    due = engine.store.read().next_due()  # the next minute: every schedule's slot
    assert due is not None
    began = time.perf_counter()
    fired = 0
    while fired < n:
        got = fire_due(engine, due, n - fired)
        if not got:
            break
        fired += len(got)
    slot = (time.perf_counter() - began) / max(fired, 1)
    began = time.perf_counter()
    for i in range(n):
        engine.start_flow(f"f{i % 100}", {})
    start = (time.perf_counter() - began) / n
    engine.close()
    return slot, start


BENCH_KEY = "procflow-bench-secret-key-" + "k" * 24  # PostgreSQL stores need a shared key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    os.environ.setdefault("PROCFLOW_SECRET_KEY", BENCH_KEY)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = fresh_store(args.db, folder)
        env = {**os.environ, "PROCFLOW_PROJECT": str(folder)}
        print(f"store: {url.split('@')[-1]}  schedules: {args.n}")
        print(f"deploy: {deploy(url, folder, args.n):.1f} s")
        for plan in plans(url):
            print(f"plan: {plan}")
        found, minutes = lags(url, args.minutes, env)
        found.sort()
        if found:
            p99 = found[min(len(found) - 1, int(len(found) * 0.99))]
            print(
                f"slots fired: {len(found)} over {minutes} minutes; lag p50 "
                f"{statistics.median(found):.3f} s, p99 {p99:.3f} s, max {found[-1]:.3f} s"
            )
        slot, start = slot_cost(url, folder, args.n)
        print(
            f"cost: {slot * 1e3:.3f} ms a slot, {start * 1e3:.3f} ms a plain start "
            f"(ratio {slot / start:.2f})"
        )


if __name__ == "__main__":
    main()
