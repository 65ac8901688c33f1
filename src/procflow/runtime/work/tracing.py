"""Traces of step attempts through OpenTelemetry, when its API is installed (``procflow[otel]``).

A run is one trace however long it lasts: attempts days apart, made by different workers, join
it without anything stored. The trace id is derived from the run id (the first 16 bytes of its
SHA-256) and every span procflow makes for the run has the same *run root* as its parent: a
remote span context whose span id is the next 8 bytes of that hash. No process ever records the
run root itself (its start may have been a record write in another process); a trace viewer
shows the attempts as its children. Spans:

- ``attempt STEP``: one per attempt, STEP the step it starts at (an attempt goes on through
  the steps that follow until the run waits or ends), made current while it runs (so spans of
  instrumented libraries under a delegate or a connector nest in it), with the attributes
  ``procflow.run.id``, ``procflow.definition``, ``procflow.definition.version``,
  ``procflow.step``, ``procflow.step.path``, ``procflow.attempt``, ``procflow.worker`` and
  ``procflow.outcome``: ``ok``, ``failed`` (the step failed this attempt: a retry or the step's
  failure follows) or ``incident`` (the attempt raised; the span's status carries the
  exception's type). A failure's message never goes in a span: messages may quote values.
- ``run start`` / ``event delivery``: made by the HTTP face when a request starts a run or an
  event resumes or starts one; a W3C ``traceparent`` on that request becomes a span *link* to
  the caller's span (the run's trace stays the run's; the caller's trace is one click away).

No var, input, record or event payload is ever put in a span. Without opentelemetry-api
installed nothing of it is imported and :func:`traced_attempt` returns the method it decorates
unchanged; with the API but no tracer provider configured (an SDK, or ``opentelemetry-
instrument``), an attempt costs one check.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.util import find_spec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from procflow.states import TokenState

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer

__all__ = [
    "AVAILABLE",
    "enabled",
    "request_span",
    "run_trace_ids",
    "traced_attempt",
]

TRACER_NAME = "procflow"
TRACEPARENT = "traceparent"
# History entries that say the attempt failed (its message stays out of the span: it may quote
# values).
_FAILURES = frozenset({"attempt.failed", "step.failed"})


def _api_installed() -> bool:
    """Whether OpenTelemetry's API is installed, found without importing any of it (not even
    its namespace package)."""
    spec = find_spec("opentelemetry")
    places = (spec.submodule_search_locations or []) if spec is not None else []
    return any(os.path.isdir(os.path.join(place, "trace")) for place in places)


AVAILABLE = _api_installed()  # decided once, at import


class _Token(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def attempt(self) -> int: ...


class _Run(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def version_id(self) -> int: ...


class _AttemptCtx(Protocol):
    """What a span needs of a run context (``procflow.runtime.work.advancing.Ctx``)."""

    @property
    def run(self) -> _Run: ...
    @property
    def tokens(self) -> Mapping[int, _Token]: ...


class _Version(Protocol):
    @property
    def version(self) -> int: ...


class _Compiled(Protocol):
    @property
    def version(self) -> _Version: ...


class _Catalog(Protocol):
    def compiled(self, version_id: int) -> _Compiled: ...


class _Host(Protocol):
    @property
    def catalog(self) -> _Catalog: ...


class _Attempter(Protocol):
    """What a span needs of the object that makes attempts (``Advancer``)."""

    owner: str

    @property
    def host(self) -> _Host: ...


_Attempt = TypeVar("_Attempt", bound=Callable[..., Any])


def run_trace_ids(run_id: str) -> tuple[int, int]:
    """The trace id of the run's trace and the span id of its root, derived from the run id."""
    digest = hashlib.sha256(run_id.encode("utf-8")).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1  # all zeros is the invalid trace id
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def traced_attempt(attempt: _Attempt) -> _Attempt:
    """Decorates ``Advancer.attempt`` (its signature kept): each call is a span in the run's
    trace, when a tracer provider is configured. Without OpenTelemetry: the method itself,
    untouched."""
    if not AVAILABLE:
        return attempt

    @functools.wraps(attempt)
    def traced(self: _Attempter, ctx: _AttemptCtx, now: int) -> Any:
        tracer = _tracer()
        if tracer is None:
            return attempt(self, ctx, now)
        with _attempt_span(tracer, self, ctx) as record:
            outcome = attempt(self, ctx, now)
            record(outcome)
            return outcome

    return cast(_Attempt, traced)


def enabled() -> bool:
    """Whether attempts are traced now (OpenTelemetry installed and a tracer provider set)."""
    return AVAILABLE and _tracer() is not None


