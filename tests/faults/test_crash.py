"""The crash test: a worker killed with SIGKILL inside a step loses nothing and doubles nothing.

Three runs of ``crash_project/app.intent`` (first → flaky, which fails once and recovers by retry →
doomed, which exhausts its retry and routes by onError → recordFailure → last → done) are brought
to a phase, then a real ``procflow worker --until-idle`` runs with ``PROCFLOW_FAULTS`` set so it
kills itself (SIGKILL: nothing flushed, no cleanup) at a fault point on its n-th hit. A fresh
worker, then ``clock advance``, take over once the dead worker's short lease has expired.

Afterwards every run has the outcome it has without any crash: the same record fields, the very
same history (gap-free seq 1..n, each committed transition exactly once, no step lost), and the
delegates' side-effect log shows every attempt executed at least once (at-least-once delivery), with
the same idempotency key on a replay.
"""

from __future__ import annotations

import shutil
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest
from crash_stores import (
    CaseStores,
    Db,
    jump_clock,
    kill_worker_at,
    procflow,
    wait_for_leases_to_expire,
)

from procflow.runtime.engine import Engine

PROJECT = Path(__file__).parent / "crash_project"
RUNS = 3

# (type, step, attempt, seconds after the start on the virtual clock) of every run, crash or not.
EXPECTED = [
    ("run.started", None, None, 0),
    ("step.started", "first", 1, 0),
    ("step.completed", "first", 1, 0),
    ("step.started", "flaky", 1, 0),
    ("attempt.failed", "flaky", 1, 0),
    ("retry.scheduled", "flaky", 2, 0),
    ("timer.fired", "flaky", 2, 10),
    ("step.started", "flaky", 2, 10),
    ("step.completed", "flaky", 2, 10),
    ("step.started", "doomed", 1, 10),
    ("attempt.failed", "doomed", 1, 10),
    ("retry.scheduled", "doomed", 2, 10),
    ("timer.fired", "doomed", 2, 30),
    ("step.started", "doomed", 2, 30),
    ("attempt.failed", "doomed", 2, 30),
    ("step.failed", "doomed", 2, 30),
    ("step.started", "recordFailure", 1, 30),
    ("step.completed", "recordFailure", 1, 30),
    ("step.started", "last", 1, 30),
    ("step.completed", "last", 1, 30),
    ("step.started", "done", 1, 30),
    ("step.completed", "done", 1, 30),
    ("run.completed", None, None, 30),
]
EXPECTED_RECORD = {
    "a": "first",
    "b": "flaky-2",  # flaky's first attempt wrote flaky-1: discarded with that attempt
    "c": "doomed-2",  # the final attempt's write commits with the onError route
    "failureMessage": "doomed: attempt 2 failed",
    "outcome": "done",
}
DELEGATE_ATTEMPTS = {("first", 1), ("flaky", 1), ("flaky", 2), ("doomed", 1), ("doomed", 2),
                     ("last", 1)}  # fmt: skip

# Where the faulty worker starts (phase) and where the kill lands (point, n-th hit). The worker
# works one step of every run per round and commits each round at once (group commit):
#   start: round 1 = first (delegate hits 1-3, commit 1); round 2 = flaky attempt 1 (hits 4-6,
#          commit 2); then every run waits on its retry.
#   retry: (clock past flaky's retry) round 1 = flaky attempt 2, a retry attempt (hits 1-3,
#          commit 1); round 2 = doomed attempt 1 (hits 4-6, commit 2).
#   error: (clock past doomed's retry) round 1 = doomed's final attempt, routed by onError (hits
#          1-3, commit 1); recordFailure (commit 2); last (hits 4-6, commit 3); done (commit 4).
CASES = [
    ("start", "before_delegate", 1),  # run 1's first step, before its delegate
    ("error", "before_delegate", 1),  # the final attempt, before its delegate
    ("start", "after_delegate", 5),  # run 2's flaky attempt 1 ran and failed, not committed
    ("retry", "after_delegate", 1),  # run 1's retry attempt ran and succeeded, not committed
    ("retry", "before_commit", 1),  # every run's successful retry attempt, uncommitted
    ("error", "before_commit", 1),  # every run's final attempt and its onError route, uncommitted
    ("start", "after_commit", 1),  # first committed; the leases still held by the dead worker
    ("retry", "after_commit", 2),  # doomed attempt 1 committed (retry scheduled), then killed
]


