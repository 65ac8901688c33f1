"""A PostgreSQL deadlock surfaces as StoreConflict (nothing committed, safe to repeat), and a
worker whose commit hits one hands its runs back instead of dying."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from procflow.store.pg import is_conflict
from procflow.store.store import StoreConflict

# SQLite cannot deadlock (one writer, BEGIN IMMEDIATE): these tests are about PostgreSQL only,
# and run against it directly rather than through the sqlite/postgresql matrix.


class _Diag:
    def __init__(self, sqlstate: str) -> None:
        self.sqlstate = sqlstate


class _Err(Exception):
    def __init__(self, sqlstate: str) -> None:
        self.diag = _Diag(sqlstate)


@pytest.mark.parametrize(
    ("sqlstate", "conflict"), [("40P01", True), ("40001", True), ("23505", False)]
)
def test_only_deadlocks_and_serialisation_failures_are_conflicts(
    sqlstate: str, conflict: bool
) -> None:
    assert is_conflict(_Err(sqlstate)) is conflict
    assert is_conflict(ValueError("x")) is False


@pytest.fixture
def pg_url(pg_databases: Any) -> Iterator[str]:
    url = pg_databases.create()
    try:
        yield url
    finally:
        pg_databases.drop(url)


def test_a_real_deadlock_raises_store_conflict_and_changes_nothing(pg_url: str) -> None:
    from procflow.store.store import Store

    setup = Store(pg_url)
    with setup.tx() as tx:
        tx.meta_set("a", "0")
        tx.meta_set("b", "0")
    stores = [Store(pg_url), Store(pg_url)]
    first_locked = threading.Barrier(2)
    outcomes: list[str] = []

    def worker(store: Store, mine: str, theirs: str) -> None:
        try:
            with store.tx() as tx:
                tx.meta_set(mine, "1")
                first_locked.wait()
                tx.meta_set(theirs, "1")
            outcomes.append("committed")
        except StoreConflict as exc:
            assert "nothing was changed, try again" in str(exc)
            outcomes.append("conflict")

    threads = [
        threading.Thread(target=worker, args=(stores[0], "a", "b")),
        threading.Thread(target=worker, args=(stores[1], "b", "a")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["committed", "conflict"]
    reader = setup.read()
    assert {reader.meta_get("a"), reader.meta_get("b")} == {"1"}  # only the winner's writes
    for store in [*stores, setup]:
        store.close()


FLOW = """\
flow: conflicted
steps:
  - one: { log.write: { message: "one" } }
  - two: { log.write: { message: "two" } }
"""


def test_a_worker_whose_commit_conflicts_hands_its_runs_back_and_they_finish(
    db_url: str, tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    from procflow.runtime.engine import Engine
    from procflow.runtime.work.commit import Committer

    path = Path(str(tmp_path)) / "c.flow.yaml"
    path.write_text(FLOW)
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(path))
        run_id = engine.start_flow("conflicted", {})
        real = Committer.commit_batch
        calls = {"n": 0}

        def conflict_once(self: Committer, batch: list, now: int) -> set[str]:  # type: ignore[type-arg]
            calls["n"] += 1
            if calls["n"] == 1:
                raise StoreConflict("deadlock (simulated)")
            return real(self, batch, now)

        monkeypatch.setattr(Committer, "commit_batch", conflict_once)
        assert engine.work_batch() == 0  # the round was rolled back: nothing committed
        assert engine.store.read().lease_of(run_id) == (None, None)  # handed back at once
        assert engine.show(run_id)["history"][-1]["type"] == "run.started"
        engine.work()
        shown = engine.show(run_id)
        assert shown["status"] == "completed"
        logs = [h["message"] for h in shown["history"] if h["type"] == "log"]
        assert logs == ["one", "two"]  # the attempt was repeated once, committed once
    finally:
        engine.close()


def test_user_calls_are_repeated_after_a_conflict_then_report_it(
    db_url: str, tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record write (any user call) whose transaction PostgreSQL rolled back to break a
    deadlock is run again; one that keeps conflicting is reported, having changed nothing."""
    import contextlib
    from collections.abc import Iterator as It
    from pathlib import Path

    from procflow.runtime.engine import Engine
    from procflow.runtime.operations import conflicts as engine_module

    path = Path(str(tmp_path)) / "c.flow.yaml"
    path.write_text(FLOW)
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(path))
        real_tx = engine.store.tx
        conflicts = {"left": 2}

        @contextlib.contextmanager
        def flaky_tx() -> It[Any]:
            with real_tx() as tx:
                yield tx
                if conflicts["left"] > 0:
                    conflicts["left"] -= 1
                    raise StoreConflict("deadlock (simulated)")

        monkeypatch.setattr(engine.store, "tx", flaky_tx)
        monkeypatch.setattr(engine_module.time, "sleep", lambda _s: None)
        run_id = engine.start_flow("conflicted", {})  # two conflicts, then committed
        assert conflicts["left"] == 0
        assert [r.id for r in engine.list_runs()] == [run_id]  # one run, not three

        conflicts["left"] = engine_module.CONFLICT_TRIES
        with pytest.raises(StoreConflict, match="simulated"):
            engine.start_flow("conflicted", {})
        assert [r.id for r in engine.list_runs()] == [run_id]  # nothing more was stored
    finally:
        engine.close()
