"""How the store writes JSON columns: compact text, built as cheaply as the hot path needs; and
how deep JSON a user gives may nest, so that every value stored can be read back."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

MAX_JSON_DEPTH = 64
"""How deep JSON given by a user may nest (objects and arrays; the outermost one is level 1), on
every face: a command-line argument, an HTTP body, a value handed to the Python API. Python's
JSON parser, and much that later walks a value (copying, encoding), recurses once per level: a
value nested a thousand deep would end a request with a RecursionError instead of a message.
64 is far beyond any real record, input, event or task data."""

TOO_DEEP = f"nested too deeply: more than {MAX_JSON_DEPTH} levels of objects and arrays"
"""The one wording of that refusal, for text (:func:`depth_problem`) and values alike."""

# A JSON string (escapes and all; unterminated, to the end of the text) or a bracket: what the
# depth scan looks at. The closing quote is optional so that every quote starts a match: were an
# unterminated string a failed match, the scan would retry at each later quote (quadratic time).
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.S)


def _compact_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"))`` without its per-call set-up (building an
    encoder object and, inside it, the C encoder): the C encoder is built once. Where the C
    accelerator is missing, the pure-Python encoder (same output)."""
    encoder = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    chunks = make(
        None, encoder.default, json.encoder.encode_basestring_ascii, None, ":", ",",
        False, False, True,
    )  # fmt: skip

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_ENCODE = _compact_encoder()


def dumps(value: Any) -> str:
    return "{}" if value == {} else _ENCODE(value)


def none_or_dumps(value: Any) -> str | None:
    return None if value is None else dumps(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def chunks(items: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    """``items`` in slices of ``size``: an ``IN (...)`` list stays under SQLite's limit on
    parameters per statement."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def too_deep_at(text: str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """The 1-based column of the first ``[`` or ``{`` in JSON ``text`` that opens level
    ``limit + 1``; None when the text nests no deeper than ``limit``. A scan, not a parse:
    it never recurses, so it is safe on any text (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= limit:  # the common case, without a scan
        return None
    depth = 0
    for found in _STRING_OR_BRACKET.finditer(text):
        first = found.group()[0]
        if first in "[{":
            depth += 1
            if depth > limit:
                return found.start() + 1
        elif first in "]}":
            depth -= 1
    return None


def depth_problem(text: str) -> str | None:
    """Why JSON ``text`` may not be read, if it nests deeper than :data:`MAX_JSON_DEPTH`:
    :data:`TOO_DEEP` and where the level past it opens; None when it does not. Checked before
    the text is parsed, which would recurse once per level."""
    at = too_deep_at(text)
    if at is None:
        return None
    return f"{TOO_DEEP} (level {MAX_JSON_DEPTH + 1} opens at character {at})"
