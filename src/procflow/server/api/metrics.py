"""``GET /metrics``: this process's metrics in the Prometheus text format (see
``procflow.server.metrics``), for a Prometheus server with a bearer token like any caller."""

from __future__ import annotations

from starlette.responses import Response

from procflow.server.metrics import CONTENT_TYPE
from procflow.server.routing import Call, Endpoint

__all__ = ["ENDPOINTS"]


def metrics(call: Call) -> Response:
    return Response(call.state.metrics.exposition(), media_type=CONTENT_TYPE)


ENDPOINTS = [
    Endpoint(
        "GET", "/metrics", metrics,
        "This process's metrics (Prometheus text): store gauges and its own counters.",
        responses={
            "200": {
                "description": "the metrics, in the Prometheus text exposition format",
                "media": "text/plain",
                "schema": {"type": "string"},
            },
        },
    ),
]  # fmt: skip
