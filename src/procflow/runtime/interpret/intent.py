"""Running intent processes: one step of one token → one :class:`Transition`.

The decisions (routing, retry or route or fail, ``{error}``, loop guard, run status) are plain
functions over the run's rows. The only side effects are the delegate call and, for ``notify``,
the ``email.send`` attempt (SMTP, or the outbox); both happen before the engine commits
the transition. A ``userTask`` or ``wait`` step only parks its token here: the task is opened by
:mod:`procflow.runtime.waits.tasks`, the wait resumed by :mod:`procflow.runtime.waits.record_waits`.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from procflow.errors import CodeLoadError, ExprError, NonRetryableError, RecordError
from procflow.expr import Expr, evaluate_condition
from procflow.model.ir import (
    END,
    JOIN,
    Application,
    Decision,
    Delegate,
    EndStep,
    Entity,
    Notify,
    ParallelStep,
    Process,
    ServiceTask,
    SetField,
    SetRelationField,
    UserTask,
    WaitRecord,
)
from procflow.runtime import faults
from procflow.runtime.clock import iso, micros
from procflow.runtime.data.records import patch_record, record_json
from procflow.runtime.data.secrets import Masker
from procflow.runtime.interpret.actions import ActionAttempt, Caller, send_email
from procflow.runtime.interpret.context import StepContext, VarsView, step_logger
from procflow.runtime.interpret.deadlines import begin_call
from procflow.runtime.interpret.delegates import call_delegate, escaped, load_attr
from procflow.runtime.interpret.intent_env import eval_context as eval_context
from procflow.runtime.interpret.intent_env import record_env as record_env
from procflow.runtime.interpret.intent_fork import arrive, fork
from procflow.runtime.transition import RecordWrite, Transition
from procflow.states import FINISHED, RunStatus, TokenState
from procflow.store.rows import RunRow, TokenRow

MAX_STEPS_WITHOUT_WAIT = 1000
TASK_OPEN = "task_open"  # the timer kind that opens a user task (see tasks.py)


@dataclass
class RunCtx:
    """What a worker holds in memory for a run while it holds the run's lease."""

    run: RunRow
    tokens: dict[int, TokenRow]
    app: Application
    process: Process
    project_dir: str
    record: dict[str, Any] | None
    load_vars: Callable[[], dict[str, Any]]  # decrypts the run's vars (only when needed)
    load_related: Callable[[str, int], dict[str, Any] | None]
    # The engine's environment (PROCFLOW_SMTP_URL); None: this process's environment, which is
    # also an engine's default.
    environ: Mapping[str, str] | None = None
    _vars: dict[str, Any] | None = field(default=None, repr=False)
    # The engine's bookkeeping: the run row's image as last stored, and the lease it set.
    saved: tuple[Any, ...] = field(default=(), repr=False)
    lease_until: int = 0

    @cached_property
    def entity(self) -> Entity | None:
        trigger = self.process.trigger
        return self.app.entity(trigger.entity) if trigger else None

    def env(self) -> Mapping[str, str]:
        return self.environ if self.environ is not None else os.environ

    def vars(self) -> dict[str, Any]:
        if self._vars is None:
            self._vars = self.load_vars() if self.process.vars else {}
        return self._vars


def advance(rc: RunCtx, token: TokenRow, now: int) -> Transition:
    """Run the step ``token`` is at (one attempt) and decide what follows."""
    tr = Transition(rc.run, now)
    step = rc.process.step(token.step)
    if isinstance(step, ServiceTask):
        _service_task(tr, rc, token, step)
    elif isinstance(step, Decision):
        _decision(tr, rc, token, step)
    elif isinstance(step, UserTask):
        _user_task(tr, token, step)
    elif isinstance(step, WaitRecord):
        _wait_record(tr, rc, token, step)
    elif isinstance(step, ParallelStep):
        fork(tr, token, step)
    elif isinstance(step, EndStep):
        tr.add("step.started", step.name, token.path, token.attempt)
        tr.add("step.completed", step.name, token.path, token.attempt)
        end_path(tr, rc, token)
    settle(tr, rc)
    return tr


def idempotency_key(rc: RunCtx, token: TokenRow) -> str:
    """``<run>/<path>#<visit>``, the same for every attempt and replay of one step visit. A
    token forked by a user task's timeout adds ``~<task id>``: two reminders of two tasks are
    two step executions, though each fork's visit count starts at 1."""
    key = f"{rc.run.id}/{token.path}#{token.data.get('visit', 0)}"
    fork = token.data.get("fork")
    return key if fork is None else f"{key}~{fork}"


