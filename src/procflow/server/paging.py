"""``?limit=`` and ``?cursor=`` of every list route, and the ``{items, next_cursor}`` it answers.

The cursor is the one every face shares (``procflow.cursors``): it names the
list it belongs to and the key of the last item its page showed. The next page holds the items
whose key sorts below it, newest first (``procflow.runtime.operations.listing``), so items added
meanwhile never shift a page still to come. A cursor of another list, or one that does not decode,
is a 400 naming ``cursor``; it carries no filter, so the same ``status``/``name``/``assignee`` are
given again with it. An empty value here is taken as absent: the web UI's pages link that way; the
API's routes refuse an empty query value before they get here (``routing.refuse_empty_query``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from procflow.cursors import (
    DEFAULT_PAGE,
    MAX_PAGE,
    decode_cursor,
    encode_cursor,
    page_limit,
)
from procflow.runtime.operations.listing import Page
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

DEFAULT_LIMIT = DEFAULT_PAGE

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
    key = _cursor_key(query, list_name, int)
    assert key is None or isinstance(key, int)
    return PageAsked(list_name, _limit(query), key)


def str_page(query: Mapping[str, str], list_name: str) -> PageAsked[str]:
    """``limit`` and ``cursor`` of a list keyed by text (runs)."""
    key = _cursor_key(query, list_name, str)
    assert key is None or isinstance(key, str)
    return PageAsked(list_name, _limit(query), key)


def page_json(asked: PageAsked[Key], page: Page[Key]) -> dict[str, Any]:
    """``{items, next_cursor}``: ``next_cursor`` asks for the next page, null after the last."""
    cursor = None if page.next_key is None else encode_cursor(asked.list_name, page.next_key)
    return {"items": page.items, "next_cursor": cursor}


def _limit(query: Mapping[str, str]) -> int:
    text = query.get("limit", "")
    limit = page_limit(text)
    if limit is None:
        raise bad_query(
            "limit",
            f"limit must be a whole number from 1 to {MAX_PAGE}, not [{_shown(text)}]",
        )
    return limit


def _cursor_key(
    query: Mapping[str, str], list_name: str, kind: type[int] | type[str]
) -> int | str | None:
    text = query.get("cursor", "")
    if text == "":
        return None
    key = decode_cursor(text, list_name, kind)
    if key is None:
        raise bad_query(
            "cursor",
            "cursor is not one this list gave out (take next_cursor from a page of the same "
            "list, or leave it out to start from the newest)",
        )
    return key


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
        "schema": {"type": "string", "minLength": 1},
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
