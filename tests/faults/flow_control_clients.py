"""The clients of the flow-control chaos test (test_flow_control_chaos.py), each a process of its
own on the test's PostgreSQL store (``PROCFLOW_DATABASE_URL``, ``PROCFLOW_SECRET_KEY``).

``starter SEED SECONDS``: starts runs of ``limited`` (through the Python API, as ``procflow
start`` does) over the keys of :data:`KEYS` for SECONDS, one every 80-300 ms; a tenth of them
fail at their ``check`` step (and so hold their place until cancelled).

``canceller SEED SECONDS STOP``: cancels a random run not ended yet (queued or active) every
~0.3 s for SECONDS, and every failed run it finds (a failed run holds its place: someone must
cancel it for the key's queue to move on), until the file STOP exists.

Each prints one line at its end: ``starts N`` / ``cancels N M`` (M: cancels refused because the
run had ended meanwhile, a race the test provokes on purpose).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import psycopg

from procflow.errors import RunStateError
from procflow.runtime.engine import Engine

FLOW = "limited"
KEYS = ("a", "a", "a", "b", "b", "c", "d")  # "a" is always queued, "d" seldom


def engine() -> Engine:
    return Engine(os.environ["PROCFLOW_DATABASE_URL"], environ=dict(os.environ))


def starter(seed: int, seconds: float) -> None:
    rng = random.Random(seed)
    eng = engine()
    starts = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        inputs = {
            "k": rng.choice(KEYS),
            "fail": rng.random() < 0.1,
            "nap": f"{rng.randint(50, 400)}ms",
        }
        eng.start_flow(FLOW, inputs)
        starts += 1
        time.sleep(rng.uniform(0.08, 0.3))
    eng.close()
    print(f"starts {starts}", flush=True)


def canceller(seed: int, seconds: float, stop: Path) -> None:
    rng = random.Random(seed)
    eng = engine()
    cancels = refused = 0
    until = time.monotonic() + seconds
    with psycopg.connect(os.environ["PROCFLOW_DATABASE_URL"], autocommit=True) as conn:
        while not stop.exists():
            time.sleep(rng.uniform(0.1, 0.5))
            rows = conn.execute(
                "SELECT id, status FROM runs WHERE name=%s AND status IN "
                "('running', 'waiting', 'failed') ORDER BY id",
                (FLOW,),
            ).fetchall()
            chosen = [run_id for run_id, status in rows if status == "failed"]
            live = [run_id for run_id, status in rows if status != "failed"]
            if live and time.monotonic() < until:
                chosen.append(rng.choice(live))
            for run_id in chosen:
                try:
                    eng.cancel(run_id)
                    cancels += 1
                except RunStateError:
                    refused += 1  # it ended between the query and the cancel
    eng.close()
    print(f"cancels {cancels} {refused}", flush=True)


def main(argv: list[str]) -> None:
    role, seed, seconds, *rest = argv
    if role == "starter":
        starter(int(seed), float(seconds))
    elif role == "canceller":
        canceller(int(seed), float(seconds), Path(rest[0]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