# --- parking: user tasks and record waits --------------------------------------------------


def park(tr: Transition, token: TokenRow, wait: dict[str, Any]) -> None:
    """The token waits (a wait state: the loop guard counts steps between waits)."""
    token.state = TokenState.WAITING
    token.wait = wait
    token.since = tr.now
    token.data["steps"] = 0
    tr.update(token)


def _user_task(tr: Transition, token: TokenRow, step: UserTask) -> None:
    """Park on an immediate ``task_open`` timer; firing it creates the task row. (A worker's
    commit writes tokens, timers and waits but no task rows, so the task is opened in the next
    claim transaction: until then ``waiting_for`` shows no task id yet.)"""
    tr.add("step.started", step.name, token.path, token.attempt)
    park(tr, token, {"kind": "task", "task_id": None, "assignee": None})
    tr.timers.append((token, TASK_OPEN, tr.now))


def wait_type(entity: str, event: str, via: str | None) -> str:
    """The ``waits.type`` of a record wait: ``Entity:onCreate:via`` (``via`` empty for waits on
    the trigger entity itself); its ``keys`` is the trigger record's id."""
    return f"{entity}:{event}:{via or ''}"


def _wait_record(tr: Transition, rc: RunCtx, token: TokenRow, step: WaitRecord) -> None:
    tr.add("step.started", step.name, token.path, token.attempt)
    wait = {"kind": "record", "entity": step.entity, "via": step.via, "when": step.when_source}
    park(tr, token, wait)
    keys = str(rc.run.record_id)  # validation: a wait needs a trigger, so the run has a record
    tr.waits.append((token, "record", wait_type(step.entity, step.event, step.via), keys))


def resume(
    tr: Transition,
    rc: RunCtx,
    token: TokenRow,
    step: UserTask | WaitRecord,
    **completed: Any,
) -> None:
    """A parked token's step is done (its task completed, its record written): it moves on."""
    assert token.id is not None
    token.state, token.wait = TokenState.READY, None
    tr.timers_drop.append(token.id)  # a task's timeout and expiry go with it
    complete_step(tr, rc, token, step, **completed)


# --- routing -----------------------------------------------------------------------------


def move(tr: Transition, rc: RunCtx, token: TokenRow, target: str) -> None:
    """Send ``token`` on to ``target`` (a step, END or its branch's JOIN), guarding against
    endless loops."""
    if target == END:
        end_path(tr, rc, token)
        return
    if target == JOIN:  # the last branch in wakes the fork's token: it goes on after the join
        if (forked := arrive(tr, rc.tokens, token)) is not None:
            step = rc.process.step(forked.step)
            move(tr, rc, forked, successor(rc.process, step.name, step.next))
        return
    visited: list[str] = token.data.setdefault("visited", [])
    visited.append(token.step)
    del visited[:-20]
    steps = token.data.get("steps", 0) + 1
    token.data["steps"] = steps
    if steps >= MAX_STEPS_WITHOUT_WAIT:
        loop = ", ".join(dict.fromkeys(visited))
        fail_run(
            tr,
            rc,
            token,
            f"the run advanced {steps} steps without waiting; it loops through [{loop}]",
            "loop",
        )
        return
    token.step = target
    token.path = target
    token.attempt = 1
    token.since = tr.now
    token.data["visit"] = token.data.get("visit", 0) + 1
    tr.update(token)


def successor(process: Process, step_name: str, explicit: str | None) -> str:
    return explicit if explicit is not None else process.fall_through(step_name)


def end_path(tr: Transition, rc: RunCtx, token: TokenRow) -> None:
    assert token.id is not None or token in tr.tokens_insert
    if token.id is not None:
        tr.tokens_delete.append(token.id)
        tr.timers_drop.append(token.id)
        rc.tokens.pop(token.id, None)
    if rc.tokens:
        tr.add("token.ended", token.step, token.path, token.attempt)
    else:
        complete_run(tr, rc)


def complete_run(tr: Transition, rc: RunCtx) -> None:
    run = rc.run
    run.status = RunStatus.COMPLETED
    run.ended_at = tr.now
    sweep_vars(tr, rc)
    tr.add("run.completed")


def sweep_vars(tr: Transition, rc: RunCtx) -> None:
    """Beyond the seed's v1: a run that ends leaves no var behind, whatever route it took."""
    if not rc.process.vars:
        return
    tr.vars_sweep = True
    for name in sorted(rc.vars()):
        tr.add("var.cleared", var=name)


