"""How the store writes JSON columns: compact text, built as cheaply as the hot path needs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any


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
