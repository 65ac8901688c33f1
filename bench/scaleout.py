"""Benchmark: the 10-step delegate chain on one PostgreSQL with 1, 2 and 4 worker processes.

For each configuration and round a fresh database (``procflow_bench_<w>w<c>c_<round>``) gets
the project of ``bench/throughput.py`` (ten trivial delegate steps per run, each its own committed
transition) and N trigger records, whose creates start N runs. The runs are created *held*: a
lease of a fictitious owner, far in the future, so no worker can claim them yet. Then the
``procflow worker`` processes start (long-running, not ``--until-idle``), reach their idle
``LISTEN``, and the benchmark releases every lease in one statement with a ``NOTIFY``: the clock
starts there and stops when a poll of the store (every 20 ms) sees N completed runs. Worker
start-up is therefore not in the figure; the workers are stopped with SIGTERM afterwards.

Target (issue 3/5, this 2-core machine): 2 workers >= 1.5x one worker; one worker >= 10x DBOS
3.4 on the same PostgreSQL (measured here: ~25 runs/s sequential, ~37 batched).

Run: ``.venv/bin/python bench/scaleout.py [--n 3000] [--workers 1,2,4] [--concurrency 1]
[--url postgresql://postgres@127.0.0.1:5432/postgres]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import STEPS, create_records, make_project, procflow_bin, worker_env

DEFAULT_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_KEY = "procflow-benchmark-secret-key-0123456789abcdef"
DBOS_SEQUENTIAL = 25.0  # runs/s of DBOS 3.4 on this machine's PostgreSQL (issue 3/5)
HOLDER = "bench-holder"


def db_url(admin: str, name: str) -> str:
    base, _, _ = admin.rpartition("/")
    return f"{base}/{name}"


def fresh_database(admin: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return db_url(admin, name)


def drop_database(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup(url: str, root: Path, n: int, env: dict[str, str]) -> tuple[str, float]:
    """Schema, project, deploy, and N runs held by a fictitious lease; returns (project, s)."""
    intent = make_project(root)
    project = str(intent.parent)
    run = [*procflow_bin()]
    subprocess.run([*run, "db", "init", "--db", url], check=True, capture_output=True, env=env)
    subprocess.run(
        [*run, "deploy", str(intent), "--db", url, "--project", project],
        check=True,
        capture_output=True,
        env=env,
    )
    import psycopg

    os.environ["PROCFLOW_SECRET_KEY"] = env["PROCFLOW_SECRET_KEY"]
    took = create_records(url, project, n)
    with psycopg.connect(url, autocommit=True) as conn:
        # No worker runs yet: hold every run, so none can start before the clock does.
        conn.execute(
            "UPDATE runs SET lease_owner=%s, lease_until=9000000000000000 WHERE status='running'",
            (HOLDER,),
        )
    return project, took


def completed(conn: Any) -> int:
    row = conn.execute("SELECT count(*) FROM runs WHERE status='completed'").fetchone()
    return int(row[0])


def measure(
    admin: str, workers: int, concurrency: int, n: int, root: Path, env: dict[str, str]
) -> dict[str, float]:
    import psycopg

    name = f"procflow_bench_{workers}w{concurrency}c_{root.name}"  # new per round: the pool
    # of this process keeps connections to a database by URL
    url = fresh_database(admin, name)
    try:
        project, _ = setup(url, root / name, n, env)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cmd = [*procflow_bin(), "worker", "--db", url, "--project", project]
        cmd += ["--concurrency", str(concurrency)]
        procs = [
            subprocess.Popen(
                [*cmd, "--id", f"bench-{i}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
            )
            for i in range(workers)
        ]
        with psycopg.connect(url, autocommit=True) as conn:
            # Wait until every worker (thread) listens: it then sleeps in LISTEN, idle.
            deadline = time.monotonic() + 30
            listeners = workers * concurrency
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname=current_database() "
                    "AND query LIKE 'LISTEN%%'"
                ).fetchone()
                if row is not None and row[0] >= listeners:
                    break
                if any(p.poll() is not None for p in procs):
                    sys.exit(f"a worker exited early: {procs[0].stderr}")
                time.sleep(0.05)
            else:
                sys.exit("the workers did not reach their idle LISTEN within 30 s")
            time.sleep(0.3)
            started = time.perf_counter()
            with conn.transaction():
                conn.execute("UPDATE runs SET lease_owner=NULL, lease_until=NULL")
                conn.execute("SELECT pg_notify('procflow_wakeup', '')")
            while completed(conn) < n:
                time.sleep(0.02)
                if time.perf_counter() - started > 600:
                    sys.exit(f"timed out: {completed(conn)} of {n} runs completed")
            elapsed = time.perf_counter() - started
            statuses = dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY status"))
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            _, err = p.communicate(timeout=30)
            if p.returncode != 0:
                sys.exit(f"worker failed ({p.returncode}): {err.decode()[-2000:]}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if statuses != {"completed": n}:
            sys.exit(f"FAILED: expected {n} completed runs, got {statuses}")
        return {"elapsed": elapsed, "cpu": cpu}
    finally:
        drop_database(admin, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="runs per configuration (3,000)")
    parser.add_argument("--workers", default="1,2,4", help="worker process counts (1,2,4)")
    parser.add_argument("--concurrency", default="1", help="threads per worker, e.g. 1,2")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians reported (3)")
    parser.add_argument(
        "--url",
        default=os.environ.get("PROCFLOW_BENCH_PG", DEFAULT_ADMIN),
        help="an administrative PostgreSQL URL (databases are created next to it)",
    )
    args = parser.parse_args()
    n = args.n
    counts = [int(w) for w in args.workers.split(",")]
    threads = [int(c) for c in args.concurrency.split(",")]
    configs = [(w, c) for c in threads for w in counts]
    rates: dict[tuple[int, int], list[float]] = {k: [] for k in configs}
    with tempfile.TemporaryDirectory(prefix="procflow-scaleout-") as tmp:
        root = Path(tmp)
        env = worker_env(root)
        env.setdefault("PROCFLOW_SECRET_KEY", BENCH_KEY)
        for round_ in range(1, args.repeat + 1):
            for workers, concurrency in configs:  # rounds interleave: drifting load hits all
                got = measure(args.url, workers, concurrency, n, root / str(round_), env)
                rate = n / got["elapsed"]
                rates[workers, concurrency].append(rate)
                print(
                    f"round {round_} workers={workers} concurrency={concurrency}: "
                    f"{rate:,.0f} runs/s ({got['elapsed']:.2f} s, worker CPU {got['cpu']:.1f} s, "
                    f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)",
                    flush=True,
                )
    base = statistics.median(rates[configs[0]])
    for workers, concurrency in configs:
        rate = statistics.median(rates[workers, concurrency])
        print(
            f"RESULT workers={workers} concurrency={concurrency}: {rate:,.0f} runs/s, "
            f"{rate * STEPS:,.0f} transitions/s, x{rate / base:.2f} vs "
            f"workers={configs[0][0]} concurrency={configs[0][1]}, "
            f"x{rate / DBOS_SEQUENTIAL:.0f} DBOS sequential "
            f"(median of {args.repeat}, N={n} runs x {STEPS} steps)"
        )


if __name__ == "__main__":
    main()
