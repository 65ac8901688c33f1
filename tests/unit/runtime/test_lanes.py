"""A lane's state under its lock: who may abandon it, and when, so that a watchdog taking a
batch over and the thread running the lane never both go on with it."""

from __future__ import annotations

import threading
import time
from collections import deque

from procflow.runtime.work.slots import Lane


def blocking_lane(gate: threading.Event, entered: threading.Event) -> Lane[int, int]:
    def work(item: int) -> int:
        if item == 1:
            entered.set()
            gate.wait(10)
        return item * 10

    return Lane(deque([1, 2, 3]), work, step_timeout=0.05)


def test_an_attempt_in_flight_can_be_abandoned_and_its_outcome_is_dropped() -> None:
    gate, entered = threading.Event(), threading.Event()
    lane = blocking_lane(gate, entered)
    thread = threading.Thread(target=lane.run)
    thread.start()
    assert entered.wait(5)
    assert lane.abandon_in_flight()
    assert not lane.abandon_in_flight()  # once only
    gate.set()
    thread.join(5)
    assert lane.finished.is_set()
    assert lane.results() == []  # the thread saw it was abandoned: nothing handed in
    assert list(lane.todo) == [2, 3]  # for whoever took the batch over


def test_a_finished_lane_cannot_be_abandoned() -> None:
    lane: Lane[int, int] = Lane(deque([1, 2]), lambda n: n, step_timeout=1.0)
    lane.run()
    assert not lane.abandon_in_flight()
    assert lane.abandon_if_overran(time.monotonic() + 3600) is None
    assert lane.results() == [(1, 1), (2, 2)]


def test_an_overrun_abandons_once_and_hands_over_the_rest() -> None:
    gate, entered = threading.Event(), threading.Event()
    lane = blocking_lane(gate, entered)
    thread = threading.Thread(target=lane.run)
    thread.start()
    try:
        assert entered.wait(5)
        assert lane.abandon_if_overran(time.monotonic()) is None  # not past its deadline yet
        taken = lane.abandon_if_overran(time.monotonic() + 1.0)
        assert taken == (1, [2, 3], 0.05)
        assert lane.abandon_if_overran(time.monotonic() + 2.0) is None  # already abandoned
        assert not lane.abandon_in_flight()
    finally:
        gate.set()
        thread.join(5)
    assert lane.results() == []
