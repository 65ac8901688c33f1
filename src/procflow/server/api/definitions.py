"""Definitions: deploy a file's text, list the deployed definitions (newest first), show one with
its versions, draw one as SVG or write it as BPMN 2.0 XML.

``POST /definitions?filename=NAME`` takes the file's text as its body; ``NAME`` (a bare file
name: ``orders.intent``, ``greet.flow.yaml``) decides the dialect and is the file the
diagnostics name. The definition is compiled as if it lay in the server's project folder
(``procflow serve --project``, ``PROCFLOW_PROJECT``; without one, the folder the server was
started in): its delegates, ``custom/`` code and ``connectors/`` are looked up there, as a
deploy from that folder would. Items are in the ``definitions list --json`` shape, the
report in the ``deploy --json`` shape plus the file's warnings.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

from starlette.responses import Response

from procflow import graph
from procflow.model.ir import Application, Flow
from procflow.runtime.engine import Engine
from procflow.server.diagrams import marked_svg
from procflow.server.inputs import INT64, id_param, query_param
from procflow.server.paging import PAGE_PARAMS, bad_query, int_page, page_json, page_schema
from procflow.server.problems import Problem
from procflow.server.routing import Call, Endpoint, json_response

__all__ = ["DEFINITION_SCHEMA", "ENDPOINTS", "FILENAME_PATTERN", "diagram_svg"]

# A bare file name (no folder) ending in a dialect's suffix, without control characters or line
# breaks (it is shown in every diagnostic): the server's check and the document's pattern (an
# ECMA-262 regex, as OpenAPI's are, and one Python reads the same).
FILENAME_PATTERN = r"^[^/\\\x00-\x1f\x7f-\x9f\u2028\u2029]*\.(intent|flow\.yaml|flow\.yml)$"
_FILENAME = re.compile(FILENAME_PATTERN)
MAX_FILENAME = 255
_TEXT_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
SVG = "image/svg+xml"
BPMN = "application/bpmn+xml"

DEFINITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A `definitions list --json` item.",
    "properties": {
        "name": {"type": "string"},
        "dialect": {"enum": ["intent", "flow"]},
        "enabled": {"type": "boolean"},
        "latest": {"type": "integer"},
        "versions": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "version": {"type": "integer"},
                "deployed_at": {"type": "string", "format": "date-time"},
                "active_runs": {"type": "integer"},
                "disabled": {"type": "boolean"},
            },
            "required": ["version", "deployed_at", "active_runs", "disabled"],
        }},
    },
    "required": ["name", "dialect", "enabled", "latest", "versions"],
}  # fmt: skip

_DIAGNOSTIC = {
    "type": "object",
    "description": "A `validate --json` item.",
    "properties": {
        "file": {"type": "string"}, "line": {"type": "integer"}, "col": {"type": "integer"},
        "severity": {"enum": ["error", "warning"]}, "message": {"type": "string"},
        "path": {"type": "string"},
    },
}  # fmt: skip

_REPORT = {
    "type": "object",
    "properties": {
        "deployed": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"}, "dialect": {"enum": ["intent", "flow"]},
                "version": {"type": "integer"}, "unchanged": {"type": "boolean"},
            },
            "required": ["name", "dialect", "version", "unchanged"],
        }},
        "warnings": {"type": "array", "items": _DIAGNOSTIC},
    },
    "required": ["deployed", "warnings"],
}  # fmt: skip


def deploy(call: Call) -> Response:
    filename = _filename(call.query.get("filename", ""))
    text = _file_text(call)
    report = call.engine.deploy_text(text, filename, user=call.actor)
    created = any(not d["unchanged"] for d in report["deployed"])
    return json_response(report, 201 if created else 200)


def _filename(name: str) -> str:
    if not name:
        raise bad_query("filename", "give the file's name: ?filename=NAME.intent or NAME.flow.yaml")
    if len(name) > MAX_FILENAME or not _FILENAME.fullmatch(name):
        shown = name if len(name) <= 60 else f"{name[:57]}..."
        shown = shown.encode("unicode_escape").decode("ascii") if not shown.isprintable() else shown
        raise bad_query(
            "filename",
            f"filename must be a file's name ending in .intent, .flow.yaml or .flow.yml (no "
            f"folder, no control character), of at most {MAX_FILENAME} characters, not [{shown}]",
        )
    return name


def _file_text(call: Call) -> str:
    kind = call.headers.get("content-type", "").split(";")[0].strip().lower()
    if not (kind.startswith("text/") or kind in _TEXT_TYPES):
        shown = kind or "none"
        raise Problem(
            400, f"the body must be the file's text (application/yaml or text/*), not [{shown}]"
        )
    try:
        return call.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Problem(400, f"the body is not UTF-8 text ({exc.reason})") from None


def list_definitions(call: Call) -> Response:
    asked = int_page(call.query, "definitions")
    page = call.engine.definitions_page(limit=asked.limit, before=asked.before)
    return json_response(page_json(asked, page))


def show_definition(call: Call) -> Response:
    return json_response(call.engine.definition(call.params["name"]))


def diagram(call: Call) -> Response:
    svg = diagram_svg(call.engine, call.params["name"], _version(call))
    return Response(svg, media_type=SVG)


def diagram_svg(engine: Engine, name: str, version: int | None = None) -> str:
    """The SVG drawing of the definition ``name`` at ``version`` (None: the latest): 404 for an
    unknown name or version, 503 when the server has no Graphviz ``dot`` to draw with."""
    definition = _drawable(engine, name, version)
    return marked_svg(definition, name)  # each step a <g class="step" data-step="NAME">


def diagram_bpmn(call: Call) -> Response:
    """The BPMN 2.0 XML of ``procflow graph --format bpmn`` (the same function draws both)."""
    version = _version(call)
    definition = _drawable(call.engine, call.params["name"], version)
    return Response(graph.draw(definition, call.params["name"], "bpmn"), media_type=BPMN)


def _version(call: Call) -> int | None:
    text = call.query.get("version", "")
    if text and not (text.isascii() and text.isdigit() and int(text) < INT64):
        raise bad_query("version", f"version must be a version number, not [{text[:40]}]")
    return int(text) if text else None


def _drawable(engine: Engine, name: str, version: int | None) -> Application | Flow:
    """The definition ``name`` at ``version``, once Graphviz is known to be there to lay it out
    (404 for an unknown name or version first, 503 without ``dot``)."""
    definition = engine.definition_version(name, version)
    if shutil.which("dot") is None:
        raise Problem(
            503,
            "drawing a diagram needs Graphviz's `dot` on the server's PATH, and it is not "
            "there; install Graphviz (`procflow graph --format mermaid` draws without it)",
        )
    return definition


_NAME = id_param("name", "The definition's name (a flow, or an intent process).")
_VERSION = query_param(
    "version",
    "Which version (default: the latest).",
    {"type": "integer", "minimum": 1, "maximum": INT64 - 1},
)
_DEFINITION = {"schema": DEFINITION_SCHEMA}
_UNKNOWN = {"description": "no such definition"}

ENDPOINTS = [
    Endpoint(
        "POST", "/definitions", deploy,
        "Validate a definition file's text and deploy its definitions.",
        params=(
            {**query_param("filename", "The file's name: NAME.intent or NAME.flow.yaml (the "
                                       "dialect).", {"type": "string", "maxLength": MAX_FILENAME,
                                                     "pattern": FILENAME_PATTERN}),
             "required": True},
        ),
        body={media: {"schema": {"type": "string"}}
              for media in ("application/yaml", "text/plain")},
        responses={
            "201": {"description": "deployed: a new version of at least one definition",
                    "schema": _REPORT},
            "200": {"description": "every definition was unchanged", "schema": _REPORT},
            "422": {"description": "the file has errors (each a `validate --json` item in "
                                   "`errors`) or cannot be deployed over what is there"},
        },
    ),
    Endpoint(
        "GET", "/definitions", list_definitions,
        "Deployed definitions, the most recently first deployed first.",
        params=PAGE_PARAMS,
        responses={"200": {"description": "a page of definitions",
                           "schema": page_schema(DEFINITION_SCHEMA)}},
    ),
    Endpoint(
        "GET", "/definitions/{name}", show_definition,
        "One definition with its versions (deployed_at, active runs).",
        params=(_NAME,),
        responses={"200": {"description": "the definition", **_DEFINITION}, "404": _UNKNOWN},
    ),
    Endpoint(
        "GET", "/definitions/{name}/diagram.svg", diagram, "A definition drawn as SVG.",
        params=(_NAME, _VERSION),
        responses={
            "200": {"description": "the diagram", "media": SVG, "schema": {"type": "string"}},
            "404": {"description": "no such definition or version"},
            "503": {"description": "Graphviz's `dot` is not installed on the server"},
        },
    ),
    Endpoint(
        "GET", "/definitions/{name}/diagram.bpmn", diagram_bpmn,
        "A definition as BPMN 2.0 XML with its diagram (`procflow graph --format bpmn`).",
        params=(_NAME, _VERSION),
        responses={
            "200": {"description": "the BPMN 2.0 document", "media": BPMN,
                    "schema": {"type": "string"}},
            "404": {"description": "no such definition or version"},
            "503": {"description": "Graphviz's `dot` (the layout) is not installed on the server"},
        },
    ),
]  # fmt: skip
