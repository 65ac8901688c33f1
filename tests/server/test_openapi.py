"""``/openapi.json`` is equal to the routes, is valid OpenAPI 3.1, and the HTTP reference page
(docs/reference/http.md) describes exactly the routes it describes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from procflow.server import idempotency
from procflow.server.api import ENDPOINTS, definitions
from procflow.server.app import create_app
from procflow.server.openapi import document, openapi_endpoint, openapi_path
from procflow.server.problems import PROBLEM_TYPE
from procflow.server.routing import Call, Endpoint
from procflow.server.state import ServerState

ROOT = Path(__file__).resolve().parents[2]
HTTP_PAGE = ROOT / "docs" / "reference" / "http.md"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# A route's heading on the reference page: ### `GET /runs/{id}`
_HEADING = re.compile(r"^#{2,4} `(?P<method>[A-Z]+) (?P<path>/[^`\s]*)`", re.M)
_PUBLIC = re.compile(r"^/(health(/.*)?|webhooks/.*)$")


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return openapi_document()


def openapi_document() -> dict[str, Any]:
    return document([*ENDPOINTS, openapi_endpoint(ENDPOINTS)])


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) of every operation of the document."""
    return [
        (method.upper(), path, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def app_routes(tmp_path: Path) -> set[tuple[str, str]]:
    """(METHOD, OpenAPI path) of every route the application answers (HEAD, which Starlette
    answers for every GET, left out)."""
    app = create_app(ServerState.of(f"sqlite:///{tmp_path / 'unused.db'}", None, {}))
    found = set()
    for route in app.routes:
        if isinstance(route, Mount) and route.path == "/ui":
            continue  # the web UI: HTML pages for people, not the API
        if (
            isinstance(route, Route)
            and route.path == "/"
            and route.endpoint.__name__ == ("redirect_root")
        ):
            continue  # `/` only redirects to the web UI
        assert isinstance(route, Route), f"a route that is not an Endpoint: {route!r}"
        for method in route.methods or ():
            if method != "HEAD":
                found.add((method, openapi_path(route.path)))
    return found


# --- the document equals the routes -----------------------------------------------------------


def test_every_route_is_in_the_document_and_nothing_else(
    spec: dict[str, Any], tmp_path: Path
) -> None:
    documented = {(method, path) for method, path, _ in operations(spec)}
    routes = app_routes(tmp_path)
    assert routes - documented == set(), "routes missing from /openapi.json"
    assert documented - routes == set(), "operations in /openapi.json with no route"
    assert ("GET", "/openapi.json") in routes and ("GET", "/health") in routes


def test_the_served_document_is_that_document(client: TestClient, spec: dict[str, Any]) -> None:
    answer = client.get("/openapi.json")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == spec


def test_the_document_is_valid_openapi_3_1(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.1.")
    errors = [e.message for e in OpenAPIV31SpecValidator(spec).iter_errors()]
    assert errors == []


def test_the_validator_does_catch_a_broken_document(spec: dict[str, Any]) -> None:
    broken = {**spec, "paths": {"/health": {"get": {"responses": {"200": {}}}}}}  # no description
    assert list(OpenAPIV31SpecValidator(broken).iter_errors())


# --- every operation is complete --------------------------------------------------------------


def test_every_operation_has_a_summary_an_id_and_a_success(spec: dict[str, Any]) -> None:
    ids = []
    for method, path, op in operations(spec):
        assert op.get("summary", "").strip(), f"{method} {path}: no summary"
        ids.append(op["operationId"])
        successes = [s for s in op["responses"] if s.startswith(("2", "3"))]
        assert successes, f"{method} {path}: no success response"
        for status, response in op["responses"].items():
            assert response.get("description"), f"{method} {path} {status}: no description"
    assert len(ids) == len(set(ids)), "operationIds must be unique"


def test_every_path_parameter_is_declared(spec: dict[str, Any]) -> None:
    for method, path, op in operations(spec):
        named = set(re.findall(r"\{([^}]+)\}", path))
        declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
        assert declared == named, f"{method} {path}: path parameters {declared} != {named}"
        for parameter in op.get("parameters", []):
            assert "schema" in parameter, f"{method} {path}: {parameter['name']} has no schema"
            if parameter["in"] == "path":
                assert parameter["required"] is True


def test_every_error_is_a_problem_document(spec: dict[str, Any]) -> None:
    for method, path, op in operations(spec):
        for status, response in op["responses"].items():
            if int(status) >= 400:
                assert list(response.get("content", {})) == [PROBLEM_TYPE], (method, path, status)


def test_only_health_and_webhooks_are_public(spec: dict[str, Any]) -> None:
    assert spec["security"] == [{"bearer": []}]
    for method, path, op in operations(spec):
        public = op.get("security") == []
        assert public == bool(_PUBLIC.match(path)), f"{method} {path}: public={public}"
        if not public:
            assert "401" in op["responses"], f"{method} {path}: needs a token, yet no 401"


def _answer(call: Call) -> Response:
    return Response()


def test_undeclared_path_parameters_are_added_with_their_type() -> None:
    endpoint = Endpoint(
        "GET", "/things/{kind}/{id:int}", _answer, "A thing.",
        params=({"name": "kind", "in": "path", "required": True, "schema": {"enum": ["a"]},
                 "description": "the kind"},),
        responses={"200": {"description": "the thing"}},
    )  # fmt: skip
    op = document([endpoint])["paths"]["/things/{kind}/{id}"]["get"]
    assert op["operationId"] == "get_things_kind_id"
    assert op["parameters"] == [
        {"name": "kind", "in": "path", "required": True, "schema": {"enum": ["a"]},
         "description": "the kind"},
        {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}},
    ]  # fmt: skip


# --- the reference page -----------------------------------------------------------------------


def page_routes() -> set[tuple[str, str]]:
    return {
        (m.group("method"), m.group("path"))
        for m in _HEADING.finditer(HTTP_PAGE.read_text(encoding="utf-8"))
    }


def test_the_reference_page_describes_exactly_the_documented_routes(
    spec: dict[str, Any],
) -> None:
    documented = {(method, path) for method, path, _ in operations(spec)}
    described = page_routes()
    assert documented - described == set(), f"routes {HTTP_PAGE.name} does not describe"
    assert described - documented == set(), f"routes {HTTP_PAGE.name} describes but no server has"


# --- the document declares what the server enforces -------------------------------------------


def parameter(spec: dict[str, Any], method: str, path: str, name: str) -> dict[str, Any]:
    params = spec["paths"][path][method.lower()]["parameters"]
    found: dict[str, Any] = next(p for p in params if p["name"] == name)
    return found


def body_schema(spec: dict[str, Any], method: str, path: str, media: str) -> dict[str, Any]:
    schema: dict[str, Any] = spec["paths"][path][method.lower()]["requestBody"]["content"][media][
        "schema"
    ]
    return schema


def test_the_document_declares_the_constraints_the_server_enforces(spec: dict[str, Any]) -> None:
    """Each was enforced with a 400 or 422 the document did not announce (issue 2/6)."""
    for path in ("/flows/{name}/runs", "/processes/{name}/runs", "/entities/{entity}"):
        key = parameter(spec, "POST", path, "Idempotency-Key")["schema"]
        assert key["pattern"] == idempotency.KEY_PATTERN == "^[!-~]{1,255}$"
    filename = parameter(spec, "POST", "/definitions", "filename")["schema"]
    assert (filename["pattern"], filename["maxLength"]) == (definitions.FILENAME_PATTERN, 255)
    assert parameter(spec, "POST", "/events", "ce-specversion")["schema"]["enum"] == ["1.0"]
    cloudevent = body_schema(spec, "POST", "/events", "application/cloudevents+json")
    assert cloudevent["properties"]["specversion"] == {"const": "1.0"}
    assert cloudevent["properties"]["data_base64"] is False
    record = body_schema(spec, "POST", "/processes/{name}/runs", "application/json")
    assert record["properties"]["record"]["additionalProperties"] is False
    assert record["properties"]["record"]["properties"]["id"]["maximum"] == 2**63 - 1
    # null is taken as absent where a route reads a member (test_null_members_are_taken_...)
    nullable = [
        (record, "again"),
        (body_schema(spec, "POST", "/flows/{name}/runs", "application/json"), "inputs"),
        (body_schema(spec, "POST", "/tasks/{id}/complete", "application/json"), "action"),
        (body_schema(spec, "POST", "/tasks/{id}/complete", "application/json"), "data"),
        (body_schema(spec, "POST", "/events", "application/json")["anyOf"][0], "id"),
        (cloudevent, "data"),
    ]
    for schema, member in nullable:
        assert "null" in schema["properties"][member]["type"], member


def test_every_text_in_a_path_or_query_holds_no_nul_and_no_query_value_is_empty(
    spec: dict[str, Any],
) -> None:
    """routing.refuse_nul and routing.refuse_empty_query, as every parameter says them."""
    for method, path, op in operations(spec):
        for param in op.get("parameters", []):
            schema, where = param["schema"], (method, path, param["name"])
            if param["in"] in ("path", "query") and schema.get("type") == "string":
                assert "pattern" in schema, where
                assert not re.search(schema["pattern"], "a\x00b"), where
            if param["in"] == "query":
                assert not _valid(schema, ""), where


def _valid(schema: dict[str, Any], value: str) -> bool:
    """Whether the query text ``value`` fits ``schema`` (as a number, for a number schema)."""
    instance: Any = value
    if schema.get("type") == "integer":
        if not value.isdigit():
            return False
        instance = int(value)
    return Draft202012Validator(schema).is_valid(instance)
