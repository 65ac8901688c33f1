"""``/health`` (the process is up) and ``/health/ready`` (the store answers and its schema is
current): for load balancers and orchestrators, without a token."""

from __future__ import annotations

from starlette.responses import Response

from procflow.server.problems import Problem
from procflow.server.routing import Call, Endpoint, json_response
from procflow.store.store import SCHEMA_VERSION

__all__ = ["ENDPOINTS"]

_STATUS = {
    "type": "object",
    "properties": {"status": {"type": "string"}},
    "required": ["status"],
}


def health(call: Call) -> Response:
    return json_response({"status": "ok"})


def ready(call: Call) -> Response:
    try:
        version = call.engine.store.schema_version()
    except Exception as exc:  # the store not answering is exactly what this reports
        raise Problem(503, f"the store does not answer: {exc}") from None
    if version != SCHEMA_VERSION:
        raise Problem(503, f"the store's schema is version {version}, not {SCHEMA_VERSION}")
    return json_response({"status": "ready", "schema_version": version})


ENDPOINTS = [
    Endpoint(
        "GET", "/health", health, "The process is up.", public=True,
        responses={"200": {"description": "up", "schema": _STATUS}},
    ),
    Endpoint(
        "GET", "/health/ready", ready, "The store answers and its schema is current.",
        public=True,
        responses={
            "200": {"description": "ready", "schema": _STATUS},
            "503": {"description": "the store does not answer or needs `procflow db upgrade`"},
        },
    ),
]  # fmt: skip
