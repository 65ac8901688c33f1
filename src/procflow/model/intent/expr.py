"""Expressions, guards, placeholders and durations in intent files, checked against entities.

Names in an intent expression are the fields of one record, its to-one relations walked one hop
(``customer.email``) and, in a decision, ``action``. They are resolved here against the entity
declarations rather than through a generic scope so the messages can say "not a field of [Order]".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from procflow.errors import DurationError, ExprSyntaxError
from procflow.expr import Expr, Placeholders, parse, parse_duration, parse_placeholders, root_paths
from procflow.expr.ast import (
    Attr,
    BoolOp,
    Chain,
    Compare,
    ListLit,
    Literal,
    MapLit,
    Name,
    Path,
    Unary,
)
from procflow.expr.constants import constant_problems
from procflow.expr.kinds import NameKinds, kind_problems
from procflow.model.intent.values import INTEGER_TYPES, NUMBER_TYPES, literal_fits
from procflow.model.ir import Entity
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YScalar
from procflow.model.source import Pos, suggest

ACTION = "action"  # the decision name for the last completed user task's action


def at(node: YScalar, offset: int | None) -> Pos:
    """The position of character ``offset`` of a (single-line) scalar's text."""
    if offset is None:
        return node.pos
    return node.pos.at(offset + (1 if node.quoted else 0))


@dataclass(frozen=True)
class Record:
    """The names an expression may use: a record's fields and its to-one relations' fields."""

    entity: Entity
    related: dict[str, Entity]  # to-one relation name → the related entity (when declared)
    action: bool = False  # ``action`` is a name too (decisions)

    def names(self) -> Iterator[str]:
        yield from (f.name for f in self.entity.fields)
        yield from (r.name for r in self.entity.relations)
        if self.action:
            yield ACTION


def parse_expr(node: YScalar, text: str, context: str, what: str, reader: Reader) -> Expr | None:
    try:
        return parse(text)
    except ExprSyntaxError as exc:
        reader.error(at(node, exc.offset), context, f"{what} [{text}]: {exc.message}")
        return None


def check_names(expr: Expr, node: YScalar, record: Record, context: str, reader: Reader) -> bool:
    """Report every name that is not a field, one-hop relation field (or ``action``)."""
    ok = True
    for ref in root_paths(expr):
        segments = [s for s in ref.segments if isinstance(s, str)]
        indexed = len(segments) != len(ref.segments)
        problem = path_problem(ref.root, segments, record, indexed)
        if problem:
            reader.error(at(node, ref.offset), context, problem)
            ok = False
    return ok


def path_problem(
    root: str, segments: list[str], record: Record, indexed: bool = False
) -> str | None:
    """Why ``root.seg...`` is not a readable name of ``record`` (``None``: it is)."""
    entity = record.entity
    if record.action and root == ACTION and entity.field(root) is None:
        return f"[{ACTION}] is text and has no [{segments[0]}]" if segments or indexed else None
    if entity.field(root) is not None:
        if segments or indexed:
            return f"[{root}] is a field of [{entity.name}]; it has no parts to read"
        return None
    rel = entity.relation(root)
    if rel is None:
        hint = suggest(root, record.names())
        return f"[{root}] is not a field or relation of [{entity.name}]{hint}"
    if not rel.to_one:
        return f"[{root}] is a {rel.kind} relation; only to-one relations can be read"
    if indexed:
        return f"[{root}] is a relation; read a field of it as {root}.field"
    if not segments:
        return None  # the related record's id
    target = record.related.get(root)
    if target is None:
        return None  # the undeclared target was reported with the relation
    if target.relation(segments[0]) is not None:
        path = ".".join([root, *segments])
        return f"[{path}] goes more than one hop; only fields of directly related records are read"
    if target.field(segments[0]) is None:
        hint = suggest(segments[0], (f.name for f in target.fields))
        return f"[{segments[0]}] is not a field of [{target.name}] (via [{root}]){hint}"
    if len(segments) > 1:
        return f"[{root}.{'.'.join(segments)}] goes more than one hop; read {root}.{segments[0]}"
    return None


def field_type(expr: Expr, record: Record) -> str | None:
    """The declared type of a name or one-hop path expression, if it is one."""
    if isinstance(expr, Name):
        f = record.entity.field(expr.name)
        if f is not None:
            return f.type
        return "text" if record.action and expr.name == ACTION else None
    if isinstance(expr, Path) and isinstance(expr.base, Name) and len(expr.steps) == 1:
        step = expr.steps[0]
        target = record.related.get(expr.base.name)
        if isinstance(step, Attr) and target is not None:
            f = target.field(step.name)
            return f.type if f is not None else None
    return None


# The kind an expression sees for a field of each type: the record's JSON form, where dates,
# timestamps and UUIDs are text.
_FIELD_KINDS = {
    **dict.fromkeys(("string", "text", "date", "timestamp", "uuid"), "string"),
    **dict.fromkeys(INTEGER_TYPES, "integer"),
    **dict.fromkeys(NUMBER_TYPES, "number"),
    "boolean": "boolean",
}


def _name_kind(record: Record) -> NameKinds:
    def kind(node: Name | Path) -> str | None:
        type_ = field_type(node, record)
        if type_ is None and isinstance(node, Name):
            # a bare to-one relation reads the related record's id
            related = record.related.get(node.name)
            key = next((f for f in related.fields if f.primary_key), None) if related else None
            type_ = key.type if key is not None else None
        return _FIELD_KINDS.get(type_) if type_ else None

    return kind


