"""Seeds (validated like record writes) and forms, both read against the declared entities."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procflow.model.intent_data import Catalog, SeededRow
from procflow.model.intent_values import describe, value_problem
from procflow.model.ir import Entity, Form, Relation, Seed
from procflow.model.reader import Reader
from procflow.model.source import suggest
from procflow.model.yamlsrc import YMap, YNode, YScalar

SEED_KEYS = ("name", "entity", "rows")
FORM_KEYS = ("name", "forEntity", "fields", "actions")


# --- seeds -----------------------------------------------------------------------------------


def compile_seeds(items: list[YNode], catalog: Catalog) -> list[Seed]:
    seeds: list[Seed] = []
    ids: dict[str, dict[int, int]] = {}  # entity → seed id → line first seen
    for i, item in enumerate(items):
        node = catalog.reader.map(item, f"seed #{i + 1}", "each seed")
        if node is not None:
            seed = _seed(node, i, catalog, ids)
            if seed is not None:
                seeds.append(seed)
    return seeds


def _seed(node: YMap, index: int, catalog: Catalog, ids: dict[str, dict[int, int]]) -> Seed | None:
    reader = catalog.reader
    raw = node.get("name")
    label = raw.value if isinstance(raw, YScalar) and isinstance(raw.value, str) else None
    context = f"seed [{label}]" if label else f"seed #{index + 1}"
    reader.keys(node, SEED_KEYS, context)
    name = reader.string(reader.require(node, "name", context), context, "name")
    entity = catalog.entity(reader.require(node, "entity", context), context, "entity")
    rows: list[Mapping[str, Any]] = []
    for r, item in enumerate(reader.seq(reader.require(node, "rows", context), context, "rows")):
        row = reader.map(item, context, "each row")
        if row is not None and entity is not None:
            plain = _row(
                row, f"{context} row {r + 1}", entity, catalog, ids.setdefault(entity.name, {})
            )
            rows.append(plain)
    if name is None or entity is None:
        return None
    return Seed(name, entity.name, tuple(rows), node.pos)


def _row(
    row: YMap, context: str, entity: Entity, catalog: Catalog, ids: dict[int, int]
) -> dict[str, Any]:
    reader = catalog.reader
    writable = [f.name for f in entity.fields] + [r.name for r in entity.relations if r.to_one]
    reader.keys(row, writable, context)
    plain: dict[str, Any] = {}
    for f in entity.fields:
        value_node = row.get(f.name)
        value = reader.scalar(value_node, context, f"field [{f.name}]")
        if value_node is None:
            if f.required and f.default is None and not f.generated:
                reader.error(row.pos, context, f"required field [{f.name}] is missing")
            continue
        problem = value_problem(f.type, f.length, value)
        if problem:
            reader.error(value_node.pos, context, f"field [{f.name}] {problem}")
        elif value is None and f.required:
            reader.error(value_node.pos, context, f"required field [{f.name}] is null")
        else:
            plain[f.name] = value
    for rel in entity.relations:
        if rel.to_one and row.get(rel.name) is not None:
            plain[rel.name] = _row_relation(row, rel, context, reader)
    _register(row, entity, plain, context, catalog, ids)
    return plain


def _row_relation(row: YMap, rel: Relation, context: str, reader: Reader) -> Any:
    node = row.entries[rel.name].value
    value = reader.scalar(node, context, f"relation [{rel.name}]")
    if value is not None and not (isinstance(value, int) and not isinstance(value, bool)):
        reader.error(
            node.pos,
            context,
            f"relation [{rel.name}] must be the related id, got {describe(value)}",
        )
    return value


def _register(
    row: YMap,
    entity: Entity,
    plain: dict[str, Any],
    context: str,
    catalog: Catalog,
    ids: dict[int, int],
) -> None:
    """Record the row's id (and name) so relations and steps can resolve seeded values."""
    pk = next((f for f in entity.fields if f.primary_key), None)
    if pk is None:
        return
    row_id = plain.get(pk.name)
    if row_id is None:
        if row.get(pk.name) is None:
            catalog.reader.error(
                row.pos,
                context,
                f"the primary key [{pk.name}] is missing; seed rows are loaded by id",
            )
        return
    if row_id in ids:
        catalog.reader.error(
            row.entries[pk.name].value.pos,
            context,
            f"id [{row_id}] of [{entity.name}] is seeded twice (first at line {ids[row_id]})",
        )
        return
    ids[row_id] = row.entries[pk.name].value.pos.line
    name = plain.get("name")
    catalog.seeded.setdefault(entity.name, []).append(
        SeededRow(row_id, name if isinstance(name, str) else None)
    )


# --- forms -----------------------------------------------------------------------------------


def compile_forms(items: list[YNode], catalog: Catalog) -> list[Form]:
    forms: list[Form] = []
    for i, item in enumerate(items):
        node = catalog.reader.map(item, f"form #{i + 1}", "each form")
        if node is None:
            continue
        form = _form(node, i, catalog)
        if form is None:
            continue
        if any(f.name == form.name for f in forms):
            catalog.reader.error(form.pos, f"form [{form.name}]", "declared twice")
            continue
        forms.append(form)
    return forms


def _form(node: YMap, index: int, catalog: Catalog) -> Form | None:
    reader = catalog.reader
    raw = node.get("name")
    label = raw.value if isinstance(raw, YScalar) and isinstance(raw.value, str) else None
    context = f"form [{label}]" if label else f"form #{index + 1}"
    reader.keys(node, FORM_KEYS, context)
    name = reader.ident(reader.require(node, "name", context), context, "form name")
    entity = catalog.entity(reader.require(node, "forEntity", context), context, "forEntity")
    fields: list[str] = []
    for text, pos in reader.strings(node.get("fields"), context, "fields"):
        if entity is not None and entity.field(text) is None:
            names = [f.name for f in entity.fields]
            reader.error(
                pos, context, f"[{text}] is not a field of [{entity.name}]{suggest(text, names)}"
            )
        elif text in fields:
            reader.error(pos, context, f"field [{text}] is listed twice")
        else:
            fields.append(text)
    actions = _actions(node, context, reader)
    if name is None or entity is None:
        return None
    return Form(name, entity.name, tuple(fields), tuple(actions), node.pos)


def _actions(node: YMap, context: str, reader: Reader) -> list[str]:
    actions: list[str] = []
    listed = reader.strings(node.get("actions"), context, "actions")
    if not listed:
        reader.error(
            node.pos,
            context,
            "declares no actions; a task with this form could never be completed "
            "(add actions: [approve, reject])",
        )
    for text, pos in listed:
        if reader.ident(YScalar(pos, text), context, "action") is None:
            continue
        if text in actions:
            reader.error(pos, context, f"action [{text}] is listed twice")
        else:
            actions.append(text)
    return actions
