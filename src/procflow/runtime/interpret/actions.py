"""Calling connector actions: config, loading, arg checks, the call, its result.

One attempt of an action (:func:`run_action`; a flow's action step, an intent's ``notify``):

1. :func:`resolve_config` — the connector's config from the worker's environment (secrets
   included, in memory only: handed to the action as ``ctx.config`` and never stored);
2. :func:`load_action` — the function implementing the action;
3. :func:`check_args` — the args against the manifest's types (a mismatch fails the step
   without retry, naming the arg);
4. :func:`call_action` — ``fn(ctx, **args)``, sync or ``async def``, within the attempt's
   ``ctx.timeout``; the result must be a JSON-compatible mapping.

What connectors exist and what they declare is the model's
(:mod:`procflow.model.connectors.registry`); the built-in connectors are plugins that see only the
public :class:`StepContext`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from contextvars import copy_context
from dataclasses import dataclass, field
from typing import Any

from procflow.config import format_size, size_setting
from procflow.errors import (
    ActionResultError,
    ActionTimeout,
    CodeLoadError,
    ConnectorConfigError,
    ConnectorLoadError,
    NonRetryableError,
)
from procflow.model.connectors.registry import BUILTIN_PACKAGE, builtin_manifest
from procflow.model.ir import ConnectorManifest
from procflow.model.values import literal_mismatch
from procflow.runtime import faults
from procflow.runtime.data.secrets import Masker
from procflow.runtime.interpret.context import KeptMessage, StepContext, step_logger
from procflow.runtime.interpret.deadlines import begin_call
from procflow.runtime.interpret.delegates import escaped, load_attr
from procflow.runtime.transition import OutboxMessage

Action = Callable[..., Any]

# Test doubles installed by ``procflow.testing.fake_action``: (connector, action) → callable.
ACTION_FAKES: dict[tuple[str, str], Action] = {}


# --- config ----------------------------------------------------------------------------------


def resolve_config(manifest: ConnectorManifest, environ: Mapping[str, str]) -> dict[str, Any]:
    """Each config item's value: its env variable when set (and not empty), else its default.

    An item without a value is left out unless it is ``required``, which raises
    :class:`ConnectorConfigError` naming the env variable. Secret values are included: the
    returned dict lives in memory only and must never be persisted.
    """
    config: dict[str, Any] = {}
    for name, item in manifest.config.items():
        raw = environ.get(item.env) if item.env else None
        if raw is not None and raw != "":
            config[name] = raw
        elif item.default is not None:
            config[name] = item.default
        elif item.required:
            where = (
                f"set the environment variable {item.env}"
                if item.env
                else "it has no env variable and no default"
            )
            raise ConnectorConfigError(
                f"connector [{manifest.name}] config [{name}] is required but missing: {where}",
                connector=manifest.name,
                item=name,
                env=item.env,
            )
    return config


def secret_config(manifest: ConnectorManifest, config: Mapping[str, Any]) -> list[str]:
    """The values of the connector's ``secret`` config items: masked wherever they would show."""
    return [
        str(config[name])
        for name, item in manifest.config.items()
        if item.secret and name in config
    ]


# --- loading ---------------------------------------------------------------------------------


def load_action(manifest: ConnectorManifest, action: str, project_dir: str) -> Action:
    """The function implementing ``<connector>.<action>``, named after the action.

    Project connectors are imported from the project's own namespace (``connectors.<name>``
    under :func:`procflow.runtime.interpret.delegates.project_package`), entry-point connectors by
    their ``module``, built-ins from the ``procflow.connectors.builtin`` plugins.
    """
    fake = ACTION_FAKES.get((manifest.name, action))
    if fake is not None:
        return fake
    if action not in manifest.actions:
        declared = ", ".join(sorted(manifest.actions)) or "none"
        raise ConnectorLoadError(
            f"connector [{manifest.name}] declares no action [{action}] (declared: {declared})",
            connector=manifest.name,
            action=action,
        )
    if manifest.source == "project":
        fn = _project_action(manifest, action, project_dir)
    else:
        fn = _module_action(manifest, action)
    if not callable(fn):
        raise _load_error(manifest, action, f"[{action}] is not a function")
    return fn  # type: ignore[no-any-return]


def _project_action(manifest: ConnectorManifest, action: str, project_dir: str) -> Any:
    module = manifest.module or f"connectors.{manifest.name}"
    try:
        return load_attr(project_dir, module, action)
    except CodeLoadError as exc:
        raise _load_error(
            manifest,
            action,
            f"{exc}; the package beside the manifest must define a function named [{action}]",
        ) from exc


def _module_action(manifest: ConnectorManifest, action: str) -> Any:
    if manifest.source == "builtin":
        module = manifest.module or f"{BUILTIN_PACKAGE}.{manifest.name}"
    elif manifest.module:
        module = manifest.module
    else:
        raise _load_error(manifest, action, "the connector names no module")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # connector code: any import-time error is reported
        raise _load_error(
            manifest, action, f"cannot import [{module}]: {type(exc).__name__}: {exc}"
        ) from exc
    fn = getattr(mod, action, None)
    if fn is None:
        raise _load_error(manifest, action, f"module [{module}] has no function named [{action}]")
    return fn


