"""The ASGI application of ``procflow serve``: the JSON API (and, with it, ``/openapi.json``), and
the web UI under ``/ui/`` (``/`` redirects there)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from procflow.server.api import ENDPOINTS
from procflow.server.openapi import openapi_endpoint
from procflow.server.problems import Problem, problem_response
from procflow.server.routing import routes_of
from procflow.server.state import ServerState
from procflow.server.timing import ServerTiming
from procflow.server.web import web_routes

__all__ = ["create_app"]


def create_app(state: ServerState) -> Starlette:
    """The application over ``state``; its engines are closed when the server stops."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            state.engines.close()

    async def not_found(request: Request, exc: Exception) -> Response:
        return problem_response(Problem(404, f"no route [{request.url.path}]"))

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return problem_response(
            Problem(405, f"[{request.method}] is not allowed on [{request.url.path}]")
        )

    routes = [*routes_of([*ENDPOINTS, openapi_endpoint(ENDPOINTS)], state), *web_routes(state)]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: not_allowed},
        middleware=[Middleware(ServerTiming)],
    )