def check_kinds(
    expr: Expr, node: YScalar, record: Record, context: str, what: str, reader: Reader
) -> None:
    """Report each comparison of two values whose kinds differ, where both kinds are known (a
    field's type, a literal): it fails whenever it runs (``[==] cannot compare ...``); each filter
    given a known kind it does not take (``filter [upper] needs a string, got integer``); and each
    written-out duration or timestamp that is refused (``duration('3000000d')``)."""
    found = kind_problems(expr, _name_kind(record)) + constant_problems(expr)
    for offset, message in found:
        reader.error(at(node, offset), context, f"{what} [{node.value}]: {message}")


def boolean_problem(expr: Expr, record: Record) -> str | None:
    """Why ``expr`` visibly cannot be a condition (``None``: it is one, or it cannot be told)."""
    if isinstance(expr, (Compare, BoolOp)) or (isinstance(expr, Unary) and expr.op == "not"):
        return None
    if isinstance(expr, Literal):
        return None if isinstance(expr.value, bool) else "is a constant, not a condition"
    if isinstance(expr, (Chain, Unary)):
        return "is arithmetic, not a condition; compare it (e.g. total > 100)"
    if isinstance(expr, (ListLit, MapLit)):
        return "is a list or mapping, not a condition"
    type_ = field_type(expr, record)
    if type_ is not None and type_ != "boolean":
        return f"reads {_article(type_)} {type_} value, not a condition; compare it (e.g. == or >)"
    return None


def _article(word: str) -> str:
    """``an`` before a vowel sound (an integer), else ``a`` (a string, a uuid: u reads as "you")."""
    return "an" if word[:1] in ("a", "e", "i", "o") else "a"


# --- guards (trigger ``when``): ``field ==|!= literal`` ----------------------------------------


def check_guard(
    expr: Expr, node: YScalar, text: str, entity: Entity, context: str, reader: Reader
) -> None:
    shape = f"guard [{text}] must be <field> == <literal> or <field> != <literal>"
    if not isinstance(expr, Compare) or expr.op not in ("==", "!="):
        reader.error(node.pos, context, shape)
        return
    left, right = expr.left, expr.right
    if isinstance(right, Name) and isinstance(left, Literal):
        left, right = right, left  # ``'x' == field`` reads the same; report on its terms
    if not isinstance(left, Name):
        reader.error(at(node, left.offset), context, shape)
        return
    field = entity.field(left.name)
    if field is None:
        names = (f.name for f in entity.fields)
        reader.error(
            at(node, left.offset),
            context,
            f"[{left.name}] is not a field of [{entity.name}]{suggest(left.name, names)}",
        )
    value = _literal(right)
    if isinstance(right, Name):
        reader.error(at(node, right.offset), context, _bare_word(right.name, entity))
    elif value is _NOT_LITERAL:
        reader.error(at(node, right.offset), context, shape)
    elif field is not None and not literal_fits(field.type, value):
        reader.error(
            at(node, right.offset),
            context,
            f"compares {field.type} field [{field.name}] with {_describe_literal(value)}",
        )


_NOT_LITERAL = object()


def _literal(expr: Expr) -> object:
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Unary) and expr.op == "-" and isinstance(expr.operand, Literal):
        value = expr.operand.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    return _NOT_LITERAL


def _bare_word(word: str, entity: Entity) -> str:
    if entity.field(word) is not None:
        return f"[{word}] is a field; a guard compares a field with a literal, not two fields"
    return f"[{word}] is not a field of [{entity.name}]; write '{word}' in quotes for text"


def _describe_literal(value: object) -> str:
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    if isinstance(value, str):
        return f"the text '{value}'"
    if isinstance(value, timedelta):
        return "a duration"
    return f"the number {value}"


# --- placeholders and durations --------------------------------------------------------------


def placeholders(
    node: YScalar, text: str, record: Record | bool | None, context: str, what: str, reader: Reader
) -> Placeholders | None:
    """Parse ``{field}`` / ``{relation.field}`` text; ``record`` False: names go unchecked."""
    try:
        parsed = parse_placeholders(text)
    except ExprSyntaxError as exc:
        reader.error(at(node, exc.offset), context, f"{what}: {exc.message}")
        return None
    for ref in parsed.refs():
        root, rest = ref.path[0], list(ref.path[1:])
        has_error_field = isinstance(record, Record) and record.entity.field("error") is not None
        if root == "error" and not has_error_field:
            reader.error(
                at(node, ref.offset),
                context,
                f"{what}: {{error}} is available only as the whole value of a setField",
            )
            continue
        if record is None:
            shown = "{" + ".".join(ref.path) + "}"
            reader.error(at(node, ref.offset), context, no_trigger(f"{what} placeholder {shown}"))
            continue
        if not isinstance(record, Record):
            continue
        problem = path_problem(root, rest, record)
        if problem:
            reader.error(at(node, ref.offset), context, f"{what}: {problem}")
    return parsed


def no_trigger(what: str) -> str:
    return (
        f"{what} reads the trigger record, but the process has no trigger, so its entity is "
        "unknown; add trigger: { onCreate: <Entity> }"
    )


def duration(node: YScalar, context: str, what: str, reader: Reader) -> timedelta | None:
    """An ISO-8601 duration longer than zero (``30s`` is refused with the ISO spelling)."""
    try:
        value = parse_duration(node.value, iso_only=True)
    except DurationError as exc:
        reader.error(node.pos, context, f"{what} {exc}")
        return None
    if value <= timedelta(0):
        reader.error(node.pos, context, f"{what} [{node.value}] must be longer than zero")
        return None
    return value
