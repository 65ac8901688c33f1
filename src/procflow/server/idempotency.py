"""``Idempotency-Key`` on the create routes (``POST /flows/{name}/runs``, ``POST
/processes/{name}/runs``, ``POST /entities/{entity}``): a client that is not sure its request
arrived sends it again with the same key, and the run or record is made once.

The first request with a key does its work and stores its response in the same transaction,
per caller and key (so two callers' keys never meet, and a work that fails stores nothing: the
key may be used again). A repeat with the same route and body answers that stored response
(with ``Idempotent-Replayed: true``) and does nothing else; with another route or body it is a
422, as a key names one request. Requests with one key wait for each other (a lock on the key),
so two sent at once still make one run. Keys are kept 24 hours by the machine's clock (a
client's retries happen in real time, even on a virtual-clock store); older ones are pruned
whenever a key is used. The body is compared as canonical JSON: the same members and values,
whatever their order or spacing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response

from procflow.runtime.clock import system_now
from procflow.runtime.operations.conflicts import retry_on_conflict
from procflow.server.problems import Problem
from procflow.server.routing import Call, json_response
from procflow.store.queries.exchange.idempotency import IdempotentResponse

__all__ = [
    "HEADER",
    "HEADER_PARAM",
    "KEEP_MICROS",
    "KEY_PATTERN",
    "REPLAYED_HEADERS",
    "Created",
    "idempotent",
]

HEADER = "Idempotency-Key"
KEEP_MICROS = 24 * 3600 * 1_000_000
REPLAYED = "Idempotent-Replayed"
# Visible ASCII, as a header carries it unchanged: the server's check and the document's pattern.
KEY_PATTERN = "^[!-~]{1,255}$"
_KEY = re.compile(KEY_PATTERN)


@dataclass(frozen=True)
class Created:
    """A create route's answer, before it becomes a response (so it can be stored)."""

    body: Any
    status: int = 201
    headers: dict[str, str] = field(default_factory=dict)


def idempotent(call: Call, body: Any, create: Callable[[], Created]) -> Response:
    """``create()``'s answer; with an ``Idempotency-Key``, made at most once per key (module
    notes). ``body``: the request's body as read, to compare repeats by."""
    key = call.headers.get(HEADER)
    if key is None:
        return _response(create())
    if not _KEY.fullmatch(key):
        message = f"{HEADER} must be 1 to 255 visible ASCII characters"
        raise Problem(400, message, [{"field": HEADER, "message": message}])
    route = f"{call.request.method} {call.request.url.path}"
    return _once(call, key, IdempotentResponse(route, _digest(body), 0, ""), create)


@retry_on_conflict
def _once(
    call: Call, key: str, asked: IdempotentResponse, create: Callable[[], Created]
) -> Response:
    caller = call.actor.user
    now = system_now()
    with call.engine.store.tx() as tx:
        tx.lock_idempotency_key(caller, key)
        tx.prune_idempotency(now - KEEP_MICROS)
        stored = tx.idempotent_response(caller, key)
        if stored is not None:
            return _replay(stored, asked, key)
        created = create()  # its engine calls join this transaction
        response = json.dumps({"headers": created.headers, "body": created.body})
        answered = IdempotentResponse(asked.route, asked.body_hash, created.status, response)
        tx.store_idempotent_response(caller, key, answered, now)
    return _response(created)


def _replay(stored: IdempotentResponse, asked: IdempotentResponse, key: str) -> Response:
    if stored.route != asked.route:
        raise _refusal(f"{HEADER} [{key}] was used for another request ({stored.route})")
    if stored.body_hash != asked.body_hash:
        raise _refusal(
            f"{HEADER} [{key}] was used with another body; a new request needs a new key"
        )
    kept = json.loads(stored.response)
    headers: Mapping[str, str] = {**kept["headers"], REPLAYED: "true"}
    return json_response(kept["body"], stored.status, headers)


def _refusal(message: str) -> Problem:
    return Problem(422, message, [{"field": HEADER, "message": message}])


def _response(created: Created) -> Response:
    return json_response(created.body, created.status, created.headers)


def _digest(body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


HEADER_PARAM: dict[str, Any] = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "description": (
        "Make this create happen at most once: a repeat with the same key and body answers the "
        "first response (kept 24 hours); with another body it is a 422."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": KEY_PATTERN},
}

REPLAYED_HEADERS: dict[str, Any] = {
    REPLAYED: {
        "description": "`true` on the stored answer to a repeat with the same Idempotency-Key",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
