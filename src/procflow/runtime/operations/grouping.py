"""Group commit: short user calls made at the same time by the threads of one process (the
request threads of ``procflow serve``) share one write transaction.

Each call hands its work to a :class:`TxGroup` and waits. The first caller to find no one
leading becomes the leader: it takes every call queued so far, does their work one after the
other in one transaction on its own store connection, commits, and wakes the callers; the calls
that arrived meanwhile wait for the next leader, one of themselves. A store answers a burst of
calls with one ``BEGIN``/``COMMIT`` per batch instead of per call, and on SQLite the callers no
longer take turns at the file's write lock through its busy handler, which naps up to 100 ms
between tries while the lock may already be free.

Each call is still all or nothing: when one call's work raises, the whole transaction is rolled
back, that call gets its error, and the others go back to the front of the queue to be done
again, in the next batch (their work is a function of the store, so doing it again is doing it
once). An error of the commit itself is every call's error, as it would have been alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from procflow.store.store import Store, Tx

__all__ = ["Grouped", "TxGroup"]

_H = TypeVar("_H", bound="Grouped")
_T = TypeVar("_T")


class Grouped(Protocol):
    """What a call's work runs on: the leader's engine, with its store connection."""

    @property
    def store(self) -> Store: ...


class _Call(Generic[_H, _T]):
    __slots__ = ("done", "error", "leads", "order", "value", "wake", "work")

    def __init__(self, work: Callable[[_H, Tx], _T], order: str) -> None:
        self.work = work
        self.order = order
        self.done = False  # committed, or failed with ``error``
        self.leads = False  # its thread is to lead the next batch
        self.value: _T | None = None
        self.error: BaseException | None = None
        self.wake = threading.Event()  # set when done or when made the leader


class TxGroup:
    """Calls from many threads, each with its own store connection, committed in batches.

    Only the threads that have something to do are woken: the callers of a committed batch,
    and the first queued caller, which leads the next one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Call[Any, Any]] = []
        self._leading = False

    def run(self, host: _H, work: Callable[[_H, Tx], _T], order: str = "") -> _T:
        """``work(host, tx)`` in a transaction shared with other threads' calls; its result.
        ``host`` (the caller's engine) does the work of the whole batch when this thread
        leads. Inside a transaction the caller already holds, the work joins it instead.

        A batch does its calls in the order of their ``order`` (what their work locks first,
        such as an event's correlation key): two processes' batches then take their locks in
        one order, and cannot deadlock on them where single calls could not."""
        if host.store.in_tx:
            with host.store.tx() as tx:
                return work(host, tx)
        call: _Call[_H, _T] = _Call(work, order)
        with self._lock:
            self._queue.append(call)
            if not self._leading:
                self._leading = True
                self._make_leader(call)
        try:
            while (batch := self._wait(call)) is not None:
                self._lead(host, batch)
        except BaseException:
            self._withdraw(call)
            raise
        if call.error is not None:
            raise call.error
        return call.value  # type: ignore[return-value]

    def _wait(self, call: _Call[_H, _T]) -> list[_Call[_H, _T]] | None:
        """None once ``call`` is done; else the batch this thread now leads."""
        call.wake.wait()
        with self._lock:
            call.wake.clear()
            if call.done:
                return None
            call.leads = False
            batch, self._queue = self._queue, []
            batch.sort(key=_order)  # stable: calls of one order keep their arrival order
            return batch

    def _make_leader(self, call: _Call[Any, Any]) -> None:
        call.leads = True
        call.wake.set()

    def _lead(self, host: _H, batch: list[_Call[_H, _T]]) -> None:
        failed: _Call[_H, _T] | None = None
        committed = False
        try:
            with host.store.tx() as tx:
                for call in batch:
                    failed = call
                    call.value = call.work(host, tx)
                failed = None
            committed = True
        except Exception as exc:
            # One call's error is its own; an error after every call's work (the commit's) is
            # every call's, as it would have been alone.
            for call in [failed] if failed is not None else batch:
                call.error = exc
        finally:
            self._settle(batch, committed)

    def _settle(self, batch: list[_Call[_H, _T]], committed: bool) -> None:
        with self._lock:
            again = []
            for call in batch:
                if committed or call.error is not None:
                    call.done = True
                    call.wake.set()
                else:
                    call.value = None
                    again.append(call)
            self._queue[:0] = again
            self._next_leader()

    def _next_leader(self) -> None:
        if self._queue:
            self._make_leader(self._queue[0])
        else:
            self._leading = False

    def _withdraw(self, call: _Call[_H, _T]) -> None:
        """The caller is gone (an interrupt): a call still queued is not done without it."""
        with self._lock:
            if call in self._queue:
                self._queue.remove(call)
                if call.leads:  # made the leader while leaving: hand it on
                    call.leads = False
                    self._next_leader()


def _order(call: _Call[Any, Any]) -> str:
    return call.order
