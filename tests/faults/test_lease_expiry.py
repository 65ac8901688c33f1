"""Lease expiry: a worker frozen mid-step loses its run; its late commit is refused.

Worker A (``procflow worker --until-idle``, one-second leases) starts the one run of the
``Frozen`` process and, inside its first step's delegate, is frozen with SIGSTOP (its heartbeat
thread with it). Its lease expires; worker B takes the run over, executes the step again and
finishes the run. Then A is resumed (SIGCONT): its delegate returns and it commits the step it
ran, a transition that would move the run a second time. The commit is refused: A reports zero
transitions, and the run's history, record and row are exactly as B left them (one step.completed
per step, the record written by B's attempt). The side-effect log shows what happened outside:
A's attempt ran (at-least-once), it just never committed.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from procflow.runtime.engine import Engine
from procflow.store.store import Store

PROJECT = Path(__file__).parent / "chaos_project"
LEASE_SECONDS = "1"


def worker(url: str, env: dict[str, str], worker_id: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    return subprocess.Popen(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle", "--id", worker_id],
        env={**clean, **env, "PROCFLOW_DATABASE_URL": url, "PROCFLOW_LEASE_SECONDS": LEASE_SECONDS},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the worker ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout}s"
        time.sleep(0.01)


def write_lock_free(url: str, run_id: str) -> bool:
    """Whether nothing (such as a heartbeat frozen inside its transaction) holds the run's row
    (PostgreSQL) or the write lock (SQLite)."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///") :], timeout=0.2, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()
    with psycopg.connect(url) as pg:
        try:
            pg.execute("SELECT 1 FROM runs WHERE id=%s FOR UPDATE NOWAIT", (run_id,))
            return True
        except psycopg.errors.LockNotAvailable:
            return False


def freeze(proc: subprocess.Popen[str], url: str, run_id: str) -> None:
    """SIGSTOP, at a moment when the frozen process holds no lock (else retry a moment later)."""
    for _ in range(50):
        os.kill(proc.pid, signal.SIGSTOP)
        if write_lock_free(url, run_id):
            return
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("could not freeze the worker outside a transaction")


def snapshot(engine: Engine, run_id: str) -> dict[str, Any]:
    shown = engine.show(run_id)
    reader = engine.store.read()
    run = reader.run(run_id)
    assert run is not None and run.record_id is not None
    return {
        "run": shown,
        "lease": reader.lease_of(run_id),
        "record": engine.get_record("Job", run.record_id),
        "tokens": reader.tokens(run_id),
        "timers": reader.timers_of_run(run_id),
    }


def effects(project: Path) -> list[tuple[str, str, int, str, int]]:
    out = []
    for line in (project / "effects.log").read_text().splitlines():
        run, step, attempt, key, pid = line.split()
        out.append((run, step, int(attempt), key, int(pid)))
    return out


def test_a_frozen_worker_loses_its_lease_and_its_late_commit_changes_nothing(
    db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    store = Store(db_url)
    store.init()  # a system-clock store (leases run on the wall clock either way)
    store.close()
    engine = Engine(db_url, environ=db_env)
    try:
        engine.deploy(str(project / "app.intent"))
        engine.create_record("Job", {"title": "frozen", "lane": "frozen", "kind": 0})
        (run,) = engine.list_runs()

        frozen = worker(db_url, db_env, "frozen-A")
        try:
            wait_for(project / "ready", frozen)  # A is inside its step's delegate
            freeze(frozen, db_url, run.id)
            owner, until = engine.store.read().lease_of(run.id)
            assert owner.startswith("frozen-A#") and until is not None
            time.sleep(max(0.0, until / 1_000_000 - time.time()) + 0.2)
            # Nobody renewed it: A's heartbeat is frozen too. The lease has expired.
            assert engine.store.read().lease_of(run.id) == (owner, until)

            rescuer = worker(db_url, db_env, "rescuer-B")
            _, err = rescuer.communicate(timeout=60)
            assert rescuer.returncode == 0, err
            before = snapshot(engine, run.id)
            assert before["run"]["status"] == "completed"

            (project / "release").touch()
            os.kill(frozen.pid, signal.SIGCONT)
            _, late = frozen.communicate(timeout=60)
        finally:
            if frozen.poll() is None:
                os.kill(frozen.pid, signal.SIGCONT)
                frozen.kill()
                frozen.wait()
        assert frozen.returncode == 0, late
        # A ran its step to the end and tried to commit: refused, so it committed nothing.
        assert "worker stopped after 0 transitions" in late, late
        after = snapshot(engine, run.id)
    finally:
        engine.close()

    assert after == before, "the late commit changed the run"
    history = before["run"]["history"]
    assert [h["seq"] for h in history] == list(range(1, len(history) + 1))
    assert [(h["type"], h.get("step")) for h in history] == [
        ("run.started", None),
        ("step.started", "slow"),
        ("step.completed", "slow"),
        ("step.started", "last"),
        ("step.completed", "last"),
        ("step.started", "done"),
        ("step.completed", "done"),
        ("run.completed", None),
    ]
    assert before["lease"] == (None, None) and not before["tokens"] and not before["timers"]

    executed = effects(project)
    slow = [e for e in executed if e[1] == "slow"]
    # Both executed the same attempt (same idempotency key): at-least-once delivery ...
    assert [(step, attempt, pid) for _, step, attempt, _, pid in slow] == [
        ("slow", 1, frozen.pid),
        ("slow", 1, rescuer.pid),
    ]
    assert len({key for *_, key, _ in slow}) == 1
    # ... but only B's attempt committed: its write is the record's, its step the history's.
    assert before["record"]["a"] == f"slow by {rescuer.pid}"
    assert Counter(pid for *_, pid in executed) == {frozen.pid: 1, rescuer.pid: 2}