def fail_run(tr: Transition, rc: RunCtx, token: TokenRow, message: str, kind: str) -> None:
    token.state = TokenState.FAILED
    token.wait = None
    tr.update(token)
    rc.run.status = RunStatus.FAILED
    rc.run.error = {"step": token.step, "message": message, "type": kind}
    tr.add("step.failed", token.step, token.path, token.attempt, message=message)
    tr.add("run.failed", token.step, token.path, token.attempt, message=message)


def settle(tr: Transition, rc: RunCtx) -> None:
    """The run's status from its tokens."""
    run = rc.run
    if run.status in FINISHED:
        return
    if not rc.tokens and not tr.tokens_insert:
        return
    for t in (*rc.tokens.values(), *tr.tokens_insert):  # a loop: this runs every transition
        if t.state == TokenState.READY:
            run.status = RunStatus.RUNNING
            return
    run.status = RunStatus.WAITING


# --- decisions ----------------------------------------------------------------------------


def _decision(tr: Transition, rc: RunCtx, token: TokenRow, step: Decision) -> None:
    tr.add("step.started", step.name, token.path, token.attempt)
    try:
        env = condition_env(rc, step.condition, token)
        outcome = evaluate_condition(step.condition, env, eval_context(tr.now))
    except ExprError as exc:
        fail_run(tr, rc, token, f"decision [{step.name}]: {exc.message}", "expression")
        return
    tr.add("step.completed", step.name, token.path, token.attempt, outcome=outcome)
    target = step.then if outcome else successor(rc.process, step.name, step.else_)
    move(tr, rc, token, target)


def condition_env(rc: RunCtx, expr: Expr, token: TokenRow) -> dict[str, Any]:
    """The trigger record's fields (see :func:`record_env`); ``action`` the last user task's
    action."""
    entity = rc.entity
    env: dict[str, Any] = {"action": token.data.get("action")}
    if entity is None or rc.record is None:
        return env
    env.update(record_env(entity, rc.record, expr, rc.load_related))
    return env


# --- service tasks ------------------------------------------------------------------------


def _service_task(tr: Transition, rc: RunCtx, token: TokenRow, step: ServiceTask) -> None:
    action = step.action
    if isinstance(action, Delegate):
        _delegate(tr, rc, token, step, action)
    elif isinstance(action, Notify):
        _notify(tr, rc, token, step, action)
    else:
        tr.add("step.started", step.name, token.path, token.attempt)
        _set_field(tr, rc, token, action)
        complete_step(tr, rc, token, step)


def _set_field(
    tr: Transition, rc: RunCtx, token: TokenRow, action: SetField | SetRelationField
) -> None:
    set_field(tr, rc, action, token.data.get("error", ""))


def set_field(
    tr: Transition, rc: RunCtx, action: SetField | SetRelationField, error: str = ""
) -> None:
    """Write one field or to-one relation of the trigger record (``{error}``: ``error``)."""
    entity = rc.entity
    assert entity is not None and rc.record is not None  # validation: only with a trigger
    before = rc.record
    after = dict(before)
    if isinstance(action, SetRelationField):
        after[action.relation] = action.value
    elif action.is_error:
        after[action.field] = error_text(error, entity, action.field)
    else:
        after[action.field] = action.value
    write_record(tr, rc, entity, before, after)


def error_text(message: str, entity: Entity, field_name: str) -> str:
    """``{error}`` cut to the field's length, ending in an ellipsis when cut."""
    length = f.length if (f := entity.field(field_name)) else None
    if length is not None and len(message) > length:
        return message[: max(length - 1, 0)] + "…"
    return message


def write_record(
    tr: Transition, rc: RunCtx, entity: Entity, before: dict[str, Any], after: dict[str, Any]
) -> None:
    if after == before:
        return
    assert rc.record is not None
    rc.record = after
    previous = tr.record_write.before if tr.record_write else before
    tr.record_write = RecordWrite(entity.name, int(after[entity.primary_key.name]), previous, after)


def complete_step(
    tr: Transition,
    rc: RunCtx,
    token: TokenRow,
    step: ServiceTask | UserTask | WaitRecord,
    **completed: Any,
) -> None:
    tr.add("step.completed", step.name, token.path, token.attempt, **completed)
    for var in rc.process.vars:
        if var.clear_after == step.name and (var.name in rc.vars() or var.name in tr.vars_set):
            tr.vars_set.pop(var.name, None)
            tr.vars_clear.append(var.name)
            rc.vars().pop(var.name, None)
            tr.add("var.cleared", step.name, token.path, token.attempt, var=var.name)
    token.data.pop("error", None)
    move(tr, rc, token, successor(rc.process, step.name, step.next))


