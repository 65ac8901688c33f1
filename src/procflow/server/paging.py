"""``?limit=`` and ``?cursor=`` of every list route, and the ``{items, next_cursor}`` it answers.

A cursor is opaque to callers: the URL-safe base64 of ``[list, key]``, the list it belongs to
and the key of the last item its page showed (a run id, or a task's, record's, message's or
definition's number). The next page holds the items whose key sorts below it, newest first
(``procflow.runtime.operations.listing``), so items added meanwhile never shift a page still to
come. A cursor of another list, or one that does not decode, is a 400 naming ``cursor``; it carries
no filter, so the same ``status``/``name``/``assignee`` are given again with it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from procflow.runtime.operations.listing import MAX_PAGE, Page
from procflow.server.problems import Problem

__all__ = [
    "DEFAULT_LIMIT",
    "PAGE_PARAMS",
    "PageAsked",
    "bad_query",
    "int_page",
    "page_json",
    "page_schema",
    "str_page",
]

DEFAULT_LIMIT = 50
_INT64 = 2**63  # keys are database integers: one out of range cannot name a row
_MAX_CURSOR = 512  # characters; a run id is 32, so a real cursor is far shorter

Key = TypeVar("Key", int, str)


@dataclass(frozen=True)
class PageAsked(Generic[Key]):
    """The page a request asks for: how many items, after which key (None: from the newest)."""

    list_name: str
    limit: int
    before: Key | None


def bad_query(field: str, message: str) -> Problem:
    """A 400 naming the query parameter ``field``."""
    return Problem(400, message, [{"field": field, "message": message}])


def int_page(query: Mapping[str, str], list_name: str) -> PageAsked[int]:
    """``limit`` and ``cursor`` of a list keyed by numbers (tasks, records, outbox, definitions)."""
    key = _cursor_key(query, list_name)
    if key is not None and not (isinstance(key, int) and not isinstance(key, bool)):
        raise _bad_cursor()
    if key is not None and not -_INT64 <= key < _INT64:
        raise _bad_cursor()
    return PageAsked(list_name, _limit(query), key)


def str_page(query: Mapping[str, str], list_name: str) -> PageAsked[str]:
    """``limit`` and ``cursor`` of a list keyed by text (runs)."""
    key = _cursor_key(query, list_name)
    # Keys given out are printable ASCII (run ids); anything else (a NUL, a lone surrogate)
    # could not even be sent to the store.
    if key is not None and not (isinstance(key, str) and key.isascii() and key.isprintable()):
        raise _bad_cursor()
    return PageAsked(list_name, _limit(query), key)


def page_json(asked: PageAsked[Key], page: Page[Key]) -> dict[str, Any]:
    """``{items, next_cursor}``: ``next_cursor`` asks for the next page, null after the last."""
    cursor = None if page.next_key is None else _encode(asked.list_name, page.next_key)
    return {"items": page.items, "next_cursor": cursor}


def _limit(query: Mapping[str, str]) -> int:
    text = query.get("limit", "")
    if text == "":
        return DEFAULT_LIMIT
    if not (text.isascii() and text.isdigit() and len(text) <= 4 and 1 <= int(text) <= MAX_PAGE):
        raise bad_query(
            "limit",
            f"limit must be a whole number from 1 to {MAX_PAGE}, not [{_shown(text)}]",
        )
    return int(text)


def _cursor_key(query: Mapping[str, str], list_name: str) -> Any:
    text = query.get("cursor", "")
    if text == "":
        return None
    if len(text) > _MAX_CURSOR or not text.isascii():
        raise _bad_cursor()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        decoded = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError included
        raise _bad_cursor() from None
    if not (isinstance(decoded, list) and len(decoded) == 2 and decoded[0] == list_name):
        raise _bad_cursor()
    return decoded[1]


def _encode(list_name: str, key: int | str) -> str:
    raw = json.dumps([list_name, key], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _bad_cursor() -> Problem:
    return bad_query(
        "cursor",
        "cursor is not one this list gave out (take next_cursor from a page of the same "
        "list, or leave it out to start from the newest)",
    )


def _shown(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:37]}..."


# --- OpenAPI ---------------------------------------------------------------------------------

PAGE_PARAMS: tuple[dict[str, Any], ...] = (
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": f"How many items (default {DEFAULT_LIMIT}, at most {MAX_PAGE}).",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_LIMIT},
    },
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "The `next_cursor` of the previous page (none: the newest items).",
        "schema": {"type": "string"},
    },
)


def page_schema(item: dict[str, Any]) -> dict[str, Any]:
    """The schema of a page of ``item``."""
    return {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": item},
            "next_cursor": {"type": ["string", "null"]},
        },
        "required": ["items", "next_cursor"],
    }
