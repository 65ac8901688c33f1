"""Events over HTTP: ``POST /events`` in each of its three forms, and the signed webhooks
``POST /webhooks/slack`` and ``POST /webhooks/events``.

Each request becomes the event ``procflow events send`` makes from the same input (``TYPE
--data --id``, ``--envelope``, ``--slack-payload``), built by the same runtime functions and
accepted by the same engine call, and is answered with the same delivery report ``{event_id,
duplicate, resumed, started}``. A repeated event id is acknowledged (``duplicate: true``) and
does nothing. A webhook's signature is checked (``procflow.server.webhooks``) before anything
in its body is parsed; without its secret configured, its route answers 404.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, unquote

from starlette.responses import Response

from procflow.connectors.builtin.slack_events import approval_event
from procflow.errors import ConfigError, EventError, UsageError
from procflow.runtime.data.events import CLOUDEVENTS_VERSION, Event, envelope, make_event
from procflow.runtime.data.identity import Actor
from procflow.server.problems import Problem
from procflow.server.routing import Call, Endpoint, json_response, parse_json
from procflow.server.tracecontext import TRACEPARENT_PARAM, traced_delivery
from procflow.server.webhooks import (
    SLACK_SIGNATURE,
    SLACK_TIMESTAMP,
    WEBHOOK_ID,
    WEBHOOK_SIGNATURE,
    WEBHOOK_TIMESTAMP,
    Refusal,
    slack_refusal,
    standard_refusal,
    webhook_key,
)

__all__ = ["DELIVERY_REPORT", "ENDPOINTS"]

log = logging.getLogger("procflow.server")

CLOUDEVENT = "application/cloudevents+json"
CLOUDEVENT_BATCH = "application/cloudevents-batch+json"
FORM = "application/x-www-form-urlencoded"
SLACK_SECRET = "SLACK_SIGNING_SECRET"
# The context attributes a binary-mode CloudEvent carries as ce-* headers, that procflow reads.
_CE_ATTRIBUTES = ("specversion", "type", "id", "source")


# --- POST /events ----------------------------------------------------------------------------


def post_event(call: Call) -> Response:
    """Accept an event; ``by`` on the runs it resumes is the caller. A ``traceparent`` header
    links the caller's trace into each run's (``procflow.server.tracecontext``)."""
    user = call.actor
    media = _media(call.headers)
    if media == CLOUDEVENT_BATCH:
        raise Problem(400, "a batch of CloudEvents is not accepted: send one event per request")
    if media == CLOUDEVENT:
        return _accepted(call, _structured(call.body), user)
    if any(name.startswith("ce-") for name in call.headers):  # names arrive lower-cased
        return _accepted(call, _binary(call), user, type_field="ce-type")
    whole = call.json()
    _require_object(whole)
    return _accepted(call, _built(lambda: envelope(whole)), user)


def _structured(body: bytes) -> Event:
    """A structured-mode CloudEvent: the whole event, attributes and ``data``, as the body."""
    whole = parse_json(body)
    _require_object(whole)
    if "specversion" not in whole:
        message = f'a CloudEvent ({CLOUDEVENT}) needs [specversion] "1.0"'
        raise Problem(422, message, [{"field": "specversion", "message": message}])
    if "data_base64" in whole:
        message = "a CloudEvent's data must be a JSON object under [data], not [data_base64]"
        raise Problem(422, message, [{"field": "data_base64", "message": message}])
    return _built(lambda: envelope(whole))


def _binary(call: Call) -> Event:
    """A binary-mode CloudEvent: attributes in ``ce-*`` headers (percent-encoded, as the
    CloudEvents HTTP binding says), the body the event's data."""
    if "ce-specversion" not in call.headers:
        message = 'a binary-mode CloudEvent needs the ce-specversion header ("1.0")'
        raise Problem(422, message, [{"field": "ce-specversion", "message": message}])
    whole: dict[str, Any] = {
        name: unquote(call.headers[f"ce-{name}"])
        for name in _CE_ATTRIBUTES
        if f"ce-{name}" in call.headers
    }
    data = call.json(allow_empty=True)
    whole["data"] = {} if data is None else data
    return _built(lambda: envelope(whole), {a: f"ce-{a}" for a in _CE_ATTRIBUTES})


# --- POST /webhooks/slack --------------------------------------------------------------------


