"""What accepting an event costs in statements, and the wake-up sent with the commit.

On PostgreSQL every statement is a round trip to another process, and on a loaded machine the
round trips, not the SQL, are what an event costs: accepting one that resumes a waiting run
takes six (BEGIN, the clock, the event stored under its key's lock with the deployed flows'
versions, the waits with their runs locked and their tokens, the wait taken with the token's
writes as one statement, NOTIFY with COMMIT). A wake-up asked for in a transaction goes with
its COMMIT, so one rolled back is never sent, not even by the next transaction of the same
store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from projects import DESK_MANIFEST, deploy_text, events_project

from procflow.errors import UsageError
from procflow.runtime.engine import Engine
from procflow.runtime.operations.grouping import TxGroup
from procflow.store.queries.runrows.waits import SeenWait
from procflow.store.rows import HistoryRow
from procflow.store.store import Store, Tx

FLOW = """\
flow: awaiting
inputs:
  k: { type: string, required: true }
steps:
  - decision:
      wait_for: desk.decided
      match: { key: "{{ k }}" }
      timeout: 1h
output: "{{ decision.status }}"
"""
# The statements of an event that resumes one run (PostgreSQL; SQLite's run in the process).
POSTGRESQL_BUDGET = 6


class Counting:
    """The store's connection, counting the statements sent through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[str] = []

    def _send(self, method: str, sql: str, *args: Any) -> Any:
        self.sent.append(sql)
        return getattr(self.inner, method)(sql, *args)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._send("execute", sql, params)

    def execute_binary(self, sql: str, params: Sequence[Any]) -> Any:
        return self._send("execute_binary", sql, params)

    def executemany(self, sql: str, rows: Any) -> Any:
        return self._send("executemany", sql, rows)

    def executescript(self, script: str) -> Any:
        return self._send("executescript", script)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def engine(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    project = events_project(tmp_path, "desk", DESK_MANIFEST)
    eng = Engine.virtual(db_url, environ=dict(db_env))
    try:
        deploy_text(eng, project, FLOW)
        yield eng
    finally:
        eng.close()


def counting(engine: Engine) -> Counting:
    store = engine.store
    spy = Counting(store.conn)
    store.conn = store.backend.conn = store.read().c = spy
    return spy


def test_an_event_resumes_a_run_in_few_statements(engine: Engine, backend: str) -> None:
    runs = [engine.start_flow("awaiting", {"k": key}) for key in ("a", "b")]
    engine.work()
    engine.send_event("desk.decided", {"key": "z"})  # the first also prunes old events (a minute)
    spy = counting(engine)

    got = engine.send_event("desk.decided", {"key": "a"}, "e-1")

    assert got["resumed"] == [runs[0]]
    if backend == "postgresql":
        assert len(spy.sent) <= POSTGRESQL_BUDGET, "\n".join(sql[:70] for sql in spy.sent)
    engine.work()
    assert engine.show(runs[0])["status"] == "completed"
    assert engine.show(runs[1])["status"] == "waiting"
    # Each wait once: the same key again finds nobody, a repeated id does nothing.
    assert engine.send_event("desk.decided", {"key": "a"}, "e-2")["resumed"] == []
    assert engine.send_event("desk.decided", {"key": "b"}, "e-1")["duplicate"] is True
    assert engine.show(runs[1])["status"] == "waiting"


def seqs(engine: Engine, run_id: str) -> list[int]:
    return [entry.seq for entry in engine.store.read().history(run_id)]


def test_a_wait_read_before_it_changed_is_read_again_and_delivered_once(
    engine: Engine, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the statement locking the runs reads their tokens from the snapshot it
    began with, and the write that takes the wait checks they are still the row versions read.
    Every stamp made stale, as if another transaction had changed the rows between the read and
    the lock: the event still reaches the run once, read again under the run's lock, its
    history numbered without a gap (the run's row is as it was before the refused write)."""
    run = engine.start_flow("awaiting", {"k": "a"})
    engine.work()
    read = Tx.waiting_runs_for_update
    stamps: list[Any] = []

    def stale(tx: Tx, type_: str, keys: str) -> list[SeenWait]:
        waits = read(tx, type_, keys)
        stamps.extend(wait.stamp for wait in waits)
        return [w._replace(stamp=("0", "0")) if w.stamp else w for w in waits]

    monkeypatch.setattr(Tx, "waiting_runs_for_update", stale)
    got = engine.send_event("desk.decided", {"key": "a"}, "e-1")

    assert got["resumed"] == [run]
    assert len(stamps) == 1 and (stamps[0] is not None) is (backend == "postgresql")
    engine.work()
    shown = engine.show(run)
    assert (shown["status"], shown["output"]) == ("completed", "received")
    numbers = seqs(engine, run)
    assert numbers == list(range(1, len(numbers) + 1))
    assert engine.send_event("desk.decided", {"key": "a"}, "e-2")["resumed"] == []


def test_the_write_refuses_a_wait_or_token_that_changed_since_it_was_read(
    engine: Engine, backend: str
) -> None:
    """The one-statement delivery itself: a stale wait or a stale token writes nothing (the
    wait stays, the token waits, no history); the stamps as read write it all. SQLite has one
    writer: nothing to compare, the token is read with its wait taken."""
    run = engine.start_flow("awaiting", {"k": "a"})
    engine.work()
    store = engine.store
    with store.tx() as tx:
        (seen,) = tx.waiting_runs_for_update("desk.decided", '["a"]')
    if backend == "sqlite":
        assert (seen.token, seen.stamp) == (None, None)
        return
    assert seen.token is not None and seen.stamp is not None
    wait_xmin, token_xmin = seen.stamp
    before = seqs(engine, run)
    entry = HistoryRow(seen.run.seq + 1, 0, "event.received", "decision", "", 0, {})
    for stamp in ((str(int(wait_xmin) + 1), token_xmin), (wait_xmin, str(int(token_xmin) + 1))):
        with store.tx() as tx:
            assert not tx.deliver_to_seen_token("e-x", seen.run, seen.token, entry, stamp)
        assert seqs(engine, run) == before
        assert store.read().tokens(run)[0].state == "waiting"
        with store.tx() as tx:
            waiting = tx.waiting_runs_for_update("desk.decided", '["a"]')
        assert [w.token_id for w in waiting] == [seen.token_id]
    with store.tx() as tx:
        assert tx.deliver_to_seen_token("e-x", seen.run, seen.token, entry, seen.stamp)
    assert seqs(engine, run) == [*before, entry.seq]
    with store.tx() as tx:
        assert tx.waiting_runs_for_update("desk.decided", '["a"]') == []


def held_batches(monkeypatch: pytest.MonkeyPatch, calls: int) -> list[int]:
    """The sizes of the batches every :class:`TxGroup` commits from now on; the first batch
    waits until the other ``calls - 1`` calls are queued, so they are the second."""
    batches: list[int] = []
    lead = TxGroup._lead

    def first_waits_for_the_rest(group: TxGroup, host: Any, batch: list[Any]) -> None:
        deadline = time.monotonic() + 10
        while not batches and len(group._queue) < calls - 1:
            assert time.monotonic() < deadline, "the other calls never queued"
            time.sleep(0.001)
        batches.append(len(batch))
        lead(group, host, batch)

    monkeypatch.setattr(TxGroup, "_lead", first_waits_for_the_rest)
    return batches


def at_once(db_url: str, db_env: dict[str, str], calls: list[Callable[[Engine], Any]]) -> list[Any]:
    """Each call on an engine of its own thread, the engines sharing one group (the request
    threads of ``procflow serve``); their results, in order."""
    group = TxGroup()
    engines = [Engine(db_url, environ=dict(db_env)) for _ in calls]
    results: dict[int, Any] = {}
    try:
        for each in engines:
            each.writes = group

        def call(i: int) -> None:
            results[i] = calls[i](engines[i])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    finally:
        for each in engines:
            each.close()
    return [results[i] for i in range(len(calls))]


def test_events_sent_at_once_share_a_transaction_and_each_is_delivered_once(
    engine: Engine, db_url: str, db_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calls queued while a batch commits are the next batch, one transaction, and each
    event is still accepted once, even the same event sent twice in the same batch."""
    keys = [f"k{i}" for i in range(5)]
    runs = {key: engine.start_flow("awaiting", {"k": key}) for key in keys}
    engine.work()
    sends = [(key, f"e-{key}") for key in keys] + [(keys[0], f"e-{keys[0]}")]  # one twice
    batches = held_batches(monkeypatch, len(sends))

    def sender(key: str, event_id: str) -> Callable[[Engine], Any]:
        return lambda e: e.send_event("desk.decided", {"key": key}, event_id)

    reports = at_once(db_url, db_env, [sender(*send) for send in sends])

    assert batches == [1, len(sends) - 1]
    twice = [reports[0], reports[-1]]
    assert sorted(r["duplicate"] for r in twice) == [False, True]
    assert sorted(r["resumed"] for r in twice) == [[], [runs[keys[0]]]]
    for report, (key, _) in zip(reports[1:-1], sends[1:-1], strict=True):
        assert report["resumed"] == [runs[key]]
    engine.work()
    assert all(engine.show(run)["status"] == "completed" for run in runs.values())


def test_runs_started_at_once_share_a_transaction_and_a_refused_start_changes_nothing(
    engine: Engine, db_url: str, db_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = held_batches(monkeypatch, 3)  # the refused start never reaches the group

    def start(key: Any) -> Callable[[Engine], Any]:
        def call(e: Engine) -> Any:
            try:
                return e.start_flow("awaiting", {"k": key})
            except UsageError as exc:
                return exc

        return call

    results = at_once(db_url, db_env, [start("a"), start("b"), start(7), start("c")])

    # The refused start is refused on its own thread, before any transaction: three runs in two.
    assert batches == [1, 2]
    assert isinstance(results[2], UsageError) and "k" in str(results[2])
    started = [r for r in results if isinstance(r, str)]
    assert len(started) == 3
    assert sorted(r.id for r in engine.store.read().runs(None, "awaiting")) == sorted(started)


def woken(listener: Store, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if listener.wait_for_wakeup(left):
            return True
    return False


@pytest.fixture
def stores(db_url: str) -> Iterator[tuple[Store, Store]]:
    listener, other = Store(db_url), Store(db_url)
    try:
        listener.ensure_ready()
        listener.wait_for_wakeup(0.0)  # PostgreSQL: listening from here on
        yield listener, other
    finally:
        other.close()
        listener.close()


def test_a_rolled_back_wake_up_is_not_sent_by_the_next_commit(
    stores: tuple[Store, Store],
) -> None:
    listener, other = stores
    with pytest.raises(RuntimeError), other.tx() as tx:
        tx.notify()
        raise RuntimeError("roll back")
    with other.tx():
        pass
    assert woken(listener, 0.5) is False


def test_a_wake_up_is_sent_with_the_commit_or_at_once_outside_a_transaction(
    stores: tuple[Store, Store], backend: str
) -> None:
    listener, other = stores
    sent = backend == "postgresql"  # SQLite has no notifications: its workers poll
    patience = 5.0 if sent else 0.2
    with other.tx() as tx:
        tx.notify()
        assert woken(listener, 0.3) is False  # not before the commit
    assert woken(listener, patience) is sent
    other.read().notify()
    assert woken(listener, patience) is sent


# --- the worker's own round trips ----------------------------------------------------------------


def test_a_system_clock_is_read_from_the_machine_and_a_virtual_one_from_the_store(
    db_url: str, db_env: dict[str, str]
) -> None:
    system = Engine(db_url, environ=dict(db_env))
    try:
        spy = counting(system)
        before = time.time()
        now = system.now()
        assert before * 1_000_000 - 1 <= now <= time.time() * 1_000_000 + 1
        assert system.now() >= now
        assert len(spy.sent) <= 1  # the clock's kind, once for the engine's life
        assert spy.sent[1:] == []
    finally:
        system.close()


def test_a_virtual_clock_moved_by_another_process_is_seen_at_once(
    engine: Engine, db_url: str, db_env: dict[str, str]
) -> None:
    start = engine.now()
    other = Engine(db_url, environ=dict(db_env))
    try:
        other.advance("1h")
    finally:
        other.close()
    assert engine.now() == start + 3_600_000_000


def test_a_worker_that_claimed_all_there_was_waits_for_a_wake_up_instead_of_claiming_again(
    engine: Engine, db_url: str, db_env: dict[str, str], backend: str
) -> None:
    """After a batch smaller than a full one, a PostgreSQL worker goes idle: whatever becomes
    ready later sends a wake-up. SQLite has none, so its worker keeps looking."""
    run = engine.start_flow("awaiting", {"k": "a"})
    spy = counting(engine)
    stop = threading.Event()
    worker = threading.Thread(target=engine.work, kwargs={"until_idle": False, "stop": stop})
    worker.start()
    try:
        assert eventually(lambda: engine.show(run)["status"] == "waiting")
        sender = Engine(db_url, environ=dict(db_env))
        try:
            sender.send_event("desk.decided", {"key": "a"})
        finally:
            sender.close()
        assert eventually(lambda: engine.show(run)["status"] == "completed")
    finally:
        stop.set()
        worker.join(10)
    claims = [sql for sql in spy.sent if is_claim(sql)]
    if backend == "postgresql":
        # The run claimed; one look once listening (work made ready before it); the run again.
        assert len(claims) == 3, "\n".join(sql[:70] for sql in spy.sent)
    else:
        assert len(claims) >= 3


def is_claim(sql: str) -> bool:
    return sql.startswith("WITH expired AS") and "UPDATE runs SET lease_owner" in sql


def eventually(check: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_claim_with_no_timer_due_is_one_statement_without_a_transaction(engine: Engine) -> None:
    run = engine.start_flow("awaiting", {"k": "a"})
    spy = counting(engine)
    engine.work()
    assert engine.show(run)["status"] == "waiting"
    first_claim = next(i for i, sql in enumerate(spy.sent) if is_claim(sql))
    # the look for due work: one probe of the timers' and the schedules' due-time indexes
    assert spy.sent[first_claim - 1].startswith("SELECT (SELECT due_at FROM timers ORDER BY")
    assert not any(sql.startswith("BEGIN") for sql in spy.sent[:first_claim])
