"""What a worker tells an observer: each attempt as it ends, each run as it finishes; and the
store's gauges (how many runs, waiting on what, how late the due work is).

The runtime does not depend on any metrics library. The work loop holds an :class:`Observer`
(``WorkLoop.observer``), :data:`NO_OBSERVER` unless a face sets one; the Prometheus observer of
``procflow serve`` and ``procflow worker --metrics-port`` lives face-side
(``procflow.server.metrics``). The two hooks sit where an attempt ends (on its slot thread) and
where a batch is committed (on the loop's thread); with no observer, each is one attribute
lookup and a call that returns at once.

An attempt's outcome, from the transition it made (or the error it raised):

- ``completed``: the step completed (or was skipped, or recovered through ``onError``);
- ``retry``: the attempt failed and another one is scheduled;
- ``failed``: the step failed for good (no attempt left);
- ``incident``: the attempt raised where no step should (the run fails with an incident);
- ``waiting``: the step parked its token (a timer, an event, a task, a record);
- ``advanced``: anything else (a gateway, a fork, a join).

A committed batch also tells of calls: each child a call step started (``started``), and what
came of each call a step took back (``completed``, ``failed``, ``timed_out``, ``cancelled``).
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from procflow.runtime.clock import store_now
from procflow.runtime.interpret import deadlines
from procflow.runtime.operations.listing import WAIT_KINDS
from procflow.runtime.schedules.firing import Fired
from procflow.runtime.transition import Transition
from procflow.states import FINISHED, TokenState
from procflow.store.rows import RunRow, TokenRow
from procflow.store.store import Tx

__all__ = [
    "CALL_OUTCOMES",
    "NO_OBSERVER",
    "OUTCOMES",
    "AttemptCtx",
    "CountingObserver",
    "Observer",
    "Observers",
    "StoreGauges",
    "attempt_seconds",
    "observed_attempt",
    "outcome_of",
    "read_gauges",
]

OUTCOMES = ("completed", "retry", "failed", "incident", "waiting", "advanced")
CALL_OUTCOMES = ("started", "completed", "failed", "timed_out", "cancelled")

_COMPLETED = frozenset({"step.completed", "step.skipped", "step.recovered"})


class AttemptCtx(Protocol):
    """What an observer reads of a run's context (``advancing.Ctx``, which imports this
    module, so it is not named here)."""

    @property
    def run(self) -> RunRow: ...
    @property
    def tokens(self) -> Mapping[int, TokenRow]: ...


class Observer:
    """Told of every attempt and every committed batch; this base is the no-op observer. An
    attempt's outcome is its :class:`Transition`, or the ``advancing.Failed`` it raised.
    ``wants_attempts`` False: :meth:`attempted` would do nothing, and the advancer keeps the
    path without it (the one every transition takes)."""

    wants_attempts = True

    def attempted(self, ctx: AttemptCtx, outcome: Any) -> None:
        """An attempt of ``ctx`` ended with ``outcome``."""

    def committed(self, steps: Sequence[tuple[AttemptCtx, Transition]]) -> None:
        """The transitions of ``steps`` are committed."""

    def slots_fired(self, flow: str, schedule: str, fired: Fired) -> None:
        """A schedule's due slot fired (committed): what it started, skipped, missed, buffered."""


NO_OBSERVER = Observer()


