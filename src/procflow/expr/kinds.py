"""Static kinds: which kind of value an expression gives, where that is known before it runs.

Only what cannot be wrong is inferred: literals, the operators and calls whose result has one
kind, and the names the caller knows the kind of (a declared input, an entity field). Anything
else is unknown (``None``) and is judged when it runs. A known kind also admits ``null`` (a path
into missing data is null), which compares with ``==`` like any value, so a comparison of two
known kinds that :func:`procflow.expr.values.comparison_problem` refuses fails whenever both
sides hold a value: validation reports it. Likewise a filter given a value of a known kind it
does not take (``count | upper``) fails whenever the value is there.
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
    FilterCall,
    ListLit,
    Literal,
    MapLit,
    Name,
    Path,
    Pipe,
    Unary,
    children,
)
from procflow.expr.filters import FILTERS
from procflow.expr.functions import FUNCTIONS
from procflow.expr.values import NUMERIC_KINDS, comparison_problem, kind_of

__all__ = [
    "NameKinds",
    "comparison_problems",
    "filter_problems",
    "kind_problems",
    "static_kind",
]

# Resolves a name or a path (``deal``, ``deal.amount``) to its kind; None when unknown.
NameKinds = Callable[[Name | Path], str | None]

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
            function = FUNCTIONS.get(name)
            return function.gives if function else None
        case Pipe():
            return _pipe_kind(expr, names)
        case Chain():
            return _chain_kind(expr, names)
    return None


def _pipe_kind(pipe: Pipe, names: NameKinds) -> str | None:
    kind = static_kind(pipe.target, names)
    for call in pipe.filters:
        kind = _after(call, kind, names)
    return kind


def _after(call: FilterCall, before: str | None, names: NameKinds) -> str | None:
    """The kind a filter gives for a value of kind ``before``."""
    if call.name != "default":
        spec = FILTERS.get(call.name)
        return spec.gives if spec else None
    fallback = static_kind(call.args[0], names)
    if before is None or fallback is None:
        return None
    if fallback == "null" or comparison_problem("==", before, fallback) is None:
        return before if before != "null" else fallback
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


def filter_problems(expr: Expr, names: NameKinds) -> list[tuple[int, str]]:
    """Each filter in ``expr`` whose input has a known kind the filter does not take: (offset of
    the filter's name, the message the run would fail with), in source order."""
    found: list[tuple[int, str]] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        stack.extend(reversed(children(node)))
        if not isinstance(node, Pipe):
            continue
        kind = static_kind(node.target, names)
        for call in node.filters:
            spec = FILTERS.get(call.name)
            # null is refused when the run gets there, naming the path: not a kind mismatch
            if spec is not None and kind not in (None, "null"):
                problem = spec.kind_problem(kind)
                if problem:
                    found.append((call.offset, problem))
            kind = _after(call, kind, names)
    return sorted(found)


def kind_problems(expr: Expr, names: NameKinds) -> list[tuple[int, str]]:
    """Comparisons and filters that fail whenever they run, by the kinds known before the run."""
    return sorted(comparison_problems(expr, names) + filter_problems(expr, names))
