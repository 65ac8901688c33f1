"""Benchmark: how soon an idle worker picks up a run that has just become ready.

One long-running ``procflow worker`` process (concurrency 1) waits, idle, on a fresh store.
Two paths are measured, one sample at a time with the worker idle in between (samples are
spaced by a random 100-200 ms):

- **start**: this process creates a ``Ping`` record, whose create starts a one-step run in the
  same transaction (on PostgreSQL the commit sends ``NOTIFY procflow_wakeup``). Latency: from the
  moment the create has returned (its transaction committed: the run is ready) to the ``at`` of
  the run's ``step.started`` (taken by the worker once it has claimed the run, right before the
  step's delegate is called). Reported too: the same from just before the create was called,
  i.e. with the creating transaction's own time included.
- **timer**: a ``Flaky`` record starts a run whose only step fails its first attempt and has
  ``retry: { count: 2, every: PT1S }``: a retry timer is armed, due 1 s after the failure.
  Latency: from the timer's due time to the ``at`` of attempt 2's ``step.started``.

Timestamps are the system clock of this one machine (worker and benchmark alike).
Target (issue 3/5): p99 <= 50 ms on PostgreSQL (LISTEN/NOTIFY, and a sleep until the next due
time). SQLite has no notifications: an idle worker polls at most a second apart.

Run: ``.venv/bin/python bench/wakeup.py [--samples 200] [--backend postgresql,sqlite]
[--url postgresql://postgres@127.0.0.1:5432/postgres]``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaleout import BENCH_KEY, DEFAULT_ADMIN, drop_database, fresh_database
from throughput import procflow_bin, worker_env

DB_NAME = "procflow_bench_wakeup"

INTENT = """\
name: wakeup
entities:
  - name: Ping
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
  - name: Flaky
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
processes:
  - name: Pong
    trigger: { onCreate: Ping }
    steps:
      - name: touch
        kind: serviceTask
        args: { delegate: Touch, next: end }
  - name: Retry
    trigger: { onCreate: Flaky }
    steps:
      - name: flaky
        kind: serviceTask
        args:
          delegate: FailOnce
          retry: { count: 2, every: PT1S }
          next: end
"""

DELEGATES = '''\
"""Touch does nothing; FailOnce fails its first attempt."""


def Touch(ctx):
    pass


def FailOnce(ctx):
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
'''


def now_us() -> int:
    return time.time_ns() // 1000


def make_project(root: Path) -> Path:
    project = root / "project"
    (project / "custom").mkdir(parents=True)
    (project / "custom" / "__init__.py").write_text(DELEGATES)
    path = project / "wakeup.intent"
    path.write_text(INTENT)
    return path


def wait_listening(url: str, proc: subprocess.Popen[bytes]) -> None:
    """PostgreSQL: until the worker's LISTEN connection shows; SQLite: a moment to settle."""
    if not url.startswith("postgresql"):
        time.sleep(2.0)
        return
    import psycopg

    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                sys.exit("the worker exited early")
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname=current_database() "
                "AND query LIKE 'LISTEN%%'"
            ).fetchone()
            if row is not None and row[0] >= 1:
                time.sleep(0.3)
                return
            time.sleep(0.05)
    sys.exit("the worker did not reach its idle LISTEN within 30 s")


def history_rows(engine: Any) -> list[tuple[str, str, int | None, int, str | None, int | None]]:
    """(run_id, type, attempt, at, record_entity, record_id) of the relevant history rows."""
    rows = engine.store.conn.execute(
        "SELECT h.run_id, h.type, h.attempt, h.at, r.record_entity, r.record_id FROM history h "
        "JOIN runs r ON r.id=h.run_id WHERE h.type IN ('step.started','attempt.failed')"
    ).fetchall()
    return [tuple(r) for r in rows]


def measure(url: str, root: Path, samples: int, env: dict[str, str]) -> dict[str, list[float]]:
    from procflow.runtime.engine import Engine

    intent = make_project(root)
    project = str(intent.parent)
    run = procflow_bin()
    subprocess.run([*run, "db", "init", "--db", url], check=True, capture_output=True, env=env)
    subprocess.run(
        [*run, "deploy", str(intent), "--db", url, "--project", project],
        check=True,
        capture_output=True,
        env=env,
    )
    cmd = [*run, "worker", "--db", url, "--project", project, "--id", "wakeup"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    engine = Engine(url, project_dir=project, environ=env)
    try:
        wait_listening(url, proc)
        rng = random.Random(7)
        # start: one record at a time; the next only once the worker is idle again.
        created: dict[int, tuple[int, int]] = {}
        for i in range(samples):
            t0 = now_us()
            record = engine.create_record("Ping", {"title": f"ping {i}"})
            created[int(record["id"])] = t0, now_us()
            time.sleep(rng.uniform(0.1, 0.2))
        # timer: records spaced so that each timer comes due while the worker is idle.
        spacing = 1.0 / 6
        for i in range(samples):
            engine.create_record("Flaky", {"title": f"flaky {i}"})
            time.sleep(spacing + rng.uniform(0, 0.05))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = engine.store.conn.execute(
                "SELECT count(*) FROM runs WHERE status='completed'"
            ).fetchone()[0]
            if done >= 2 * samples:
                break
            time.sleep(0.1)
        else:
            sys.exit(f"only {done} of {2 * samples} runs completed")
        rows = history_rows(engine)
    finally:
        engine.close()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    start: list[float] = []
    start_call: list[float] = []
    failed: dict[str, int] = {}
    second: dict[str, int] = {}
    for run_id, type_, attempt, at, entity, record_id in rows:
        if entity == "Ping" and type_ == "step.started":
            assert record_id is not None
            called, committed = created[record_id]
            start.append((at - committed) / 1000)
            start_call.append((at - called) / 1000)
        elif entity == "Flaky" and type_ == "attempt.failed" and attempt == 1:
            failed[run_id] = at
        elif entity == "Flaky" and type_ == "step.started" and attempt == 2:
            second[run_id] = at
    timer = [(second[r] - (failed[r] + 1_000_000)) / 1000 for r in failed]
    return {
        "start (from commit)": start,
        "start (from create call)": start_call,
        "timer (from due time)": timer,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=200, help="samples per path (200)")
    parser.add_argument("--backend", default="postgresql,sqlite", help="postgresql,sqlite")
    parser.add_argument(
        "--url",
        default=os.environ.get("PROCFLOW_BENCH_PG", DEFAULT_ADMIN),
        help="an administrative PostgreSQL URL (the database is created next to it)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="procflow-wakeup-") as tmp:
        root = Path(tmp)
        env = worker_env(root)
        env.setdefault("PROCFLOW_SECRET_KEY", BENCH_KEY)
        for backend in args.backend.split(","):
            if backend == "postgresql":
                url = fresh_database(args.url, DB_NAME)
            else:
                url = f"sqlite:///{root / 'wakeup.db'}"
            try:
                got = measure(url, root / backend, args.samples, env)
            finally:
                if backend == "postgresql":
                    drop_database(args.url, DB_NAME)
            for path, values in got.items():
                print(
                    f"RESULT {backend} {path}: p50 {statistics.median(values):.1f} ms, "
                    f"p99 {pct(values, 0.99):.1f} ms, max {max(values):.1f} ms "
                    f"(n={len(values)}, load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
