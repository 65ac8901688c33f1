"""Group commit: calls made while a batch is being committed share the next transaction; each
call is still all or nothing, and one call's error is its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from procflow.runtime.operations.grouping import TxGroup


class Tx:
    def __init__(self) -> None:
        self.writes: list[str] = []


class FakeStore:
    """A store whose transactions are lists of writes: kept at commit, dropped at rollback.
    Each thread has a connection of its own, as each request thread's engine does."""

    def __init__(self) -> None:
        self.committed: list[list[str]] = []  # one list per transaction
        self.rolled_back = 0
        self.fail_commit: Exception | None = None
        self._local = threading.local()
        self._count = threading.Lock()
        self.open_now = 0
        self.most_open = 0  # transactions open at once, at most

    @property
    def in_tx(self) -> bool:
        return getattr(self._local, "open", None) is not None

    @contextmanager
    def tx(self) -> Iterator[Tx]:
        if self.in_tx:
            yield self._local.open
            return
        self._local.open = tx = Tx()
        with self._count:
            self.open_now += 1
            self.most_open = max(self.most_open, self.open_now)
        try:
            yield tx
            if self.fail_commit is not None:
                raise self.fail_commit
        except BaseException:
            self.rolled_back += 1
            raise
        else:
            self.committed.append(tx.writes)
        finally:
            self._local.open = None
            with self._count:
                self.open_now -= 1


class Host:
    def __init__(self, store: FakeStore) -> None:
        self.store = store


Work = Callable[[Any, Tx], str]


def writing(name: str, calls: list[str] | None = None) -> Work:
    def work(host: Any, tx: Tx) -> str:
        if calls is not None:
            calls.append(name)
        tx.writes.append(name)
        return f"{name} done"

    return work


class Callers:
    """Calls of ``group`` from threads of their own, each with its result or error."""

    def __init__(self, group: TxGroup, host: Host) -> None:
        self.group, self.host = group, host
        self.results: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def call(self, name: str, work: Work) -> None:
        def run() -> None:
            try:
                self.results[name] = self.group.run(self.host, work)
            except BaseException as exc:
                self.results[name] = exc

        thread = threading.Thread(target=run)
        self.threads.append(thread)
        thread.start()

    def queue_when(self, count: int) -> None:
        """Wait until ``count`` calls wait for the next batch."""
        deadline = time.monotonic() + 5
        while len(self.group._queue) < count:
            assert time.monotonic() < deadline, "the calls never queued"
            time.sleep(0.001)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(5)
            assert not thread.is_alive()


def leading(gate: threading.Event, entered: threading.Event) -> Work:
    """A call that holds its batch open until ``gate`` is set."""

    def work(host: Any, tx: Tx) -> str:
        entered.set()
        assert gate.wait(5)
        tx.writes.append("first")
        return "first done"

    return work


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def callers(store: FakeStore) -> Callers:
    return Callers(TxGroup(), Host(store))


def hold_first_batch(callers: Callers) -> threading.Event:
    gate, entered = threading.Event(), threading.Event()
    callers.call("first", leading(gate, entered))
    assert entered.wait(5)
    return gate


def test_calls_made_while_a_batch_commits_share_the_next_transaction(
    store: FakeStore, callers: Callers
) -> None:
    gate = hold_first_batch(callers)
    for name in ("a", "b", "c"):
        callers.call(name, writing(name))
    callers.queue_when(3)
    gate.set()
    callers.join()
    assert store.committed[0] == ["first"]
    assert sorted(store.committed[1]) == ["a", "b", "c"]
    assert len(store.committed) == 2
    assert callers.results == {n: f"{n} done" for n in ("first", "a", "b", "c")}


def test_a_failing_call_gets_its_error_and_the_others_are_done_again(
    store: FakeStore, callers: Callers
) -> None:
    gate = hold_first_batch(callers)

    def failing(host: Any, tx: Tx) -> str:
        tx.writes.append("bad")
        raise ValueError("no such run")

    done: list[str] = []
    callers.call("bad", failing)
    callers.queue_when(1)  # queued first: its error comes after nothing of the batch was done
    callers.call("a", writing("a", done))
    callers.queue_when(2)
    callers.call("b", writing("b", done))
    callers.queue_when(3)
    gate.set()
    callers.join()
    error = callers.results["bad"]
    assert isinstance(error, ValueError) and str(error) == "no such run"
    assert callers.results["a"] == "a done" and callers.results["b"] == "b done"
    assert all("bad" not in writes for writes in store.committed)  # rolled back, never kept
    assert sorted(w for writes in store.committed for w in writes) == ["a", "b", "first"]
    assert store.rolled_back == 1


