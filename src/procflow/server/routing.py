"""How a route of the HTTP API is declared and called.

Each route is one :class:`Endpoint`: its method and path, who may call it, what it reads and
answers (which ``/openapi.json`` is built from), and a plain function that takes a :class:`Call`
and returns the answer. The function runs on a thread of the server's pool with that thread's
own engine, exactly like a CLI command: every face makes the same engine calls. Whatever goes
wrong becomes a problem document (``problems.py``); no traceback ever leaves the process.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from procflow.errors import ProcflowError, StoreError
from procflow.runtime.data.identity import ADMINISTRATOR, Actor
from procflow.runtime.engine import Engine
from procflow.server.problems import Problem, problem_for, problem_response
from procflow.server.state import ServerState
from procflow.store.codec import depth_problem

__all__ = ["Call", "Endpoint", "json_response", "routes_of"]

log = logging.getLogger("procflow.server")

MAX_BODY = 1024 * 1024  # bytes: a larger body is refused with 413 before it is read whole


@dataclass
class Call:
    """One request, as a route's function sees it."""

    request: Request
    body: bytes
    actor: Actor
    state: ServerState

    @property
    def engine(self) -> Engine:
        """This server thread's engine, opened on first use (``/health`` never opens one)."""
        return self.state.engines.get()

    @property
    def params(self) -> Mapping[str, str]:
        return self.request.path_params

    @property
    def query(self) -> Mapping[str, str]:
        return self.request.query_params

    @property
    def headers(self) -> Mapping[str, str]:
        return self.request.headers

    def json(self, *, allow_empty: bool = False) -> Any:
        """The body as JSON (``application/json``); 400 when it is anything else."""
        if not self.body and allow_empty:
            return None
        kind = self.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json" and not kind.endswith("+json"):
            raise Problem(400, f"the body must be application/json, not [{kind or 'none'}]")
        return parse_json(self.body)


def parse_json(body: bytes, what: str = "the body") -> Any:
    """``body`` (``what``: how a refusal names it) as JSON; 400 when it is not UTF-8 text, not
    JSON, or nested deeper than every face allows (checked before parsing, which recurses once
    per level; the engine checks the values it is given against the same limit)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Problem(400, f"{what} is not UTF-8 text") from None
    too_deep = depth_problem(text)
    if too_deep is not None:
        raise Problem(400, f"{what} is {too_deep}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise Problem(400, f"{what} is not valid JSON: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


@dataclass(frozen=True)
class Endpoint:
    """A route: its contract (for ``/openapi.json``) and the function that answers it."""

    method: str
    path: str
    handler: Callable[[Call], Response]
    summary: str
    public: bool = False  # no bearer token needed (/health, /webhooks)
    params: tuple[dict[str, Any], ...] = ()  # OpenAPI parameter objects (path and query)
    body: dict[str, Any] | None = None  # OpenAPI requestBody content by media type
    body_required: bool = True  # False: the route takes no body as an empty object
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)

    def route(self, state: ServerState) -> Route:
        async def endpoint(request: Request) -> Response:
            return await answer(self, request, state)

        return Route(self.path, endpoint, methods=[self.method], name=f"{self.method} {self.path}")


def routes_of(endpoints: list[Endpoint], state: ServerState) -> list[Route]:
    return [e.route(state) for e in endpoints]


async def answer(endpoint: Endpoint, request: Request, state: ServerState) -> Response:
    try:
        actor = ADMINISTRATOR if endpoint.public else await state.authenticate(request.headers)
        refuse_nul(request)
        refuse_empty_query(endpoint, request)
        body = await read_body(request)
        return await state.engines.call(_call, endpoint, request, body, actor, state)
    except Problem as problem:
        return problem_response(problem)


def _call(
    endpoint: Endpoint, request: Request, body: bytes, actor: Actor, state: ServerState
) -> Response:
    try:
        return endpoint.handler(Call(request, body, actor, state))
    except Problem as problem:
        return problem_response(problem)
    except StoreError as exc:
        log.error("store error on %s %s: %s", endpoint.method, endpoint.path, exc)
        return problem_response(Problem(503, f"the store is not available: {exc}"))
    except ProcflowError as exc:
        return problem_response(problem_for(exc))
    except Exception:  # a bug: logged here in full, never sent to the caller
        log.exception("internal error on %s %s", endpoint.method, endpoint.path)
        return problem_response(Problem(500, "an internal error occurred; it has been logged"))


def refuse_nul(request: Request) -> None:
    """A NUL character in a path value or query parameter is refused (400) before any route
    sees it: no name, id or filter holds one, and PostgreSQL cannot even compare text with one."""
    pairs = [*request.path_params.items(), *request.query_params.multi_items()]
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            shown = name.replace("\x00", "\\0")
            message = f"[{shown}] holds a NUL character, which no name, id or value may hold"
            raise Problem(400, message, [{"field": shown, "message": message}])


def refuse_empty_query(endpoint: Endpoint, request: Request) -> None:
    """A query parameter the route declares, given with an empty value (``?limit=``), is refused
    (400) rather than taken as absent: every one is declared with a type, values or a pattern
    that no empty text is (``/openapi.json``), and a client that sends one meant something."""
    declared = {p["name"]: p.get("required", False) for p in endpoint.params if p["in"] == "query"}
    for name, value in request.query_params.multi_items():
        if value == "" and name in declared:
            message = f"the query parameter [{name}] is empty: give it a value" + (
                "" if declared[name] else ", or leave it out"
            )
            raise Problem(400, message, [{"field": name, "message": message}])


async def read_body(request: Request) -> bytes:
    """The whole body, refused with 413 past :data:`MAX_BODY` (before reading it all)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise Problem(413, f"the body is larger than {MAX_BODY} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise Problem(413, f"the body is larger than {MAX_BODY} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        # The caller went (or sent a body its HTTP parser refused) before the body ended: the
        # answer reaches no one, and the server's log owes no traceback for it.
        raise Problem(400, "the connection closed before the body ended") from None
    return b"".join(chunks)


def json_response(
    value: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(value, status_code=status, headers=dict(headers or {}))
