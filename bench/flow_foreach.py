"""Benchmark: one flow run whose ``for_each`` walks 1,000 items, one trivial action each.

A temporary project holds a flow with a single ``for_each`` over its ``items`` input; the body is
one action step, in two variants:

- **connector**: a project connector (``connectors/bench/``) whose action returns ``{"n": item}``;
- **log.write**: the built-in ``log.write`` with ``message: "item {{ item }}"``.

Each action attempt is its own committed transition, so the run takes ~1,000 commits, each saving
the run's state (the iteration scopes done so far included). The store is a fresh virtual-clock
SQLite file (WAL, ``synchronous=NORMAL``) per repetition; with ``--pg ADMIN_URL`` (or
``PROCFLOW_BENCH_PG`` set) a fresh PostgreSQL database next to it too. Timed: from ``start_flow``
until ``engine.work()`` has returned (in-process, one engine), after the flow was deployed and
compiled. Checked: the run is ``completed`` and its ``each`` binding holds 1,000 iteration
scopes. Each case runs ``--repeat`` times (3); the median is reported.

Run: ``.venv/bin/python bench/flow_foreach.py [--items 1000] [--repeat 3]
[--pg postgresql://postgres@127.0.0.1:5432/postgres] [--profile]``.
``--profile`` runs one SQLite repetition per variant under cProfile and prints the top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaleout import BENCH_KEY, drop_database, fresh_database

DB_NAME = "procflow_bench_foreach"

MANIFEST = """\
connector: bench
description: A trivial action for benchmarks.
actions:
  echo:
    args:
      n: { type: integer, required: true }
    result:
      n: { type: integer }
"""

CONNECTOR = '''\
"""Returns its argument."""


def echo(ctx, n):
    return {"n": n}
'''

BODIES = {
    "connector": '{ bench.echo: { n: "{{ item }}" } }',
    "log.write": '{ log.write: { message: "item {{ item }}" } }',
}


def flow_text(body: str) -> str:
    return (
        "flow: foreach-bench\n"
        "inputs:\n"
        "  items: { type: array, required: true }\n"
        "steps:\n"
        "  - each:\n"
        '      for_each: "{{ items }}"\n'
        "      steps:\n"
        f"        - one: {body}\n"
    )


def make_project(root: Path, variant: str) -> Path:
    project = root / f"project-{variant.replace('.', '-')}"
    connector = project / "connectors" / "bench"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text(MANIFEST)
    (connector / "__init__.py").write_text(CONNECTOR)
    path = project / "foreach.flow.yaml"
    path.write_text(flow_text(BODIES[variant]))
    return path


def one_run(
    url: str, flow: Path, items: int, profiler: cProfile.Profile | None = None
) -> tuple[float, int, int, str]:
    """(seconds, transitions, len(each), status) of one run on the fresh store at ``url``."""
    from procflow.runtime.engine import Engine

    environ = {**os.environ, "PROCFLOW_SECRET_KEY": BENCH_KEY}
    engine = Engine.virtual(url, project_dir=str(flow.parent), environ=environ)
    try:
        engine.deploy(str(flow))
        engine.latest_flow("foreach-bench")  # compiled and cached: not in the timing
        values = list(range(items))
        if profiler is not None:
            profiler.enable()
        started = time.perf_counter()
        run_id = engine.start_flow("foreach-bench", {"items": values})
        transitions = engine.work()
        elapsed = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
        shown = engine.show(run_id, history=1)
        each = shown["bindings"].get("each") or []
        return elapsed, transitions, len(each), str(shown["status"])
    finally:
        engine.close()


def close_pool(url: str) -> None:
    """procflow keeps a process-wide connection pool per PostgreSQL URL: close it before the
    database is dropped (each repetition has its own database name, so no pool is reused)."""
    from procflow.store import pg

    found = pg._pools.pop(url, None)
    if found is not None:
        found.close()


def print_profile(profiler: cProfile.Profile, top: int) -> None:
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
        print(f"--- top {top} by {key} ---")
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1000, help="for_each items (1,000)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per case (3)")
    parser.add_argument(
        "--pg",
        metavar="ADMIN_URL",
        default=os.environ.get("PROCFLOW_BENCH_PG"),
        help="also on PostgreSQL: a fresh database next to ADMIN_URL (env PROCFLOW_BENCH_PG)",
    )
    parser.add_argument("--profile", action="store_true", help="one SQLite run under cProfile")
    parser.add_argument("--top", type=int, default=25, help="profile entries to print")
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgresql"] if args.pg else [])
    rows: list[tuple[str, str, float, float, int, int, str]] = []
    with tempfile.TemporaryDirectory(prefix="procflow-foreach-") as tmp:
        root = Path(tmp)
        for variant in BODIES:
            flow = make_project(root, variant)
            if args.profile:
                profiler = cProfile.Profile()
                url = f"sqlite:///{root / f'profile-{variant}.db'}"
                secs, _, _, _ = one_run(url, flow, args.items, profiler)
                print(f"=== {variant}: {secs:.2f} s under cProfile")
                print_profile(profiler, args.top)
                continue
            for backend in backends:
                times: list[float] = []
                for rep in range(args.repeat):
                    db_name = f"{DB_NAME}_{variant.replace('.', '_')}_{rep}"
                    if backend == "postgresql":
                        url = fresh_database(args.pg, db_name)
                    else:
                        url = f"sqlite:///{root / f'{variant}-{rep}.db'}"
                    try:
                        secs, transitions, length, status = one_run(url, flow, args.items)
                    finally:
                        if backend == "postgresql":
                            close_pool(url)
                            drop_database(args.pg, db_name)
                    if status != "completed" or length != args.items:
                        sys.exit(
                            f"FAILED {backend}/{variant}: status {status}, "
                            f"len(each) = {length} (expected completed, {args.items})"
                        )
                    times.append(secs)
                wall = statistics.median(times)
                spread = ", ".join(f"{t:.2f}" for t in times)
                rows.append(
                    (
                        backend,
                        variant,
                        wall,
                        args.items / wall,
                        transitions,
                        length,
                        f"{status} [{spread}]",
                    )
                )
    if args.profile:
        return
    print(f"for_each over {args.items} items, one action per iteration (median of {args.repeat})")
    header = (
        f"{'backend':<11}{'body':<11}{'wall s':>8}{'iter/s':>9}{'commits':>9}{'len':>6}  status"
    )
    print(header)
    print("-" * len(header))
    for backend, variant, wall, rate, transitions, length, status in rows:
        print(
            f"{backend:<11}{variant:<11}{wall:>8.2f}{rate:>9,.0f}{transitions:>9}{length:>6}"
            f"  {status}"
        )
    print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
