"""Benchmark: N runs of a 10-step delegate chain through the real worker on SQLite.

A temporary project holds an intent file whose process, triggered by creating an ``Order``
record, runs ten trivial delegate steps in a row (``custom/``), the last routing to ``end``:
ten step transitions per run, each its own committed transition (group commit shares the
fsync of a round). The store is a fresh SQLite file (WAL, ``synchronous=NORMAL``) on the
system clock.

Phases, timed apart:
1. create N trigger records (each create starts its run in the create's transaction; creates
   are grouped 500 to a database transaction, as a bulk import would);
2. ``procflow worker --until-idle`` as a subprocess until every run has completed: the headline
   figure, including the worker's start-up (reported separately too, from an idle worker).

Target (issue 2/5): >= 1,000 runs/s (10,000 transitions/s) on one worker process.
Run: ``.venv/bin/python bench/throughput.py [--n 4000] [--profile]``.
``--profile`` runs phase 2 in-process under cProfile and prints the top entries instead.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = 10
CREATE_GROUP = 500


def intent_text(steps: int) -> str:
    lines = [
        "name: bench",
        "entities:",
        "  - name: Order",
        "    fields:",
        "      - { name: id, type: integer, primaryKey: true, generated: true }",
        "      - { name: title, type: string, required: true, length: 100 }",
        "processes:",
        "  - name: Chain",
        "    trigger: { onCreate: Order }",
        "    steps:",
    ]
    for i in range(1, steps + 1):
        nxt = f"s{i + 1}" if i < steps else "end"
        lines.append(f"      - name: s{i}")
        lines.append("        kind: serviceTask")
        lines.append(f"        args: {{ delegate: Step{i}, next: {nxt} }}")
    return "\n".join(lines) + "\n"


def delegates_text(steps: int) -> str:
    out = ['"""Trivial delegates: each reads the record and returns."""\n']
    for i in range(1, steps + 1):
        out.append(f"\n\ndef Step{i}(ctx):\n    ctx.record['title']\n")
    return "".join(out)


def make_project(root: Path) -> Path:
    project = root / "project"
    (project / "custom").mkdir(parents=True)
    (project / "custom" / "__init__.py").write_text(delegates_text(STEPS))
    path = project / "bench.intent"
    path.write_text(intent_text(STEPS))
    return path


def procflow_bin() -> list[str]:
    exe = Path(sys.executable).with_name("procflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "procflow"]


def create_records(url: str, project: str, n: int) -> float:
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=project)
    try:
        started = time.perf_counter()
        for first in range(0, n, CREATE_GROUP):
            with engine.store.tx():  # nested creates join this transaction
                for i in range(first, min(first + CREATE_GROUP, n)):
                    engine.create_record("Order", {"title": f"order {i}"})
        return time.perf_counter() - started
    finally:
        engine.close()


def count_runs(url: str) -> dict[str, int]:
    from procflow.store.store import Store

    store = Store(url)
    try:
        rows = store.conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        return {str(status): int(count) for status, count in rows}
    finally:
        store.close()


def worker_env(root: Path) -> dict[str, str]:
    """Byte-code caching on, as in any installation (this environment may switch it off), into
    a folder of the benchmark's own rather than the source tree."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    return env


def worker(url: str, project: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``procflow worker --until-idle`` process."""
    cmd = [*procflow_bin(), "worker", "--until-idle", "--db", url, "--project", project]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def profile_work(url: str, project: str, top: int) -> float:
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=project)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    engine.work(until_idle=True)
    profiler.disable()
    elapsed = time.perf_counter() - started
    engine.close()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
        print(f"--- top {top} by {key} ---")
        print(out.getvalue())
    return elapsed


def setup(root: Path, n: int) -> tuple[str, str, float]:
    intent = make_project(root)
    url = f"sqlite:///{root / 'bench.db'}"
    project = str(intent.parent)
    subprocess.run([*procflow_bin(), "db", "init", "--db", url], check=True, capture_output=True)
    subprocess.run(
        [*procflow_bin(), "deploy", str(intent), "--db", url, "--project", project],
        check=True,
        capture_output=True,
    )
    return url, project, create_records(url, project, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4000, help="runs (default 4,000)")
    parser.add_argument("--profile", action="store_true", help="work in-process under cProfile")
    parser.add_argument("--top", type=int, default=30, help="profile entries to print")
    args = parser.parse_args()
    n = args.n
    with tempfile.TemporaryDirectory(prefix="procflow-bench-") as tmp:
        root = Path(tmp)
        url, project, create_s = setup(root, n)
        print(
            f"created {n} records (and started their runs) in {create_s:.2f} s: "
            f"{n / create_s:,.0f} records/s"
        )
        if args.profile:
            elapsed = profile_work(url, project, args.top)
            label = "in-process, under cProfile"
        else:
            idle_db = root / "idle"
            idle_db.mkdir()
            idle_url = f"sqlite:///{idle_db / 'idle.db'}"
            subprocess.run(
                [*procflow_bin(), "db", "init", "--db", idle_url], check=True, capture_output=True
            )
            env = worker_env(root)
            worker(idle_url, project, env)  # warms the byte-code cache
            startup, _ = worker(idle_url, project, env)
            elapsed, cpu = worker(url, project, env)
            label = (
                f"procflow worker --until-idle, start-up {startup:.2f} s included; "
                f"worker CPU {cpu:.2f} s"
            )
        statuses = count_runs(url)
        done = statuses.get("completed", 0)
        if done != n:
            sys.exit(f"FAILED: expected {n} completed runs, got {statuses}")
        transitions = n * STEPS
        load = os.getloadavg()[0]
        print(
            f"RESULT: {n / elapsed:,.0f} runs/s, {transitions / elapsed:,.0f} transitions/s "
            f"(N={n} runs x {STEPS} steps, worker wall {elapsed:.2f} s, {label}; "
            f"load average {load:.2f} on {os.cpu_count()} CPUs)"
        )


if __name__ == "__main__":
    main()
