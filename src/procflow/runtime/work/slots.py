"""Lanes and slot threads: where a worker makes attempts, so that a blocked call holds one
thread, never the worker.

A *lane* is a queue of runs one thread advances one after another, each under an
:class:`AttemptClock`: the work loop's driver thread runs a round's lane itself, and runs queued
behind a slow attempt move to a new lane on a slot thread. A lane whose current attempt overruns
its deadline is *abandoned*: its thread stays with the call (a Python thread cannot be stopped),
the runs it had not begun are taken back for other lanes, and a new thread replaces it — for a
slot, up to as many abandoned threads as there are slots; past that, a hung call does cost the
worker a slot until it returns.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Generic, TypeVar

from procflow.runtime.interpret.deadlines import AttemptClock, watching

__all__ = ["Lane", "Slots"]

log = logging.getLogger("procflow.worker")

T = TypeVar("T")  # what a lane works on (a run's context)
R = TypeVar("R")  # what advancing one gives (a transition, or the error it raised)


@dataclass(eq=False)
class Lane(Generic[T, R]):
    """Runs one slot thread advances in turn, and what came of each. Its state changes under its
    lock, so the loop abandoning it and the thread moving on never disagree about a run."""

    todo: deque[T]
    work: Callable[[T], R]
    step_timeout: float
    done: list[tuple[T, R]] = field(default_factory=list)
    current: T | None = None  # the run whose attempt is in flight, timed by ``clock``
    clock: AttemptClock = field(init=False)
    abandoned: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # One clock for the lane, restarted for each attempt: its attempts are one at a time.
        self.clock = AttemptClock.starting(self.step_timeout)

    def run(self) -> None:
        clock = self.clock
        todo, done, lock, work = self.todo, self.done, self.lock, self.work
        try:
            with watching(clock):
                with lock:
                    if self.abandoned or not todo:
                        return
                    item = self.current = todo.popleft()
                    clock.restart()
                default = clock.default
                while True:
                    outcome = work(item)
                    # One lock per attempt: hand in the outcome and take the next run together.
                    with lock:
                        if self.abandoned:  # the loop took this run over: drop the outcome
                            return
                        done.append((item, outcome))
                        if not todo:
                            self.current = None
                            return
                        item = self.current = todo.popleft()
                        # clock.restart(), inlined: this runs once per transition
                        clock.started = started = monotonic()
                        clock.limit, clock.deadline = default, started + default
        finally:
            self.finished.set()

    def take_unbegun(self, slower_than: float, now: float) -> list[T]:
        """When the current attempt has run longer than ``slower_than`` seconds, the runs not
        begun, for another lane (the current attempt stays; it may just be slow)."""
        with self.lock:
            if self.current is None or not self.todo:
                return []
            if now - self.clock.started < slower_than:
                return []
            left = list(self.todo)
            self.todo.clear()
            return left

    def abandon_if_overran(self, now: float) -> tuple[T, list[T], float] | None:
        """If the current attempt overran its deadline: abandon the lane and return that run,
        the runs not begun (both now the loop's) and the limit it overran; else None."""
        with self.lock:
            if self.abandoned or self.current is None or now <= self.clock.deadline:
                return None
            self.abandoned = True
            left = list(self.todo)
            self.todo.clear()
            return self.current, left, self.clock.limit

    def abandon_in_flight(self) -> bool:
        """Abandon the lane if an attempt is in flight (its thread is then no longer the
        lane's); False when the lane has already finished its last attempt."""
        with self.lock:
            if self.abandoned or self.current is None:
                return False
            self.abandoned = True
            return True

    def results(self) -> list[tuple[T, R]]:
        """The outcomes so far, handed over once."""
        with self.lock:
            out = list(self.done)
            self.done.clear()  # in place: the lane's thread appends to this very list
            return out


class Slots:
    """``count`` daemon threads taking lanes from a queue (daemon: a call that never returns
    must not keep the process alive once the worker has handed its runs back)."""

    def __init__(self, count: int, name: str = "procflow-slot") -> None:
        self.count = max(1, count)
        self._name = name
        self._queue: queue.SimpleQueue[Lane[Any, Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._stuck = 0  # threads left with an abandoned call
        self._lock = threading.Lock()

    def start(self, lane: Lane[Any, Any]) -> None:
        with self._lock:
            if len(self._threads) < self.count:
                self._spawn()
        self._queue.put(lane)

    def replace(self) -> None:
        """A lane was abandoned with its thread: start a fresh one in its place."""
        with self._lock:
            self._stuck += 1
            if self._stuck <= self.count:
                self._spawn()  # a fresh thread takes the stuck one's place
            else:
                log.error(
                    "%d calls overran their deadline and still hold their threads; "
                    "this worker now has fewer free slots",
                    self._stuck,
                )

    def _spawn(self) -> None:
        thread = threading.Thread(
            target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        while True:
            lane = self._queue.get()
            if lane is None:
                return
            lane.run()
            if lane.abandoned:  # this thread was replaced while the call hung
                with self._lock:
                    self._stuck -= 1
                    self._threads.remove(threading.current_thread())
                return

    def close(self) -> None:
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
