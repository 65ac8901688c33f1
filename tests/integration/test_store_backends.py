"""What the backends do differently gives the same results: batches (row by row on SQLite, one
statement over arrays on PostgreSQL), locks (one writer on SQLite, row and advisory locks on
PostgreSQL) and claims that pass each other (``SKIP LOCKED``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from procflow.store.rows import HistoryRow, RunRow, ScheduleRow, TokenRow
from procflow.store.store import Store, Tx, run_image

OWNER = "worker-a"


def add_run(tx: Tx, run_id: str = "r1") -> RunRow:
    run = RunRow(run_id, 1, "p", "flow", "running", 0)
    assert tx.insert_run(run)
    return run


def token(run_id: str, step: str) -> TokenRow:
    return TokenRow(None, run_id, step, "", "ready", 1, 0, None, {"step": step})


def test_token_batches(store: Store) -> None:
    with store.tx() as tx:
        add_run(tx)
        a, b, c = (token("r1", s) for s in "abc")
        for t in (a, b, c):
            tx.insert_token(t)
        a_first = TokenRow(a.id, "r1", "a1", "", "waiting", 2, 5, {"on": "x"}, {"n": 1})
        a_last = TokenRow(a.id, "r1", "a2", "", "failed", 3, 6, None, {"n": 2})
        b.state = "waiting"
        tx.update_tokens([a_first, b, a_last])  # a listed twice: its last image stays
        tx.update_tokens([])
        tx.delete_tokens([])
        tx.delete_tokens([c.id or 0])
    tokens = {t.step: t for t in store.read().tokens("r1")}
    assert sorted(tokens) == ["a2", "b"]
    assert (tokens["a2"].state, tokens["a2"].attempt, tokens["a2"].data) == ("failed", 3, {"n": 2})
    assert tokens["b"].state == "waiting"


def test_timer_batches(store: Store) -> None:
    with store.tx() as tx:
        add_run(tx)
        tx.insert_timers([("r1", 1, "timeout", 10), ("r1", 2, "timeout", 20), ("r1", 3, "x", 30)])
        tx.delete_timers_of_tokens([1])
        tx.delete_timers_of_tokens([])
        left = tx.timers_of_run("r1")
        tx.delete_timers([left[0].id])
        tx.delete_timers([])
    assert [(t.token_id, t.due_at) for t in store.read().timers_of_run("r1")] == [(3, 30)]


def test_history_batch(store: Store) -> None:
    with store.tx() as tx:
        tx.append_history_many(
            [
                ("r1", HistoryRow(1, 10, "run.started")),
                ("r2", HistoryRow(1, 11, "run.started", data={"x": 1})),
                ("r1", HistoryRow(2, 12, "step.done", "s", "", 1, {"ok": True})),
            ]
        )
        tx.append_history_many([])
    assert store.read().history("r1") == [
        HistoryRow(1, 10, "run.started"),
        HistoryRow(2, 12, "step.done", "s", "", 1, {"ok": True}),
    ]
    assert store.read().history("r2")[0].data == {"x": 1}


def test_saving_held_runs_counts_only_the_runs_still_held(store: Store) -> None:
    with store.tx() as tx:
        one, two, three = (add_run(tx, f"r{i}") for i in (1, 2, 3))
        claimed = tx.claim_runs(OWNER, 100, 1_000, 10)
        assert sorted(r.id for r in claimed) == ["r1", "r2", "r3"]
        tx.release_leases(OWNER, ["r3"])
        one.status, one.seq = "waiting", 4
        two.seq = three.seq = 7
        full = [(one, run_image(one), 2_000, OWNER)]
        assert tx.save_held_runs(full, [two, three], OWNER, 500) == 2  # r3 is no longer held
        assert tx.save_held_runs([], [two], "someone-else", 500) == 0
        assert tx.save_held_runs([], [], OWNER, 500) == 0
    runs = store.read().runs_by_id(["r1", "r2", "r3"])
    assert (runs["r1"].status, runs["r1"].seq, runs["r2"].seq, runs["r3"].seq) == (
        "waiting",
        4,
        7,
        0,
    )
    assert store.read().lease_of("r1") == (OWNER, 2_000)


def _new_run(run_id: str, start_key: str | None) -> RunRow:
    return RunRow(run_id, 1, "f", "flow", "running", 5, start_key=start_key, state={"v": 1}, seq=1)


def _started(tx: Tx, *runs: RunRow) -> set[str]:
    return tx.insert_started_runs(
        runs,
        [(r.id, "in", 0, {"x": r.id}) for r in runs],
        [TokenRow(None, r.id, "s", "s", "ready", 1, 5, None, {}) for r in runs],
        [(r.id, HistoryRow(1, 5, "run.started")) for r in runs],
    )


def test_started_runs_go_in_with_their_first_rows(store: Store) -> None:
    """A group of new runs (one statement on PostgreSQL): each run with its scope, first token
    and history; a run whose start key was taken is not among the ids that went in."""
    with store.tx() as tx:
        assert _started(tx, _new_run("r1", "k1"), _new_run("r2", None)) == {"r1", "r2"}
        assert _started(tx) == set()
    read = store.read()
    assert read.run("r1") == _new_run("r1", "k1")
    assert read.scopes("r2", "in") == {0: {"x": "r2"}}
    assert [(t.step, t.state) for t in read.tokens("r2")] == [("s", "ready")]
    assert read.history("r1") == [HistoryRow(1, 5, "run.started")]
    with store.tx() as tx:
        assert _started(tx, _new_run("r3", "k1"), _new_run("r4", "k4")) == {"r4"}


def test_live_runs_leave_out_ended_and_unknown_runs(store: Store) -> None:
    with store.tx() as tx:
        ids = [add_run(tx, f"r{i:03}").id for i in range(600)]  # more than one IN list holds
        ended = add_run(tx, "done")
        ended.status, ended.ended_at = "completed", 9
        tx.save_run(ended, None, None)
    live = store.read().live_runs_by_id([*ids, "done", "gone"])
    assert sorted(live) == ids
    assert live["r001"] == RunRow("r001", 1, "p", "flow", "running", 0)
    assert store.read().live_runs_by_id([]) == {}


def test_saving_fired_slots_writes_what_firing_changes(store: Store) -> None:
    """What firing changes is written, one statement for the group on PostgreSQL; what it never
    changes (spec, plan, pause) is left as stored."""
    rows = [ScheduleRow(k, "f", "f", {"every": 60}, {"first": "s"}) for k in ("a", "b")]
    with store.tx() as tx:
        for row in rows:
            tx.insert_schedule(row)
    a, b = rows
    a.next_slot, a.due_at, a.open_runs, a.last_slot, a.last_run = 120, 121, ["r9"], 60, "r9"
    a.started, a.skipped, a.missed, a.buffers, a.buffered = 1, 2, 3, 4, 180
    b.error, b.spec, b.paused = "no flow", {"every": 1}, True  # spec and pause: not firing's
    with store.tx() as tx:
        tx.save_fired(rows)
    saved = store.read().schedule("a")
    assert saved == a
    assert store.read().schedule("b") == ScheduleRow(
        "b", "f", "f", {"every": 60}, {"first": "s"}, error="no flow"
    )


# --- locks: a second transaction taking the same lock waits for the first to commit ------------


def _setup_locked_rows(tx: Tx) -> int:
    add_run(tx)
    tx.insert_record("Order", 1, {"a": 1}, None, 0)
    return tx.insert_task(
        run_id="r1", token_id=1, step="s", assignee="ann", assignee_kind="user", form=None,
        actions=["ok"], fields=[], record=None, now=0,
    )  # fmt: skip


LOCKS: dict[str, Callable[[Tx, int], object]] = {
    "event key": lambda tx, _task: tx.lock_key("order.paid", "7"),
    "record ids": lambda tx, _task: tx.lock_record_ids("Order"),
    "deploys": lambda tx, _task: tx.lock_deploys(),
    "run row": lambda tx, _task: tx.run_for_update("r1"),
    "record row": lambda tx, _task: tx.record("Order", 1, lock=True),
    "task row": lambda tx, task: tx.task(task, lock=True),
}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_a_lock_is_held_until_commit(store: Store, lock: str) -> None:
    with store.tx() as tx:
        task_id = _setup_locked_rows(tx)
    take = LOCKS[lock]
    first, second = Store(store.url), Store(store.url)
    holding = threading.Event()
    order: list[str] = []

    def hold() -> None:
        with first.tx() as tx:
            take(tx, task_id)
            holding.set()
            time.sleep(0.4)
            order.append("first commits")

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(10)
        with second.tx() as tx:
            take(tx, task_id)
            order.append("second holds")
    finally:
        thread.join()
        first.close()
        second.close()
    assert order == ["first commits", "second holds"]


# --- claimers pass each other (PostgreSQL) or queue up (SQLite, one writer) -------------------


def _second_while_first_holds(
    store: Store, first_take: Callable[[Tx], object], second_take: Callable[[Tx], object]
) -> tuple[object, float]:
    """Run ``second_take`` in its own transaction while another transaction that ran
    ``first_take`` stays open for 0.5 s; returns its result and how long it took."""
    first, second = Store(store.url), Store(store.url)
    holding = threading.Event()

    def hold() -> None:
        with first.tx() as tx:
            first_take(tx)
            holding.set()
            time.sleep(0.5)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(10)
        started = time.monotonic()
        with second.tx() as tx:
            got = second_take(tx)
        return got, time.monotonic() - started
    finally:
        thread.join()
        first.close()
        second.close()


def _passed_or_queued(backend: str, elapsed: float) -> None:
    if backend == "postgresql":
        assert elapsed < 0.4  # passed the locked rows, never waited for them
    else:
        assert elapsed >= 0.4  # BEGIN IMMEDIATE: waited for the first writer's commit


def test_a_claim_skips_runs_another_claim_holds(store: Store, backend: str) -> None:
    with store.tx() as tx:
        add_run(tx, "r1")
        add_run(tx, "r2")
    got, elapsed = _second_while_first_holds(
        store,
        lambda tx: tx.claim_runs("a", 100, 1_000, 1),
        lambda tx: [r.id for r in tx.claim_runs("b", 100, 1_000, 10)],
    )
    _passed_or_queued(backend, elapsed)
    assert len(got) == 1  # type: ignore[arg-type]


def test_due_timers_skip_those_another_worker_holds(store: Store, backend: str) -> None:
    with store.tx() as tx:
        add_run(tx, "r1")
        add_run(tx, "r2")
        tx.insert_timers([("r1", 1, "timeout", 10), ("r2", 2, "timeout", 20)])
    got, elapsed = _second_while_first_holds(
        store,
        lambda tx: tx.due_timers_free(100, 100, 1),
        lambda tx: [t.run_id for t in tx.due_timers_free(100, 100, 10)],
    )
    _passed_or_queued(backend, elapsed)
    expected = ["r2"] if backend == "postgresql" else ["r1", "r2"]  # nothing held on SQLite
    assert got == expected
