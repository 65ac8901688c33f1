"""An intent schedule's ``where``: ``{ field, op, value }`` conditions (ANDed), and the moments
``CURRENT_DATE``, ``CURRENT_TIMESTAMP`` and ``NOW`` with at most one signed ISO-8601 offset.

Private to :mod:`procflow.model.intent.schedules`. Every condition is checked against the swept
entity as the runtime will compare it (docs/reference/intent.md, "Schedules"): the operator
against the field's type, the value against the field (a status relation's seeded name resolved
to its id), and a moment against a date or timestamp field, each problem at its position.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from procflow.model.intent.data import Catalog
from procflow.model.intent.expr import at
from procflow.model.intent.values import (
    INTEGER_TYPES,
    NUMBER_TYPES,
    TEXT_TYPES,
    a_type,
    value_problem,
)
from procflow.model.ir import Entity, Relation
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar
from procflow.model.schedule import Compare, Condition, Moment, WhereOp
from procflow.model.source import suggest

__all__ = ["RECORD_INSTANTS", "compile_where", "read_moment"]

WHERE_KEYS = ("field", "op", "value")
OPS = tuple(op.value for op in WhereOp)
MOMENTS = ("CURRENT_DATE", "CURRENT_TIMESTAMP", "NOW")
RECORD_INSTANTS = {"createdAt": "created_at", "changedAt": "updated_at"}
"""Names a condition may compare that an entity need not declare: the record's stored creation
and last-write instants (a declared field of the name wins)."""
_ORDERED = frozenset({"text", "number", "date", "timestamp"})
_WORD = re.compile(r"[A-Za-z_]+")
_OFFSET = re.compile(
    r"P(?:(?P<Y>\d+)Y)?(?:(?P<MO>\d+)M)?(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:(?P<T>T)(?:(?P<H>\d+)H)?(?:(?P<MI>\d+)M)?(?:(?P<S>\d+)S)?)?"
)
_MAX_DAYS = 36_525  # an offset is at most 100 years, as any procflow duration
_OFFSET_HINT = "write a signed duration such as -PT30M (30 minutes) or +P7D (7 days)"


@dataclass(frozen=True)
class Target:
    """What a condition's ``field`` names, and how its values compare."""

    name: str
    compare: Compare
    kind: str  # for messages: "a string field", "a status relation"
    type_: str | None = None  # the field's declared type (None: a relation)
    relation: Relation | None = None
    column: str | None = None


def compile_where(
    node: YNode | None, entity: Entity | None, context: str, catalog: Catalog
) -> tuple[Condition, ...]:
    """Every condition of ``where``; those with a problem are reported and left out."""
    reader = catalog.reader
    out: list[Condition] = []
    for item in reader.seq(node, context, "where"):
        entry = reader.map(item, context, "each where condition")
        if entry is None:
            continue
        reader.keys(entry, WHERE_KEYS, context)
        condition = _condition(entry, entity, context, catalog)
        if condition is not None:
            out.append(condition)
    return tuple(out)


def _condition(
    entry: YMap, entity: Entity | None, context: str, catalog: Catalog
) -> Condition | None:
    reader = catalog.reader
    what = f"a field or relation of [{entity.name}]" if entity is not None else "a field"
    field_node = reader.require(entry, "field", context, what)
    op_node = reader.require(entry, "op", context, ", ".join(OPS))
    value_node = reader.require(entry, "value", context, "what the field is compared with")
    name = reader.string(field_node, context, "where field")
    op = _op(op_node, context, catalog)
    if entity is None or name is None or field_node is None:
        return None
    target = _target(name, field_node, entity, context, catalog)
    if target is None or op is None or not _op_fits(op, op_node, target, context, catalog):
        return None
    if value_node is None:
        return None
    ok, value = _value(value_node, op, target, context, catalog)
    if not ok:
        return None
    return Condition(name, op, value, target.compare, entry.pos, target.column)


