"""Static kinds: which kind of value an expression gives, where that is known before it runs.

Only what cannot be wrong is inferred: literals, the operators and calls whose result has one
kind, and the names the caller knows the kind of (a declared input, an entity field). Anything
else is unknown (``None``) and is judged when it runs. A known kind also admits ``null`` (a path
into missing data is null), which compares with ``==`` like any value, so a comparison of two
known kinds that :func:`procflow.expr.values.comparison_problem` refuses fails whenever both
sides hold a value: validation reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from procflow.expr.ast import (
    BoolOp,
    Call,
    Chain,
    Compare,
    Expr,
    ListLit,
    Literal,
    MapLit,
    Name,
    Path,
    Pipe,
    Unary,
    children,
)
from procflow.expr.values import NUMERIC_KINDS, comparison_problem, kind_of

__all__ = ["NameKinds", "comparison_problems", "static_kind"]

# Resolves a name or a path (``deal``, ``deal.amount``) to its kind; None when unknown.
NameKinds = Callable[[Name | Path], str | None]

_FUNCTION_KINDS = {"now": "timestamp", "timestamp": "timestamp", "duration": "duration"}
_FILTER_KINDS = {
    "minus": "timestamp",
    "plus": "timestamp",
    "length": "integer",
    "upper": "string",
    "lower": "string",
    "trim": "string",
    "string": "string",
    "json": "string",
    "join": "string",
    "date": "string",
    "int": "integer",
    "float": "number",
    "round": "number",
    "keys": "list",
    "values": "list",
}
_COMPARED = ("==", "!=", "<", "<=", ">", ">=")


def static_kind(expr: Expr, names: NameKinds) -> str | None:
    """The kind ``expr`` gives (a :func:`procflow.expr.kind_of` name), or None when unknown."""
    match expr:
        case Literal(value=value):
            return "duration" if isinstance(value, timedelta) else kind_of(value)
        case Name() | Path():
            return names(expr)
        case ListLit():
            return "list"
        case MapLit():
            return "mapping"
        case Compare() | BoolOp() | Unary(op="not"):
            return "boolean"
        case Unary(operand=operand):
            kind = static_kind(operand, names)
            return kind if kind in (*NUMERIC_KINDS, "duration") else None
        case Call(name=name):
            return _FUNCTION_KINDS.get(name)
        case Pipe():
            return _pipe_kind(expr, names)
        case Chain():
            return _chain_kind(expr, names)
    return None


def _pipe_kind(pipe: Pipe, names: NameKinds) -> str | None:
    last = pipe.filters[-1]
    if last.name != "default":
        return _FILTER_KINDS.get(last.name)
    before = Pipe(pipe.offset, pipe.target, pipe.filters[:-1]) if len(pipe.filters) > 1 else None
    value = static_kind(before or pipe.target, names)
    fallback = static_kind(last.args[0], names)
    if value is None or fallback is None:
        return None
    if fallback == "null" or comparison_problem("==", value, fallback) is None:
        return value if value != "null" else fallback
    return None


def _chain_kind(chain: Chain, names: NameKinds) -> str | None:
    """Arithmetic on numbers gives a number, ``+`` on strings a string; the rest is unknown."""
    kinds = {static_kind(e, names) for e in (chain.first, *(e for _, _, e in chain.rest))}
    if kinds <= set(NUMERIC_KINDS):
        return "number"
    if kinds == {"string"} and all(op == "+" for op, _, _ in chain.rest):
        return "string"
    return None


def comparison_problems(expr: Expr, names: NameKinds) -> list[tuple[int, str]]:
    """Each comparison in ``expr`` whose two sides have known kinds that cannot be compared:
    (offset of the operator, message), in source order."""
    found: list[tuple[int, str]] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        stack.extend(reversed(children(node)))
        if not isinstance(node, Compare) or node.op not in _COMPARED:
            continue
        left, right = static_kind(node.left, names), static_kind(node.right, names)
        if left is None or right is None:
            continue
        problem = comparison_problem(node.op, left, right)
        if problem:
            found.append((node.op_offset, problem))
    return sorted(found)
