"""The data half of an intent file: entities, their fields and relations (seeds: intent_seeds).

Entities are read in two passes because relations name entities declared further down
(``to``, ``function: EntityStatus`` needs the target to be a setting entity) and ``init`` names a
seeded value, and seeds in turn need the entities' fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast

from procflow.model.intent.expr import Record
from procflow.model.intent.values import (
    FIELD_TYPES,
    INTEGER_TYPES,
    read_description,
    value_problem,
)
from procflow.model.ir import Entity, Field, FieldType, Relation, RelationKind
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.source import Pos, listing, suggest

ENTITY_KEYS = ("name", "description", "function", "kind", "fields", "relations")
ENTITY_NOT_RUN = (
    "audit", "group", "icon", "label", "order", "imports", "multilingual", "checks", "lifecycle",
    "history", "hierarchy", "related", "view", "visibleTo",
)  # fmt: skip
FIELD_KEYS = (
    "name", "type", "primaryKey", "generated", "required", "length", "defaultValue", "unique",
    "precision", "scale", "description",
)  # fmt: skip
FIELD_NOT_RUN = ("calculatedOnCreate", "calculatedOnUpdate", "pattern", "visibleTo")
_FLAGS = frozenset(("primaryKey", "generated", "required", "unique"))
RELATION_KEYS = ("name", "kind", "to", "function", "init", "required", "description")
ENTITY_FUNCTIONS = ("Setting", "Document", "DocumentItem", "Master", "Detail", "List")
RELATION_KINDS = ("manyToOne", "oneToOne", "oneToMany", "manyToMany")


@dataclass
class SeededRow:
    id: int
    name: str | None


@dataclass(frozen=True)
class SeedIndex:
    """An entity's seed ids and seeded names → the seed id (the first row wins)."""

    rows: int
    ids: dict[int | str, int]
    names: tuple[str, ...]
    id_texts: tuple[str, ...]

    @classmethod
    def of(cls, rows: list[SeededRow]) -> SeedIndex:
        ids: dict[int | str, int] = {}
        for row in rows:
            ids.setdefault(row.id, row.id)
        names = tuple(r.name for r in rows if r.name is not None)
        for row in rows:  # an id (int) and a name (str) never collide as keys
            if row.name is not None:
                ids.setdefault(row.name, row.id)
        return cls(len(rows), ids, names, tuple(str(r.id) for r in rows))


@dataclass
class Catalog:
    """Every entity and seeded value of the file, for the processes to resolve names against."""

    reader: Reader
    entities: dict[str, Entity] = field(default_factory=dict)
    declared: dict[str, str | None] = field(default_factory=dict)  # entity name → function
    seeded: dict[str, list[SeededRow]] = field(default_factory=dict)
    _indexes: dict[str, SeedIndex] = field(default_factory=dict)
    _records: dict[tuple[str, bool], Record] = field(default_factory=dict)

    def entity(self, node: YNode | None, context: str, what: str) -> Entity | None:
        """The declared entity ``node`` names; an unknown name is reported with a suggestion."""
        name = self.reader.string(node, context, what)
        if name is None or node is None:
            return None
        found = self.entities.get(name)
        if found is None and name not in self.declared:
            self.reader.error(
                node.pos,
                context,
                f"{what} [{name}] is not a declared entity{suggest(name, self.declared)}",
            )
        return found

    def _seed_index(self, entity: str) -> SeedIndex:
        """The seeds of ``entity``, indexed once rather than scanned for every reference (and
        built again only if rows were added since)."""
        rows = self.seeded.get(entity, [])
        cached = self._indexes.get(entity)
        if cached is None or cached.rows != len(rows):
            cached = self._indexes[entity] = SeedIndex.of(rows)
        return cached

    def record(self, entity: Entity, action: bool = False) -> Record:
        """The names an expression about a record of ``entity`` may read (made once per entity:
        every expression of every step asks)."""
        cached = self._records.get((entity.name, action))
        if cached is not None and cached.entity is entity:
            return cached
        related = {
            r.name: e
            for r in entity.relations
            if r.to_one and (e := self.entities.get(r.to)) is not None
        }
        made = self._records[entity.name, action] = Record(entity, related, action)
        return made

    def resolve(self, entity: str, node: YNode, context: str, what: str) -> int | None:
        """A seed id or seeded name of ``entity`` → the seed id (reported when it is neither)."""
        value = node.value if isinstance(node, YScalar) else None
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            self.reader.error(
                node.pos, context, f"{what} must be a seed id or seeded name, got {kind_name(node)}"
            )
            return None
        rows = self.seeded.get(entity, [])
        if not rows:
            self.reader.error(
                node.pos,
                context,
                f"{what} [{value}] cannot be resolved: [{entity}] has no seeds; "
                f"add rows for it under seeds:",
            )
            return None
        index = self._seed_index(entity)
        found = index.ids.get(value)
        if found is not None:
            return found
        if isinstance(value, int):
            hint = f" (seeded ids: {listing(index.id_texts)})"
        else:
            hint = suggest(value, index.names) or f" (seeded names: {listing(index.names)})"
        self.reader.error(
            node.pos, context, f"{what} [{value}] is not a seeded value of [{entity}]{hint}"
        )
        return None


