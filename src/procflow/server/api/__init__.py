"""The routes of the HTTP API, one module per resource; ``ENDPOINTS`` lists them all."""

from __future__ import annotations

from procflow.server.api import definitions, entities, events, health, metrics, outbox, runs, tasks
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
    *metrics.ENDPOINTS,
]
