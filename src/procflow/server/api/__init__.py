"""The routes of the HTTP API, one module per resource; ``ENDPOINTS`` lists them all.

They import the server's shared modules (``routing``, ``state``, ``paging``, …), the runtime's
engine calls and its serializer; never ``server.web``.
"""

from __future__ import annotations

from procflow.server.api import (
    definitions,
    entities,
    events,
    health,
    metrics,
    outbox,
    runs,
    schedules,
    tasks,
)
from procflow.server.routing import Endpoint

__all__ = ["ENDPOINTS"]

ENDPOINTS: list[Endpoint] = [
    *health.ENDPOINTS,
    *events.ENDPOINTS,
    *definitions.ENDPOINTS,
    *runs.ENDPOINTS,
    *tasks.ENDPOINTS,
    *entities.ENDPOINTS,
    *outbox.ENDPOINTS,
    *schedules.ENDPOINTS,
    *metrics.ENDPOINTS,
]
