"""The ASGI application of ``procflow serve``: the JSON API (and, with it, ``/openapi.json``), and
the web UI under ``/ui/`` (``/`` redirects there)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import Scope

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
        # Each route answers one method, so Starlette's own Allow names only the first route
        # of the path it found: the header lists what every route of the path answers.
        # A 405 raised inside a mounted router (the web UI) comes with the mount's scope: the
        # routes are matched from the application's root again.
        root = request.scope.get("app_root_path", request.scope.get("root_path", ""))
        allowed = ", ".join(sorted(methods_of(routes, {**request.scope, "root_path": root})))
        return problem_response(
            Problem(
                405, f"[{request.method}] is not allowed on [{request.url.path}]; use {allowed}",
                headers={"Allow": allowed},
            )
        )  # fmt: skip

    routes = [*routes_of([*ENDPOINTS, openapi_endpoint(ENDPOINTS)], state), *web_routes(state)]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: not_allowed},
        middleware=[Middleware(ServerTiming)],
    )


def methods_of(routes: Sequence[BaseRoute], scope: Scope) -> set[str]:
    """Every method some route of ``routes`` answers on the path of ``scope`` (RFC 9110's
    ``Allow``), looking into mounted routers."""
    found: set[str] = set()
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        if isinstance(route, Mount):
            found |= methods_of(route.routes, {**scope, **child})
        else:
            found |= getattr(route, "methods", None) or set()
    return found
