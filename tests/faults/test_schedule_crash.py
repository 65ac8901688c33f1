"""Exactly one run per slot, on both store backends, with real worker processes: a worker killed
(SIGKILL) after firing a slot and before committing, and two workers firing the same due slots at
once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from projects import write

from procflow.runtime.engine import Engine

FLOW = """\
flow: tick{i}
trigger:
  schedule: {{ every: 1h }}
steps:
  - s: {{ set: {{ x: 1 }} }}
"""


def _setup(tmp_path: Path, db_url: str, flows: int) -> None:
    engine = Engine.virtual(db_url)
    try:
        for i in range(flows):
            engine.deploy(write(tmp_path / f"tick{i}.flow.yaml", FLOW.format(i=i)))
        with engine.store.tx() as tx:  # an hour on, with no worker running meanwhile
            tx.meta_set("clock_now", str(engine.now() + 3_600_000_000))
    finally:
        engine.close()


def _worker(db_url: str, db_env: dict[str, str], faults: str = "") -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    env.update(db_env, PROCFLOW_DATABASE_URL=db_url)
    if faults:
        env["PROCFLOW_FAULTS"] = faults
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def _slots(db_url: str) -> Counter[tuple[str, int]]:
    engine = Engine(db_url, create=False)
    try:
        return Counter(
            (r.state["schedule"]["name"], int(r.state["schedule"]["slot"]))
            for r in engine.list_runs()
            if r.state.get("schedule")
        )
    finally:
        engine.close()


def test_a_worker_killed_between_firing_and_commit_starts_no_second_run(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    _setup(tmp_path, db_url, 1)
    assert _worker(db_url, db_env, "slot_fired=1") == -9
    assert _slots(db_url) == Counter(), "nothing of the killed firing was committed"
    assert _worker(db_url, db_env) == 0
    assert _worker(db_url, db_env) == 0
    assert _slots(db_url) == Counter({("tick0", 3_600_000_000 + _epoch()): 1})


def test_two_workers_fire_each_due_slot_once(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    _setup(tmp_path, db_url, 150)  # more than one group of firings: they interleave
    with ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(lambda _: _worker(db_url, db_env), range(2)))
    assert codes == [0, 0]
    slots = _slots(db_url)
    assert len(slots) == 150 and set(slots.values()) == {1}


def _epoch() -> int:
    from procflow.runtime.clock import VIRTUAL_EPOCH, from_iso

    return from_iso(VIRTUAL_EPOCH)
