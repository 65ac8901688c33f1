"""What the crash tests share: a store of one backend (`Db`), `CaseStores`, which makes a
fresh store per crash case so module-scoped fixtures can run the cases side by side, and the
`procflow` processes they start, kill and recover with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from procflow.store.store import Store

LEASE_SECONDS = "1"


@dataclass(frozen=True)
class Db:
    url: str
    env: dict[str, str]  # what a procflow process needs beyond the URL (the key on PostgreSQL)

    def query(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        """Rows of one statement on a connection of its own (autocommit on both backends)."""
        store = Store(self.url)
        try:
            cursor = store.conn.execute(sql, args)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        finally:
            store.close()


class CaseStores:
    """Fresh stores (SQLite files or PostgreSQL databases) and a 3-thread pool to run cases in;
    everything is dropped when the requesting fixture ends."""

    def __init__(
        self, request: pytest.FixtureRequest, backend_envs: dict[str, dict[str, str]], pg: bool
    ) -> None:
        self.envs = backend_envs
        self.pg = request.getfixturevalue("pg_databases") if pg else None
        self.made: list[str] = []
        self.pool = ThreadPoolExecutor(max_workers=3)
        request.addfinalizer(self._finish)

    def store(self, backend: str, tmp_path: Path) -> Db:
        if backend == "sqlite":
            return Db(f"sqlite:///{tmp_path / 'crash.db'}", self.envs[backend])
        assert self.pg is not None
        self.made.append(self.pg.create())
        return Db(self.made[-1], self.envs[backend])

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self.pool.submit(fn, *args)

    def _finish(self) -> None:
        self.pool.shutdown()
        for url in self.made:
            assert self.pg is not None
            self.pg.drop(url)


def procflow_env(db: Db, faults: str = "") -> dict[str, str]:
    """A `procflow` process's environment on ``db``: none of the caller's PROCFLOW_* settings,
    short leases, one slot, and the fault injection ``faults`` (``point=hit``) if any."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    env.update(db.env, PROCFLOW_DATABASE_URL=db.url, PROCFLOW_LEASE_SECONDS=LEASE_SECONDS)
    # One slot: attempts run one after another, so a kill at the Nth hit of a point lands after
    # exactly the attempts the case counts (kills amid concurrent attempts: the chaos test).
    env["PROCFLOW_SLOTS"] = "1"
    if faults:
        env["PROCFLOW_FAULTS"] = faults
    return env


def procflow(db: Db, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "procflow.cli", *args],
        env=procflow_env(db),
        capture_output=True,
        text=True,
        timeout=60,
    )


def kill_worker_at(db: Db, point: str, hit: int) -> tuple[int, int]:
    """Run `procflow worker --until-idle` until fault injection kills it at the ``hit``-th pass of
    ``point``: its pid, and how many runs' leases it still held (the next worker takes them)."""
    crashed = subprocess.Popen(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle"],
        env=procflow_env(db, f"{point}={hit}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = crashed.communicate(timeout=60)
    assert crashed.returncode == -9, f"the worker was meant to die at {point}={hit}: {err}"
    [(leased,)] = db.query(
        "SELECT count(*) FROM runs WHERE lease_owner LIKE ?", f"%:{crashed.pid}#%"
    )
    assert isinstance(leased, int)
    return crashed.pid, leased


def jump_clock(db: Db, seconds: int) -> None:
    """Time passes with no process alive: move the virtual clock without running anything."""
    db.query(
        "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + ? AS TEXT) WHERE key = 'clock_now'",
        seconds * 1_000_000,
    )


def wait_for_leases_to_expire(db: Db) -> None:
    """The dead worker's leases run out after PROCFLOW_LEASE_SECONDS of wall-clock time."""
    [(until,)] = db.query("SELECT max(lease_until) FROM runs")
    if isinstance(until, int):
        time.sleep(max(0.0, until / 1_000_000 - time.time() + 0.05))


Effect = dict[str, Any]  # run_id, path, attempt, idempotency_key, pid
"""One side effect a crash project's connector noted (its ``effects.jsonl``)."""


def effects(project: Path) -> list[Effect]:
    """The side effects noted so far in ``project``, in order."""
    path = project / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
