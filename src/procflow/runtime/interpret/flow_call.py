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

from procflow.errors import CallRefused, ExprError, InputError
from procflow.expr import EvalContext, render_value
from procflow.model.ir import CallStep, Flow, FlowStep
from procflow.runtime.clock import iso, micros
from procflow.runtime.data.inputs import check_inputs
from procflow.runtime.interpret.actions import ActionAttempt
from procflow.runtime.interpret.flow_state import Frame, to_json
from procflow.runtime.interpret.flow_throttle import ThrottledMachine, over_budget
from procflow.runtime.transition import ChildStart, Transition, new_run_id
from procflow.states import RunStatus, TokenState
from procflow.store.rows import RunRow, TokenRow

__all__ = [
    "CALL_FAKES", "MAX_DEPTH", "CallRefused", "CallTarget", "CallingMachine", "Stop",
    "child_failure",
]  # fmt: skip

MAX_DEPTH = 16  # calls nested deeper than this fail their step: recursion terminates

# Test doubles installed by ``procflow.testing``: flow name → a function of the rendered inputs
# that returns the child's output or raises (the call then fails like a failed child).
CALL_FAKES: dict[str, Callable[[dict[str, Any]], Any]] = {}


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
    def started(self, step: FlowStep, **data: Any) -> None: ...
    def complete(
        self, step: FlowStep, value: Any, *, history: bool = True, **data: Any
    ) -> None: ...
    def fail(self, step: FlowStep, message: str, kind: str) -> None: ...
    def failed_attempt(self, step: CallStep, outcome: ActionAttempt) -> None: ...
    def resolve_call(self, name: str) -> CallTarget: ...


def take_call(m: CallingMachine, step: CallStep, frame: Frame) -> None:
    """The call step, on its first visit or on its token's return."""
    child_id = frame.pop("call", None)
    if child_id is not None:
        _returned(m, step, child_id, m.token.data.pop("child", None))
        return
    if over_budget(m, step):
        raise _Stop
    m.started(step)
    try:
        given = render_value(dict(step.inputs), m.env(), m.eval_ctx)
    except ExprError as exc:
        m.fail(step, f"inputs: {exc.message}", "expression")
        return
    given = to_json(given)
    fake = CALL_FAKES.get(step.flow)
    if fake is not None:
        _faked(m, step, fake, given)
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
        token, depth, step.detach, target.flow.concurrency is not None,
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
    m: CallingMachine, step: CallStep, fake: Callable[[dict[str, Any]], Any], given: Any
) -> None:
    try:
        output = fake(given if isinstance(given, dict) else {})
    except Exception as exc:  # a fake's failure stands for a failed child
        m.failed_attempt(step, ActionAttempt(error=str(exc), kind="call"))
        return
    if step.detach:
        m.complete(step, {"run_id": None})
        return
    m.complete(step, {"run_id": None, "status": "completed", "output": to_json(output)})


def _span(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