class Observers(Observer):
    """Several observers told of the same attempts and batches, in order (logs and metrics)."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers
        self.wants_attempts = any(o.wants_attempts for o in observers)

    def attempted(self, ctx: AttemptCtx, outcome: Any) -> None:
        for observer in self.observers:
            observer.attempted(ctx, outcome)

    def committed(self, steps: Sequence[tuple[AttemptCtx, Transition]]) -> None:
        for observer in self.observers:
            observer.committed(steps)

    def slots_fired(self, flow: str, schedule: str, fired: Fired) -> None:
        for observer in self.observers:
            observer.slots_fired(flow, schedule, fired)


def attempt_seconds() -> float | None:
    """How long the attempt ending now ran; None for a replay (its call was abandoned)."""
    clock = deadlines.current()  # None, or unstarted, for a replay
    return time.monotonic() - clock.started if clock is not None and clock.started else None


_F = TypeVar("_F", bound=Callable[..., Any])


def observed_attempt(attempt: _F) -> _F:
    """Decorates ``Advancer.attempt`` (its signature kept): the advancer's ``observer`` is told
    of each attempt as it ends."""

    @functools.wraps(attempt)
    def observed(self: Any, ctx: AttemptCtx, now: int) -> Any:
        outcome = attempt(self, ctx, now)
        self.observer.attempted(ctx, outcome)
        return outcome

    return cast(_F, observed)


class CountingObserver(Observer, ABC):
    """An observer that classifies attempts and finished runs and hands them to
    :meth:`count_attempt` and :meth:`count_finished` (which a metrics face implements)."""

    def attempted(self, ctx: AttemptCtx, outcome: Any) -> None:
        step, kind = outcome_of(ctx, outcome)
        self.count_attempt(ctx.run.name, step, kind, attempt_seconds())

    def committed(self, steps: Sequence[tuple[AttemptCtx, Transition]]) -> None:
        for _, tr in steps:
            if tr.run.status in FINISHED:
                self.count_finished(tr.run.name, tr.run.status)
            for child in tr.calls:
                self.count_call(child.flow, "started")
            for flow, outcome in tr.calls_ended:
                self.count_call(flow, outcome)
            for entry in tr.history:
                if entry.type == "step.throttled" and entry.data is not None:
                    self.count_throttled(str(entry.data["budget"]))

    @abstractmethod
    def count_attempt(
        self, definition: str, step: str, outcome: str, seconds: float | None
    ) -> None:
        """One attempt of ``step`` of ``definition`` ended with ``outcome`` after ``seconds``
        (None: a replay, whose call was abandoned)."""

    @abstractmethod
    def count_finished(self, definition: str, status: str) -> None:
        """A run of ``definition`` finished with ``status``."""

    @abstractmethod
    def count_call(self, flow: str, outcome: str) -> None:
        """A call of ``flow`` started (``started``), or its step took back what came of it: one
        of :data:`CALL_OUTCOMES` after ``started`` (a detached call counts only as started)."""

    @abstractmethod
    def count_throttled(self, budget: str) -> None:
        """A step's attempt waited for the throttle budget ``budget`` (its name, or
        ``FLOW/STEP``) instead of starting."""


def outcome_of(ctx: AttemptCtx, outcome: Any) -> tuple[str, str]:
    """(the step the attempt advanced, what came of it: one of :data:`OUTCOMES`)."""
    if not isinstance(outcome, Transition):  # ``advancing.Failed``: the attempt raised
        token_id = getattr(outcome, "token_id", None)
        token = ctx.tokens.get(token_id) if token_id is not None else None
        return (token.step if token is not None else ""), "incident"
    step, kind = "", "advanced"
    for entry in outcome.history:
        if not step and entry.step:
            step = entry.step
        if entry.type == "step.failed":  # the step that failed, after any the attempt passed
            return entry.step or step, "failed"
        if entry.type in _COMPLETED:
            kind = "completed"
        elif entry.type == "attempt.failed" and kind != "completed":
            kind = "retry"
    if kind == "advanced" and any(
        t.state == TokenState.WAITING for t in (*outcome.tokens_update, *outcome.tokens_insert)
    ):
        kind = "waiting"
    return step, kind


# --- the store's gauges -----------------------------------------------------------------------


@dataclass(frozen=True)
class StoreGauges:
    """What the store holds now, as the gauges show it."""

    runs: dict[tuple[str, str], int]  # (status, definition) -> runs
    waiting: dict[str, int]  # what runs wait for -> runs (every kind, 0 included)
    open_tasks: int
    oldest_due_seconds: float  # how late the most overdue timer is; 0 when none is due
    queued: dict[str, int] = field(default_factory=dict)  # flow -> runs queued (none: absent)
    read_at: float = field(default_factory=time.monotonic)


def read_gauges(reader: Tx) -> StoreGauges:
    """The gauges, read with one indexed query each (see ``store/queries/metrics.py``)."""
    waiting = dict.fromkeys(WAIT_KINDS, 0)
    waiting.update(reader.waiting_run_counts())
    due = reader.earliest_due()
    now = store_now(reader)
    late = max(0.0, (now - due) / 1_000_000) if due is not None else 0.0
    return StoreGauges(
        reader.run_counts_by_status_and_name(), waiting, reader.open_task_count(), late,
        reader.queued_run_counts(),
    )  # fmt: skip
