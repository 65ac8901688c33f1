"""A flow's ``call`` step: start a run of another flow and wait for it to end.

Nothing here starts or reads a run: the step decides, and its transition carries the child to
start (:class:`~procflow.runtime.transition.ChildStart`), written in the same commit as the
parent's token parked on it (a wait of kind ``call`` keyed by the child's id). The child's end
hands its outcome to the token (``token.data["child"]``, see ``runtime/waits/calls.py``); a
timeout takes the wait first, and this step then cancels the child. Rules:
docs/reference/calls.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from procflow.errors import ActionTimeout, CallRefused, ExprError, InputError, NonRetryableError
from procflow.expr import EvalContext, render_value
from procflow.model.ir import CallStep, Flow, FlowStep
from procflow.runtime.clock import iso, micros
from procflow.runtime.data.inputs import check_inputs
from procflow.runtime.interpret.actions import ActionAttempt
from procflow.runtime.interpret.flow_state import Frame, to_json
from procflow.runtime.interpret.flow_throttle import ThrottledMachine, throttle_start
from procflow.runtime.transition import ChildStart, Transition, new_run_id
from procflow.states import RunStatus, TokenState
from procflow.store.rows import RunRow, TokenRow

__all__ = [
    "CALL_FAKES", "MAX_DEPTH", "TIMED_OUT", "CallAsk", "CallRefused", "CallTarget",
    "CallingMachine", "Stop", "child_failure",
]  # fmt: skip

MAX_DEPTH = 16  # calls nested deeper than this fail their step: recursion terminates

TIMED_OUT = "did not end within"  # in the message of a call that timed out (route coverage)


@dataclass(frozen=True)
class CallAsk:
    """What a test double of a called flow is asked: the rendered inputs, and which attempt of
    which step asks (``fail: N`` counts attempts; ``takes`` is held against ``timeout``)."""

    flow: str
    step: str
    inputs: dict[str, Any]
    attempt: int
    timeout: float | None  # the step's timeout in seconds, None without one


# Test doubles installed by ``procflow.testing``: flow name → a function of the call that returns
# the child's output or raises: the call then fails like a failed child (``error.type: call``);
# :class:`~procflow.errors.NonRetryableError` skips the remaining retries, and a virtual
# :class:`~procflow.errors.ActionTimeout` keeps the step waiting until its timeout runs out.
CALL_FAKES: dict[str, Callable[[CallAsk], Any]] = {}


class _Stop(Exception):
    """The token parked (waiting, ready for its next action, failed) or the run ended."""


Stop = _Stop  # the flow machine's, shared with it


@dataclass(frozen=True)
class CallTarget:
    version_id: int
    flow: Flow


Resolver = Callable[[str], CallTarget]
"""The newest enabled version of a flow, by name (raises :class:`CallRefused`)."""


class CallingMachine(ThrottledMachine, Protocol):
    """What the call step needs of the flow machine."""

    tr: Transition
    token: TokenRow
    eval_ctx: EvalContext

    @property
    def current_run(self) -> RunRow: ...
    def env(self) -> dict[str, Any]: ...
    def started(self, step: FlowStep, at: int | None = None, **data: Any) -> None: ...
    def complete(
        self, step: FlowStep, value: Any, *, history: bool = True, **data: Any
    ) -> None: ...
    def fail(self, step: FlowStep, message: str, kind: str) -> None: ...
    def failed_attempt(self, step: CallStep, outcome: ActionAttempt) -> None: ...
    def park(self, kind: str, due: int, extra: dict[str, Any]) -> None: ...
    def resolve_call(self, name: str) -> CallTarget: ...


def take_call(m: CallingMachine, step: CallStep, frame: Frame) -> None:
    """The call step, on its first visit or on its token's return."""
    child_id = frame.pop("call", None)
    if child_id is not None:
        _returned(m, step, child_id, m.token.data.pop("child", None))
        return
    timed_out = frame.pop("timed_out", None)
    if timed_out is not None:  # a fake's virtual time ran past the step's timeout
        m.failed_attempt(step, ActionAttempt(error=timed_out, kind="timeout"))
        return
    started = throttle_start(m, step)
    if started is None:
        raise _Stop
    m.started(step, started)
    try:
        given = render_value(dict(step.inputs), m.env(), m.eval_ctx)
    except ExprError as exc:
        m.fail(step, f"inputs: {exc.message}", "expression")
        return
    given = to_json(given)
    fake = CALL_FAKES.get(step.flow)
    if fake is not None:
        _faked(m, step, frame, fake, given if isinstance(given, dict) else {})
        return
    depth = int(m.current_run.state.get("depth", 0)) + 1
    if depth > MAX_DEPTH:
        message = (
            f"call of [{step.flow}] would start a run nested {depth} calls deep; calls nest "
            f"at most {MAX_DEPTH} deep"
        )
        m.fail(step, message, "call")
        return
    try:
        target = m.resolve_call(step.flow)
        inputs = check_inputs(target.flow, given)
    except CallRefused as exc:
        m.fail(step, str(exc), "call")
        return
    except InputError as exc:
        m.fail(step, f"the inputs of [{step.flow}]: {'; '.join(exc.problems)}", "call")
        return
    _start(m, step, frame, target, inputs, depth)


