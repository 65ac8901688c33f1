"""The filter and function tables.

Filters never see ``null`` (the evaluator refuses it first, naming the path) except ``default``,
which the evaluator handles itself so that its argument is evaluated only when needed.
Implementations raise :class:`ExprEvalError` without an offset; the evaluator adds it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from procflow.errors import DurationError, ExprEvalError
from procflow.expr.context import EvalContext
from procflow.expr.duration import parse_duration
from procflow.expr.values import (
    INT_MAX,
    is_number,
    kind_of,
    parse_timestamp,
    render_text,
    shift,
    to_json_text,
    to_utc,
)

__all__ = ["FILTERS", "FUNCTIONS", "FilterSpec", "FunctionSpec", "arity_text"]

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_ROUND_DIGITS = 15


@dataclass(frozen=True, slots=True)
class FilterSpec:
    name: str
    min_args: int
    max_args: int
    apply: Callable[[Any, list[Any]], Any]
    summary: str


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    name: str
    min_args: int
    max_args: int
    apply: Callable[[list[Any], EvalContext], Any]
    summary: str


def arity_text(min_args: int, max_args: int) -> str:
    if max_args == 0:
        return "no arguments"
    if min_args == max_args:
        return f"{min_args} argument" + ("s" if min_args != 1 else "")
    return f"{min_args} to {max_args} arguments"


def _fail(name: str, value: Any, wants: str) -> ExprEvalError:
    return ExprEvalError(f"filter [{name}] needs {wants}, got {kind_of(value)}")


def check_int(value: int) -> int:
    if not -INT_MAX - 1 <= value <= INT_MAX:
        raise ExprEvalError("integer result out of range (more than 64 bits)")
    return value


def as_timestamp(value: Any, where: str) -> datetime:
    """A timestamp, or an ISO-8601 string read as one (only where the language says so)."""
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, str):
        return parse_timestamp(value)
    raise ExprEvalError(f"{where} needs a timestamp or an ISO-8601 string, got {kind_of(value)}")


def as_duration(value: Any, where: str) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ExprEvalError(f"{where}: {exc}") from None
    raise ExprEvalError(f"{where} needs a duration, got {kind_of(value)}")


# --- filters ---------------------------------------------------------------------------------


def _shift(name: str, sign: int) -> Callable[[Any, list[Any]], Any]:
    def apply(value: Any, args: list[Any]) -> Any:
        start = as_timestamp(value, f"filter [{name}]")
        delta = as_duration(args[0], f"filter [{name}]")
        try:
            return shift(start, delta, sign)
        except ExprEvalError as exc:
            raise ExprEvalError(f"filter [{name}]: {exc.message}") from None

    return apply


def _default(value: Any, args: list[Any]) -> Any:
    return args[0] if value is None else value


def _length(value: Any, args: list[Any]) -> Any:
    if isinstance(value, str) or kind_of(value) in ("list", "mapping"):
        return len(value)
    raise _fail("length", value, "a string, list or mapping")


def _text_filter(name: str, op: Callable[[str], str]) -> Callable[[Any, list[Any]], Any]:
    def apply(value: Any, args: list[Any]) -> Any:
        if not isinstance(value, str):
            raise _fail(name, value, "a string")
        return op(value)

    return apply


def _string(value: Any, args: list[Any]) -> Any:
    return render_text(value)


def _int(value: Any, args: list[Any]) -> Any:
    if isinstance(value, bool):
        raise _fail("int", value, "a number or a string")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExprEvalError(f"filter [int]: [{value}] has no integer value")
        return check_int(int(value))
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 25 or not _INT_TEXT.fullmatch(text):
            raise ExprEvalError(f"filter [int]: [{value}] is not an integer")
        return check_int(int(text))
    raise _fail("int", value, "a number or a string")


def _float(value: Any, args: list[Any]) -> Any:
    if isinstance(value, bool):
        raise _fail("float", value, "a number or a string")
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise ExprEvalError("filter [float]: integer too large") from None
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 400 or not _FLOAT_TEXT.fullmatch(text):
            raise ExprEvalError(f"filter [float]: [{value}] is not a number")
        number = float(text)
        if not math.isfinite(number):
            raise ExprEvalError(f"filter [float]: [{value}] is too large")
        return number
    raise _fail("float", value, "a number or a string")


def _json(value: Any, args: list[Any]) -> Any:
    return to_json_text(value)


def _first(value: Any, args: list[Any]) -> Any:
    if kind_of(value) != "list":
        raise _fail("first", value, "a list")
    return value[0] if value else None


def _last(value: Any, args: list[Any]) -> Any:
    if kind_of(value) != "list":
        raise _fail("last", value, "a list")
    return value[-1] if value else None


def _join(value: Any, args: list[Any]) -> Any:
    if kind_of(value) != "list":
        raise _fail("join", value, "a list")
    sep = args[0]
    if not isinstance(sep, str):
        raise ExprEvalError(f"filter [join]: the separator must be a string, got {kind_of(sep)}")
    parts = []
    for i, item in enumerate(value):
        if item is None:
            raise ExprEvalError(f"filter [join]: item [{i}] is null")
        parts.append(render_text(item))
    return sep.join(parts)


def _keys(value: Any, args: list[Any]) -> Any:
    if kind_of(value) != "mapping":
        raise _fail("keys", value, "a mapping")
    return list(value.keys())


def _values(value: Any, args: list[Any]) -> Any:
    if kind_of(value) != "mapping":
        raise _fail("values", value, "a mapping")
    return list(value.values())


def _round(value: Any, args: list[Any]) -> Any:
    if not is_number(value):
        raise _fail("round", value, "a number")
    digits = args[0] if args else None
    shown = render_text(digits) if is_number(digits) else kind_of(digits)
    if digits is not None and (
        not isinstance(digits, int)
        or isinstance(digits, bool)
        or not 0 <= digits <= _MAX_ROUND_DIGITS
    ):
        raise ExprEvalError(
            f"filter [round]: the number of decimals must be an integer from 0 to "
            f"{_MAX_ROUND_DIGITS}, got {shown}"
        )
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        raise ExprEvalError(f"filter [round]: [{value}] is not finite")
    if abs(value) < 2**52:
        # Decimal(repr) rounds the number as written (2.675 -> 2.68), half away from zero, which
        # is what people expect from money; float rounding would give 2.67 or banker's rounding.
        try:
            quantum = Decimal(1).scaleb(-(digits or 0))
            value = float(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))
        except InvalidOperation:
            pass
    return check_int(int(value)) if digits is None else value


def _date(value: Any, args: list[Any]) -> Any:
    dt = as_timestamp(value, "filter [date]")
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}"


FILTERS: Mapping[str, FilterSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            FilterSpec("minus", 1, 1, _shift("minus", -1), "timestamp minus a duration"),
            FilterSpec("plus", 1, 1, _shift("plus", 1), "timestamp plus a duration"),
            FilterSpec("default", 1, 1, _default, "the argument when the value is null"),
            FilterSpec("length", 0, 0, _length, "length of a string, list or mapping"),
            FilterSpec("upper", 0, 0, _text_filter("upper", str.upper), "upper-case text"),
            FilterSpec("lower", 0, 0, _text_filter("lower", str.lower), "lower-case text"),
            FilterSpec("trim", 0, 0, _text_filter("trim", str.strip), "text without outer spaces"),
            FilterSpec("string", 0, 0, _string, "the value's text form"),
            FilterSpec("int", 0, 0, _int, "integer from a number or text"),
            FilterSpec("float", 0, 0, _float, "number from an integer or text"),
            FilterSpec("json", 0, 0, _json, "compact JSON text"),
            FilterSpec("first", 0, 0, _first, "first item of a list (null when empty)"),
            FilterSpec("last", 0, 0, _last, "last item of a list (null when empty)"),
            FilterSpec("join", 1, 1, _join, "items joined with a separator"),
            FilterSpec("keys", 0, 0, _keys, "keys of a mapping"),
            FilterSpec("values", 0, 0, _values, "values of a mapping"),
            FilterSpec("round", 0, 1, _round, "number rounded half away from zero"),
            FilterSpec("date", 0, 0, _date, "YYYY-MM-DD of a timestamp"),
        )
    }
)


# --- functions -------------------------------------------------------------------------------


def _now(args: list[Any], ctx: EvalContext) -> Any:
    value = ctx.now()
    if not isinstance(value, datetime):
        raise ExprEvalError("now() is not available here (the host clock gave no timestamp)")
    return to_utc(value)


def _duration(args: list[Any], ctx: EvalContext) -> Any:
    return as_duration(args[0], "duration()")


def _timestamp(args: list[Any], ctx: EvalContext) -> Any:
    return as_timestamp(args[0], "timestamp()")


def _secret(args: list[Any], ctx: EvalContext) -> Any:
    name = args[0]
    if not isinstance(name, str) or not name:
        raise ExprEvalError(f"secret() needs a non-empty name, got {kind_of(name)}")
    if ctx.secret is None:
        raise ExprEvalError("secret() is not available here")
    value = ctx.secret(name)
    if not isinstance(value, str):
        raise ExprEvalError(f"secret [{name}] is not set")
    return value


FUNCTIONS: Mapping[str, FunctionSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            FunctionSpec("now", 0, 0, _now, "the current time (UTC)"),
            FunctionSpec("duration", 1, 1, _duration, "a duration from text (30s, PT30S)"),
            FunctionSpec("timestamp", 1, 1, _timestamp, "a timestamp from ISO-8601 text"),
            FunctionSpec("secret", 1, 1, _secret, "a secret's value, read when the step runs"),
        )
    }
)
