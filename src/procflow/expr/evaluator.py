"""Evaluation of a parsed expression against plain-data bindings.

The walk is recursive; the parser bounds the tree's height by ``MAX_DEPTH``, which keeps it far
below Python's recursion limit. Errors carry the offset of the node that failed and name the
sub-expression involved, e.g. ``[deal.amount] is null; [+] needs a value``.

Comparing values of different kinds is an error naming both kinds (``[==] cannot compare
timestamp with string``), never a silent ``false``; integers and numbers are one kind, and ``null``
compares with ``==``/``!=`` like any value (:func:`procflow.expr.values.comparison_problem`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from procflow.errors import ExprEvalError
from procflow.expr.ast import (
    Attr,
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
    to_source,
)
from procflow.expr.context import EvalContext
from procflow.expr.filters import FILTERS
from procflow.expr.functions import FUNCTIONS, check_int
from procflow.expr.values import (
    MAX_ITEMS,
    comparison_problem,
    duration_result,
    is_number,
    json_equal,
    kind_of,
    shift,
    to_utc,
)

__all__ = ["evaluate", "evaluate_condition"]

# Host-side arithmetic failures that mean "the result does not fit", never a bug in the caller.
_RANGE_ERRORS = (ArithmeticError, ValueError)


def _null_error(node: Expr, needed_by: str) -> ExprEvalError:
    return ExprEvalError(
        f"[{to_source(node)}] is null; {needed_by} needs a value (use | default(...) "
        f"to supply one)",
        node.offset,
    )


def _num(value: Any) -> bool:
    return is_number(value)


def _checked(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return check_int(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ExprEvalError("number out of range")
    return value


def _add(a: Any, b: Any) -> Any:
    if _num(a) and _num(b):
        return _checked(a + b)
    if isinstance(a, str) and isinstance(b, str):
        if len(a) + len(b) > MAX_ITEMS:
            raise ExprEvalError(f"text would be longer than {MAX_ITEMS} characters")
        return a + b
    ka, kb = kind_of(a), kind_of(b)
    if ka == "list" and kb == "list":
        if len(a) + len(b) > MAX_ITEMS:
            raise ExprEvalError(f"list would have more than {MAX_ITEMS} items")
        return [*a, *b]
    if ka == "timestamp" and kb == "duration":
        return shift(a, b)
    if ka == "duration" and kb == "timestamp":
        return shift(b, a)
    if ka == "duration" and kb == "duration":
        return duration_result(lambda: a + b)
    raise ExprEvalError(f"cannot add {ka} and {kb}")


def _sub(a: Any, b: Any) -> Any:
    if _num(a) and _num(b):
        return _checked(a - b)
    ka, kb = kind_of(a), kind_of(b)
    if ka == "timestamp" and kb == "duration":
        return shift(a, b, -1)
    if ka == "timestamp" and kb == "timestamp":
        return to_utc(a) - to_utc(b)
    if ka == "duration" and kb == "duration":
        return duration_result(lambda: a - b)
    raise ExprEvalError(f"cannot subtract {kb} from {ka}")


def _mul(a: Any, b: Any) -> Any:
    if _num(a) and _num(b):
        return _checked(a * b)
    if isinstance(a, timedelta) and _num(b):
        return duration_result(lambda: a * b)
    if _num(a) and isinstance(b, timedelta):
        return duration_result(lambda: b * a)
    raise ExprEvalError(f"cannot multiply {kind_of(a)} and {kind_of(b)}")


def _div(a: Any, b: Any) -> Any:
    if _num(a) and _num(b):
        if b == 0:
            raise ExprEvalError("division by zero")
        return _checked(a / b)
    if isinstance(a, timedelta) and _num(b):
        if b == 0:
            raise ExprEvalError("division by zero")
        return duration_result(lambda: a / b)
    if isinstance(a, timedelta) and isinstance(b, timedelta):
        if not b:
            raise ExprEvalError("division by a zero duration")
        return a / b
    raise ExprEvalError(f"cannot divide {kind_of(a)} by {kind_of(b)}")


def _mod(a: Any, b: Any) -> Any:
    if _num(a) and _num(b):
        if b == 0:
            raise ExprEvalError("modulo by zero")
        return _checked(a % b)
    raise ExprEvalError(f"cannot take {kind_of(a)} modulo {kind_of(b)}")


_ARITH = {"+": _add, "-": _sub, "*": _mul, "/": _div, "%": _mod}


def _comparable(op: str, a: Any, b: Any) -> str:
    """The kind of ``a``, once ``a op b`` is known to compare values of one kind."""
    ka, kb = kind_of(a), kind_of(b)
    problem = comparison_problem(op, ka, kb)
    if problem:
        raise ExprEvalError(problem)
    return ka


def _equal(op: str, a: Any, b: Any) -> bool:
    _comparable(op, a, b)
    return json_equal(a, b)


def _order(op: str, a: Any, b: Any) -> bool:
    if _comparable(op, a, b) == "timestamp":
        a, b = to_utc(a), to_utc(b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


class _Evaluator:
    def __init__(self, env: Mapping[str, Any], ctx: EvalContext) -> None:
        self.env = env
        self.ctx = ctx

    def value(self, node: Expr, needed_by: str) -> Any:
        """Evaluate a node whose value must not be null."""
        result = self.eval(node)
        if result is None:
            raise _null_error(node, needed_by)
        return result

    def eval(self, node: Expr) -> Any:
        match node:
            case Literal(value=value):
                return value
            case Name(name=name):
                if name not in self.env:
                    raise ExprEvalError(f"[{name}] is not bound", node.offset)
                return self.env[name]
            case Path():
                return self.path(node)
            case ListLit(items=items):
                return [self.eval(i) for i in items]
            case MapLit(entries=entries):
                return {k: self.eval(v) for k, v in entries}
            case Call():
                return self.call(node)
            case Pipe():
                return self.pipe(node)
            case Unary(op="not", operand=operand):
                value = self.value(operand, "[not]")
                if not isinstance(value, bool):
                    raise ExprEvalError(
                        f"[not] needs a boolean, got {kind_of(value)} from [{to_source(operand)}]",
                        operand.offset,
                    )
                return not value
            case Unary(operand=operand):
                value = self.value(operand, "[-]")
                if _num(value):
                    return _checked(-value)
                if isinstance(value, timedelta):
                    delta = value
                    return self.guard(lambda: duration_result(lambda: -delta), node.offset)
                raise ExprEvalError(
                    f"[-] needs a number or a duration, got {kind_of(value)} "
                    f"from [{to_source(operand)}]",
                    node.offset,
                )
            case Chain():
                return self.chain(node)
            case Compare():
                return self.compare(node)
            case BoolOp(op=op, operands=operands):
                for operand in operands:
                    value = self.value(operand, f"[{op}]")
                    if not isinstance(value, bool):
                        raise ExprEvalError(
                            f"[{op}] needs booleans, got {kind_of(value)} "
                            f"from [{to_source(operand)}]",
                            operand.offset,
                        )
                    if value is (op == "or"):
                        return value
                return op == "and"

    def guard(self, compute: Any, offset: int) -> Any:
        try:
            return compute()
        except ExprEvalError as exc:
            if exc.offset is None:
                raise ExprEvalError(exc.message, offset) from None
            raise
        except _RANGE_ERRORS:
            raise ExprEvalError("value out of range", offset) from None

    def path(self, node: Path) -> Any:
        current = self.eval(node.base)
        for step in node.steps:
            if current is None:
                return None
            if isinstance(step, Attr):
                current = current.get(step.name) if isinstance(current, Mapping) else None
                continue
            key = self.value(step.index, "an index")
            if isinstance(current, list | tuple):
                if isinstance(key, int) and not isinstance(key, bool):
                    index = key + len(current) if key < 0 else key
                    current = current[index] if 0 <= index < len(current) else None
                else:
                    current = None
            elif isinstance(current, Mapping):
                current = current.get(key) if isinstance(key, str) else None
            else:
                current = None
        return current

    def call(self, node: Call) -> Any:
        spec = FUNCTIONS[node.name]
        args = [self.value(a, f"[{node.name}()]") for a in node.args]
        if node.name in ("now", "secret"):
            # Host callbacks: their own exceptions are the host's to handle.
            try:
                return spec.apply(args, self.ctx)
            except ExprEvalError as exc:
                if exc.offset is None:
                    raise ExprEvalError(exc.message, node.offset) from None
                raise
        return self.guard(lambda: spec.apply(args, self.ctx), node.offset)

    def pipe(self, node: Pipe) -> Any:
        value = self.eval(node.target)
        for i, f in enumerate(node.filters):
            if f.name == "default":
                if value is None:
                    value = self.eval(f.args[0])
                continue
            if value is None:
                so_far = node.target if i == 0 else Pipe(node.offset, node.target, node.filters[:i])
                raise _null_error(so_far, f"filter [{f.name}]")
            args = [self.value(a, f"filter [{f.name}]") for a in f.args]
            spec = FILTERS[f.name]
            current = value
            value = self.guard(lambda spec=spec, v=current, a=args: spec.call(v, a), f.offset)
        return value

    def chain(self, node: Chain) -> Any:
        acc = self.value(node.first, f"[{node.rest[0][0]}]")
        for op, offset, operand in node.rest:
            right = self.value(operand, f"[{op}]")
            left = acc
            acc = self.guard(lambda o=op, a=left, b=right: _ARITH[o](a, b), offset)
        return acc

    def compare(self, node: Compare) -> bool:
        op = node.op
        if op in ("==", "!="):
            left, right = self.eval(node.left), self.eval(node.right)
            equal = self.guard(lambda: _equal(op, left, right), node.op_offset)
            return bool(equal) if op == "==" else not equal
        if op in ("in", "not in"):
            found = self.contains(node)
            return found if op == "in" else not found
        left = self.value(node.left, f"[{op}]")
        right = self.value(node.right, f"[{op}]")
        return bool(self.guard(lambda: _order(op, left, right), node.op_offset))

    def contains(self, node: Compare) -> bool:
        container = self.value(node.right, f"[{node.op}]")
        item = self.eval(node.left)
        kind = self.guard(lambda: kind_of(container), node.op_offset)
        if kind == "list":
            found = self.guard(lambda: any(json_equal(item, x) for x in container), node.op_offset)
            return bool(found)
        if item is None:
            raise _null_error(node.left, f"[{node.op}]")
        if kind in ("string", "mapping"):
            if not isinstance(item, str):
                what = "a substring" if kind == "string" else "a key"
                raise ExprEvalError(
                    f"[{node.op}] needs a string as {what} of a {kind}, got {kind_of(item)}",
                    node.op_offset,
                )
            return item in container
        raise ExprEvalError(
            f"[{node.op}] needs a list, string or mapping on the right, got {kind}",
            node.op_offset,
        )


def evaluate(expr: Expr, env: Mapping[str, Any], ctx: EvalContext) -> Any:
    """Evaluate ``expr`` with the names in ``env`` (plain data only)."""
    return _Evaluator(env, ctx).eval(expr)


def evaluate_condition(expr: Expr, env: Mapping[str, Any], ctx: EvalContext) -> bool:
    """Evaluate a condition (``if``, ``until``, ``when``); anything but a boolean is an error."""
    value = evaluate(expr, env, ctx)
    if not isinstance(value, bool):
        shown = "null" if value is None else kind_of(value)
        raise ExprEvalError(
            f"condition [{to_source(expr)}] must be a boolean, got {shown}", expr.offset
        )
    return value