# --- entities --------------------------------------------------------------------------------


def declare_entities(items: list[YNode], catalog: Catalog) -> None:
    """Pass 1: the entity names (unique identifiers) and their functions."""
    reader = catalog.reader
    first: dict[str, Pos] = {}
    for i, item in enumerate(items):
        node = reader.map(item, f"entity #{i + 1}", "each entity")
        if node is None or node.get("name") is None:
            continue
        name = reader.ident(node.get("name"), f"entity #{i + 1}", "entity name")
        if name is None:
            continue
        name_pos = node.entries["name"].value.pos
        if name in first:
            reader.error(
                name_pos, f"entity [{name}]", f"declared twice (first at line {first[name].line})"
            )
            continue
        first[name] = name_pos
        catalog.declared[name] = _function(node)


def _function(node: YMap) -> str | None:
    fn = node.get("function")
    kind = node.get("kind")
    if isinstance(fn, YScalar) and isinstance(fn.value, str):
        return fn.value
    if isinstance(kind, YScalar) and kind.value == "setting":
        return "Setting"
    return None


@dataclass
class EntityNodes:
    """Where an entity's relations were written, for the checks that need every entity."""

    entity: Entity
    relations: dict[str, YMap]


def compile_entities(items: list[YNode], catalog: Catalog) -> list[EntityNodes]:
    """Pass 2: fields and relations of every entity (relations finished by :func:`finish`)."""
    out: list[EntityNodes] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        node = catalog.reader.map(item, f"entity #{i + 1}", "each entity")
        if node is None:
            continue
        compiled = _entity(node, i, catalog)
        if compiled is not None and compiled.entity.name not in seen:
            seen.add(compiled.entity.name)
            catalog.entities[compiled.entity.name] = compiled.entity
            out.append(compiled)
    return out


def _entity(node: YMap, index: int, catalog: Catalog) -> EntityNodes | None:
    reader = catalog.reader
    raw = node.get("name")
    name = raw.value if isinstance(raw, YScalar) and isinstance(raw.value, str) else None
    context = f"entity [{name}]" if name else f"entity #{index + 1}"
    reader.keys(node, ENTITY_KEYS, context, not_run=ENTITY_NOT_RUN)
    if (
        reader.require(node, "name", context) is None
        or name is None
        or name not in catalog.declared
    ):
        return None  # a bad or duplicate name was reported when the names were declared
    function = _entity_function(node, context, reader)
    fields, complete = _fields(node, context, reader)
    relations, rel_nodes = _relations(node, context, reader, {f.name for f in fields})
    if complete:  # a field that failed may well be the primary key; do not guess
        _check_primary_key(node, fields, context, reader)
    read_description(node, context, reader)
    entity = Entity(name, node.pos, tuple(fields), tuple(relations), function)
    return EntityNodes(entity, rel_nodes)