def _load_error(manifest: ConnectorManifest, action: str, problem: str) -> ConnectorLoadError:
    """``action [<connector>.<action>]: <problem>``."""
    return ConnectorLoadError(
        f"action [{manifest.name}.{action}]: {problem}", connector=manifest.name, action=action
    )


# --- args ------------------------------------------------------------------------------------


def check_args(manifest: ConnectorManifest, action: str, args: Mapping[str, Any]) -> None:
    """Rendered args against the manifest's schema: a value of the wrong type, a missing
    required arg or an undeclared arg raises :class:`NonRetryableError` naming the arg (the same
    values would fail every retry). ``None`` counts as "not given"."""
    spec = manifest.actions.get(action)
    label = f"{manifest.name}.{action}"
    if spec is None:
        raise NonRetryableError(f"connector [{manifest.name}] declares no action [{action}]")
    for name, value in args.items():
        arg = spec.args.get(name)
        if arg is None:
            raise NonRetryableError(f"action [{label}] has no arg [{name}]")
        if value is None:
            continue
        why = literal_mismatch(value, arg.type)
        if why is not None:
            raise NonRetryableError(f"action [{label}] arg [{name}] {why}")
    for name, arg in spec.args.items():
        if arg.required and args.get(name) is None:
            raise NonRetryableError(f"action [{label}] arg [{name}] is required but has no value")


# --- calling ---------------------------------------------------------------------------------


