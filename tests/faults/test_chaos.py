"""The chaos test: four worker processes on one PostgreSQL, SIGKILLed at random, lose nothing and
double nothing.

``PROCFLOW_CHAOS_RUNS`` runs (200 in ``make test``, 1,000 in ``make chaos``) of
``chaos_project/app.intent`` (five kinds: clean; a retry; two retries; a step that exhausts its
retry and is routed by onError; a step that exhausts its retry and fails the run — every retry a
real 0.2 s timer on the system clock) are advanced by four ``procflow worker`` processes with
one-second leases (two of them with ``--concurrency 2``), while a driver SIGKILLs a random worker
every ~200 ms and starts a new one in its place. Half of the new workers also carry a fault plan
(``PROCFLOW_FAULTS``) that kills them at a named commit point, so kills land exactly there too.
Runs are created while the killing goes on (wake-ups by NOTIFY). When every run has ended the
killing stops and the workers are stopped with SIGTERM (graceful: exit 0). The workers are forked
from a warm interpreter (chaos_forkserver.py): a fresh one needs ~0.5 s of CPU to start, and five
starts a second would starve this 2-core machine. Any worker exit that is not a kill, and any
traceback in a worker's output (a thread that died), fails the test.

Then: every run has the status and record fields it has without any crash; every history is
gap-free (seq 1..n) and is exactly the expected sequence (no committed transition twice, none
lost; one step.completed per step visit); nothing is left behind (timers, leases, tokens but the
failed runs' failed ones); and the delegates' side-effect log shows every step attempt executed
at least once, none that should not have run, and one idempotency key per step visit. The
figures (kills, re-executed attempts, wall time) are printed (``make chaos`` shows them).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from chaos_fleet import Fleet, FleetPlan

from procflow.runtime.engine import Engine
from procflow.runtime.faults import POINTS

PROJECT = Path(__file__).parent / "chaos_project"
SECRET_KEY = "chaos-test-key-0123456789abcdef0123456789"
RUNS = int(os.environ.get("PROCFLOW_CHAOS_RUNS", "200"))
WORKERS = 4
KILL_EVERY = 0.2  # seconds between kills, on average
LEASE_SECONDS = "1"
# Give up (a clear failure, not a hang) when the runs have not all ended by then.
GIVE_UP_AFTER = float(os.environ.get("PROCFLOW_CHAOS_GIVE_UP", str(60 + RUNS * 0.2)))
KINDS = 5  # see chaos_project/app.intent and custom/__init__.py
FLAKY_FAILURES = {0: 0, 1: 1, 2: 2, 3: 0, 4: 1}

Entry = tuple[str, str | None, int | None]


def expected_history(kind: int) -> list[Entry]:
    """(type, step, attempt) of every history entry of a run of ``kind``, crash or not."""
    out: list[Entry] = [("run.started", None, None)]

    def ok(step: str, attempt: int = 1) -> None:
        out.extend([("step.started", step, attempt), ("step.completed", step, attempt)])

    def fail(step: str, attempt: int) -> None:
        out.extend([("step.started", step, attempt), ("attempt.failed", step, attempt)])

    def retry(step: str, attempt: int) -> None:
        out.extend([("retry.scheduled", step, attempt), ("timer.fired", step, attempt)])

    ok("first")
    for attempt in range(1, FLAKY_FAILURES[kind] + 1):
        fail("flaky", attempt)
        retry("flaky", attempt + 1)
    ok("flaky", FLAKY_FAILURES[kind] + 1)
    ok("route")
    if kind == 3:
        fail("doomed", 1)
        retry("doomed", 2)
        fail("doomed", 2)
        out.append(("step.failed", "doomed", 2))
        ok("recordFailure")
    else:
        ok("fatalOrLast")
    if kind == 4:
        fail("fatal", 1)
        retry("fatal", 2)
        fail("fatal", 2)
        out.extend([("step.failed", "fatal", 2), ("run.failed", "fatal", 2)])
        return out
    ok("last")
    ok("done")
    out.append(("run.completed", None, None))
    return out


def expected_record(kind: int) -> dict[str, Any]:
    return {
        "a": "first",
        "b": f"flaky-{FLAKY_FAILURES[kind] + 1}",  # the failed attempts' writes are discarded
        "c": "doomed-2" if kind == 3 else None,  # onError: the final attempt's write commits
        "failureMessage": "doomed: attempt 2 failed" if kind == 3 else None,
        "outcome": None if kind == 4 else "done",
    }


def expected_attempts(kind: int) -> set[tuple[str, int]]:
    """The delegate attempts (step, attempt) a run of ``kind`` executes."""
    out = {("first", 1)} | {("flaky", a) for a in range(1, FLAKY_FAILURES[kind] + 2)}
    if kind == 3:
        out |= {("doomed", 1), ("doomed", 2)}
    if kind == 4:
        return out | {("fatal", 1), ("fatal", 2)}
    return out | {("last", 1)}


# --- a fresh PostgreSQL database ------------------------------------------------------------


@pytest.fixture
def pg_url(pg_databases: Any) -> Iterator[str]:
    """A new database holding procflow's schema on the test PostgreSQL (tests/conftest.py:
    PROCFLOW_TEST_PG, else the local server or a throwaway cluster), dropped afterwards. The
    chaos test is about PostgreSQL: it runs whatever PROCFLOW_TEST_BACKENDS narrows."""
    url: str = pg_databases.create()
    try:
        yield url
    finally:
        pg_databases.drop(url)


# --- the driver ---------------------------------------------------------------------------


def create_runs(url: str, errors: list[BaseException]) -> None:
    """One record (and so one run) per kind in turn, while the workers are being killed."""
    engine = Engine(url, environ={"PROCFLOW_SECRET_KEY": SECRET_KEY})
    try:
        for i in range(RUNS):
            engine.create_record(
                "Job", {"title": f"job {i + 1}", "lane": "chaos", "kind": i % KINDS}
            )
    except BaseException as exc:
        errors.append(exc)
    finally:
        engine.close()


def ended(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM runs WHERE status IN ('completed', 'failed')"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_workers_killed_at_random_lose_and_duplicate_nothing(pg_url: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    logs = tmp_path / "workers"
    logs.mkdir()
    engine = Engine(pg_url, environ={"PROCFLOW_SECRET_KEY": SECRET_KEY})
    engine.deploy(str(project / "app.intent"))
    engine.close()

    t0 = time.monotonic()
    seed = int(os.environ.get("PROCFLOW_CHAOS_SEED") or random.randrange(1, 1_000_000))
    env = {
        "PROCFLOW_DATABASE_URL": pg_url, "PROCFLOW_SECRET_KEY": SECRET_KEY,
        "PROCFLOW_LEASE_SECONDS": LEASE_SECONDS,
    }  # fmt: skip
    fleet = Fleet(FleetPlan(WORKERS, POINTS, 40, env), logs, seed)
    fleet.start_all()
    errors: list[BaseException] = []
    creator = threading.Thread(target=create_runs, args=(pg_url, errors))
    creator.start()
    done = 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        try:
            while True:
                time.sleep(fleet.random.uniform(0.5, 1.5) * KILL_EVERY)
                fleet.reap()
                done = ended(conn)
                if done == RUNS or errors or time.monotonic() - t0 > GIVE_UP_AFTER:
                    break
                fleet.kill_one()
            creator.join()
            killing = time.monotonic() - t0
        finally:
            stopped = fleet.stop()
            creator.join()
    wall = time.monotonic() - t0
    assert not errors, f"creating the runs failed: {errors[0]!r}"
    assert not fleet.figures.crashes, "a worker died of something else than a kill:\n" + (
        "\n".join(fleet.figures.crashes)
    )
    assert done == RUNS, (
        f"gave up after {GIVE_UP_AFTER:.0f}s: {done} of {RUNS} runs ended "
        f"({fleet.figures.kills} kills, seed {seed}); worker logs in {logs}"
    )
    assert all(code == 0 for _, code in stopped), f"SIGTERM must stop a worker cleanly: {stopped}"
    # A thread that died (the heartbeat, say) does not end its worker: its traceback shows it.
    failed = fleet.tracebacks()
    assert not failed, "\n".join(f"== {name}\n{text[-3000:]}" for name, text in failed.items())

    executed = check_store(pg_url)
    reexecuted = check_effects(project, executed)
    f = fleet.figures
    print(
        f"\nchaos (seed {seed}): {RUNS} runs, {WORKERS} workers, {f.kills} SIGKILLs by the "
        f"driver + {f.fault_kills} at fault points ({f.starts} worker starts), "
        f"{reexecuted} delegate attempts executed again; all ended in {killing:.1f}s "
        f"(wall {wall:.1f}s)"
    )
    assert f.kills + f.fault_kills >= min(RUNS // 20, 20), "too few kills to prove anything"


def check_store(url: str) -> dict[str, int]:
    """Every run's status, history and record as without a crash; returns run id → kind."""
    with psycopg.connect(url) as conn:
        records = {
            int(id_): json.loads(data)
            for id_, data in conn.execute("SELECT id, data FROM records WHERE entity='Job'")
        }
        runs = conn.execute(
            "SELECT id, status, record_id, lease_owner, error FROM runs ORDER BY record_id"
        ).fetchall()
        history: dict[str, list[tuple[int, str, str | None, int | None]]] = {}
        for run_id, seq, type_, step, attempt in conn.execute(
            "SELECT run_id, seq, type, step, attempt FROM history ORDER BY run_id, seq"
        ):
            history.setdefault(run_id, []).append((seq, type_, step, attempt))
        tokens = conn.execute("SELECT run_id, step, state FROM tokens").fetchall()
        (timers,) = conn.execute("SELECT count(*) FROM timers").fetchone() or (None,)
        (vars_,) = conn.execute("SELECT count(*) FROM vars").fetchone() or (None,)

    assert len(records) == RUNS
    assert len(runs) == RUNS, "one run per record, exactly"
    kinds: dict[str, int] = {}
    for run_id, status, record_id, lease_owner, error in runs:
        record = records[record_id]
        kind = record["kind"]
        kinds[run_id] = kind
        assert status == ("failed" if kind == 4 else "completed"), (run_id, kind, error)
        assert lease_owner is None, f"run {run_id} ({status}) still leased to {lease_owner}"
        entries = history[run_id]
        assert [e[0] for e in entries] == list(range(1, len(entries) + 1)), f"gap: {run_id}"
        got = [e[1:] for e in entries]
        assert got == expected_history(kind), f"run {run_id} (kind {kind})"
        completed = Counter(e[2] for e in entries if e[1] == "step.completed")
        assert set(completed.values()) == {1}, f"a step committed twice in run {run_id}"
        assert {k: record.get(k) for k in expected_record(kind)} == expected_record(kind), run_id
    assert timers == 0 and vars_ == 0
    # A failed run keeps its failed token (for `runs retry`); nothing else is left.
    assert sorted((kinds[r], step, state) for r, step, state in tokens) == [
        (4, "fatal", "failed")
    ] * sum(1 for k in kinds.values() if k == 4)
    return kinds


def check_effects(project: Path, kinds: dict[str, int]) -> int:
    """Every step attempt executed at least once, none that should not have; returns how many
    executions were repeats (crash replays)."""
    lines = (project / "effects.log").read_text().splitlines()
    per_run: dict[str, Counter[tuple[str, int]]] = {}
    keys: dict[tuple[str, str], set[str]] = {}
    for line in lines:
        run_id, step, attempt, key, _pid = line.split()
        per_run.setdefault(run_id, Counter())[(step, int(attempt))] += 1
        keys.setdefault((run_id, step), set()).add(key)
    assert set(per_run) == set(kinds)
    for run_id, counts in per_run.items():
        assert set(counts) == expected_attempts(kinds[run_id]), run_id
    assert all(len(k) == 1 for k in keys.values()), "an idempotency key changed across attempts"
    return len(lines) - sum(len(c) for c in per_run.values())