def prepare(tmp_path: Path, db: Db, phase: str) -> Path:
    """A store with RUNS runs brought to ``phase`` by an in-process engine (no faults)."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    engine = Engine.virtual(db.url, environ=db.env)
    try:
        engine.deploy(str(project / "app.intent"))
        for i in range(RUNS):
            engine.create_record("Job", {"title": f"job {i + 1}"})
        if phase in ("retry", "error"):
            engine.work(until_idle=True)  # every run waits on flaky's retry, due at +10s
        if phase == "error":
            engine.advance("PT10S")  # flaky recovered; every run waits on doomed's retry (+30s)
    finally:
        engine.close()
    jump_clock(db, {"start": 0, "retry": 10, "error": 20}[phase])
    return project


def effects(project: Path) -> list[tuple[str, str, int, str, int]]:
    """(run, step, attempt, idempotency key, pid) per executed delegate attempt."""
    path = project / "effects.log"
    lines = path.read_text().splitlines() if path.exists() else []
    out = []
    for line in lines:
        run, step, attempt, key, pid = line.split()
        out.append((run, step, int(attempt), key, int(pid)))
    return out


@dataclass
class Crash:
    project: Path
    db: Db
    before: list[tuple[str, str, int, str, int]]  # effects of the phase's preparation
    during: list[tuple[str, str, int, str, int]]  # effects of the worker that was killed
    crashed_pid: int
    leased: int  # runs whose lease the dead worker still held: the next worker takes them over


def crash_and_recover(tmp_path: Path, db: Db, phase: str, point: str, hit: int) -> Crash:
    project = prepare(tmp_path, db, phase)
    before = effects(project)
    crashed_pid, leased = kill_worker_at(db, point, hit)
    during = effects(project)[len(before) :]
    wait_for_leases_to_expire(db)
    recovery = procflow(db, "worker", "--until-idle")
    assert recovery.returncode == 0, recovery.stderr
    advanced = procflow(db, "clock", "advance", "PT1H")
    assert advanced.returncode == 0, advanced.stderr
    return Crash(project, db, before, during, crashed_pid, leased)


Case = tuple[str, str, str, int]  # backend, phase, point, hit


@pytest.fixture(scope="module")
def crashes(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    backend_envs: dict[str, dict[str, str]],
) -> dict[Case, Future[Crash]]:
    """Every selected case on every selected backend, run side by side: they share nothing but
    the CPU, and mostly wait."""
    selected = {
        tuple(i.callspec.params[k] for k in ("backend", "phase", "point", "hit"))
        for i in request.session.items
        if getattr(i, "originalname", "") == "test_a_killed_worker_loses_and_duplicates_nothing"
    }
    stores = CaseStores(request, backend_envs, any(c[0] == "postgresql" for c in selected))
    out: dict[Case, Future[Crash]] = {}
    for backend in ("postgresql", "sqlite"):  # PostgreSQL's first: its cases take longer
        for case in CASES:
            if (backend, *case) in selected:
                tmp_path = tmp_path_factory.mktemp("crash")
                db = stores.store(backend, tmp_path)
                out[(backend, *case)] = stores.submit(crash_and_recover, tmp_path, db, *case)
    return out


@pytest.mark.parametrize(
    ("phase", "point", "hit"), CASES, ids=[f"{p}-{f}={n}" for p, f, n in CASES]
)
def test_a_killed_worker_loses_and_duplicates_nothing(
    crashes: dict[Case, Future[Crash]], backend: str, phase: str, point: str, hit: int
) -> None:
    crash = crashes[(backend, phase, point, hit)].result()
    assert all(pid == crash.crashed_pid for *_, pid in crash.during)
    # Killed mid-batch, it held every run's lease; killed after committing waits, none.
    assert crash.leased == (0 if (phase, point) == ("retry", "after_commit") else RUNS)

    engine = Engine(crash.db.url, environ=crash.db.env)
    try:
        assert engine.work(until_idle=True) == 0, "work was left over"
        runs = engine.list_runs()
        assert len(runs) == RUNS
        for run in runs:
            shown = engine.show(run.id)
            assert shown["status"] == "completed", shown
            history = shown["history"]
            assert [h["seq"] for h in history] == list(range(1, len(history) + 1))
            got = [(h["type"], h.get("step"), h.get("attempt")) for h in history]
            assert got == [e[:3] for e in EXPECTED], f"run {run.id}"
            # Committed exactly once: one step.completed per step visit (no duplicate, none lost).
            completed = Counter(h["step"] for h in history if h["type"] == "step.completed")
            assert completed == {"first": 1, "flaky": 1, "recordFailure": 1, "last": 1, "done": 1}
            # Nothing moved in time: each entry at the virtual instant it has without a crash.
            t0 = run.started_at
            assert [engine_seconds(h["at"], t0) for h in history] == [e[3] for e in EXPECTED]
            assert record_of(engine, run.record_id) == EXPECTED_RECORD
        # Nothing left behind: no token, timer, var or lease.
        conn = engine.store.conn
        for table in ("tokens", "timers", "vars"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        held = conn.execute("SELECT count(*) FROM runs WHERE lease_owner IS NOT NULL").fetchone()
        assert held == (0,)
    finally:
        engine.close()

    # The outside world's view: every attempt executed at least once, none that should not be.
    executed = effects(crash.project)
    per_run: dict[str, Counter[tuple[str, int]]] = {}
    keys: dict[tuple[str, str], set[str]] = {}
    for run_id, step, attempt, key, _pid in executed:
        per_run.setdefault(run_id, Counter())[(step, attempt)] += 1
        keys.setdefault((run_id, step), set()).add(key)
    assert len(per_run) == RUNS
    for counts in per_run.values():
        assert set(counts) == DELEGATE_ATTEMPTS
    assert all(len(k) == 1 for k in keys.values()), "an idempotency key changed across attempts"
    replays = len(executed) - RUNS * len(DELEGATE_ATTEMPTS)
    if point in ("after_delegate", "before_commit"):
        assert replays >= 1, "the killed worker's executed attempt must run again"
        assert crash.during, "the killed worker executed nothing"
    if point == "after_commit" or (point == "before_delegate" and hit == 1):
        assert replays == 0, "an attempt ran again that had nothing to replay"


def engine_seconds(at: str, t0: int) -> int:
    from procflow.expr import parse_timestamp
    from procflow.runtime.clock import from_datetime

    return (from_datetime(parse_timestamp(at)) - t0) // 1_000_000


def record_of(engine: Engine, id_: int | None) -> dict[str, object]:
    assert id_ is not None
    record = engine.get_record("Job", id_)
    return {k: record[k] for k in EXPECTED_RECORD}
