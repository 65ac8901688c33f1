"""A request's W3C trace context, linked into the traces of the runs it starts or resumes.

Each run is its own trace (``procflow.runtime.work.tracing``). A ``traceparent`` header on a request
that starts a run (``POST /flows/{name}/runs``, ``POST /processes/{name}/runs``) or delivers an
event (``POST /events``) does not make the run part of the caller's trace: the request leaves a
span in each run's trace (``run start``, ``event delivery``) that links to the caller's span.
Without a tracer provider configured, nothing happens; without the header, the spans are made
unlinked. An event that a duplicate id makes a no-op leaves no span.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow.runtime.data.events import Event
from procflow.runtime.work.tracing import AVAILABLE, TRACEPARENT, request_span

__all__ = ["TRACEPARENT_PARAM", "traced_delivery", "traced_start"]

# The header as the OpenAPI document of a route that takes it declares it.
TRACEPARENT_PARAM: dict[str, Any] = {
    "name": TRACEPARENT, "in": "header", "required": False, "schema": {"type": "string"},
    "description": "W3C trace context: the run's trace links to the caller's span",
}  # fmt: skip


def traced_start(headers: Mapping[str, str], run: Mapping[str, Any]) -> None:
    """The ``run start`` span of a run a request started (``run`` in the ``runs show`` shape)."""
    if not AVAILABLE:
        return
    request_span(
        "run start",
        str(run["id"]),
        headers.get(TRACEPARENT),
        {"procflow.definition": str(run["name"]), "procflow.definition.version": run["version"]},
    )


def traced_delivery(headers: Mapping[str, str], event: Event, report: Mapping[str, Any]) -> None:
    """An ``event delivery`` span in each run the event resumed or started."""
    if not AVAILABLE:
        return
    for effect in ("resumed", "started"):
        for run_id in report.get(effect, ()):
            request_span(
                "event delivery",
                str(run_id),
                headers.get(TRACEPARENT),
                {
                    "procflow.event.type": event.type,
                    "procflow.event.id": event.id,
                    "procflow.delivery": effect,
                },
            )
