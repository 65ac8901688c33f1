"""Calling connector actions: config resolution, loading, arg checks, the call itself.

The runtime's sequence for one attempt of an action step (flow.md, "Connectors"):

1. :func:`resolve_config` — the connector's config from the worker's environment (secrets
   included, in memory only: the result is handed to the action through ``ctx.config`` and never
   stored);
2. :func:`load_action` — the function implementing the action;
3. :func:`check_args` — the rendered args against the manifest's types (a mismatch fails the
   step without retry, naming the arg);
4. :func:`call_action` — ``fn(ctx, **args)``, sync or ``async def``, within the step's
   per-attempt ``timeout``; the result must be a JSON-compatible mapping.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar, copy_context
from typing import Any

from procflow.errors import NonRetryableError, ProcflowError
from procflow.model.flow_exprs import literal_mismatch
from procflow.model.ir import ConnectorManifest
from procflow.runtime.context import StepContext
from procflow.runtime.delegates import CodeLoadError, load_attr

BUILTIN_PACKAGE = "procflow.connectors.builtin"

Action = Callable[..., Any]

# Test doubles installed by ``procflow.testing.fake_action``: (connector, action) → callable.
ACTION_FAKES: dict[tuple[str, str], Action] = {}


class ConnectorConfigError(ProcflowError):
    """A ``required`` config value of a connector is missing from the environment."""


class ConnectorLoadError(ProcflowError):
    """The code implementing a connector action cannot be imported or found."""


class ActionTimeout(ProcflowError):
    """The attempt ran longer than the step's ``timeout`` (its late result is discarded)."""


class ActionResultError(ProcflowError):
    """An action returned something other than a JSON-compatible mapping."""


# The running attempt's timeout in seconds (None: no limit), for actions that pass it on to I/O
# (``http.request`` uses it as its request timeout). Set by :func:`call_action`.
ATTEMPT_TIMEOUT: ContextVar[float | None] = ContextVar("procflow_attempt_timeout", default=None)


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
                f"connector [{manifest.name}] config [{name}] is required but missing: {where}"
            )
    return config


# --- loading ---------------------------------------------------------------------------------


def load_action(manifest: ConnectorManifest, action: str, project_dir: str) -> Action:
    """The function implementing ``<connector>.<action>``, named after the action.

    Project connectors are imported from the project's own namespace (``connectors.<name>``
    under :func:`procflow.runtime.delegates.project_package`), entry-point connectors by their
    ``module``, built-ins from :mod:`procflow.connectors.builtin`.
    """
    label = f"{manifest.name}.{action}"
    fake = ACTION_FAKES.get((manifest.name, action))
    if fake is not None:
        return fake
    if action not in manifest.actions:
        declared = ", ".join(sorted(manifest.actions)) or "none"
        raise ConnectorLoadError(
            f"connector [{manifest.name}] declares no action [{action}] (declared: {declared})"
        )
    if manifest.source == "project":
        module = manifest.module or f"connectors.{manifest.name}"
        try:
            fn: Any = load_attr(project_dir, module, action)
        except CodeLoadError as exc:
            raise ConnectorLoadError(
                f"action [{label}]: {exc}; the package beside the manifest must define "
                f"a function named [{action}]"
            ) from exc
    else:
        if manifest.source == "builtin":
            module = manifest.module or f"{BUILTIN_PACKAGE}.{manifest.name}"
        elif manifest.module:
            module = manifest.module
        else:
            raise ConnectorLoadError(f"action [{label}]: the connector names no module")
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # connector code: any import-time error is reported
            raise ConnectorLoadError(
                f"action [{label}]: cannot import [{module}]: {type(exc).__name__}: {exc}"
            ) from exc
        fn = getattr(mod, action, None)
        if fn is None:
            raise ConnectorLoadError(
                f"action [{label}]: module [{module}] has no function named [{action}]"
            )
    if not callable(fn):
        raise ConnectorLoadError(f"action [{label}]: [{action}] is not a function")
    return fn  # type: ignore[no-any-return]


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
        field = spec.args.get(name)
        if field is None:
            raise NonRetryableError(f"action [{label}] has no arg [{name}]")
        if value is None:
            continue
        why = literal_mismatch(value, field.type)
        if why is not None:
            raise NonRetryableError(f"action [{label}] arg [{name}] {why}")
    for name, field in spec.args.items():
        if field.required and args.get(name) is None:
            raise NonRetryableError(f"action [{label}] arg [{name}] is required but has no value")


# --- calling ---------------------------------------------------------------------------------


def call_action(
    fn: Action, ctx: StepContext, args: Mapping[str, Any], timeout: float | None
) -> dict[str, Any]:
    """``fn(ctx, **args)`` → its result as a JSON-compatible dict (``None`` → ``{}``).

    Without a timeout the action runs in the calling thread (a coroutine through
    :func:`asyncio.run`). With one it runs in a daemon worker thread, and after ``timeout``
    seconds :class:`ActionTimeout` is raised; the action cannot be killed, so it may finish
    later, and its late result is discarded. Exceptions the action raises pass through
    unchanged (:class:`NonRetryableError` included).
    """
    kwargs = dict(args)
    if timeout is None:
        token = ATTEMPT_TIMEOUT.set(None)
        try:
            result = _invoke(fn, ctx, kwargs)
        finally:
            ATTEMPT_TIMEOUT.reset(token)
        return _as_result(result, ctx)

    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()
    context = copy_context()

    def run() -> None:
        ATTEMPT_TIMEOUT.set(timeout)
        try:
            outcome.append((True, _invoke(fn, ctx, kwargs)))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(
        target=context.run, args=(run,), name=f"procflow-action-{ctx.step}", daemon=True
    )
    worker.start()
    if not done.wait(max(timeout, 0.0)):
        raise ActionTimeout(f"the attempt ran longer than {_seconds(timeout)}")
    ok, value = outcome[0]
    if not ok:
        raise value
    return _as_result(value, ctx)


def _invoke(fn: Action, ctx: StepContext, kwargs: dict[str, Any]) -> Any:
    result = fn(ctx, **kwargs)
    if inspect.isawaitable(result):

        async def wait() -> Any:
            return await result

        result = asyncio.run(wait())
    return result


def _seconds(timeout: float) -> str:
    return f"{timeout:g}s"


def _as_result(value: Any, ctx: StepContext) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ActionResultError(
            f"step [{ctx.step}]: the action returned {_type_name(value)}; "
            "it must return a mapping (dict) of JSON values, or None"
        )
    problem = _json_problem(value, "result")
    if problem is not None:
        raise ActionResultError(f"step [{ctx.step}]: the action's {problem}")
    return dict(value)


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
