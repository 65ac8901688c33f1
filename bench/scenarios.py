"""Benchmark: ``procflow test`` over the examples' scenarios, 100 of them, on one core.

The examples' ``*.test.yaml`` files are loaded and checked once (timed apart), then their
scenarios are run round-robin until 100 have run, one after another in this process (no pool),
each on a fresh in-memory store with a virtual clock, exactly as ``procflow test`` runs them.
The process is pinned to one CPU first (``os.sched_setaffinity``, where the OS has it).

Reported: the load time, the run time of the 100, per scenario mean, p50, p90 and max, and
the slowest scenario's name. Target: the 100 in under 5 s. The figures are wall-clock: other load
on the machine shows in them (the load average is printed).

Run: ``.venv/bin/python bench/scenarios.py [--count 100]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from procflow.testing.runner import Result

ROOT = Path(__file__).resolve().parents[1]
# This folder holds http.py: first on sys.path it would stand in for the standard library's
# http module, which the slack connector imports (through httpx).
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    del sys.path[0]
TARGET_SECONDS = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    began = time.perf_counter()
    from procflow.testing.runner import find_test_files, load_all, run_jobs

    imported = time.perf_counter()
    tests, problems = load_all(find_test_files([str(ROOT / "examples")]))
    if problems:
        print("\n".join(p.format() for p in problems), file=sys.stderr)
        return 2
    every = [(t.path, i) for t in tests for i in range(len(t.scenarios))]
    jobs = [every[n % len(every)] for n in range(args.count)]
    loaded = time.perf_counter()
    results = run_jobs(jobs, workers=1)
    done = time.perf_counter()
    return _report(results, imported - began, loaded - imported, done - loaded, len(every))


def _report(results: list[Result], imports: float, load: float, run: float, distinct: int) -> int:
    failed = [r for r in results if not r.passed]
    for result in failed[:3]:
        print(f"FAIL {result.name}: {result.failure}")
    times = sorted(r.seconds * 1000 for r in results)
    slowest = max(results, key=lambda r: r.seconds)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"cpus: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}")
    print(f"import procflow.testing: {imports:.2f} s")
    print(f"load + check the examples' test files ({distinct} scenarios): {load * 1000:.0f} ms")
    print(f"{len(results)} scenarios: {run:.2f} s ({'under' if run < TARGET_SECONDS else 'OVER'} "
          f"the {TARGET_SECONDS:g} s target), {len(failed)} failed")  # fmt: skip
    print(
        f"per scenario: mean {statistics.mean(times):.1f} ms, p50 {times[len(times) // 2]:.1f} ms, "
        f"p90 {times[int(len(times) * 0.9)]:.1f} ms, max {times[-1]:.1f} ms ({slowest.name})"
    )
    return 0 if not failed and run < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
