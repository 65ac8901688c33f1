"""The outbox: messages kept by unconfigured senders (notify, ``email.send``, ``slack.post``),
newest first, each in the ``outbox list --json`` shape."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from procflow.server.paging import PAGE_PARAMS, int_page, page_json, page_schema
from procflow.server.routing import Call, Endpoint, json_response

__all__ = ["ENDPOINTS", "MESSAGE_SCHEMA"]

_MAYBE_TEXT = {"type": ["string", "null"]}

MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An `outbox list --json` item.",
    "properties": {
        "id": {"type": "integer"},
        "channel": {"enum": ["email", "slack"]},
        "to": {"type": "string"},
        "subject": _MAYBE_TEXT,
        "body": _MAYBE_TEXT,
        "run_id": _MAYBE_TEXT,
        "step": _MAYBE_TEXT,
        "created_at": {"type": "string", "format": "date-time"},
    },
    "required": ["id", "channel", "to", "subject", "body", "run_id", "step", "created_at"],
}


def list_outbox(call: Call) -> Response:
    asked = int_page(call.query, "outbox")
    page = call.engine.outbox_page(limit=asked.limit, before=asked.before)
    return json_response(page_json(asked, page))


ENDPOINTS = [
    Endpoint(
        "GET", "/outbox", list_outbox, "Kept messages, newest first.",
        params=PAGE_PARAMS,
        responses={"200": {"description": "a page of kept messages",
                           "schema": page_schema(MESSAGE_SCHEMA)}},
    ),
]  # fmt: skip
