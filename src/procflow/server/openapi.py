"""``/openapi.json``: the OpenAPI 3.1 description of every route, built from the same
:class:`~procflow.server.routing.Endpoint` objects the server routes by, so the two cannot
drift apart (a test checks that too)."""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import Response

from procflow import __version__
from procflow.server.problems import PROBLEM_TYPE
from procflow.server.routing import Call, Endpoint, json_response

__all__ = ["PROBLEM_SCHEMA", "document", "openapi_endpoint", "openapi_path"]

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                "required": ["field", "message"],
            },
        },
    },
    "required": ["type", "title", "status", "detail"],
}

_ERRORS = {
    "400": "the body or a query parameter cannot be read (bad JSON, JSON nested more than 64 "
    "levels, a wrong content type, an empty or bad query value, a NUL character)",
    "401": "no bearer token, or not a valid one (a token of the table, or a JWT of the "
    "OpenID Connect issuer)",
    "413": "the body is larger than 1 MiB",
    "503": "the store does not answer",
}


def openapi_endpoint(endpoints: list[Endpoint]) -> Endpoint:
    """``GET /openapi.json``: the document of ``endpoints`` and of itself (built once: the
    routes do not change while the server runs)."""
    described: dict[str, Any] = {}

    def answer(call: Call) -> Response:
        return json_response(described)

    endpoint = Endpoint(
        "GET", "/openapi.json", answer, "This document: the OpenAPI 3.1 description of the API.",
        responses={"200": {"description": "the OpenAPI document", "schema": {"type": "object"}}},
    )  # fmt: skip
    described.update(document([*endpoints, endpoint]))
    return endpoint


def document(endpoints: list[Endpoint]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        path = openapi_path(endpoint.path)
        paths.setdefault(path, {})[endpoint.method.lower()] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "procflow",
            "version": __version__,
            "description": "Runs, definitions, events, tasks and records of a procflow store.",
        },
        "components": {
            "schemas": {"Problem": PROBLEM_SCHEMA},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": dict(sorted(paths.items())),
    }


def openapi_path(path: str) -> str:
    """A route's path as OpenAPI writes it: ``/entities/{E}/{id:int}`` → ``/entities/{E}/{id}``."""
    return _PATH_PARAM.sub(lambda m: "{" + m.group("name") + "}", path)


_PATH_PARAM = re.compile(r"\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<convert>[a-z]+))?\}")
_CONVERTED = {"int": {"type": "integer", "minimum": 0}, "float": {"type": "number"}}
_PROBLEM_CONTENT = {PROBLEM_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": endpoint.summary,
        "operationId": _operation_id(endpoint),
        "responses": _responses(endpoint),
    }
    if endpoint.public:
        operation["security"] = []
    parameters = _parameters(endpoint)
    if parameters:
        operation["parameters"] = parameters
    if endpoint.body is not None:
        operation["requestBody"] = {"required": endpoint.body_required, "content": endpoint.body}
    return operation


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    """The endpoint's own parameter objects, and every path parameter it leaves undeclared (so
    the document always names what the path takes)."""
    declared = {(p.get("in"), p.get("name")) for p in endpoint.params}
    implied = [
        {
            "name": m.group("name"),
            "in": "path",
            "required": True,
            "schema": _CONVERTED.get(m.group("convert") or "", {"type": "string"}),
        }
        for m in _PATH_PARAM.finditer(endpoint.path)
        if ("path", m.group("name")) not in declared
    ]
    return [_without_nul(p) for p in (*endpoint.params, *implied)]


# routing.refuse_nul: no path value or query parameter may hold a NUL character.
NO_NUL = "^[^\\u0000]*$"


def _without_nul(parameter: dict[str, Any]) -> dict[str, Any]:
    """A path or query parameter of text says it holds no NUL (a pattern of its own, if it has
    one, says more)."""
    schema = parameter["schema"]
    if parameter["in"] not in ("path", "query") or schema.get("type") != "string":
        return parameter
    if "pattern" in schema:
        return parameter
    return {**parameter, "schema": {**schema, "pattern": NO_NUL}}


def _responses(endpoint: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, spec in endpoint.responses.items():
        response: dict[str, Any] = {"description": spec["description"]}
        if "schema" in spec:
            media = spec.get("media", "application/json")
            response["content"] = {media: {"schema": spec["schema"]}}
        elif int(status) >= 400:
            response["content"] = _PROBLEM_CONTENT
        if "headers" in spec:
            response["headers"] = spec["headers"]
        out[status] = response
    for status, description in _ERRORS.items():
        if status == "401" and endpoint.public:
            continue
        out.setdefault(status, {"description": description, "content": _PROBLEM_CONTENT})
    if _guarded(endpoint):
        out.setdefault("403", {"description": _REFUSED, "content": _PROBLEM_CONTENT})
    return dict(sorted(out.items()))


_REFUSED = (
    "the caller's roles do not allow this: the role table (operator, deployer, admin) or, for "
    "records, the application's permissions; the detail names the role it needs"
)


def _guarded(endpoint: Endpoint) -> bool:
    """Whether the role table or record permissions may refuse the route: every change, and
    reading records (any signed-in user reads everything else)."""
    if endpoint.public:
        return False
    return endpoint.method != "GET" or endpoint.path.startswith("/entities/")


def _operation_id(endpoint: Endpoint) -> str:
    path = openapi_path(endpoint.path)
    words = [w.strip("{}") for w in re.split(r"[/.\-]", path) if w]
    return "_".join([endpoint.method.lower(), *words])
