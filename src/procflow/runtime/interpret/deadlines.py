"""Every attempt has a deadline: the worker's ``--step-timeout``, or a flow step's ``timeout``.

A worker advances runs on slot threads (``runtime/work/slots.py``) and watches the clock of each.
The code that calls a delegate or a connector action announces the call here first
(:func:`begin_call`), which sets the attempt's deadline from the step's own timeout when it has
one. When a call overruns its deadline the worker stops waiting for it: the thread stays with the
call, and the run is advanced again without it, where :func:`begin_call` raises the timeout, so
the attempt fails like any other (retry and onError apply).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

from procflow.errors import ActionTimeout

__all__ = ["AttemptClock", "begin_call", "current", "watching"]

# How much longer than a step's own ``timeout`` the worker waits before it gives up on the
# slot: the call's own timer (a daemon thread in ``call_action``) should win the race.
GRACE_SECONDS = 5.0


@dataclass
class AttemptClock:
    """The deadline of the attempt a slot thread is making (``time.monotonic`` seconds)."""

    default: float  # the worker's step timeout, in seconds
    deadline: float
    limit: float  # the timeout the deadline was set from (the step's own, or the default)
    # Set when the attempt is advanced again after its call overran: the call is not made.
    overran: str | None = None
    started: float = 0.0  # when the attempt began (monotonic)

    @classmethod
    def starting(cls, default: float) -> AttemptClock:
        now = time.monotonic()
        return cls(default, now + default, default, started=now)

    def restart(self) -> None:
        """The next attempt begins (a lane reuses its clock)."""
        self.started = started = time.monotonic()
        self.limit = self.default
        self.deadline = started + self.default

    @classmethod
    def replay(cls, default: float, message: str) -> AttemptClock:
        return cls(default, float("inf"), default, message)


_current: ContextVar[AttemptClock | None] = ContextVar("procflow_attempt_clock", default=None)


def current() -> AttemptClock | None:
    return _current.get()


class watching:
    """Install ``clock`` for the attempt made inside the block (on this thread)."""

    def __init__(self, clock: AttemptClock) -> None:
        self.clock = clock

    def __enter__(self) -> AttemptClock:
        self._token = _current.set(self.clock)
        return self.clock

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def begin_call(step: str, timeout: float | None) -> None:
    """A delegate or action of ``step`` is about to be called with the step's own ``timeout``
    (None: the worker's default). Raises :class:`ActionTimeout` when this is the replay of an
    attempt whose call overran."""
    clock = _current.get()
    if clock is None:
        return  # not on a worker's slot (a one-off call): nothing watches the clock
    if clock.overran is not None:
        seconds = timeout if timeout is not None else clock.default
        raise ActionTimeout(clock.overran, seconds=seconds, step=step)
    if timeout is not None:  # without one, the deadline the attempt started with stands
        clock.limit, clock.deadline = timeout, time.monotonic() + timeout + GRACE_SECONDS