def _op(node: YNode | None, context: str, catalog: Catalog) -> WhereOp | None:
    text = catalog.reader.string(node, context, "op")
    if text is None or node is None:
        return None
    if text not in OPS:
        catalog.reader.error(
            node.pos, context, f"op [{text}] is not one of {', '.join(OPS)}{suggest(text, OPS)}"
        )
        return None
    return WhereOp(text)


def _target(
    name: str, node: YNode, entity: Entity, context: str, catalog: Catalog
) -> Target | None:
    field = entity.field(name)
    if field is not None:
        return Target(name, _compare(field.type), f"{a_type(field.type)} field", field.type)
    rel = entity.relation(name)
    if rel is not None and rel.to_one:
        kind = "a status relation" if rel.is_status else f"a {rel.kind} relation"
        return Target(name, "relation", kind, relation=rel)
    if rel is None and name in RECORD_INSTANTS:
        kind = "the record's " + ("creation" if name == "createdAt" else "last-write") + " instant"
        return Target(name, "timestamp", kind, "timestamp", column=RECORD_INSTANTS[name])
    if rel is not None:
        problem = f"is a {rel.kind} relation, which stores nothing to compare"
    else:
        names = itertools.chain(
            (f.name for f in entity.fields), (r.name for r in entity.relations if r.to_one),
            (n for n in RECORD_INSTANTS if entity.field(n) is None),
        )  # fmt: skip
        problem = f"is not a field of [{entity.name}]{suggest(name, names)}"
    catalog.reader.error(node.pos, context, f"where field [{name}] {problem}")
    return None


def _compare(type_: str) -> Compare:
    if type_ in TEXT_TYPES:
        return "text"
    if type_ in INTEGER_TYPES or type_ in NUMBER_TYPES:
        return "number"
    assert type_ in ("boolean", "date", "timestamp", "uuid")
    return type_  # type: ignore[return-value]


def _op_fits(
    op: WhereOp, node: YNode | None, target: Target, context: str, catalog: Catalog
) -> bool:
    """Whether ``op`` can compare ``target``: ``like`` text only, the orderings no booleans,
    uuids or relations."""
    assert node is not None
    if op is WhereOp.LIKE and target.compare != "text":
        problem = f"op [like] matches text, but [{target.name}] is {target.kind}"
    elif op not in (WhereOp.EQ, WhereOp.NE, WhereOp.LIKE) and target.compare not in _ORDERED:
        problem = (
            f"op [{op.value}] orders values, but [{target.name}] is {target.kind}: compare it "
            "with eq or ne"
        )
    else:
        return True
    catalog.reader.error(node.pos, context, problem)
    return False


def _value(
    node: YNode, op: WhereOp, target: Target, context: str, catalog: Catalog
) -> tuple[bool, Any]:
    """The condition's value (a literal in the field's terms, a moment, or None) and whether
    it is usable."""
    reader = catalog.reader
    if not isinstance(node, YScalar):
        reader.scalar(node, context, "value")
        return False, None
    if node.value is None:
        if op in (WhereOp.EQ, WhereOp.NE):
            return True, None
        message = "value null compares with eq or ne only (is null, is not null)"
        reader.error(node.pos, context, message)
        return False, None
    if target.relation is not None:
        return _relation_value(node, target.relation, context, catalog)
    text = node.value if isinstance(node.value, str) else None
    word = _WORD.match(text) if text is not None and op is not WhereOp.LIKE else None
    if word is not None and word.group() in MOMENTS:
        moment = read_moment(node, target, context, catalog)
        return moment is not None, moment
    assert target.type_ is not None
    problem = value_problem(target.type_, None, node.value)
    if problem is None and target.compare == "timestamp":
        problem = _zone_problem(node.value)
    if problem is None:
        return True, node.value
    if word is not None and target.compare in ("date", "timestamp"):
        fitting = MOMENTS[:1] if target.compare == "date" else MOMENTS[1:]
        hint = suggest(word.group(), fitting) or f"; [{target.name}] compares with " + " or ".join(
            fitting
        )
        reader.error(node.pos, context, f"[{word.group()}] is not a moment{hint}")
    else:
        reader.error(node.pos, context, f"value for [{target.name}] {problem}")
    return False, None


