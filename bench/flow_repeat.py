"""Benchmark: one flow run whose ``repeat`` polls 100,000 times; the cost of an iteration must
not grow with the iterations before it.

The flow's ``repeat`` runs one ``set`` step per iteration and polls every second on a virtual
clock until the iteration count is reached; each iteration is one timer firing, one claim of the
run and one commit (its scope is written as a row of its own). Timed: ``engine.advance("1s")``
per iteration, in CPU time, in blocks of ``--block`` iterations at the start (after one block of
warm-up), the middle and the end of the loop; a block's figure is its fastest of 20 slices, since
other processes on a shared machine only ever add time. The end block stops one iteration short:
the last iteration also binds the loop's list of all iteration scopes, timed on its own.
Checked: the run completed and bound every iteration. The three figures must be flat within 20 %
(before the fix an iteration read every earlier iteration's scope: 3.4 ms at first, 128 ms at
10,800).

Run: ``.venv/bin/python bench/flow_repeat.py [--iterations 100000] [--block 1000]
[--pg postgresql://postgres@127.0.0.1:5432/postgres]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaleout import BENCH_KEY, drop_database, fresh_database

DB_NAME = "procflow_bench_repeat"

FLOW = """\
flow: repeat-bench
inputs:
  iterations: { type: integer, required: true }
steps:
  - poll:
      repeat: { every: 1s, max: 1000000, until: "{{ tick.n >= iterations }}" }
      steps:
        - tick: { set: { n: "{{ ((now() - timestamp(run.started_at)) / 1s) | int + 1 }}" } }
  - after: { set: { count: "{{ poll | length }}" } }
"""


def timed_block(engine: object, size: int, parts: int = 20) -> float:
    """CPU seconds per iteration over ``size`` iterations (one clock step each): the fastest of
    ``parts`` equal slices (SQLite runs in this process: its work is counted)."""
    advance = engine.advance  # type: ignore[attr-defined]
    per_slice = max(size // parts, 1)
    costs = []
    for _ in range(parts):
        started = time.process_time()
        for _ in range(per_slice):
            advance("1s")
        costs.append((time.process_time() - started) / per_slice)
    return min(costs)


def one_run(url: str, flow: Path, iterations: int, block: int) -> dict[str, float]:
    from procflow.runtime.engine import Engine

    engine = Engine.virtual(url, environ={**os.environ, "PROCFLOW_SECRET_KEY": BENCH_KEY})
    try:
        engine.deploy(str(flow))
        run_id = engine.start_flow("repeat-bench", {"iterations": iterations})
        engine.work()  # iteration 1
        done = 1
        figures: dict[str, float] = {}
        middle = iterations // 2 - block // 2
        end = iterations - 1 - block
        # "start" begins after one block: the first iterations warm caches (the compiled flow,
        # SQLite's pages), which is not what an iteration costs
        for name, at in (("start", 1 + block), ("middle", middle), ("end", end)):
            for _ in range(at - done):
                engine.advance("1s")
            figures[name] = timed_block(engine, block)
            done = at + block // 20 * 20
        for _ in range(iterations - 1 - done):
            engine.advance("1s")
        started = time.perf_counter()
        engine.advance("1s")  # the last iteration, and the loop's list bound
        figures["last"] = time.perf_counter() - started
        shown = engine.show(run_id, history=0)
        count = (shown["bindings"].get("after") or {}).get("count")
        if shown["status"] != "completed" or count != iterations:
            sys.exit(f"FAILED: status {shown['status']}, {count} iterations bound")
        return figures
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=100_000, help="iterations (100,000)")
    parser.add_argument("--block", type=int, default=1000, help="iterations per sample (1,000)")
    parser.add_argument(
        "--pg",
        metavar="ADMIN_URL",
        default=os.environ.get("PROCFLOW_BENCH_PG"),
        help="also on PostgreSQL: a fresh database next to ADMIN_URL (env PROCFLOW_BENCH_PG)",
    )
    args = parser.parse_args()
    if args.iterations < 5 * args.block + 2:
        sys.exit("--iterations must be at least 5 blocks (and 2) long")
    backends = ["sqlite"] + (["postgresql"] if args.pg else [])
    print(f"repeat of {args.iterations:,} iterations, CPU ms per iteration over {args.block:,}")
    print(f"{'backend':<11}{'start':>8}{'middle':>8}{'end':>8}{'spread':>8}  last iteration")
    with tempfile.TemporaryDirectory(prefix="procflow-repeat-") as tmp:
        flow = Path(tmp) / "repeat.flow.yaml"
        flow.write_text(FLOW)
        for backend in backends:
            if backend == "postgresql":
                url = fresh_database(args.pg, DB_NAME)
            else:
                url = f"sqlite:///{Path(tmp) / 'repeat.db'}"
            try:
                f = one_run(url, flow, args.iterations, args.block)
            finally:
                if backend == "postgresql":
                    from procflow.store import pg

                    found = pg._pools.pop(url, None)
                    if found is not None:
                        found.close()
                    drop_database(args.pg, DB_NAME)
            samples = [f["start"], f["middle"], f["end"]]
            spread = max(samples) / min(samples) - 1
            print(
                f"{backend:<11}{f['start'] * 1000:>8.2f}{f['middle'] * 1000:>8.2f}"
                f"{f['end'] * 1000:>8.2f}{spread:>8.0%}  {f['last']:.2f} s (binds the list)"
            )
    print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