def slack_webhook(call: Call) -> Response:
    """A Slack button click (``block_actions``) → the ``slack.approval`` event."""
    secret = call.state.secret(SLACK_SECRET)
    if secret is None:
        raise Problem(404, f"POST /webhooks/slack is off: the server has no {SLACK_SECRET}")
    _refuse_unsigned(
        slack_refusal(
            secret,
            call.headers.get(SLACK_TIMESTAMP),
            call.headers.get(SLACK_SIGNATURE),
            call.body,
            time.time(),  # the real clock, even on a virtual-clock store
        )
    )
    payload = _slack_payload(call)
    try:
        data, key = approval_event(payload)
    except UsageError as exc:
        raise Problem(422, str(exc), [{"field": "payload", "message": str(exc)}]) from None
    return _accepted(call, _built(lambda: make_event("slack.approval", data, key)), user=None)


def _slack_payload(call: Call) -> Any:
    """The JSON in the form field ``payload`` of a Slack interactivity request."""
    media = _media(call.headers)
    if media != FORM:
        raise Problem(400, f"a Slack interactivity request is {FORM}, not [{media or 'none'}]")
    try:
        fields = parse_qs(call.body.decode("utf-8"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        raise Problem(400, "the form body is not UTF-8 text") from None
    values = fields.get("payload", [])
    if len(values) != 1:
        raise Problem(
            400, "a Slack interactivity request has exactly one form field [payload] (JSON)"
        )
    return parse_json(values[0].encode("utf-8"), "the form field [payload]")


# --- POST /webhooks/events -------------------------------------------------------------------


def standard_webhook(call: Call) -> Response:
    """An event ``{type, data}`` signed by the Standard Webhooks scheme; its id is the
    ``webhook-id``, so a redelivery of the same webhook is a duplicate."""
    secret = call.state.config.webhook_secret
    if secret is None:
        raise Problem(
            404, "POST /webhooks/events is off: the server has no PROCFLOW_WEBHOOK_SECRET"
        )
    try:
        key = webhook_key(secret)
    except ConfigError as exc:
        log.error("%s", exc)
        raise Problem(500, str(exc)) from None
    msg_id = call.headers.get(WEBHOOK_ID)
    _refuse_unsigned(
        standard_refusal(
            key,
            msg_id,
            call.headers.get(WEBHOOK_TIMESTAMP),
            call.headers.get(WEBHOOK_SIGNATURE),
            call.body,
            time.time(),
        )
    )
    body = parse_json(call.body)
    _require_object(body, "{type, data}")
    # Only type and data are read: other fields (a sender's timestamp, its own id) are left be.
    whole = {"type": body.get("type"), "data": body.get("data"), "id": msg_id}
    return _accepted(call, _built(lambda: envelope(whole), {"id": WEBHOOK_ID}), user=None)


# --- shared ----------------------------------------------------------------------------------


def _accepted(call: Call, event: Event, user: Actor | None, type_field: str = "type") -> Response:
    try:
        report = call.engine.accept_event(event, user=user)
    except EventError as exc:
        # The engine refuses the type (an error without a field: no such connector or event)
        # or a field of the payload (named as in the data).
        raise _rejected(exc, exc.field or type_field) from None
    traced_delivery(call.headers, event, report)
    return json_response(report)


def _built(build: Callable[[], Event], names: Mapping[str, str] | None = None) -> Event:
    """The event ``build`` makes; its refusal as a 422 naming the request's own field (the
    ``ce-*`` header of a binary-mode attribute, ``webhook-id`` for a webhook's id)."""
    try:
        return build()
    except EventError as exc:
        field = exc.field or "type"  # without a field, it is the type that is not valid text
        raise _rejected(exc, (names or {}).get(field, field)) from None


def _rejected(exc: EventError, field: str) -> Problem:
    return Problem(422, str(exc), [{"field": field, "message": str(exc)}])


def _refuse_unsigned(refusal: Refusal | None) -> None:
    if refusal is not None:
        error = {"field": refusal.field, "message": refusal.message}
        raise Problem(401, refusal.message, [error])


def _require_object(value: Any, shape: str = "{type, data, id} or a CloudEvent") -> None:
    if not isinstance(value, dict):
        raise Problem(400, f"the body must be a JSON object: {shape}")


def _media(headers: Mapping[str, str]) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


# --- the contract ----------------------------------------------------------------------------

DELIVERY_REPORT: dict[str, Any] = {
    "type": "object",
    "description": "the delivery report, as `procflow events send --json` prints it",
    "properties": {
        "event_id": {"type": "string"},
        "duplicate": {"type": "boolean", "description": "the id was seen before: nothing done"},
        "resumed": {"type": "array", "items": {"type": "string"}, "description": "run ids"},
        "started": {"type": "array", "items": {"type": "string"}, "description": "run ids"},
        "errors": {
            "type": "array",
            "description": "triggers whose `when` could not be evaluated (their flow not started)",
            "items": {
                "type": "object",
                "properties": {"flow": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
    "required": ["event_id", "duplicate", "resumed", "started"],
}

_TEXT = {"type": "string", "minLength": 1}
# <connector>.<event>: text before the first dot, and after it (runtime.waits.delivery).
_EVENT_TYPE = {"type": "string", "pattern": "^[^.]+\\.[\\s\\S]+$"}
_DATA = {"type": ["object", "null"], "description": "the payload its manifest declares (null: {})"}

_EVENT = {
    "type": "object",
    "properties": {
        "type": {**_EVENT_TYPE, "description": "<connector>.<event>, e.g. slack.approval"},
        "data": _DATA,
        "id": {"type": ["string", "null"], "minLength": 1,
               "description": "a repeated id is a duplicate; minted if absent or null"},
    },
    "required": ["type"],
}  # fmt: skip

_BINARY_DATA = {
    "type": "object",
    "description": "with ce-* headers (a binary-mode CloudEvent): the event's data itself",
}

_CLOUDEVENT = {
    "type": "object",
    "description": "a CloudEvent in structured mode (specversion 1.0 only; data as JSON, not "
    "data_base64)",
    "properties": {
        "specversion": {"const": "1.0"},
        "type": _EVENT_TYPE,
        "id": _TEXT,
        "source": _TEXT,
        "data": _DATA,
        "data_base64": False,
    },
    "required": ["specversion", "type", "id", "source"],
}


def _header(
    name: str, description: str, *, required: bool = False, schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": required, "schema": schema or _TEXT,
            "description": description}  # fmt: skip


_RECENT = "Unix seconds, within 5 minutes of the server's real clock"
_REPORT = {"200": {"description": "the delivery report", "schema": DELIVERY_REPORT}}
_REJECTED = {"422": {"description": "a rejected event (unknown type, payload not its manifest's)"}}
_UNSIGNED = {"401": {"description": "a missing, wrong or stale signature: nothing accepted"}}

ENDPOINTS = [
    Endpoint(
        "POST", "/events", post_event,
        "Accept an event: {type, data, id}, or a CloudEvent in structured or binary mode.",
        params=(
            _header("ce-specversion", "binary-mode CloudEvent: 1.0 (the body is the data)",
                    schema={"type": "string", "enum": [CLOUDEVENTS_VERSION]}),
            _header("ce-type", "binary-mode CloudEvent: the event type", schema=_EVENT_TYPE),
            _header("ce-id", "binary-mode CloudEvent: the event id"),
            _header("ce-source", "binary-mode CloudEvent: its source"),
            TRACEPARENT_PARAM,
        ),
        body={
            "application/json": {"schema": {"anyOf": [_EVENT, _BINARY_DATA]}},
            CLOUDEVENT: {"schema": _CLOUDEVENT},
        },
        responses={**_REPORT, **_REJECTED},
    ),
    Endpoint(
        "POST", "/webhooks/slack", slack_webhook,
        "A Slack interactivity click, signed with SLACK_SIGNING_SECRET: a slack.approval event.",
        public=True,
        params=(
            _header(SLACK_SIGNATURE, "v0=<hex HMAC-SHA256>", required=True),
            _header(SLACK_TIMESTAMP, _RECENT, required=True),
        ),
        body={FORM: {"schema": {
            "type": "object",
            "properties": {"payload": {"type": "string", "description": "block_actions JSON"}},
            "required": ["payload"],
        }}},
        responses={
            **_REPORT, **_UNSIGNED, **_REJECTED,
            "404": {"description": "SLACK_SIGNING_SECRET is not set: the route is off"},
        },
    ),
    Endpoint(
        "POST", "/webhooks/events", standard_webhook,
        "An event {type, data} signed by Standard Webhooks with PROCFLOW_WEBHOOK_SECRET.",
        public=True,
        params=(
            _header(WEBHOOK_ID, "the event id: a redelivery is a duplicate", required=True),
            _header(WEBHOOK_TIMESTAMP, _RECENT, required=True),
            _header(WEBHOOK_SIGNATURE, "v1,<base64 HMAC-SHA256> ...", required=True),
        ),
        body={"application/json": {"schema": {
            "type": "object",
            "properties": {"type": _EVENT_TYPE, "data": _DATA},
            "required": ["type"],
        }}},
        responses={
            **_REPORT, **_UNSIGNED, **_REJECTED,
            "404": {"description": "PROCFLOW_WEBHOOK_SECRET is not set: the route is off"},
            "500": {"description": "PROCFLOW_WEBHOOK_SECRET is whsec_ but not base64"},
        },
    ),
]  # fmt: skip
