"""The expression syntax tree.

Operator chains (``a + b - c``, ``a and b and c``), path steps and filter pipes are stored flat,
not as left-leaning binary trees: a long but shallow expression then gives a shallow tree, so every
recursive walk over a tree the parser accepted stays far below Python's recursion limit.

``offset`` is the 0-based index of the node's first character in the text that was parsed (for a
template, in the whole template string).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeAlias

from procflow.expr.duration import format_short_duration

__all__ = [
    "Attr",
    "BoolOp",
    "Call",
    "Chain",
    "Compare",
    "Expr",
    "FilterCall",
    "Item",
    "ListLit",
    "Literal",
    "MapLit",
    "Name",
    "Path",
    "PathStep",
    "Pipe",
    "Unary",
    "children",
    "to_source",
]

LiteralValue: TypeAlias = bool | int | float | str | timedelta | None


@dataclass(frozen=True, slots=True)
class Literal:
    offset: int
    value: LiteralValue


@dataclass(frozen=True, slots=True)
class Name:
    offset: int
    name: str


@dataclass(frozen=True, slots=True)
class ListLit:
    offset: int
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class MapLit:
    offset: int
    entries: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True, slots=True)
class Attr:
    """``.name`` path step."""

    offset: int
    name: str


@dataclass(frozen=True, slots=True)
class Item:
    """``[index]`` path step."""

    offset: int
    index: Expr


PathStep: TypeAlias = Attr | Item


@dataclass(frozen=True, slots=True)
class Path:
    offset: int
    base: Expr
    steps: tuple[PathStep, ...]


@dataclass(frozen=True, slots=True)
class Call:
    offset: int
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class FilterCall:
    offset: int
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Pipe:
    offset: int
    target: Expr
    filters: tuple[FilterCall, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    offset: int
    op: str  # "-" or "not"
    operand: Expr


@dataclass(frozen=True, slots=True)
class Chain:
    """``first op1 x1 op2 x2 ...`` for one precedence level of ``+ -`` or ``* / %``.

    Each entry of ``rest`` is ``(op, offset of the operator, operand)``.
    """

    offset: int
    first: Expr
    rest: tuple[tuple[str, int, Expr], ...]


@dataclass(frozen=True, slots=True)
class Compare:
    offset: int
    op: str  # == != < <= > >= in, "not in"
    op_offset: int
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class BoolOp:
    offset: int
    op: str  # "and" or "or"
    operands: tuple[Expr, ...]


Expr: TypeAlias = (
    Literal | Name | ListLit | MapLit | Path | Call | Pipe | Unary | Chain | Compare | BoolOp
)


def children(node: Expr) -> list[Expr]:
    """Direct sub-expressions, in source order."""
    match node:
        case Literal() | Name():
            return []
        case ListLit(items=items):
            return list(items)
        case MapLit(entries=entries):
            return [v for _, v in entries]
        case Path(base=base, steps=steps):
            return [base, *(s.index for s in steps if isinstance(s, Item))]
        case Call(args=args):
            return list(args)
        case Pipe(target=target, filters=filters):
            return [target, *(a for f in filters for a in f.args)]
        case Unary(operand=operand):
            return [operand]
        case Chain(first=first, rest=rest):
            return [first, *(e for _, _, e in rest)]
        case Compare(left=left, right=right):
            return [left, right]
        case BoolOp(operands=operands):
            return list(operands)


# Binding strength used to decide where to_source needs parentheses.
_PREC_OR, _PREC_AND, _PREC_NOT, _PREC_CMP, _PREC_ADD, _PREC_MUL, _PREC_NEG = 1, 2, 3, 4, 5, 6, 7
_PREC_PIPE, _PREC_ATOM = 8, 9


def _prec(node: Expr) -> int:
    match node:
        case BoolOp(op="or"):
            return _PREC_OR
        case BoolOp():
            return _PREC_AND
        case Unary(op="not"):
            return _PREC_NOT
        case Compare():
            return _PREC_CMP
        case Chain(rest=rest):
            return _PREC_ADD if rest[0][0] in "+-" else _PREC_MUL
        case Unary():
            return _PREC_NEG
        case Pipe():
            return _PREC_PIPE
        case Literal(value=v) if isinstance(v, int | float | timedelta) and _negative(v):
            return _PREC_NEG
        case _:
            return _PREC_ATOM


def _negative(v: int | float | timedelta) -> bool:
    return v < timedelta(0) if isinstance(v, timedelta) else v < 0


def _quote(text: str) -> str:
    body = json.dumps(text, ensure_ascii=False)[1:-1].replace('\\"', '"').replace("'", "\\'")
    return f"'{body}'"


def _literal_source(value: LiteralValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, timedelta):
        return format_short_duration(value)
    return repr(value)


def to_source(node: Expr) -> str:
    """Render an expression back as text, for messages such as ``[deal.amount] is null``."""

    def sub(child: Expr, min_prec: int) -> str:
        text = to_source(child)
        return f"({text})" if _prec(child) < min_prec else text

    match node:
        case Literal(value=value):
            return _literal_source(value)
        case Name(name=name):
            return name
        case ListLit(items=items):
            return "[" + ", ".join(to_source(i) for i in items) + "]"
        case MapLit(entries=entries):
            return "{" + ", ".join(f"{_quote(k)}: {to_source(v)}" for k, v in entries) + "}"
        case Path(base=base, steps=steps):
            out = sub(base, _PREC_ATOM)
            for step in steps:
                out += f".{step.name}" if isinstance(step, Attr) else f"[{to_source(step.index)}]"
            return out
        case Call(name=name, args=args):
            return f"{name}(" + ", ".join(to_source(a) for a in args) + ")"
        case Pipe(target=target, filters=filters):
            out = sub(target, _PREC_PIPE + 1)
            for f in filters:
                out += f" | {f.name}"
                if f.args:
                    out += "(" + ", ".join(to_source(a) for a in f.args) + ")"
            return out
        case Unary(op="not", operand=operand):
            return "not " + sub(operand, _PREC_NOT)
        case Unary(operand=operand):
            text = sub(operand, _PREC_NEG)
            return ("- " if text.startswith("-") else "-") + text
        case Chain(first=first, rest=rest):
            level = _prec(node)
            out = sub(first, level)
            for op, _, operand in rest:
                out += f" {op} " + sub(operand, level + 1)
            return out
        case Compare(op=op, left=left, right=right):
            return f"{sub(left, _PREC_CMP + 1)} {op} {sub(right, _PREC_CMP + 1)}"
        case BoolOp(op=op, operands=operands):
            level = _prec(node)
            return f" {op} ".join(sub(o, level + 1) for o in operands)
