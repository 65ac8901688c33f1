"""Calls whose argument is written out, checked when a definition is validated.

``duration('3000000d')``, ``timestamp('10000-01-01')`` or ``now() | plus('P1M')`` read text that
is fixed in the file, so a bad one fails every time it runs; validation reports it instead, with
the message evaluation would raise.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from procflow.errors import ExprEvalError
from procflow.expr.ast import Call, Expr, Literal, Pipe, children
from procflow.expr.functions import as_duration, as_timestamp

__all__ = ["constant_problems"]

_Read = Callable[[Any, str], object]
_READERS: dict[str, _Read] = {"duration": as_duration, "timestamp": as_timestamp}
_SHIFTS = ("plus", "minus")  # filters taking a duration


def constant_problems(expr: Expr) -> list[tuple[int, str]]:
    """(offset, message) of each call in ``expr`` whose written-out text argument is refused."""
    problems: list[tuple[int, str]] = []
    queue: deque[Expr] = deque([expr])
    while queue:
        node = queue.popleft()
        if isinstance(node, Call) and node.name in _READERS:
            problems += _refused(node.args, node.offset, f"{node.name}()", _READERS[node.name])
        elif isinstance(node, Pipe):
            for f in node.filters:
                if f.name in _SHIFTS:
                    problems += _refused(f.args, f.offset, f"filter [{f.name}]", as_duration)
        queue.extend(children(node))
    return sorted(problems)


def _refused(args: tuple[Expr, ...], offset: int, where: str, read: _Read) -> list[tuple[int, str]]:
    if len(args) != 1 or not isinstance(args[0], Literal) or not isinstance(args[0].value, str):
        return []
    try:
        read(args[0].value, where)
    except ExprEvalError as exc:
        return [(offset, exc.message)]
    return []
