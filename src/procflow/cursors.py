"""The page size and the cursor text every face's lists share (HTTP ``?limit=&cursor=``, the
CLI's ``--limit``/``--cursor``, the Python API's ``page(limit=, cursor=)``).

A cursor is opaque to callers: the URL-safe base64 of ``[list, key]``, the list it belongs to and
the key of the last item its page showed (a run id, or a task's, record's, message's or
definition's number). A cursor given out by one face works on every other. Each face words its own
refusal (a 400 naming ``cursor``, a usage error naming ``--cursor``), so the checks here answer
None for an unusable value instead of raising.

Only the standard library is imported: the CLI reads :data:`DEFAULT_PAGE` and :data:`MAX_PAGE`
when its options are declared, before any command runs.
"""

from __future__ import annotations

import base64
import binascii
import json

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "decode_cursor", "encode_cursor", "page_limit"]

DEFAULT_PAGE = 50  # items a page holds when no limit is given
MAX_PAGE = 500  # the most items one page holds

_INT64 = 2**63  # keys are database integers: one out of range cannot name a row
_MAX_CURSOR = 512  # characters; a run id is 32, so a real cursor is far shorter


def page_limit(text: str) -> int | None:
    """A page size given as text (empty: the default); None when it is not 1 to MAX_PAGE."""
    if text == "":
        return DEFAULT_PAGE
    if text.isascii() and text.isdigit() and len(text) <= 4 and 1 <= int(text) <= MAX_PAGE:
        return int(text)
    return None


def encode_cursor(list_name: str, key: int | str) -> str:
    """The cursor asking for the items of ``list_name`` after the one keyed ``key``."""
    raw = json.dumps([list_name, key], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(text: str, list_name: str, kind: type[int] | type[str]) -> int | str | None:
    """The key a cursor of ``list_name`` carries, of type ``kind``; None when ``text`` is not
    such a cursor (another list's, or one that does not decode)."""
    if len(text) > _MAX_CURSOR or not text.isascii():
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        decoded = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError included
        return None
    if not (isinstance(decoded, list) and len(decoded) == 2 and decoded[0] == list_name):
        return None
    key = decoded[1]
    if kind is int:
        usable = isinstance(key, int) and not isinstance(key, bool) and -_INT64 <= key < _INT64
        return key if usable else None
    # Keys given out are printable ASCII (run ids); anything else (a NUL, a lone surrogate)
    # could not even be sent to the store.
    return key if isinstance(key, str) and key.isascii() and key.isprintable() else None