def _zone_problem(value: Any) -> str | None:
    """A timestamp literal names an instant only with its zone."""
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return f"[{value}] needs a zone: add Z or an offset such as +01:00"
    return None


def _relation_value(
    node: YScalar, rel: Relation, context: str, catalog: Catalog
) -> tuple[bool, Any]:
    if rel.is_status:
        if rel.to not in catalog.declared:
            return False, None  # its unknown entity is reported at the relation
        resolved = catalog.resolve(rel.to, node, context, "value")
        return resolved is not None, resolved
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool):
        return True, value
    catalog.reader.error(
        node.pos,
        context,
        f"value for [{rel.name}] must be the id of a [{rel.to}] record (an integer)",
    )
    return False, None


# --- moments ---------------------------------------------------------------------------------


def read_moment(node: YScalar, target: Target, context: str, catalog: Catalog) -> Moment | None:
    """``node``'s text as a moment compared with ``target`` (reported when it is not one)."""
    reader = catalog.reader
    text = str(node.value)
    word = _WORD.match(text)
    assert word is not None
    token = word.group()
    if target.compare not in ("date", "timestamp"):
        reader.error(
            node.pos,
            context,
            f"[{token}] is a moment, but [{target.name}] is {target.kind}: moments compare "
            "with date and timestamp fields",
        )
        return None
    date = token == "CURRENT_DATE"
    if date != (target.compare == "date"):
        fit = "CURRENT_DATE" if target.compare == "date" else "CURRENT_TIMESTAMP or NOW"
        reader.error(
            node.pos,
            context,
            f"[{target.name}] is {target.kind}: compare it with {fit}, not {token}",
        )
        return None
    return _offset(node, text, word.end(), date, context, catalog)


def _offset(
    node: YScalar, text: str, start: int, date: bool, context: str, catalog: Catalog
) -> Moment | None:
    """The moment whose token ends at ``start`` of ``text``, with its offset if any."""
    rest = text[start:]
    if not rest.strip():
        return Moment(text, date)
    sign_at = start + len(rest) - len(rest.lstrip())
    sign = text[sign_at]
    if sign not in "+-":
        catalog.reader.error(
            at(node, sign_at),
            context,
            f"after {text[:start]} comes a signed ISO-8601 offset (-PT30M, +P7D), not "
            f"[{text[sign_at:]}]",
        )
        return None
    body_at = sign_at + 1 + len(text[sign_at + 1 :]) - len(text[sign_at + 1 :].lstrip())
    body = text[body_at:].rstrip()
    second = next((i for i, c in enumerate(body) if c in "+-"), None)
    if second is not None:
        catalog.reader.error(
            at(node, body_at + second),
            context,
            f"a moment takes at most one offset; [{body[second:]}] is a second one",
        )
        return None
    return _duration(node, sign, body, (sign_at, date), context, catalog)


def _duration(
    node: YScalar, sign: str, body: str, where: tuple[int, bool], context: str, catalog: Catalog
) -> Moment | None:
    sign_at, date = where
    match = _OFFSET.fullmatch(body)
    reader, pos = catalog.reader, at(node, sign_at)
    if match is None or body in ("P", "PT") or body.endswith("T"):
        reader.error(pos, context, f"[{sign}{body}] is not an ISO-8601 offset; {_OFFSET_HINT}")
        return None
    if date and match.group("T"):
        reader.error(
            pos,
            context,
            f"a date moves by whole days, months or years; [{sign}{body}] has a time part",
        )
        return None
    parts = {k: int(v) for k, v in match.groupdict().items() if v is not None and k != "T"}
    months = parts.get("Y", 0) * 12 + parts.get("MO", 0)
    days = parts.get("W", 0) * 7 + parts.get("D", 0)
    micros = (parts.get("H", 0) * 3600 + parts.get("MI", 0) * 60 + parts.get("S", 0)) * 10**6
    if months * 30.44 + days + micros / 86_400e6 > _MAX_DAYS:
        reader.error(pos, context, f"offset [{sign}{body}] is longer than 100 years")
        return None
    text = str(node.value)
    return Moment(text, date, -1 if sign == "-" else 1, months, days, micros)
