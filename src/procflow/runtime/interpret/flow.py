"""Running flows: from the run's position, take steps until the run waits, ends, or reaches
its next action after having run one (each action's side effect gets its own commit).

The position is the frame stack of :mod:`procflow.runtime.interpret.flow_state`. Pure steps
(``set``, ``if``, groups, loop bookkeeping, a ``wait`` already past) are taken in the same
transition as
the action before them. Failures follow the order of docs/reference/flow.md ("Failure"):
``optional`` on the failing step, else the scope's owner's ``recover``, else the owner fails and
the rule repeats one level up; at the top, unhandled, the run fails with its position kept, so
``runs retry`` re-runs the failed step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from procflow.errors import DurationError, ExprError
from procflow.expr import (
    EvalContext,
    Template,
    evaluate_condition,
    parse_duration,
    parse_timestamp,
    render,
    render_value,
    to_source,
)
from procflow.model.ir import (
    ActionStep,
    CallStep,
    FailStep,
    Flow,
    FlowStep,
    ForEachStep,
    GroupStep,
    RepeatStep,
    SetStep,
    WaitForStep,
    WaitStep,
)
from procflow.runtime.clock import from_datetime, iso, micros, to_datetime
from procflow.runtime.data.events import correlation_keys
from procflow.runtime.interpret.flow_action import ActionAttempt, attempt_action
from procflow.runtime.interpret.flow_call import CallTarget, Resolver, take_call
from procflow.runtime.interpret.flow_call import Stop as _Stop
from procflow.runtime.interpret.flow_state import (
    ITEMS,
    FlowIndex,
    Frame,
    environment,
    prefix,
    run_names,
    scope_of,
    to_json,
    watched_values,
)
from procflow.runtime.interpret.flow_throttle import Reserve, throttle_start
from procflow.runtime.transition import Transition
from procflow.states import RunStatus, TokenState
from procflow.store.rows import RunRow, TokenRow

# Pure steps taken in one transition at most; a long for_each of `set` steps commits between.
STEP_BUDGET = 200


@dataclass
class FlowCtx:
    """What a worker holds in memory for a flow run while it holds the run's lease."""

    run: RunRow
    tokens: dict[int, TokenRow]
    flow: Flow
    index: FlowIndex
    project_dir: str
    environ: dict[str, str]
    load_scopes: Callable[[str], dict[int, Any]] = field(default=lambda path: {}, repr=False)
    # One loop row (``path``, ``n``), or None: a for_each's items without its finished scopes.
    load_row: Callable[[str, int], Any] | None = field(default=None, repr=False)
    scopes: dict[str, dict[int, Any]] = field(default_factory=dict, repr=False)  # loop rows read
    # Rows known one by one (written here, or read alone) while their loop's rows were not all
    # read: an iteration adds its own row without reading every earlier one (reading them made
    # a long repeat quadratic), and only a finished loop reads them all.
    known: dict[str, dict[int, Any]] = field(default_factory=dict, repr=False)
    saved: tuple[Any, ...] = field(default=(), repr=False)
    lease_until: int = 0
    resolve_call: Resolver | None = field(default=None, repr=False)  # a call step's flow
    reserve: Reserve | None = field(default=None, repr=False)  # a throttled step's start


def advance_flow(fc: FlowCtx, token: TokenRow, now: int) -> Transition:
    tr = Transition(fc.run, now)
    machine = Machine(fc, token, tr)
    with contextlib.suppress(_Stop):  # every way out of the loop parks or ends the run
        machine.run()
    status = fc.run.status
    if status in (RunStatus.RUNNING, RunStatus.WAITING):
        fc.run.status = RunStatus.RUNNING if token.state == TokenState.READY else RunStatus.WAITING
    return tr


def output_failure(message: str) -> dict[str, str]:
    return {"step": "output", "message": message, "type": "expression"}


