"""What an intent expression reads: the trigger record's fields (a relation read through bound to
the related record) and the evaluation clock (re-exported by :mod:`intent`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from procflow.expr import EvalContext, Expr, root_paths
from procflow.model.ir import Entity
from procflow.runtime.clock import to_datetime
from procflow.runtime.data.records import record_json


def eval_context(now: int) -> EvalContext:
    moment = to_datetime(now)
    return EvalContext(now=lambda: moment)


def record_env(
    entity: Entity,
    record: Mapping[str, Any],
    expr: Expr,
    load_related: Callable[[str, int], dict[str, Any] | None],
) -> dict[str, Any]:
    """A record's fields for an expression; a relation read through (``customer.creditLimit``)
    binds the related record (loaded only when the expression reads through it), a bare
    relation its id."""
    env = record_json(entity, record)
    walked = {ref.root for ref in root_paths(expr) if ref.segments}
    for relation in entity.relations:
        if relation.to_one and relation.name in walked:
            related_id = record.get(relation.name)
            env[relation.name] = (
                load_related(relation.to, related_id) if related_id is not None else None
            )
    return env