def _entity_function(node: YMap, context: str, reader: Reader) -> str | None:
    fn = reader.string(node.get("function"), context, "function")
    if fn is not None and fn not in ENTITY_FUNCTIONS:
        pos = node.entries["function"].value.pos
        reader.error(
            pos,
            context,
            f"function [{fn}] is not an entity function ({', '.join(ENTITY_FUNCTIONS)})"
            + suggest(fn, ENTITY_FUNCTIONS),
        )
        fn = None
    kind = reader.string(node.get("kind"), context, "kind")
    if kind is None:
        return fn
    kind_pos = node.entries["kind"].value.pos
    if kind != "setting":
        reader.error(
            kind_pos,
            context,
            f"kind [{kind}] is not an entity kind; the only one is [setting]"
            + suggest(kind, ["setting"]),
        )
    elif fn not in (None, "Setting"):
        reader.error(kind_pos, context, f"kind [setting] contradicts function [{fn}]; keep one")
    else:
        return "Setting"
    return fn


def _fields(node: YMap, context: str, reader: Reader) -> tuple[list[Field], bool]:
    """The entity's fields, and whether every one of them compiled."""
    fields: dict[str, Field] = {}
    complete = True
    for item in reader.seq(node.get("fields"), context, "fields"):
        fnode = reader.map(item, context, "each field")
        compiled = _field(fnode, context, reader) if fnode is not None else None
        if compiled is None:
            complete = False
            continue
        if compiled.name in fields:
            reader.error(compiled.pos, context, f"field [{compiled.name}] is declared twice")
            continue
        fields[compiled.name] = compiled
    return list(fields.values()), complete


def _field(node: YMap, entity_context: str, reader: Reader) -> Field | None:
    name = reader.ident(reader.require(node, "name", entity_context), entity_context, "field name")
    context = f"{entity_context} field [{name}]" if name else entity_context
    reader.keys(node, FIELD_KEYS, context, not_run=FIELD_NOT_RUN)
    type_node = reader.require(node, "type", context)
    type_ = reader.string(type_node, context, "type")
    if type_ is not None and type_ not in FIELD_TYPES and type_node is not None:
        reader.error(
            type_node.pos,
            context,
            f"type [{type_}] is not a field type ({' '.join(FIELD_TYPES)})"
            + suggest(type_, FIELD_TYPES),
        )
        type_ = None
    flags = dict.fromkeys(_FLAGS, False)
    for k in _FLAGS.intersection(node.entries):  # most fields set none of them
        flags[k] = bool(reader.boolean(node.get(k), context, k))
    length = _positive(node, "length", context, reader)
    precision = _positive(node, "precision", context, reader)
    scale = reader.integer(node.get("scale"), context, "scale")
    read_description(node, context, reader)
    default = _default(node, type_, length, context, reader)
    if name is None or type_ is None:
        return None
    return Field(
        name,
        cast(FieldType, type_),
        node.pos,
        flags["primaryKey"],
        flags["generated"],
        flags["required"],
        length,
        default,
        flags["unique"],
        precision,
        scale,
    )


def _positive(node: YMap, key: str, context: str, reader: Reader) -> int | None:
    value_node = node.get(key)
    value = reader.integer(value_node, context, key)
    if value is not None and value_node is not None and value < 1:
        reader.error(value_node.pos, context, f"{key} [{value}] must be a positive integer")
        return None
    return value


def _default(
    node: YMap, type_: str | None, length: int | None, context: str, reader: Reader
) -> Any:
    value_node = node.get("defaultValue")
    value = reader.scalar(value_node, context, "defaultValue")
    if value_node is None or type_ is None:
        return value
    problem = value_problem(type_, length, value)
    if problem:
        reader.error(value_node.pos, context, f"defaultValue {problem}")
        return None
    return value


def _check_primary_key(node: YMap, fields: list[Field], context: str, reader: Reader) -> None:
    keys = [f for f in fields if f.primary_key]
    if not keys:
        reader.error(
            node.pos,
            context,
            "has no primary key; declare one integer field with primaryKey: true "
            "(usually { name: id, type: integer, primaryKey: true, generated: true })",
        )
    for extra in keys[1:]:
        reader.error(
            extra.pos,
            f"{context} field [{extra.name}]",
            f"is a second primary key (the first is [{keys[0].name}]); an entity has exactly one",
        )
    if keys and keys[0].type not in INTEGER_TYPES:
        reader.error(
            keys[0].pos,
            f"{context} field [{keys[0].name}]",
            f"the primary key must be an integer field, not {keys[0].type}",
        )


