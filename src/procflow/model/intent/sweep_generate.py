"""An intent schedule's ``generate``: one new record of ``to`` per matching row, its fields from
``map`` (``targetField: sourceField``) and ``defaults`` (``field: now | literal``).

Private to :mod:`procflow.model.intent.schedules`. Checked so that a write the runtime would
refuse for every row is refused when the file is validated: every name declared, each mapped
pair holding the same kind of value, each default a value of its field, and every required
field of ``to`` given one.
"""

from __future__ import annotations

import itertools
from typing import Any

from procflow.model.intent.data import Catalog
from procflow.model.intent.values import (
    INTEGER_TYPES,
    NUMBER_TYPES,
    TEXT_TYPES,
    a_type,
    value_problem,
)
from procflow.model.ir import Entity
from procflow.model.reading.yamlsrc import YEntry, YNode, YScalar
from procflow.model.schedule import Generate, Moment
from procflow.model.source import Pos, suggest

__all__ = ["compile_generate"]

GENERATE_KEYS = ("to", "map", "defaults")
GENERATE_NOT_RUN = ("children",)
NOW = "now"


def compile_generate(
    node: YNode, source: Entity | None, context: str, catalog: Catalog
) -> Generate | None:
    reader = catalog.reader
    body = reader.map(node, context, "generate")
    if body is None:
        return None
    reader.keys(body, GENERATE_KEYS, context, not_run=GENERATE_NOT_RUN)
    to_node = reader.require(body, "to", context, "the entity it creates a record of")
    target = catalog.entity(to_node, context, "generate to")
    mapped = _map(body.get("map"), target, source, context, catalog)
    defaults = _defaults(body.get("defaults"), target, mapped, context, catalog)
    if target is None or to_node is None or mapped is None or defaults is None:
        return None
    _check_required(to_node, target, set(mapped) | set(defaults), context, catalog)
    return Generate(target.name, tuple(mapped.items()), tuple(defaults.items()))


def _kind(entity: Entity, name: str) -> tuple[str, str] | None:
    """What ``name`` of ``entity`` holds — a group of alike values and, for messages, its kind
    — or None when it is not a field or to-one relation."""
    field = entity.field(name)
    if field is not None:
        t = field.type
        group = (
            "text" if t in TEXT_TYPES else "integer" if t in INTEGER_TYPES
            else "number" if t in NUMBER_TYPES else t
        )  # fmt: skip
        return group, f"{a_type(t)} field"
    rel = entity.relation(name)
    if rel is not None and rel.to_one:
        return f"relation:{rel.to}", f"a relation to [{rel.to}]"
    return None


def _fits(source: str, target: str) -> bool:
    """Whether a value of group ``source`` can be written where ``target`` is held (an id is an
    integer either way)."""
    ids = ("integer", "relation:")
    return (
        source == target
        or (source == "integer" and target == "number")
        or (source.startswith(ids) and target.startswith(ids) and "integer" in (source, target))
    )


def _unknown(entity: Entity, name: str, what: str) -> str:
    rel = entity.relation(name)
    if rel is not None:
        return f"{what} [{name}] is a {rel.kind} relation, which stores nothing"
    names = itertools.chain(
        (f.name for f in entity.fields), (r.name for r in entity.relations if r.to_one)
    )
    return f"{what} [{name}] is not a field of [{entity.name}]{suggest(name, names)}"


def _map(
    node: YNode | None, target: Entity | None, source: Entity | None, context: str,
    catalog: Catalog,
) -> dict[str, str] | None:  # fmt: skip
    reader = catalog.reader
    body = reader.map(node, context, "map")
    if node is not None and body is None:
        return None
    out: dict[str, str] = {}
    ok = True
    for name, entry in (body.entries if body is not None else {}).items():
        src = reader.string(entry.value, context, f"map source for [{name}]")
        if src is None or target is None or source is None:
            ok = False
            continue
        problem = _pair(name, src, entry, target, source)
        if problem is not None:
            reader.error(problem[0], context, problem[1])
            ok = False
            continue
        out[name] = src
    return out if ok else None


def _pair(
    name: str, src: str, entry: YEntry, target: Entity, source: Entity
) -> tuple[Pos, str] | None:
    """Why ``name: src`` cannot be mapped (its position and message), or None."""
    into = _kind(target, name)
    if into is None:
        return entry.key_pos, _unknown(target, name, "map target")
    out_of = _kind(source, src)
    if out_of is None:
        return entry.value.pos, _unknown(source, src, "map source")
    if not _fits(out_of[0], into[0]):
        return entry.value.pos, (
            f"map [{name}: {src}]: [{src}] is {out_of[1]} and [{name}] {into[1]}; they do not "
            "hold the same values"
        )
    return None


def _defaults(
    node: YNode | None, target: Entity | None, mapped: dict[str, str] | None, context: str,
    catalog: Catalog,
) -> dict[str, Any] | None:  # fmt: skip
    reader = catalog.reader
    body = reader.map(node, context, "defaults")
    if node is not None and body is None:
        return None
    out: dict[str, Any] = {}
    ok = True
    for name, entry in (body.entries if body is not None else {}).items():
        if target is None:
            ok = False
            continue
        if _kind(target, name) is None:
            reader.error(entry.key_pos, context, _unknown(target, name, "default"))
            ok = False
        elif mapped is not None and name in mapped:
            reader.error(
                entry.key_pos, context, f"[{name}] is both mapped and defaulted; give it one value"
            )
            ok = False
        else:
            found, value = _default(entry, target, name, context, catalog)
            ok = ok and found
            out[name] = value
    return out if ok else None


def _default(
    entry: YEntry, target: Entity, name: str, context: str, catalog: Catalog
) -> tuple[bool, Any]:
    reader, node = catalog.reader, entry.value
    if not isinstance(node, YScalar):
        reader.scalar(node, context, f"default for [{name}]")
        return False, None
    rel = target.relation(name)
    if rel is not None:
        if rel.is_status:
            if rel.to not in catalog.declared:
                return False, None
            resolved = catalog.resolve(rel.to, node, context, f"default for [{name}]")
            return resolved is not None, resolved
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return True, node.value
        reader.error(
            node.pos, context, f"default for [{name}] must be the id of a [{rel.to}] record"
        )
        return False, None
    field = target.field(name)
    assert field is not None
    if node.value == NOW:
        if field.type in ("date", "timestamp"):
            return True, Moment(NOW, field.type == "date")
        reader.error(
            node.pos,
            context,
            f"default now fills a date or timestamp field; [{name}] is {a_type(field.type)} field",
        )
        return False, None
    problem = value_problem(field.type, field.length, node.value)
    if problem:
        reader.error(node.pos, context, f"default for [{name}] {problem}")
        return False, None
    return True, node.value


def _check_required(
    node: YNode, target: Entity, given: set[str], context: str, catalog: Catalog
) -> None:
    """Every required field of ``target`` that nothing fills is named at ``to``."""
    missing = [
        f.name
        for f in target.fields
        if (f.required or f.primary_key) and f.default is None and not f.generated
    ]
    missing += [r.name for r in target.relations if r.to_one and r.required and r.init is None]
    for name in missing:
        if name not in given:
            catalog.reader.error(
                node.pos,
                context,
                f"generate to [{target.name}] leaves [{name}] empty, but it is required: map "
                "it or give it a default",
            )
