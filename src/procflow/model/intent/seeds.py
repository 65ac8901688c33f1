"""Seeds (validated like record writes) and forms, both read against the declared entities."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from procflow.model.intent.data import Catalog, SeededRow
from procflow.model.intent.values import value_problem
from procflow.model.ir import Entity, Field, Form, Relation, Seed
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar
from procflow.model.source import suggest
from procflow.model.values import describe

SEED_KEYS = ("name", "entity", "rows")
FORM_KEYS = ("name", "forEntity", "fields", "actions")


# --- seeds -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RowShape:
    """What each seed row of an entity is checked against, worked out once per entity: a row
    costs its own keys, not the entity's fields (an entity may have tens of thousands)."""

    writable: Mapping[str, int]  # field and to-one relation names → declaration order
    required: tuple[Field, ...]  # required, with no default, not generated: a row must set them
    key: Field | None

    @classmethod
    def of(cls, entity: Entity) -> _RowShape:
        names = [f.name for f in entity.fields] + [r.name for r in entity.relations if r.to_one]
        required = tuple(f for f in entity.fields if f.required and f.default is None)
        return cls(
            {n: i for i, n in reversed(list(enumerate(names)))},
            tuple(f for f in required if not f.generated),
            next((f for f in entity.fields if f.primary_key), None),
        )


@dataclass
class _Seeding:
    """The seeds read so far: ids seen per entity (entity → id → line) and row shapes."""

    catalog: Catalog
    ids: dict[str, dict[int, int]] = field(default_factory=dict)
    shapes: dict[str, _RowShape] = field(default_factory=dict)

    def shape(self, entity: Entity) -> _RowShape:
        found = self.shapes.get(entity.name)
        if found is None:
            found = self.shapes[entity.name] = _RowShape.of(entity)
        return found


def compile_seeds(items: list[YNode], catalog: Catalog) -> list[Seed]:
    seeds: list[Seed] = []
    seeding = _Seeding(catalog)
    for i, item in enumerate(items):
        node = catalog.reader.map(item, f"seed #{i + 1}", "each seed")
        if node is not None:
            seed = _seed(node, i, seeding)
            if seed is not None:
                seeds.append(seed)
    return seeds


def _seed(node: YMap, index: int, seeding: _Seeding) -> Seed | None:
    catalog = seeding.catalog
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
            rows.append(_row(row, f"{context} row {r + 1}", entity, seeding))
    if name is None or entity is None:
        return None
    return Seed(name, entity.name, tuple(rows), node.pos)


def _row(row: YMap, context: str, entity: Entity, seeding: _Seeding) -> dict[str, Any]:
    reader = seeding.catalog.reader
    shape = seeding.shape(entity)
    reader.keys(row, shape.writable, context)
    for f in shape.required:
        if row.get(f.name) is None:
            reader.error(row.pos, context, f"required field [{f.name}] is missing")
    plain: dict[str, Any] = {}
    for key in sorted(row.entries.keys() & shape.writable.keys(), key=shape.writable.__getitem__):
        declared = entity.field(key)
        if declared is not None:
            _row_field(row, declared, context, reader, plain)
        else:
            rel = entity.relation(key)
            assert rel is not None  # a writable name is a field or a to-one relation
            plain[key] = _row_relation(row, rel, context, reader)
    _register(row, entity, plain, context, seeding)
    return plain


def _row_field(row: YMap, f: Field, context: str, reader: Reader, plain: dict[str, Any]) -> None:
    value_node = row.entries[f.name].value
    value = reader.scalar(value_node, context, f"field [{f.name}]")
    problem = value_problem(f.type, f.length, value)
    if problem:
        reader.error(value_node.pos, context, f"field [{f.name}] {problem}")
    elif value is None and f.required:
        reader.error(value_node.pos, context, f"required field [{f.name}] is null")
    else:
        plain[f.name] = value


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
    row: YMap, entity: Entity, plain: dict[str, Any], context: str, seeding: _Seeding
) -> None:
    """Record the row's id (and name) so relations and steps can resolve seeded values."""
    catalog = seeding.catalog
    pk = seeding.shape(entity).key
    if pk is None:
        return
    ids = seeding.ids.setdefault(entity.name, {})
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
    forms: dict[str, Form] = {}
    for i, item in enumerate(items):
        node = catalog.reader.map(item, f"form #{i + 1}", "each form")
        if node is None:
            continue
        form = _form(node, i, catalog)
        if form is None:
            continue
        if form.name in forms:
            catalog.reader.error(form.pos, f"form [{form.name}]", "declared twice")
            continue
        forms[form.name] = form
    return list(forms.values())


def _form(node: YMap, index: int, catalog: Catalog) -> Form | None:
    reader = catalog.reader
    raw = node.get("name")
    label = raw.value if isinstance(raw, YScalar) and isinstance(raw.value, str) else None
    context = f"form [{label}]" if label else f"form #{index + 1}"
    reader.keys(node, FORM_KEYS, context)
    name = reader.ident(reader.require(node, "name", context), context, "form name")
    entity = catalog.entity(reader.require(node, "forEntity", context), context, "forEntity")
    fields: dict[str, None] = {}  # a dict keeps the order and finds a repeat at once
    for text, pos in reader.strings(node.get("fields"), context, "fields"):
        if entity is not None and entity.field(text) is None:
            names = (f.name for f in entity.fields)
            reader.error(
                pos, context, f"[{text}] is not a field of [{entity.name}]{suggest(text, names)}"
            )
        elif text in fields:
            reader.error(pos, context, f"field [{text}] is listed twice")
        else:
            fields[text] = None
    actions = _actions(node, context, reader)
    if name is None or entity is None:
        return None
    return Form(name, entity.name, tuple(fields), tuple(actions), node.pos)


def _actions(node: YMap, context: str, reader: Reader) -> list[str]:
    actions: dict[str, None] = {}
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
            actions[text] = None
    return list(actions)