def _relations(
    node: YMap, context: str, reader: Reader, field_names: set[str]
) -> tuple[list[Relation], dict[str, YMap]]:
    relations: list[Relation] = []
    nodes: dict[str, YMap] = {}
    for item in reader.seq(node.get("relations"), context, "relations"):
        rnode = reader.map(item, context, "each relation")
        if rnode is None:
            continue
        rel = _relation(rnode, context, reader)
        if rel is None:
            continue
        if rel.name in nodes or rel.name in field_names:
            what = "a field" if rel.name in field_names else "another relation"
            reader.error(
                rel.pos, context, f"relation [{rel.name}] has the same name as {what}; rename it"
            )
            continue
        relations.append(rel)
        nodes[rel.name] = rnode
    return relations, nodes


def _relation(node: YMap, entity_context: str, reader: Reader) -> Relation | None:
    name = reader.ident(
        reader.require(node, "name", entity_context), entity_context, "relation name"
    )
    context = f"{entity_context} relation [{name}]" if name else entity_context
    reader.keys(node, RELATION_KEYS, context)
    kind_node = reader.require(node, "kind", context, ", ".join(RELATION_KINDS))
    kind = reader.string(kind_node, context, "kind")
    if kind is not None and kind not in RELATION_KINDS and kind_node is not None:
        reader.error(
            kind_node.pos,
            context,
            f"kind [{kind}] is not a relation kind ({', '.join(RELATION_KINDS)})"
            + suggest(kind, RELATION_KINDS),
        )
        kind = None
    to = reader.string(reader.require(node, "to", context, "the related entity"), context, "to")
    required = bool(reader.boolean(node.get("required"), context, "required"))
    read_description(node, context, reader)
    if name is None or kind is None or to is None:
        return None
    function = reader.string(node.get("function"), context, "function")
    return Relation(name, cast(RelationKind, kind), to, node.pos, function, None, required)


def finish_relations(compiled: list[EntityNodes], catalog: Catalog) -> None:
    """Pass 3 (after seeds): targets, status functions and ``init`` resolved to a seed id."""
    for item in compiled:
        entity = item.entity
        relations = tuple(
            _finish(entity.name, rel, item.relations[rel.name], catalog) for rel in entity.relations
        )
        catalog.entities[entity.name] = dataclasses.replace(entity, relations=relations)


def _finish(entity: str, rel: Relation, node: YMap, catalog: Catalog) -> Relation:
    reader = catalog.reader
    context = f"entity [{entity}] relation [{rel.name}]"
    to_node = node.entries["to"].value
    if rel.to not in catalog.declared:
        reader.error(
            to_node.pos,
            context,
            f"to [{rel.to}] is not a declared entity{suggest(rel.to, catalog.declared)}",
        )
    function = rel.function
    if function is not None:
        function = _status_function(rel, node, context, catalog)
    init: int | None = None
    init_node = node.get("init")
    if init_node is not None:
        if function != "EntityStatus":
            reader.error(
                node.entries["init"].key_pos,
                context,
                "init sets the initial status; it needs function: EntityStatus on this relation",
            )
        elif rel.to in catalog.declared:
            init = catalog.resolve(rel.to, init_node, context, "init")
    return dataclasses.replace(rel, function=function, init=init)


def _status_function(rel: Relation, node: YMap, context: str, catalog: Catalog) -> str | None:
    pos = node.entries["function"].value.pos
    reader = catalog.reader
    if rel.function != "EntityStatus":
        reader.error(
            pos,
            context,
            f"function [{rel.function}] is not a relation function; the only one is "
            f"[EntityStatus]{suggest(str(rel.function), ['EntityStatus'])}",
        )
        return None
    if not rel.to_one:
        reader.error(
            pos,
            context,
            f"a status relation must be to-one (manyToOne or oneToOne), not {rel.kind}",
        )
        return None
    if rel.to in catalog.declared and catalog.declared[rel.to] != "Setting":
        reader.error(
            pos,
            context,
            f"a status relation must point to a setting entity; [{rel.to}] is not one "
            "(give it function: Setting)",
        )
        return None
    return rel.function
