"""What a worker logs of the runs it advances, so that an operator can follow a run by its id:

- at DEBUG (``worker --verbose``), each attempt as it ends: ``attempt ended`` with ``run_id``,
  ``definition``, ``step``, ``attempt``, ``outcome`` (one of ``observe.OUTCOMES``) and
  ``duration_ms``;
- at INFO, each run that fails or is aborted as its transition commits: ``run failed: MESSAGE``
  (or ``run aborted: ...``) with ``run_id``, ``definition``, ``step`` and ``outcome``. A run that
  fails by an incident is logged where the incident is built (ERROR, ``advancing``), not again.

A line names runs and steps, never what they carry: the attempt line has no message at all, and
a failure's message is the one the run keeps (masked by the interpreter with the run's vars and
secrets), masked once more with the vars the failing transition set.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from procflow.runtime.data.secrets import Masker
from procflow.runtime.transition import Transition
from procflow.runtime.work.incidents import INCIDENT
from procflow.runtime.work.observe import (
    NO_OBSERVER,
    AttemptCtx,
    Observer,
    Observers,
    attempt_seconds,
    outcome_of,
)
from procflow.states import RunStatus

__all__ = ["RunLogObserver", "with_run_logs"]

log = logging.getLogger("procflow.worker")

_ENDINGS = {"run.failed": RunStatus.FAILED, "run.aborted": RunStatus.ABORTED}
_ENDED_BADLY = frozenset(_ENDINGS.values())


class RunLogObserver(Observer):
    """Logs attempts (DEBUG) and failed runs (INFO) of the worker ``worker`` (its lease owner,
    on each line as the worker's other lines have it); each hook returns at once when its level
    is off."""

    def __init__(self, worker: str | None = None) -> None:
        self.worker = worker
        # At INFO only failed runs are logged: the attempts need not pass through here at all.
        self.wants_attempts = log.isEnabledFor(logging.DEBUG)

    def attempted(self, ctx: AttemptCtx, outcome: Any) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            return
        step, kind = outcome_of(ctx, outcome)
        seconds = attempt_seconds()
        log.debug(
            "attempt ended: %s", kind,
            extra={
                "run_id": ctx.run.id, "definition": ctx.run.name, "step": step or None,
                "attempt": _attempt(ctx, outcome, step), "outcome": kind,
                "duration_ms": None if seconds is None else round(seconds * 1000, 3),
                "worker": self.worker,
            },
        )  # fmt: skip

    def committed(self, steps: Sequence[tuple[AttemptCtx, Transition]]) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        for _, tr in steps:
            if tr.run.status not in _ENDED_BADLY:  # nearly every transition: one look
                continue
            ending = next((h for h in tr.history if h.type in _ENDINGS), None)
            error = tr.run.error or {}
            if ending is None or error.get("type") == INCIDENT:
                continue
            masked = Masker(tr.vars_set.values()).mask(str(error.get("message") or ""))
            status = _ENDINGS[ending.type].value
            log.info(
                "run %s: %s", status, masked,
                extra={"run_id": tr.run.id, "definition": tr.run.name,
                       "step": error.get("step") or ending.step, "outcome": status,
                       "worker": self.worker},
            )  # fmt: skip


def _attempt(ctx: AttemptCtx, outcome: Any, step: str) -> int | None:
    """The attempt's number: the first one its history names for ``step``, or its token's (an
    incident)."""
    if isinstance(outcome, Transition):
        numbered = [h for h in outcome.history if h.attempt is not None]
        return next((h.attempt for h in numbered if h.step == step), None) or next(
            (h.attempt for h in numbered), None
        )
    token_id = getattr(outcome, "token_id", None)
    token = ctx.tokens.get(token_id) if token_id is not None else None
    return token.attempt if token is not None else None


def with_run_logs(observer: Observer | None, worker: str | None = None) -> Observer:
    """``observer`` (None: none) and the run logs of ``worker``, for its advancer. With INFO off for
    ``procflow.worker`` nothing would be logged: ``observer`` alone is kept, and the advancer
    keeps its fast path when that is none."""
    if not log.isEnabledFor(logging.INFO):
        return NO_OBSERVER if observer is None else observer
    logs = RunLogObserver(worker)
    return logs if observer is None or observer is NO_OBSERVER else Observers(logs, observer)
