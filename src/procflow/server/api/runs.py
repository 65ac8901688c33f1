"""Runs: start one (a flow with inputs, a trigger-less process for a record), list them newest
first, show one, cancel or retry one. A run is answered in the ``runs show --json`` shape, a
list item in the ``runs list --json`` shape (the runtime builds both for every face)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from procflow.runtime.operations.listing import WAIT_KINDS, bad_parent
from procflow.runtime.transition import RUN_ID_PATTERN, is_run_id
from procflow.server.idempotency import HEADER_PARAM, REPLAYED_HEADERS, Created, idempotent
from procflow.server.inputs import (
    INT64,
    JSON_OBJECT,
    id_param,
    json_object,
    member,
    query_param,
    text_param,
    unprocessable,
)
from procflow.server.paging import PAGE_PARAMS, bad_query, page_json, page_schema, str_page
from procflow.server.routing import Call, Endpoint, json_response
from procflow.server.tracecontext import TRACEPARENT_PARAM, traced_start
from procflow.states import RunStatus

__all__ = ["ENDPOINTS", "RUN_SCHEMA", "RUN_SUMMARY_SCHEMA"]

_STATUSES = [s.value for s in RunStatus]
_TIME = {"type": "string", "format": "date-time"}
_MAYBE_TIME = {"type": ["string", "null"], "format": "date-time"}

RUN_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A `runs list --json` item.",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "dialect": {"enum": ["intent", "flow"]},
        "status": {"enum": _STATUSES},
        "started_at": _TIME,
        "ended_at": _MAYBE_TIME,
        "business_key": {"type": ["string", "null"]},
    },
    "required": ["id", "name", "dialect", "status", "started_at", "ended_at", "business_key"],
}

RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The `runs show --json` shape: tokens and why they wait, vars (masked), "
    "output or error, history.",
    "properties": {
        **RUN_SUMMARY_SCHEMA["properties"],
        "version": {"type": "integer"},
        "record": {
            "type": ["object", "null"],
            "properties": {"entity": {"type": "string"}, "id": {"type": "integer"}},
        },
        "tokens": {"type": "array", "items": JSON_OBJECT},
        "bindings": JSON_OBJECT,
        "vars": JSON_OBJECT,
        "output": {},
        "error": {"type": ["object", "null"]},
        "history": {"type": "array", "items": JSON_OBJECT},
        "parent": {
            "type": ["object", "null"],
            "description": "the run whose call step started this one (null: none)",
            "properties": {"run_id": {"type": "string"}, "step": {"type": "string"},
                           "detached": {"const": True}},
            "required": ["run_id", "step"],
        },
        "children": {
            "type": "array",
            "description": "the runs this run's call steps started, oldest first",
            "items": {
                "type": "object",
                "properties": {
                    "run_id": {"type": "string"}, "flow": {"type": "string"},
                    "status": {"enum": [*_STATUSES, None]}, "step": {"type": "string"},
                    "detached": {"const": True},
                },
                "required": ["run_id", "flow", "status", "step"],
            },
        },
        "schedule": {
            "type": "object",
            "description": "present when a schedule started the run: its name and slot",
            "properties": {"name": {"type": "string"}, "slot": _TIME},
            "required": ["name", "slot"],
        },
    },
    "required": [
        *RUN_SUMMARY_SCHEMA["required"], "version", "record", "parent", "children", "tokens",
        "bindings", "vars", "output", "error", "history",
    ],
}  # fmt: skip


def list_runs(call: Call) -> Response:
    status = call.query.get("status") or None
    if status is not None and status not in _STATUSES:
        raise bad_query("status", f"status must be one of {', '.join(_STATUSES)}, not [{status}]")
    waiting = call.query.get("waiting_for") or None
    if waiting is not None and waiting not in WAIT_KINDS:
        raise bad_query(
            "waiting_for", f"waiting_for must be one of {', '.join(WAIT_KINDS)}, not [{waiting}]"
        )
    asked = str_page(call.query, "runs")
    name = call.query.get("name") or None
    parent = call.query.get("parent") or None
    if parent is not None and not is_run_id(parent):
        raise bad_query("parent", bad_parent(parent))
    page = call.engine.runs_page(
        status, name, limit=asked.limit, before=asked.before, waiting=waiting, parent=parent
    )
    return json_response(page_json(asked, page))


def show_run(call: Call) -> Response:
    history = _history(call.query.get("history", ""))
    return json_response(call.engine.show(call.params["id"], history))


def _history(text: str) -> int | None:
    """``?history=N``: keep the last N entries (a whole number, 0 or more)."""
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()):
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise bad_query(
            "history", f"history keeps the last N entries: a whole number, 0 or more, not [{shown}]"
        )
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else None  # more than any run holds: keep all


def cancel_run(call: Call) -> Response:
    run_id = call.params["id"]
    call.engine.cancel(run_id, user=call.actor)
    return json_response(call.engine.show(run_id))


def retry_run(call: Call) -> Response:
    run_id = call.params["id"]
    call.engine.retry(run_id, user=call.actor)
    return json_response(call.engine.show(run_id))


def start_flow(call: Call) -> Response:
    body = json_object(call, {"inputs"})
    inputs = member(body, "inputs", dict, {})
    name = call.params["name"]

    def create() -> Created:
        return _started(call, call.engine.start_flow(name, inputs, user=call.actor))

    return idempotent(call, body, create)


def start_process(call: Call) -> Response:
    body = json_object(call, {"record", "again"})
    entity, record_id = _record_ref(member(body, "record", dict, None))
    again = member(body, "again", bool, False)
    name = call.params["name"]

    def create() -> Created:
        run_id = call.engine.start(name, record=(entity, record_id), again=again, user=call.actor)
        return _started(call, run_id)

    return idempotent(call, body, create)


def _record_ref(record: dict[str, Any] | None) -> tuple[str, int]:
    """``{"entity", "id"}`` of the record a process starts for."""
    if record is None:
        raise unprocessable("record", 'give the record as {"entity": ENTITY, "id": ID}')
    entity, record_id = record.get("entity"), record.get("id")
    if set(record) - {"entity", "id"}:
        raise unprocessable("record", 'record takes only "entity" and "id"')
    if not isinstance(entity, str) or not entity:
        raise unprocessable("record.entity", "record.entity must be an entity's name")
    if isinstance(record_id, float) and record_id.is_integer():
        record_id = int(record_id)  # 12.0 is an integer to JSON Schema, as the document says it
    if isinstance(record_id, bool) or not isinstance(record_id, int) or not 0 <= record_id < INT64:
        raise unprocessable("record.id", "record.id must be a record's id: a whole number")
    return entity, record_id


def _started(call: Call, run_id: str) -> Created:
    run = call.engine.show(run_id)
    traced_start(call.headers, run)
    return Created(run, 201, {"Location": f"/runs/{quote(run_id)}"})


_RUN_ID = id_param("id", "The run's id.")
_NAME = id_param("name", "The deployed definition's name.")
_RUN = {"schema": RUN_SCHEMA}
_STARTED = {
    "description": "started: the run",
    "schema": RUN_SCHEMA,
    "headers": {
        "Location": {"schema": {"type": "string"}, "description": "/runs/{id}"},
        **REPLAYED_HEADERS,
    },
}
_UNKNOWN = {"description": "no such run"}
_START_REFUSED = {"description": "refused: bad inputs or record, a disabled definition, a reused "
                  "Idempotency-Key"}  # fmt: skip

ENDPOINTS = [
    Endpoint(
        "GET", "/runs", list_runs, "Runs, newest first.",
        params=(
            {**text_param("status", "Only runs with this status."), "schema": {"enum": _STATUSES}},
            text_param("name", "Only runs of this definition."),
            {**text_param("waiting_for", "Only runs with a token waiting for this (queue: over "
                          "a concurrency limit; throttle: over a step's throttle)."),
             "schema": {"enum": list(WAIT_KINDS)}},
            query_param("parent", "Only the runs that this run started by `call` (an unknown "
                        "run: none).", {"type": "string", "pattern": RUN_ID_PATTERN}),
            *PAGE_PARAMS,
        ),
        responses={
            "200": {"description": "a page of runs", "schema": page_schema(RUN_SUMMARY_SCHEMA)},
        },
    ),
    Endpoint(
        "GET", "/runs/{id}", show_run, "One run: its tokens and why they wait, its history.",
        params=(
            _RUN_ID,
            {**text_param("history", "Keep the last N history entries."),
             "schema": {"type": "integer", "minimum": 0}},
        ),
        responses={"200": {"description": "the run", **_RUN}, "404": _UNKNOWN},
    ),
    Endpoint(
        "POST", "/runs/{id}/cancel", cancel_run,
        "End a run that has not ended: its waits, timers and open tasks are withdrawn.",
        params=(_RUN_ID,),
        responses={
            "200": {"description": "cancelled: the run", **_RUN}, "404": _UNKNOWN,
            "409": {"description": "the run has already ended"},
        },
    ),
    Endpoint(
        "POST", "/runs/{id}/retry", retry_run,
        "Run a failed run's failed step again, with a fresh retry budget.",
        params=(_RUN_ID,),
        responses={
            "200": {"description": "retrying: the run", **_RUN}, "404": _UNKNOWN,
            "409": {"description": "the run has not failed"},
        },
    ),
    Endpoint(
        "POST", "/flows/{name}/runs", start_flow, "Start a run of a deployed flow.",
        params=(_NAME, HEADER_PARAM, TRACEPARENT_PARAM),
        body={"application/json": {"schema": {
            "type": "object",
            "properties": {"inputs": {"type": ["object", "null"],
                                      "description": "the flow's inputs (null: none given)"}},
            "additionalProperties": False,
        }}},
        responses={"201": _STARTED, "404": {"description": "no such definition"},
                   "409": {"description": "the flow's concurrency limit is reached for the "
                           "run's key and it refuses starts over it (on_limit: refuse): nothing "
                           "stored"},
                   "422": _START_REFUSED},
    ),
    Endpoint(
        "POST", "/processes/{name}/runs", start_process,
        "Start a run of an intent process for a record (at most once per record for a "
        "triggered process, unless `again`).",
        params=(_NAME, HEADER_PARAM, TRACEPARENT_PARAM),
        body={"application/json": {"schema": {
            "type": "object",
            "properties": {
                "record": {
                    "type": "object",
                    "properties": {
                        "entity": {"type": "string", "minLength": 1},
                        "id": {"type": "integer", "minimum": 0, "maximum": INT64 - 1},
                    },
                    "required": ["entity", "id"], "additionalProperties": False,
                },
                "again": {"type": ["boolean", "null"], "description": "null: false"},
            },
            "required": ["record"], "additionalProperties": False,
        }}},
        responses={"201": _STARTED, "404": {"description": "no such definition or record"},
                   "422": _START_REFUSED},
    ),
]  # fmt: skip
