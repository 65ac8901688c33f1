"""JSON Schemas (draft 2020-12) of the two definition dialects, for editors.

The YAML language server (and any JSON Schema aware editor) uses them to complete and check keys
while a file is typed. They describe the *shape* of a file; names, routes, expressions and
connector args are checked by ``procflow validate``, which stays the authority. Where a rule cannot
be written as JSON Schema, the schema is looser than procflow, never stricter.

The schemas are package data (``<dialect>.schema.json`` beside this module), read on demand.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["DIALECTS", "schema", "schema_text"]

DIALECTS: tuple[str, ...] = ("intent", "flow")
"""The dialect names a schema exists for: ``intent`` (``*.intent``), ``flow`` (``*.flow.yaml``)."""


def schema_text(dialect: str) -> str:
    """The JSON text of ``dialect``'s schema, exactly as shipped (what ``procflow schema`` prints).

    Raises :class:`ValueError` for a name not in :data:`DIALECTS`.
    """
    if dialect not in DIALECTS:
        known = ", ".join(DIALECTS)
        raise ValueError(f"no schema for dialect [{dialect}]; the dialects are {known}")
    return resources.files(__name__).joinpath(f"{dialect}.schema.json").read_text(encoding="utf-8")


def schema(dialect: str) -> dict[str, Any]:
    """``dialect``'s schema as a new mapping (the caller may change it); ValueError as above."""
    parsed: dict[str, Any] = json.loads(schema_text(dialect))
    return parsed