def call_action(fn: Action, ctx: StepContext, args: Mapping[str, Any]) -> dict[str, Any]:
    """``fn(ctx, **args)`` → its result as a JSON-compatible dict (``None`` → ``{}``).

    Without ``ctx.timeout`` the action runs in the calling thread (a coroutine through
    :func:`asyncio.run`). With one it runs in a daemon worker thread, and after that many
    seconds :class:`ActionTimeout` is raised; the action cannot be killed, so it may finish
    later, and its late result is discarded. Exceptions the action raises pass through
    unchanged (:class:`NonRetryableError` included).
    """
    kwargs = dict(args)
    timeout = ctx.timeout
    if timeout is None:
        return _as_result(_invoke(fn, ctx, kwargs), ctx)

    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, _invoke(fn, ctx, kwargs)))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(
        target=copy_context().run, args=(run,), name=f"procflow-action-{ctx.step}", daemon=True
    )
    worker.start()
    if not done.wait(max(timeout, 0.0)):
        raise ActionTimeout(
            f"the attempt ran longer than {timeout:g}s", seconds=timeout, step=ctx.step
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return _as_result(value, ctx)


def _invoke(fn: Action, ctx: StepContext, kwargs: dict[str, Any]) -> Any:
    result = fn(ctx, **kwargs)
    if inspect.isawaitable(result):
        import asyncio  # only for an async action: ~14 ms every command would pay at start-up

        async def wait() -> Any:
            return await result

        result = asyncio.run(wait())
    return result


def _as_result(value: Any, ctx: StepContext) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ActionResultError(
            f"step [{ctx.step}]: the action returned {_type_name(value)}; "
            "it must return a mapping (dict) of JSON values, or None",
            step=ctx.step,
        )
    problem = _json_problem(value, "result")
    if problem is not None:
        raise ActionResultError(f"step [{ctx.step}]: the action's {problem}", step=ctx.step)
    _check_size(value, ctx)
    return dict(value)


RESULT_SIZE = "PROCFLOW_MAX_RESULT_SIZE"


def _check_size(value: Mapping[str, Any], ctx: StepContext) -> None:
    """A result is kept in the run (a flow binds it, and the run row is rewritten with every
    later step), so one over the limit fails the attempt; retry and onError apply as to any
    failure. Measured as compact JSON, counting only up to the limit."""
    limit = size_setting(RESULT_SIZE)
    size = 0
    for chunk in _COMPACT.iterencode(value):
        size += len(chunk.encode("utf-8")) if not chunk.isascii() else len(chunk)
        if size > limit:
            raise ActionResultError(
                f"step [{ctx.step}]: the action's result is over the limit of "
                f"{format_size(limit)} of JSON a run keeps ({RESULT_SIZE}); return less, e.g. "
                "a reference to where the data is stored",
                step=ctx.step,
            )


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _json_problem(value: Any, path: str) -> str | None:
    """Where ``value`` stops being JSON-compatible, or None."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} is {value}, which JSON cannot hold"
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a key that is {_type_name(key)}; keys must be strings"
            problem = _json_problem(item, f"{path}.{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            problem = _json_problem(item, f"{path}[{i}]")
            if problem is not None:
                return problem
        return None
    return f"{path} is {_type_name(value)}, which is not a JSON value"


def _type_name(value: Any) -> str:
    kind = type(value)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    return f"a value of type {name}"


# --- one attempt -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """The attempt an action is called for: what its context names."""

    run_id: str
    step: str
    attempt: int
    idempotency_key: str
    project_dir: str


@dataclass
class ActionAttempt:
    """The outcome of one attempt, masked, before it is committed or discarded."""

    result: dict[str, Any] | None = None
    error: str | None = None
    kind: str = "action"  # the error's type: action | expression | timeout
    final: bool = False  # no further attempts (NonRetryableError, a bad rendered arg)
    virtual_seconds: float | None = None  # a timeout that elapses on the virtual clock only
    logs: list[tuple[str, str]] = field(default_factory=list)
    outbox: list[OutboxMessage] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)  # recipients a sender really sent to
    masker: Masker = field(default_factory=lambda: Masker(()))  # what masked all of the above


def run_action(
    manifest: ConnectorManifest,
    action: str,
    args: Mapping[str, Any],
    caller: Caller,
    *,
    environ: Mapping[str, str],
    timeout: float | None = None,
    hide: Iterable[Any] = (),
) -> ActionAttempt:
    """One attempt of ``<connector>.<action>``; whatever it raises becomes its outcome.

    The call runs between the fault points ``before_delegate`` and ``after_delegate`` (the side
    effect happened, nothing is committed). Everything the outcome carries is masked: the values
    in ``hide`` and the connector's secret config never leave the attempt.
    """
    out = ActionAttempt()
    config: dict[str, Any] = {}
    try:
        config = resolve_config(manifest, environ)
        fn = load_action(manifest, action, caller.project_dir)
        check_args(manifest, action, args)
        log, lines = step_logger(caller.run_id, caller.step)
        ctx = StepContext(
            run_id=caller.run_id, step=caller.step, attempt=caller.attempt,
            idempotency_key=caller.idempotency_key, project_dir=caller.project_dir, log=log,
            args=args, config=config, timeout=timeout,
        )  # fmt: skip
        out.logs = lines.lines
        begin_call(caller.step, timeout)  # the worker watches the attempt's deadline from here
        faults.point("before_delegate")
        try:
            out.result = call_action(fn, ctx, args)
        finally:  # the side effect happened, failed or not; nothing is committed yet
            out.sent = list(ctx.sent)
            out.outbox = _kept(ctx)
            faults.point("after_delegate")
    except ActionTimeout as exc:
        out.error, out.kind = str(exc), "timeout"
        out.virtual_seconds = exc.seconds if exc.virtual else None
    except NonRetryableError as exc:
        out.error, out.final = _message(exc), True
    except Exception as exc:  # the action's failure is the attempt's, whatever it raised
        out.error = _message(exc)
    except (SystemExit, KeyboardInterrupt) as exc:  # project code must not stop the worker
        out.error = escaped(exc)
    return _masked(out, Masker([*hide, *secret_config(manifest, config)]))


def _kept(ctx: StepContext) -> list[OutboxMessage]:
    kept: list[OutboxMessage] = []
    for item in ctx.outbox:
        if not isinstance(item, KeptMessage):
            raise ActionResultError(
                f"step [{ctx.step}]: ctx.outbox holds {_type_name(item)}; "
                "a connector keeps a message with ctx.outbox.append(KeptMessage(...))",
                step=ctx.step,
            )
        kept.append(OutboxMessage(item.channel, item.recipient, item.subject, item.body, ctx.step))
    return kept


def _masked(out: ActionAttempt, masker: Masker) -> ActionAttempt:
    out.masker = masker
    if not masker:
        return out
    if out.result is not None:
        out.result = masker.mask_data(out.result)
    if out.error is not None:
        out.error = masker.mask(out.error)
    out.logs = [(level, masker.mask(line)) for level, line in out.logs]
    for message in out.outbox:
        message.subject = masker.mask(message.subject) if message.subject else message.subject
        message.body = masker.mask(message.body) if message.body else message.body
    return out


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# --- procflow's own mail ---------------------------------------------------------------------


def send_email(
    caller: Caller,
    message: tuple[str, str, str],
    *,
    environ: Mapping[str, str],
    hide: Iterable[Any] = (),
) -> ActionAttempt:
    """``(to, subject, body)`` sent by procflow itself (an intent's ``notify``) as one attempt of
    the built-in ``email.send``: the same config (``PROCFLOW_SMTP_URL``, ``PROCFLOW_SMTP_FROM``;
    no URL → outbox mode), Message-ID and failure rules as a flow's ``email.send`` step. The
    built-in is used even where a project declares its own ``email`` connector."""
    manifest = builtin_manifest("email")
    assert manifest is not None  # package data, read by every test run
    to, subject, body = message
    args = {"to": to, "subject": subject, "body": body}
    return run_action(manifest, "send", args, caller, environ=environ, hide=hide)
