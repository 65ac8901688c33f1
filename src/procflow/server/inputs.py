"""What a request brings, checked before any engine call: its JSON body's members, the ids in
its path, its query parameters; and the OpenAPI objects that declare them.

A body that is not JSON is a 400 (``Call.json``); a JSON body of the wrong shape (not an object,
a member of the wrong type, a member the route does not take) is a 422 naming the member. An id
in the path that cannot name anything (not a whole number) is a 404, like an id that names
nothing; a query parameter that is not one of its values is a 400 naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from procflow.server.problems import Problem
from procflow.server.routing import Call

__all__ = [
    "INT64",
    "JSON_OBJECT",
    "id_param",
    "json_object",
    "member",
    "path_number",
    "query_param",
    "text_param",
    "unprocessable",
]

INT64 = 2**63  # ids are database integers: a larger one cannot name a row
_JSON_TYPES = {dict: "an object", str: "a string", bool: "true or false", list: "an array"}

JSON_OBJECT: dict[str, Any] = {"type": "object"}


def unprocessable(field: str, message: str) -> Problem:
    """A 422 naming the body member ``field``."""
    return Problem(422, message, [{"field": field, "message": message}])


def json_object(
    call: Call, members: Collection[str] | None = None, *, optional: bool = False
) -> dict[str, Any]:
    """The body as a JSON object; ``members``: the only members it may have (None: any).
    ``optional``: no body at all is taken as ``{}`` (a route whose members all have defaults)."""
    if optional and not call.body:
        return {}
    body = call.json()
    if not isinstance(body, dict):
        raise unprocessable("", f"the body must be a JSON object, not {_kind(body)}")
    if members is not None:
        for name in body:
            if name not in members:
                allowed = ", ".join(sorted(members)) or "none"
                raise unprocessable(
                    name, f"the body has a member [{name}] this route does not take ({allowed})"
                )
    return body


def member(body: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    """``body[name]`` if it is of ``kind`` (``dict``, ``str``, ``bool``, ``list``); ``default``
    when it is missing or null; else a 422 naming it."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise unprocessable(name, f"[{name}] must be {_JSON_TYPES[kind]}, not {_kind(value)}")
    return value


def path_number(call: Call, name: str, not_found: Callable[[str], str]) -> int:
    """The whole number in the path parameter ``name``; otherwise a 404 with the message
    ``not_found(what was given)``."""
    text = call.params[name]
    if text.isascii() and text.isdigit() and int(text) < INT64:
        return int(text)
    message = not_found(text if len(text) <= 40 else f"{text[:37]}...")
    raise Problem(404, message, [{"field": name, "message": message}])


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return next((noun for t, noun in _JSON_TYPES.items() if isinstance(value, t)), "a value")


# --- OpenAPI ---------------------------------------------------------------------------------


def id_param(name: str, description: str, *, number: bool = False) -> dict[str, Any]:
    """A path parameter: an id (a whole number no store can hold a larger one than), or text."""
    schema: dict[str, Any] = (
        {"type": "integer", "minimum": 0, "maximum": INT64 - 1} if number else {"type": "string"}
    )
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": schema}  # fmt: skip


def query_param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An optional query parameter."""
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema}  # fmt: skip


def text_param(name: str, description: str) -> dict[str, Any]:
    """An optional query parameter of any text but the empty one (``refuse_empty_query``)."""
    return query_param(name, description, {"type": "string", "minLength": 1})