def test_a_call_after_the_failing_one_is_done_again_in_a_new_transaction(
    store: FakeStore, callers: Callers
) -> None:
    gate = hold_first_batch(callers)
    done: list[str] = []

    def failing(host: Any, tx: Tx) -> str:
        raise ValueError("refused")

    callers.call("a", writing("a", done))
    callers.queue_when(1)
    callers.call("bad", failing)
    callers.queue_when(2)
    gate.set()
    callers.join()
    assert done == ["a", "a"]  # its first doing was rolled back with the failing call's
    assert store.committed == [["first"], ["a"]]
    assert isinstance(callers.results["bad"], ValueError)


def test_an_error_of_the_commit_is_every_calls_error(store: FakeStore, callers: Callers) -> None:
    gate = hold_first_batch(callers)
    callers.call("a", writing("a"))
    callers.call("b", writing("b"))
    callers.queue_when(2)
    store.fail_commit = OSError("disk full")
    gate.set()
    callers.join()
    assert store.committed == []
    assert all(isinstance(result, OSError) for result in callers.results.values())
    assert len(callers.results) == 3


def test_a_call_inside_an_open_transaction_joins_it(store: FakeStore) -> None:
    group, host = TxGroup(), Host(store)
    with store.tx():
        assert group.run(host, writing("inner")) == "inner done"
        assert store.committed == []  # not committed on its own
    assert store.committed == [["inner"]]


def test_a_lone_call_is_a_transaction_of_its_own(store: FakeStore) -> None:
    group, host = TxGroup(), Host(store)
    assert group.run(host, writing("a")) == "a done"
    assert group.run(host, writing("b")) == "b done"
    assert store.committed == [["a"], ["b"]]


def test_a_batch_does_its_calls_in_the_order_they_lock_in(
    store: FakeStore, callers: Callers
) -> None:
    """Two processes' batches then take their locks in one order and cannot deadlock."""
    gate = hold_first_batch(callers)
    group, host = callers.group, callers.host
    for name, order in (("b", "key-2"), ("a", "key-1"), ("c", "key-3"), ("a2", "key-1")):
        thread = threading.Thread(target=group.run, args=(host, writing(name), order))
        callers.threads.append(thread)
        thread.start()
        callers.queue_when(len(callers.threads) - 1)
    gate.set()
    callers.join()
    assert store.committed == [["first"], ["a", "a2", "b", "c"]]  # arrival order within a key


def test_many_threads_calls_are_each_done_once_one_batch_at_a_time(store: FakeStore) -> None:
    """12 threads of 40 calls each, a seventh of them failing, batches overlapping in time."""
    group, host = TxGroup(), Host(store)
    results: dict[str, Any] = {}

    def caller(t: int) -> None:
        for n in range(40):
            name = f"{t}-{n}"

            def work(host: Any, tx: Tx, name: str = name, n: int = n) -> str:
                tx.writes.append(name)
                time.sleep(0.0002 * (n % 3))  # others queue meanwhile
                if n % 7 == 3:
                    raise ValueError(name)
                return f"{name} done"

            try:
                results[name] = group.run(host, work, order=str(n % 5))
            except ValueError as exc:
                results[name] = exc

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    kept = [w for writes in store.committed for w in writes]
    failing = {name for name, result in results.items() if isinstance(result, ValueError)}
    assert len(results) == 12 * 40 and len(failing) == 12 * 6
    assert sorted(kept) == sorted(set(results) - failing)  # each done and kept once
    assert all(results[name] == f"{name} done" for name in kept)
    assert all(store.committed)  # no empty transaction
    assert store.most_open == 1
    assert max(map(len, store.committed)) > 1  # calls did share transactions
    assert not group._leading and not group._queue
