"""How an idle worker waits for work: ``Store.wait_for_wakeup`` on both backends.

PostgreSQL: LISTEN/NOTIFY, the listener made by the first call (which returns at once), a
notification committed by another connection ends the wait at once, ``stop`` ends it within a
slice. SQLite: no notifications, a plain sleep that ``stop`` cuts short. Each test runs on both
and holds each backend to its own side of that contract.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from procflow.store.store import Store


def notify_from_another_connection(url: str) -> None:
    other = Store(url)
    try:
        with other.tx() as tx:
            tx.notify()
    finally:
        other.close()


def timed_wait(
    store: Store, seconds: float, stop: threading.Event | None = None
) -> tuple[bool, float]:
    started = time.monotonic()
    woken = store.wait_for_wakeup(seconds, stop)
    return woken, time.monotonic() - started


def later(delay: float, action: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_stop_ends_the_wait(store: Store) -> None:
    store.wait_for_wakeup(0.0)  # PostgreSQL: the first call only starts listening
    stop = threading.Event()
    setter = later(0.3, stop.set)
    woken, elapsed = timed_wait(store, 30.0, stop)
    setter.join()
    assert woken is False
    assert elapsed < 2.0


def test_a_set_stop_returns_at_once(store: Store) -> None:
    store.wait_for_wakeup(0.0)
    stop = threading.Event()
    stop.set()
    assert timed_wait(store, 30.0, stop)[1] < 0.5


def test_the_wait_times_out(store: Store) -> None:
    store.wait_for_wakeup(0.0)
    woken, elapsed = timed_wait(store, 0.5)
    assert woken is False
    assert 0.45 <= elapsed < 3.0


def test_poll_interval_per_backend(store: Store, backend: str) -> None:
    assert store.idle_poll_seconds == {"sqlite": 1.0, "postgresql": 5.0}[backend]


# --- notifications: PostgreSQL is woken, SQLite sleeps on -------------------------------------


def test_first_call_returns_at_once_on_postgresql(store: Store, backend: str) -> None:
    woken, elapsed = timed_wait(store, 1.0)
    assert woken is False
    if backend == "postgresql":
        assert elapsed < 0.5  # only started listening: the caller looks for work first
    else:
        assert elapsed >= 0.95  # nothing to start: an ordinary sleep


def test_a_notify_from_another_connection_wakes_a_postgresql_waiter(
    store: Store, backend: str
) -> None:
    store.wait_for_wakeup(0.0)
    sender = later(0.2, lambda: notify_from_another_connection(store.url))
    woken, elapsed = timed_wait(store, 2.0)
    sender.join()
    if backend == "postgresql":
        assert woken is True
        assert elapsed < 1.5  # well before the timeout: woken, not timed out
    else:
        assert woken is False
        assert elapsed >= 1.95


def test_a_notify_sent_between_listening_and_waiting_is_not_missed(
    store: Store, backend: str
) -> None:
    store.wait_for_wakeup(0.0)  # PostgreSQL: listening from here on
    notify_from_another_connection(store.url)  # while the caller "looks for work"
    woken, elapsed = timed_wait(store, 1.0)
    assert woken is (backend == "postgresql")
    if woken:
        assert elapsed < 0.5
        assert timed_wait(store, 0.3)[0] is False  # one wake-up drained, not replayed


def test_a_rolled_back_notify_wakes_nobody(store: Store) -> None:
    store.wait_for_wakeup(0.0)
    other = Store(store.url)
    try:
        with pytest.raises(RuntimeError), other.tx() as tx:
            tx.notify()
            raise RuntimeError("roll back")
    finally:
        other.close()
    assert timed_wait(store, 0.5)[0] is False


def listening_connections(store: Store, backend: str) -> int:
    if backend == "sqlite":
        return 0  # a SQLite store waits without any connection of its own
    row = store.conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND query = 'LISTEN procflow_wakeup'"
    ).fetchone()
    return int(row[0])


def test_close_closes_the_listener(store: Store, backend: str) -> None:
    waiter = Store(store.url)
    try:
        assert listening_connections(store, backend) == 0
        waiter.wait_for_wakeup(0.0)
        assert listening_connections(store, backend) == (backend == "postgresql")
    finally:
        waiter.close()
    deadline = time.monotonic() + 5.0
    while listening_connections(store, backend) and time.monotonic() < deadline:
        time.sleep(0.05)  # the server notices a closed connection asynchronously
    assert listening_connections(store, backend) == 0
