"""Record permissions in the IR: which roles may read and write which entity's records.

An intent file's ``permissions:`` block compiles into flat :class:`Permission` triples (``write``
already expanded into create, update and delete); :class:`~procflow.model.ir.Application` indexes
them. What an entity named in no permission allows, and who else (an administrator) may act, is
the runtime's decision, not the model's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class RecordAction(StrEnum):
    READ = "read"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


WRITE = "write"
"""The action a file may name that stands for create, update and delete together."""

ACTIONS: Mapping[str, tuple[RecordAction, ...]] = {
    **{action.value: (action,) for action in RecordAction},
    WRITE: (RecordAction.CREATE, RecordAction.UPDATE, RecordAction.DELETE),
}
"""Each action a permission may name → the record actions it grants."""


@dataclass(frozen=True, slots=True)
class Permission:
    """Members of ``role`` may do ``action`` on records of ``entity``."""

    role: str
    entity: str
    action: RecordAction


def grants_index(
    permissions: Iterable[Permission],
) -> dict[tuple[str, RecordAction], frozenset[str]]:
    """(entity, action) → the roles granted it: asked on every record read and write, so built
    once per compiled application rather than scanned."""
    roles: dict[tuple[str, RecordAction], set[str]] = {}
    for p in permissions:
        roles.setdefault((p.entity, p.action), set()).add(p.role)
    return {key: frozenset(names) for key, names in roles.items()}