@dataclass
class Attempt:
    """The outcome of one delegate attempt, before it is committed or discarded."""

    error: str | None = None
    final: bool = False  # skip the remaining attempts (NonRetryableError, contract breach)
    record: dict[str, Any] | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    logs: list[tuple[str, str]] = field(default_factory=list)


def _delegate(
    tr: Transition, rc: RunCtx, token: TokenRow, step: ServiceTask, action: Delegate
) -> None:
    started = tr.now
    attempt = run_delegate(rc, token, step, action)
    tr.add("step.started", step.name, token.path, token.attempt, at=started)
    if not attempt.logs and attempt.error is None:  # nothing to mask: no masker to build
        commit_writes(tr, rc, token, step, attempt)
        complete_step(tr, rc, token, step)
        return
    masker = Masker([*rc.vars().values(), *attempt.vars.values()])
    for level, line in attempt.logs:
        tr.add("log", step.name, token.path, token.attempt, level=level, message=masker.mask(line))
    if attempt.error is None:
        commit_writes(tr, rc, token, step, attempt)
        complete_step(tr, rc, token, step)
    else:
        fail_attempt(tr, rc, token, step, attempt, masker.mask(attempt.error))


def run_delegate(rc: RunCtx, token: TokenRow, step: ServiceTask, action: Delegate) -> Attempt:
    entity = rc.entity
    original = record_json(entity, rc.record) if entity and rc.record is not None else {}
    vars_view = VarsView(step.name, step.produces, step.uses, _var_loader(rc), run_id=rc.run.id)
    log, handler = step_logger(rc.run.id, step.name)
    ctx = StepContext(
        run_id=rc.run.id,
        step=step.name,
        attempt=token.attempt,
        idempotency_key=idempotency_key(rc, token),
        project_dir=rc.project_dir,
        log=log,
        record=_copy_record(original),
        vars=vars_view,
        fields=dict(action.fields),
    )
    out = Attempt(logs=handler.lines)
    try:
        begin_call(step.name, None)  # a replay of an attempt whose call overran fails here
        faults.point("before_delegate")
        target = load_attr(rc.project_dir, action.module, action.attr)
        call_delegate(target, ctx, dict(action.fields))
    except NonRetryableError as exc:
        out.error, out.final = failure_message(exc), True
    except CodeLoadError as exc:
        out.error = str(exc)
    except Exception as exc:  # a delegate's failure is the step's failure, whatever it raised
        out.error = failure_message(exc)
    except (SystemExit, KeyboardInterrupt) as exc:  # project code must not stop the worker
        out.error = escaped(exc)
    faults.point("after_delegate")
    if vars_view.breach:
        out.error, out.final = vars_view.breach, True
    out.vars = dict(vars_view.written)
    for name, value in list(out.vars.items()):
        try:  # a value that cannot be sealed fails this attempt, never the worker's commit
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            del out.vars[name]
            kind = type(value).__name__
            out.final = True
            out.error = f"step [{step.name}] set var [{name}] to a [{kind}], which is not JSON data"
    if entity is not None and rc.record is not None and ctx.record != original:
        try:
            changed = {k: v for k, v in ctx.record.items() if original.get(k) != v}
            out.record = patch_record(rc.app, entity, rc.record, changed, exists=_exists(rc))
        except RecordError as exc:
            out.error = out.error or f"step [{step.name}] wrote an invalid record: {exc}"
    return out


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy_record(record: dict[str, Any]) -> dict[str, Any]:
    """The delegate's own copy of the record (deep only where a value is mutable)."""
    for v in record.values():  # a loop, not all(<generator>): this runs every attempt
        if type(v) not in _SCALARS:
            return copy.deepcopy(record)
    return dict(record)


def failure_message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _var_loader(rc: RunCtx) -> Callable[[str], tuple[bool, Any]]:
    def load(name: str) -> tuple[bool, Any]:
        values = rc.vars()
        return (name in values, values.get(name))

    return load


def _exists(rc: RunCtx) -> Callable[[str, int], bool]:
    return lambda entity, id_: rc.load_related(entity, id_) is not None


def commit_writes(
    tr: Transition, rc: RunCtx, token: TokenRow, step: ServiceTask, attempt: Attempt
) -> None:
    entity = rc.entity
    if attempt.record is not None and entity is not None and rc.record is not None:
        write_record(tr, rc, entity, rc.record, attempt.record)
    for name, value in attempt.vars.items():
        tr.vars_set[name] = value
        rc.vars()[name] = value
        tr.add("var.produced", step.name, token.path, token.attempt, var=name)