def _start(
    m: CallingMachine, step: CallStep, frame: Frame, target: CallTarget,
    inputs: dict[str, Any], depth: int,
) -> None:  # fmt: skip
    token, tr = m.token, m.tr
    child = ChildStart(
        new_run_id(), target.version_id, target.flow.name, target.flow.steps[0].id, inputs,
        token, depth, step.detach, token.path, target.flow.concurrency is not None,
    )  # fmt: skip
    tr.calls.append(child)
    tr.add("call.started", step.id, token.path, token.attempt, run_id=child.run_id,
           flow=step.flow, detached=step.detach)  # fmt: skip
    if step.detach:
        m.complete(step, {"run_id": child.run_id})
        return
    frame["call"] = child.run_id
    token.state, token.since = TokenState.WAITING, tr.now
    token.wait = {"kind": "call", "run_id": child.run_id, "flow": step.flow}
    tr.waits.append((token, "call", "call", child.run_id))
    if step.mods.timeout is not None:
        due = tr.now + micros(step.mods.timeout)
        token.wait["timeout_at"] = due
        tr.timers.append((token, "timeout", due))
        tr.add("timer.armed", step.id, token.path, token.attempt, due=iso(due))
    tr.update(token)
    raise _Stop


def _returned(m: CallingMachine, step: CallStep, child_id: str, child: Any) -> None:
    m.tr.calls_ended.append((step.flow, _outcome(child)))
    if child is None:  # the timeout took the wait: the child is cancelled with this commit
        m.tr.cancels.append(child_id)
        timeout = step.mods.timeout or timedelta(0)
        message = f"run {child_id} of {step.flow} did not end within {_span(timeout)}"
        m.failed_attempt(step, ActionAttempt(error=message, kind="timeout"))
        return
    if child.get("status") == RunStatus.COMPLETED:
        value = {"run_id": child_id, "status": "completed", "output": child.get("output")}
        m.complete(step, value, run_id=child_id)
        return
    m.failed_attempt(
        step, ActionAttempt(error=child_failure(child_id, step.flow, child), kind="call")
    )


_OUTCOMES = {RunStatus.COMPLETED: "completed", RunStatus.CANCELLED: "cancelled"}


def _outcome(child: Any) -> str:
    """What came of a call, as metrics count it (``None``: its timeout took the wait; a failed
    or aborted child failed it)."""
    return "timed_out" if child is None else _OUTCOMES.get(child.get("status"), "failed")


def child_failure(child_id: str, flow: str, child: dict[str, Any]) -> str:
    """``run 01a2… of provision-tenant failed at createDb: quota exceeded``."""
    status = child.get("status")
    error = child.get("error") or {}
    if status == RunStatus.FAILED:
        at = f" at {error['step']}" if error.get("step") else ""
        return f"run {child_id} of {flow} failed{at}: {error.get('message', 'no message')}"
    if status == "refused":
        return f"run {child_id} of {flow} was refused: {error.get('message')}"
    return f"run {child_id} of {flow} was {status}"


def _faked(
    m: CallingMachine, step: CallStep, frame: Frame, fake: Callable[[CallAsk], Any],
    given: dict[str, Any],
) -> None:  # fmt: skip
    """A call answered by a test double: no child run; a detached one goes on whatever the
    double does (a detached child's end never reaches its parent)."""
    timeout = step.mods.timeout.total_seconds() if step.mods.timeout is not None else None
    ask = CallAsk(step.flow, step.id, given, m.token.attempt, timeout)
    try:
        output = fake(ask)
    except Exception as exc:  # a fake's failure stands for a failed child
        if step.detach:
            m.complete(step, {"run_id": None})
            return
        if isinstance(exc, ActionTimeout):
            _fake_ran_late(m, step, frame, exc)
        final = isinstance(exc, NonRetryableError)
        m.failed_attempt(step, ActionAttempt(error=str(exc), kind="call", final=final))
        return
    if step.detach:
        m.complete(step, {"run_id": None})
        return
    m.complete(step, {"run_id": None, "status": "completed", "output": to_json(output)})


def _fake_ran_late(m: CallingMachine, step: CallStep, frame: Frame, exc: ActionTimeout) -> None:
    """The faked child takes longer than the step's timeout: the step waits until the timeout
    runs out on the virtual clock, then fails as a real call's timeout does."""
    span = _span(timedelta(seconds=exc.seconds))
    frame["timed_out"] = f"the faked run of {step.flow} {TIMED_OUT} {span}"
    m.park("timer", m.tr.now + micros(timedelta(seconds=exc.seconds)), {})
    raise _Stop


def _span(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