class Machine:
    def __init__(self, fc: FlowCtx, token: TokenRow, tr: Transition) -> None:
        self.fc = fc
        self.flow = fc.flow
        self.index = fc.index
        self.state = fc.run.state
        self.token = token
        self.tr = tr
        moment = to_datetime(tr.now)
        self.eval_ctx = EvalContext(now=lambda: moment)
        self.acted = False

    @property
    def current_run(self) -> RunRow:
        return self.fc.run

    @property
    def flow_name(self) -> str:
        return self.flow.name

    def reserve(self) -> Reserve | None:
        return self.fc.reserve

    def resolve_call(self, name: str) -> CallTarget:
        assert self.fc.resolve_call is not None  # the worker gives every flow run its resolver
        return self.fc.resolve_call(name)

    @property
    def frames(self) -> list[Frame]:
        frames: list[Frame] = self.state["frames"]
        return frames

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        for _ in range(STEP_BUDGET):
            frame = self.frames[-1]
            if frame.pop("poll", None) is not None:
                self.tr.add("step.started", frame["o"], self._path(frame["o"], outer=True),
                            self.token.attempt, iteration=frame["n"] + 1)  # fmt: skip
            steps = self.index.steps_of(frame)
            if frame["i"] >= len(steps):
                self.scope_done(frame)
                continue
            step = steps[frame["i"]]
            if isinstance(step, ActionStep) and self.acted:
                self.park_ready(step)
            self.place(step)
            self.take(step, frame)
        self.park_ready(None)

    def place(self, step: FlowStep) -> None:
        path = prefix(self.frames) + step.id
        token = self.token
        if token.step != step.id or token.path != path:
            token.step, token.path, token.attempt, token.since = step.id, path, 1, self.tr.now
        self.tr.update(token)

    def park_ready(self, step: FlowStep | None) -> None:
        if step is not None:
            self.place(step)
        self.token.state = TokenState.READY
        self.tr.update(self.token)
        raise _Stop

    def env(self) -> dict[str, Any]:
        run = self.fc.run
        names = run_names(run.id, run.started_at, self.state.get("schedule"))
        return environment(self.flow, self.index, self.state, names, self.item)

    def item(self, path: str, n: int) -> Any:
        """Loop row ``n`` of ``path`` (a for_each's items, the run's inputs), read alone."""
        fc = self.fc
        if path in fc.scopes or fc.load_row is None:
            return self.rows(path)[n]
        if n in fc.known.get(path, {}):
            return fc.known[path][n]
        value = fc.load_row(path, n)
        if value is None:
            raise KeyError((path, n))  # every row asked for was written when the loop began
        fc.known.setdefault(path, {})[n] = value
        return value

    def _path(self, step_id: str, *, outer: bool = False) -> str:
        frames = self.frames[:-1] if outer else self.frames
        return prefix(frames) + step_id

    # --- one step ---------------------------------------------------------------------------

    def take(self, step: FlowStep, frame: Frame) -> None:
        if not frame.get("s"):
            if step.mods.if_ is not None:
                try:
                    holds = self.condition(step.mods.if_)
                except ExprError as exc:
                    self.fail(step, f"if: {exc.message}", "expression")
                    return
                if not holds:
                    self.tr.add("step.skipped", step.id, self.token.path, 1, reason="if is false")
                    self.complete(step, None, history=False)
                    return
            frame["s"] = True
        if isinstance(step, ActionStep):
            self.action(step, frame)
        elif isinstance(step, WaitStep):
            self.wait(step, frame)
        elif isinstance(step, SetStep):
            self.set(step)
        elif isinstance(step, FailStep):
            self.fail_step(step)
        elif isinstance(step, GroupStep | ForEachStep | RepeatStep):
            self.enter(step)
        elif isinstance(step, WaitForStep):
            self.wait_for(step, frame)
        elif isinstance(step, CallStep):
            take_call(self, step, frame)
        else:
            raise AssertionError(f"step [{step.id}]: unknown construct")

    def condition(self, template: Template) -> bool:
        expr = template.single
        assert expr is not None  # validation: conditions are single expressions
        return evaluate_condition(expr, self.env(), self.eval_ctx)

    def complete(self, step: FlowStep, value: Any, *, history: bool = True, **data: Any) -> None:
        """Bind ``step`` in its scope and move to the next step of that scope."""
        frame = self.frames[-1]
        scope_of(self.state, frame)[step.id] = to_json(value)
        if history:
            self.tr.add("step.completed", step.id, self.token.path, self.token.attempt, **data)
        self.next(frame)

    def next(self, frame: Frame) -> None:
        frame["i"] += 1
        frame.pop("s", None)
        frame.pop("due", None)

    def started(self, step: FlowStep, at: int | None = None, **data: Any) -> None:
        self.tr.add("step.started", step.id, self.token.path, self.token.attempt, at, **data)

    # --- constructs -------------------------------------------------------------------------

    def action(self, step: ActionStep, frame: Frame) -> None:
        timed_out = frame.pop("timed_out", None)
        if timed_out is not None:  # the virtual time of the attempt below has run out
            self.failed_attempt(step, ActionAttempt(error=timed_out, kind="timeout"))
            return
        started = throttle_start(self, step)
        if started is None:
            raise _Stop
        manifest = self.flow.connectors[step.connector]
        outcome, _ = attempt_action(
            step, manifest, self.env(), self.eval_ctx, run_id=self.fc.run.id,
            path=self.token.path, attempt=self.token.attempt, project_dir=self.fc.project_dir,
            environ=self.fc.environ,
        )  # fmt: skip
        self.acted = True
        token = self.token
        self.tr.add("step.started", step.id, token.path, token.attempt, at=started)
        for level, line in outcome.logs:
            self.tr.add("log", step.id, token.path, token.attempt, level=level, message=line)
        for message in outcome.outbox:
            self.tr.outbox.append(message)
            self.tr.add("message.outboxed", step.id, token.path, token.attempt,
                        to=message.recipient)  # fmt: skip
        for recipient in outcome.sent:
            self.tr.add("message.sent", step.id, token.path, token.attempt, to=recipient)
        if outcome.error is None:
            self.complete(step, outcome.result or {})
        elif outcome.virtual_seconds is not None:  # a fake that takes longer than the timeout:
            # the attempt is under way until the virtual clock reaches its timeout, then fails
            frame["timed_out"] = outcome.error
            self.park("timer", started + micros(timedelta(seconds=outcome.virtual_seconds)), {})
            raise _Stop
        else:
            self.failed_attempt(step, outcome)

    def failed_attempt(self, step: ActionStep | CallStep, outcome: ActionAttempt) -> None:
        """Retry the attempt that failed with ``outcome``, or fail the step."""
        token = self.token
        assert outcome.error is not None
        self.tr.add("attempt.failed", step.id, token.path, token.attempt, message=outcome.error)
        retry = step.mods.retry
        if retry is not None and not outcome.final and token.attempt < retry.attempts:
            due = self.tr.now + micros(retry.every)
            token.attempt += 1
            self.park(
                "retry", due,
                {"attempt": token.attempt, "of": retry.attempts, "last_error": outcome.error},
            )  # fmt: skip
            self.tr.add("retry.scheduled", step.id, token.path, token.attempt, due=iso(due))
            raise _Stop
        self.fail(step, outcome.error, outcome.kind)

    def park(self, kind: str, due: int, extra: dict[str, Any]) -> None:
        token = self.token
        token.state, token.since = TokenState.WAITING, self.tr.now
        token.wait = {"kind": kind, **extra, "due": due}
        self.tr.timers.append((token, kind, due))
        self.tr.update(token)

    def wait(self, step: WaitStep, frame: Frame) -> None:
        if frame.get("due") is not None:  # the timer fired
            self.complete(step, {"until": iso(self.tr.now)})
            return
        self.started(step)
        try:
            due = self.wait_due(step)
        except (ExprError, DurationError) as exc:
            self.fail(step, exc.message if isinstance(exc, ExprError) else str(exc), "expression")
            return
        if due <= self.tr.now:  # an instant already past resumes at once
            self.complete(step, {"until": iso(self.tr.now)})
            return
        frame["due"] = due
        self.park("timer", due, {})
        self.tr.add("timer.armed", step.id, self.token.path, self.token.attempt, due=iso(due))
        raise _Stop

    def wait_for(self, step: WaitForStep, frame: Frame) -> None:
        """Park until a matching event or the timeout, whichever comes first (exactly one wins:
        both consume the same wait row). Match values are evaluated once, now, and stored."""
        token = self.token
        if frame.get("due") is not None:  # resumed by its event or by its timeout
            event = token.data.pop("event", None)
            if event is None:
                self.complete(step, {"status": "timeout", "event": None})
            else:
                self.complete(step, {"status": "received", "event": event["data"]})
            return
        self.started(step)
        connector, _, name = step.event.partition(".")
        spec = self.flow.connectors[connector].events[name]
        try:
            env = self.env()
            values = {k: to_json(render(t, env, self.eval_ctx)) for k, t in step.match.items()}
        except ExprError as exc:
            self.fail(step, f"match: {exc.message}", "expression")
            return
        keys = correlation_keys(spec, values)
        due = self.tr.now + micros(step.timeout)
        frame["due"] = due
        token.state, token.since = TokenState.WAITING, self.tr.now
        token.wait = {"kind": "event", "type": step.event, "match": values, "timeout_at": due}
        self.tr.timers.append((token, "timeout", due))
        self.tr.waits.append((token, "event", step.event, keys))
        if step.lookback is not None:
            self.tr.lookbacks.append((token, step.event, keys, self.tr.now - micros(step.lookback)))
        self.tr.update(token)
        self.tr.add("timer.armed", step.id, token.path, token.attempt, due=iso(due))
        raise _Stop

    def wait_due(self, step: WaitStep) -> int:
        if step.for_ is not None:
            value = render(step.for_, self.env(), self.eval_ctx)
            if isinstance(value, str):
                value = parse_duration(value)
            if not isinstance(value, timedelta):
                raise DurationError(f"wait.for must give a duration, got {_kind(value)}")
            return self.tr.now + micros(value)
        assert step.until is not None
        value = render(step.until, self.env(), self.eval_ctx)
        if isinstance(value, str):
            value = parse_timestamp(value)
        if not isinstance(value, datetime):
            raise DurationError(f"wait.until must give a timestamp, got {_kind(value)}")
        return from_datetime(value)

    def set(self, step: SetStep) -> None:
        self.started(step)
        try:
            values = render_value(dict(step.values), self.env(), self.eval_ctx)
        except ExprError as exc:
            self.fail(step, exc.message, "expression")
            return
        self.complete(step, values)

    def fail_step(self, step: FailStep) -> None:
        self.started(step)
        try:
            message = render(step.message, self.env(), self.eval_ctx)
        except ExprError as exc:
            self.fail(step, exc.message, "expression")
            return
        self.fail(step, str(message), "fail")

    def enter(self, step: GroupStep | ForEachStep | RepeatStep) -> None:
        frame: Frame = {"o": step.id, "i": 0, "scope": {}}
        if isinstance(step, ForEachStep):
            self.started(step)
            try:
                items = render(step.items, self.env(), self.eval_ctx)
            except ExprError as exc:
                self.fail(step, f"for_each: {exc.message}", "expression")
                return
            if not isinstance(items, list):
                self.fail(step, f"for_each must give a list, got {_kind(items)}", "expression")
                return
            if not items:
                self.complete(step, [])
                return
            path = self._path(step.id)
            self.drop_rows(path)
            self.put_row(path, ITEMS, to_json(items))
            frame.update(n=0, count=len(items))
        elif isinstance(step, RepeatStep):
            self.started(step, iteration=1)
            self.drop_rows(self._path(step.id))
            frame.update(n=0)
        else:
            self.started(step)
        self.frames.append(frame)

    # --- the end of a scope ------------------------------------------------------------------

    def scope_done(self, frame: Frame) -> None:
        if frame.pop("rec", None):
            error = frame.pop("err", None)
            owner = frame.get("o")
            self.tr.add("step.recovered", owner, self._path(owner, outer=True) if owner else None,
                        1 if owner else None, error=error)  # fmt: skip
        if len(self.frames) == 1:
            self.complete_run()
            return
        step = self.index.owner(frame)
        assert step is not None
        self.frames.pop()
        self.token.path = prefix(self.frames) + step.id
        self.token.step = step.id
        if isinstance(step, GroupStep):
            self.complete(step, frame["scope"])
            return
        self.put_row(self.token.path, frame["n"], frame["scope"])
        if isinstance(step, ForEachStep):
            if frame["n"] + 1 < frame["count"]:
                self.next_iteration(frame)
                return
            self.complete_loop(step, frame)
            return
        self.repeat_check(step, frame)

    def complete_loop(self, step: ForEachStep | RepeatStep, frame: Frame, **data: Any) -> None:
        """Bind the loop's list of iteration scopes; its rows are no longer needed."""
        path = self.token.path
        rows = self.rows(path)
        scopes = [rows[n] for n in range(frame["n"] + 1)]
        self.drop_rows(path)
        self.complete(step, scopes, **data)

    # --- loop rows (items and finished iteration scopes, outside the run row) ----------------

    def rows(self, path: str) -> dict[int, Any]:
        """Every row of the loop at ``path``: only a finished loop needs them all."""
        cache = self.fc.scopes
        if path not in cache:
            loaded = self.fc.load_scopes(path)
            loaded.update(self.fc.known.pop(path, {}))  # not committed yet, or newer
            cache[path] = loaded
        return cache[path]

    def put_row(self, path: str, n: int, data: Any) -> None:
        fc = self.fc
        target = fc.scopes[path] if path in fc.scopes else fc.known.setdefault(path, {})
        target[n] = data
        self.tr.scope_ops.append(("put", path, n, data))

    def drop_rows(self, path: str) -> None:
        self.fc.scopes[path] = {}
        self.fc.known.pop(path, None)
        self.tr.scope_ops.append(("drop", path, 0, None))

    def next_iteration(self, frame: Frame) -> None:
        frame.update(n=frame["n"] + 1, i=0, scope={})
        frame.pop("s", None)
        self.frames.append(frame)

    def repeat_check(self, step: RepeatStep, frame: Frame) -> None:
        self.frames.append(frame)  # `until` is evaluated in the iteration's own scope
        try:
            done = self.condition(step.until)
        except ExprError as exc:
            self.frames.pop()
            self.fail(step, f"until: {exc.message}", "expression")
            return
        last = self.until_values(step)
        self.frames.pop()
        if done:
            self.complete_loop(step, frame, iterations=frame["n"] + 1)
            return
        if frame["n"] + 1 >= step.max:
            message = (
                f"repeat [{step.id}] ran its max of {step.max} iterations and "
                f"[{to_source(step.until.single) if step.until.single else step.until.text}] "
                f"is still false{last}"
            )
            self.fail(step, message, "repeat")
            return
        self.next_iteration(frame)
        frame["poll"] = due = self.tr.now + micros(step.every)
        self.token.step, self.token.path = step.id, self._path(step.id, outer=True)
        self.park("poll", due, {"iteration": frame["n"] + 1, "of": step.max})
        self.tr.add("timer.armed", step.id, self.token.path, self.token.attempt, due=iso(due))
        raise _Stop

    def until_values(self, step: RepeatStep) -> str:
        """`` (check.status = 'pending')``: the values `until` looked at, for the message."""
        expr = step.until.single
        return "" if expr is None else watched_values(expr, self.env())

    def complete_run(self) -> None:
        run, tr = self.fc.run, self.tr
        if self.flow.output is not None:
            try:
                run.output = to_json(render_value(self.flow.output, self.env(), self.eval_ctx))
            except ExprError as exc:
                self.token.step = self.token.path = "output"
                self.fail_run(output_failure(f"output: {exc.message}"))
        run.status, run.ended_at = RunStatus.COMPLETED, tr.now
        self.state.pop("frames", None)
        tr.scope_ops.append(("sweep", "", 0, None))
        token = self.token
        if token.id is not None:
            tr.tokens_delete.append(token.id)
            tr.timers_drop.append(token.id)
            self.fc.tokens.pop(token.id, None)
        tr.add("run.completed")
        raise _Stop

    # --- failure ----------------------------------------------------------------------------

    def fail(self, step: FlowStep, message: str, kind: str) -> None:
        """``step`` (in the innermost frame) failed: optional, recover, or propagate upward."""
        error = {"message": message, "step": step.id, "type": kind}
        self.tr.add("step.failed", step.id, self.token.path, self.token.attempt,
                    message=message, error_type=kind)  # fmt: skip
        level = len(self.frames) - 1
        failing: FlowStep = step
        while True:
            if failing.mods.optional:
                del self.frames[level + 1 :]
                self.token.step, self.token.path = failing.id, prefix(self.frames) + failing.id
                self.complete(failing, {"error": error}, history=False)
                return
            frame = self.frames[level]
            if self.index.recover_of(frame) and not frame.get("rec"):
                del self.frames[level + 1 :]
                frame.update(rec=True, err=error, i=0)
                frame.pop("s", None)
                frame.pop("due", None)
                return
            if level == 0:
                self.fail_run(error)
            owner = self.index.owner(frame)
            assert owner is not None
            level -= 1
            failing = owner
            path = prefix(self.frames[: level + 1]) + owner.id
            # An owner (group, loop) runs once where it stands: its entries are attempt 1.
            self.tr.add("step.failed", owner.id, path, 1, message=message, error_type=kind)

    def fail_run(self, error: dict[str, Any]) -> None:
        token, run = self.token, self.fc.run
        token.state, token.wait = TokenState.FAILED, None
        self.tr.update(token)
        run.status, run.error = RunStatus.FAILED, error
        self.tr.add("run.failed", token.step, token.path, token.attempt, message=error["message"])
        raise _Stop


def _kind(value: Any) -> str:
    from procflow.expr import kind_of

    return "null" if value is None else kind_of(value)