def fail_attempt(
    tr: Transition,
    rc: RunCtx,
    token: TokenRow,
    step: ServiceTask,
    attempt: Attempt,
    message: str,
) -> None:
    """A failed attempt: retry later, route to onError, or fail the run (the seed's rules)."""
    total = step.retry.attempts if step.retry else 1
    tr.add("attempt.failed", step.name, token.path, token.attempt, message=message)
    if not attempt.final and token.attempt < total and step.retry is not None:
        due = tr.now + micros(step.retry.every)
        token.attempt += 1
        token.state = TokenState.WAITING
        token.since = tr.now
        token.data["steps"] = 0  # a wait state: the loop guard counts steps between waits
        token.wait = {
            "kind": "retry", "attempt": token.attempt, "of": total, "due": due,
            "last_error": message,
        }  # fmt: skip
        tr.timers.append((token, "retry", due))
        tr.update(token)
        tr.add("retry.scheduled", step.name, token.path, token.attempt, due=iso(due))
        return
    if step.on_error is None:
        fail_run(tr, rc, token, message, "action")
        return
    commit_writes(tr, rc, token, step, attempt)  # the final attempt's writes go with the route
    tr.add("step.failed", step.name, token.path, token.attempt, message=message)
    token.data["error"] = message
    move(tr, rc, token, step.on_error)


# --- notify -------------------------------------------------------------------------------


def _notify(tr: Transition, rc: RunCtx, token: TokenRow, step: ServiceTask, action: Notify) -> None:
    tr.add("step.started", step.name, token.path, token.attempt)
    masker = Masker(rc.vars().values())
    to = recipient(rc, action)
    subject, empty_s = action.subject.render(lambda path: _placeholder(rc, path))
    body, empty_b = action.body.render(lambda path: _placeholder(rc, path))
    empty = sorted({".".join(p) for p in [*empty_s, *empty_b]})
    if not to:
        tr.add(
            "step.completed", step.name, token.path, token.attempt,
            skipped="the recipient resolved to nothing", empty_placeholders=empty or None,
        )  # fmt: skip
        move(tr, rc, token, successor(rc.process, step.name, step.next))
        return
    subject, body = masker.mask(subject), masker.mask(body)
    sent = send_mail(rc, token, step, (to, subject, body))
    for level, line in sent.logs:
        tr.add("log", step.name, token.path, token.attempt, level=level, message=line)
    if sent.error is not None:
        fail_attempt(tr, rc, token, step, Attempt(final=sent.final), sent.error)
        return
    for message in sent.outbox:
        tr.outbox.append(message)
        tr.add("message.outboxed", step.name, token.path, token.attempt, to=message.recipient)
    for address in sent.sent:
        tr.add("message.sent", step.name, token.path, token.attempt, to=address)
    if empty:
        names = ", ".join(empty)
        tr.add("log", step.name, token.path, level="warning",
               message=f"empty placeholders rendered as empty text: {names}")  # fmt: skip
    complete_step(tr, rc, token, step)


def send_mail(
    rc: RunCtx, token: TokenRow, step: ServiceTask, message: tuple[str, str, str]
) -> ActionAttempt:
    """Send as one attempt of ``email.send`` (outbox mode without ``PROCFLOW_SMTP_URL`` in the
    engine's environment; the Message-ID comes from the step's idempotency key, so a re-sent
    attempt carries the first one's). Its failures are this attempt's: a 5xx answer or a bad
    URL is final, a 4xx or network failure retries. Vars never show in what it keeps."""
    caller = Caller(rc.run.id, step.name, token.attempt, idempotency_key(rc, token), rc.project_dir)
    return send_email(caller, message, environ=rc.env(), hide=rc.vars().values())


def recipient(rc: RunCtx, action: Notify) -> str | None:
    if action.to.address:
        return action.to.address
    value = _placeholder(rc, action.to.path)
    return str(value) if value not in (None, "") else None


def _placeholder(rc: RunCtx, path: tuple[str, ...]) -> Any:
    entity = rc.entity
    if entity is None or rc.record is None:
        return None
    if len(path) == 1:
        return record_json(entity, rc.record).get(path[0])
    relation = entity.relation(path[0])
    related_id = rc.record.get(path[0])
    if relation is None or related_id is None:
        return None
    related = rc.load_related(relation.to, related_id)
    return None if related is None else related.get(path[1])
