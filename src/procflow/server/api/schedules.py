"""Flow schedules: list them (by name, keyset paged), show one with its next slots, pause, resume,
trigger and backfill one. Each answer is the ``schedules ... --json`` shape (the runtime builds it
for every face: ``runtime.schedules.calls.schedule_json``).

A schedule is addressed as its flow's name (a lone schedule) or ``FLOW/NAME``, so the path
parameter may hold one ``/``: the routes take it with Starlette's ``path`` convertor, and a client
may send the slash as it is or percent-encoded. Pause, resume and backfill need the role
``deployer``, trigger ``operator``: the engine's calls refuse the others (403).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from procflow.runtime.schedules.calls import MAX_NOTE
from procflow.runtime.schedules.firing import MAX_SLOTS
from procflow.server.inputs import json_object, member, query_param, unprocessable
from procflow.server.paging import PAGE_PARAMS, bad_query, page_json, page_schema, str_page
from procflow.server.routing import Call, Endpoint, json_response

__all__ = ["BACKFILL_SCHEMA", "ENDPOINTS", "NAME_PATTERN", "SCHEDULE_SCHEMA", "TRIGGER_SCHEMA"]

# FLOW or FLOW/NAME: a flow's name, and a schedule's identifier in a list of triggers.
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z_][A-Za-z0-9_]*)?$"
# A pause note is one line: no control characters (the engine refuses them too).
NOTE_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
DEFAULT_NEXT = 3

_TIME = {"type": "string", "format": "date-time"}
_MAYBE_TIME = {"type": ["string", "null"], "format": "date-time"}
_MAYBE_TEXT = {"type": ["string", "null"]}
_COUNT = {"type": "integer", "minimum": 0}

SCHEDULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A `schedules list --json` item, the `schedules show --json` shape.",
    "properties": {
        "name": {"type": "string", "description": "FLOW, or FLOW/NAME"},
        "flow": {"type": "string"},
        "schedule": {"type": "string"},
        "spec": {"type": "string", "description": "in words: `0 6 * * MON-FRI Europe/Berlin`"},
        "state": {"enum": ["active", "paused", "disabled", "ended"]},
        "note": _MAYBE_TEXT,
        "overlap": {"enum": ["skip", "allow", "buffer_one", "cancel_previous", None]},
        "missed": {"enum": ["latest", "all", "none", None]},
        "next": {"type": "array", "items": _TIME},
        "due_at": _MAYBE_TIME,
        "buffered": _MAYBE_TIME,
        "last": {
            "type": ["object", "null"],
            "properties": {"slot": _TIME, "run_id": _MAYBE_TEXT},
            "required": ["slot", "run_id"],
        },
        "error": {**_MAYBE_TEXT, "description": "why its last due slot started no run"},
        "counts": {
            "type": "object",
            "properties": {k: _COUNT for k in ("started", "skipped", "missed", "buffered")},
            "required": ["started", "skipped", "missed", "buffered"],
        },
    },
    "required": [
        "name", "flow", "schedule", "spec", "state", "note", "overlap", "missed", "next",
        "due_at", "buffered", "last", "error", "counts",
    ],
}  # fmt: skip

TRIGGER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The `schedules trigger --json` report: the runs started (none when the "
    "schedule's overlap skipped or buffered the slot).",
    "properties": {
        "name": {"type": "string"},
        "started": {"type": "array", "items": {"type": "string"}},
        "skipped": _COUNT,
        "buffered": _COUNT,
    },
    "required": ["name", "started", "skipped", "buffered"],
}

BACKFILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The `schedules backfill --json` report: every slot of the window, oldest "
    "first, with the run it has (`started`: this call started it).",
    "properties": {
        "name": {"type": "string"},
        "dry_run": {"type": "boolean"},
        "slots": {"type": "array", "items": {
            "type": "object",
            "properties": {"slot": _TIME, "run_id": _MAYBE_TEXT, "started": {"type": "boolean"}},
            "required": ["slot", "run_id", "started"],
        }},
    },
    "required": ["name", "dry_run", "slots"],
}  # fmt: skip


def list_schedules(call: Call) -> Response:
    asked = str_page(call.query, "schedules")
    page = call.engine.schedules.page(limit=asked.limit, after=asked.before)
    return json_response(page_json(asked, page))


def show_schedule(call: Call) -> Response:
    next_count = _next_count(call.query.get("next", ""))
    return json_response(call.engine.schedules.show(call.params["name"], next_count))


def _next_count(text: str) -> int:
    """``?next=N``: how many next slots (1 to MAX_SLOTS; default 3)."""
    if text == "":
        return DEFAULT_NEXT
    if text.isascii() and text.isdigit() and len(text) <= 4 and 1 <= int(text) <= MAX_SLOTS:
        return int(text)
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    raise bad_query("next", f"next must be a whole number from 1 to {MAX_SLOTS}, not [{shown}]")


def pause_schedule(call: Call) -> Response:
    body = json_object(call, {"note"}, optional=True)
    note = member(body, "note", str, None)
    return json_response(call.engine.schedules.pause(call.params["name"], note, user=call.actor))


def resume_schedule(call: Call) -> Response:
    return json_response(call.engine.schedules.resume(call.params["name"], user=call.actor))


def trigger_schedule(call: Call) -> Response:
    body = json_object(call, {"overlap"}, optional=True)
    overlap = member(body, "overlap", str, None)
    if overlap not in (None, "allow"):
        raise unprocessable(
            "overlap", f'overlap takes only "allow" (start even while its runs are open), '
            f"not [{overlap[:40]}]",
        )  # fmt: skip
    report = call.engine.schedules.trigger(
        call.params["name"], allow_overlap=overlap == "allow", user=call.actor
    )
    return json_response(report)


def backfill_schedule(call: Call) -> Response:
    body = json_object(call, {"from", "to", "dry_run"})
    bounds = {}
    for name in ("from", "to"):
        bounds[name] = member(body, name, str, None)
        if bounds[name] is None:
            raise unprocessable(name, f"give [{name}]: a timestamp like 2027-01-01T00:00:00Z")
    dry_run = member(body, "dry_run", bool, False)
    report = call.engine.schedules.backfill(
        call.params["name"], bounds["from"], bounds["to"], dry_run=dry_run, user=call.actor
    )
    return json_response(report)


# --- OpenAPI ---------------------------------------------------------------------------------

_NAME = {
    "name": "name", "in": "path", "required": True,
    "description": "The schedule: its flow's name (a lone schedule) or FLOW/NAME (the slash as "
    "it is, or percent-encoded).",
    "schema": {"type": "string", "pattern": NAME_PATTERN},
}  # fmt: skip
_SCHEDULE = {"schema": SCHEDULE_SCHEMA}
_UNKNOWN = {"description": "no such schedule"}


def _json_body(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    return {"application/json": {"schema": {**schema, "required": list(required)}}}


ENDPOINTS = [
    Endpoint(
        "GET", "/schedules", list_schedules, "Flow schedules by name: spec, state, next slots, "
        "last run, counts.",
        params=PAGE_PARAMS,
        responses={"200": {"description": "a page of schedules",
                           "schema": page_schema(SCHEDULE_SCHEMA)}},
    ),
    Endpoint(
        "GET", "/schedules/{name:path}", show_schedule, "One schedule, with its next slots.",
        params=(_NAME, query_param(
            "next", f"How many next slots (default {DEFAULT_NEXT}).",
            {"type": "integer", "minimum": 1, "maximum": MAX_SLOTS, "default": DEFAULT_NEXT},
        )),
        responses={"200": {"description": "the schedule", **_SCHEDULE}, "404": _UNKNOWN},
    ),
    Endpoint(
        "POST", "/schedules/{name:path}/pause", pause_schedule,
        "Stop a schedule firing (its flow stays enabled); no slot is counted missed meanwhile.",
        params=(_NAME,),
        body=_json_body({"note": {
            "type": ["string", "null"], "maxLength": MAX_NOTE, "pattern": NOTE_PATTERN,
            "description": "why it is paused, shown with its state (null: none)",
        }}),
        body_required=False,
        responses={"200": {"description": "paused: the schedule", **_SCHEDULE}, "404": _UNKNOWN,
                   "422": {"description": "a note that is not one line of text"}},
    ),
    Endpoint(
        "POST", "/schedules/{name:path}/resume", resume_schedule,
        "Arm a paused schedule's first slot after the current instant.",
        params=(_NAME,),
        responses={"200": {"description": "resumed: the schedule", **_SCHEDULE},
                   "404": _UNKNOWN, "409": {"description": "the schedule is not paused"}},
    ),
    Endpoint(
        "POST", "/schedules/{name:path}/trigger", trigger_schedule,
        "Start one run now, as a slot at the current instant (the schedule's overlap applies "
        "unless `overlap` is `allow`).",
        params=(_NAME,),
        body=_json_body({"overlap": {
            "enum": ["allow", None], "description": "allow: start even while its runs are open",
        }}),
        body_required=False,
        responses={
            "200": {"description": "the runs started", "schema": TRIGGER_SCHEMA},
            "404": _UNKNOWN, "422": {"description": "its flow is disabled, or a bad `overlap`"},
        },
    ),
    Endpoint(
        "POST", "/schedules/{name:path}/backfill", backfill_schedule,
        f"One run for every slot of [from, to] that has none yet, oldest first (the schedule "
        f"as it is now; at most {MAX_SLOTS} slots, none after the current instant).",
        params=(_NAME,),
        body=_json_body({
            "from": {**_TIME, "description": "the window's start"},
            "to": {**_TIME, "description": "the window's end (not after the current instant)"},
            "dry_run": {"type": ["boolean", "null"], "description": "only list the slots"},
        }, ("from", "to")),
        responses={
            "200": {"description": "the window's slots", "schema": BACKFILL_SCHEMA},
            "404": _UNKNOWN,
            "422": {"description": f"a timestamp that cannot be read, a window that ends before "
                    f"it starts, after the current instant, or holds more than {MAX_SLOTS} "
                    "slots"},
        },
    ),
]  # fmt: skip
