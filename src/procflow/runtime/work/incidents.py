"""Incidents: a run that cannot be advanced fails alone, never its worker.

Anything that raises while a worker advances one run — a due time past year 9999, a var that no
longer decrypts, a definition whose project folder is gone, a bug — becomes that run's incident:
the run is ``failed`` at the step its token stands on, with the error's text, and the rest of the
batch commits. Once the cause is fixed, ``runs retry`` takes the run up again at that step.

The transition is built from the run's rows as last committed (the failed attempt may have left
its in-memory objects half-changed), so nothing of the failed attempt is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from procflow.runtime.data.secrets import Masker
from procflow.runtime.transition import Transition
from procflow.states import RunStatus, TokenState
from procflow.store.rows import RunRow, TokenRow

__all__ = ["INCIDENT", "IncidentCtx", "describe", "incident"]

INCIDENT = "incident"  # the error type a run's incident carries


@dataclass
class IncidentCtx:
    """A run being failed by an incident: its rows, without a definition (it may not load)."""

    run: RunRow
    tokens: dict[int, TokenRow]
    saved: tuple[Any, ...] = field(default=(), repr=False)
    lease_until: int = 0


def describe(exc: BaseException) -> str:
    """The incident's message: what was raised and what it said."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def incident(
    ctx: IncidentCtx, token: TokenRow | None, now: int, message: str, secrets: Iterable[Any] = ()
) -> Transition:
    """Fail ``ctx.run`` at ``token``'s step with ``message`` (masked with ``secrets``)."""
    message = Masker(secrets).mask(f"the worker could not advance this run: {message}")
    run, tr = ctx.run, Transition(ctx.run, now)
    step = path = None
    attempt: int | None = None
    if token is not None:
        step, path, attempt = token.step, token.path, token.attempt
        token.state, token.wait = TokenState.FAILED, None
        tr.update(token)
        tr.add("step.failed", step, path, attempt, message=message, error_type=INCIDENT)
    run.status, run.error = RunStatus.FAILED, {"step": step, "message": message, "type": INCIDENT}
    tr.add("run.failed", step, path, attempt, message=message)
    return tr