def request_span(
    name: str,
    run_id: str,
    traceparent: str | None,
    attributes: Mapping[str, str | int],
) -> None:
    """Record a span ``name`` in the run's trace, linked to the caller's span when
    ``traceparent`` is a valid W3C trace context (an invalid one is ignored, as the spec
    says a receiver does)."""
    tracer = _tracer() if AVAILABLE else None
    if tracer is None:
        return
    from opentelemetry.trace import Link

    caller = _caller_context(traceparent)
    links = [Link(caller)] if caller is not None else []
    attrs = {"procflow.run.id": run_id, **attributes}
    tracer.start_span(name, context=_run_root(run_id), links=links, attributes=attrs).end()


# --- OpenTelemetry, imported on first use ---------------------------------------------------


def _tracer() -> Tracer | None:
    """procflow's tracer, or None while no tracer provider is configured (every span would be
    a no-op: skip building it). Called once per attempt: kept to a lookup and a test."""
    trace = _api()
    # The API's global, read directly: while none is set, get_tracer_provider() looks up an
    # environment variable on every call (a microsecond an attempt). _api() made that call
    # once, which set the global if the variable names a provider; should a later API drop
    # the global, the public call stands in.
    provider: Any = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None:
        return None
    if provider is _UNKNOWN:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            return None
    cached = _TRACERS.get(id(provider))
    if cached is None or cached[0] is not provider:
        cached = _TRACERS[id(provider)] = (provider, provider.get_tracer(TRACER_NAME))
    return cached[1]


_UNKNOWN = object()


@functools.cache
def _api() -> ModuleType:
    """``opentelemetry.trace``, imported on first use (it costs ~25 ms of start-up)."""
    from opentelemetry import trace

    trace.get_tracer_provider()  # sets the provider OTEL_PYTHON_TRACER_PROVIDER names, if any
    return trace


# The tracer of each provider seen (one in practice; tests swap providers).
_TRACERS: dict[int, tuple[object, Tracer]] = {}


@functools.lru_cache(maxsize=4096)  # a worker makes several attempts of each run it holds
def _run_root(run_id: str) -> Context:
    from opentelemetry import trace

    trace_id, span_id = run_trace_ids(run_id)
    root = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(root))


def _caller_context(traceparent: str | None) -> Any:
    """The caller's span context from a ``traceparent`` header, or None."""
    if not traceparent:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract({TRACEPARENT: traceparent})
    caller = trace.get_current_span(context).get_span_context()
    return caller if caller.is_valid else None


@contextmanager
def _attempt_span(
    tracer: Tracer, attempter: _Attempter, ctx: _AttemptCtx
) -> Iterator[Callable[[Any], None]]:
    from opentelemetry.trace import Status, StatusCode

    run = ctx.run
    token = next(iter(_ready_tokens(ctx)), None)
    attrs: dict[str, str | int] = {
        "procflow.run.id": run.id,
        "procflow.definition": run.name,
        "procflow.worker": attempter.owner,
    }
    version = _version_of(attempter, run.version_id)
    if version is not None:
        attrs["procflow.definition.version"] = version
    if token is not None:
        attrs |= {
            "procflow.step": token.step,
            "procflow.step.path": token.path,
            "procflow.attempt": token.attempt,
        }
    name = f"attempt {token.step}" if token is not None else "attempt"
    # An attempt returns its failure rather than raising; should anything escape anyway, its
    # message stays out of the span (it may quote values): no exception event, no status text.
    with tracer.start_as_current_span(
        name, context=_run_root(run.id), attributes=attrs,
        record_exception=False, set_status_on_exception=False,
    ) as span:  # fmt: skip

        def record(outcome: Any) -> None:
            error = getattr(outcome, "error", None)
            if isinstance(error, BaseException):  # a Failed outcome: the run's incident
                span.set_attribute("procflow.outcome", "incident")
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            elif any(entry.type in _FAILURES for entry in getattr(outcome, "history", ())):
                span.set_attribute("procflow.outcome", "failed")
                span.set_status(Status(StatusCode.ERROR, "the step attempt failed"))
            else:
                span.set_attribute("procflow.outcome", "ok")

        yield record


def _ready_tokens(ctx: _AttemptCtx) -> Iterator[_Token]:
    """The token the attempt advances: the ready one (as ``advancing._ready_id`` picks it)."""
    for token in ctx.tokens.values():
        if token.state == TokenState.READY:
            yield token


def _version_of(attempter: _Attempter, version_id: int) -> int | None:
    try:
        return attempter.host.catalog.compiled(version_id).version.version
    except Exception:  # a definition that no longer compiles: its attempt is an incident
        return None
