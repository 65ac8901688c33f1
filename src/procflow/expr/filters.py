"""The filter table: each filter's name, arguments, the kinds it takes and gives, what it does.

The one description of every filter: the parser checks names and argument counts against it, the
evaluator refuses a value of a kind the filter does not take (:meth:`FilterSpec.call`), validation
refuses the same where the value's kind is known before the run (:mod:`procflow.expr.kinds`), and
the reference's filter table (docs/reference/expressions.md) is checked against it by a test.

Filters never see ``null`` (the evaluator refuses it first, naming the path) except ``default``,
which the evaluator handles itself so that its argument is evaluated only when needed.
Implementations raise :class:`ExprEvalError` without an offset; the evaluator adds it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from procflow.errors import ExprEvalError
from procflow.expr.functions import as_duration, as_timestamp, check_int
from procflow.expr.values import is_number, kind_of, render_text, shift, to_json_text

__all__ = ["FILTERS", "FilterSpec", "Kinds"]

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_ROUND_DIGITS = 15


@dataclass(frozen=True, slots=True)
class Kinds:
    """The kinds of value a filter takes (:func:`procflow.expr.kind_of` names), and how messages
    and the docs say them."""

    names: frozenset[str]
    text: str


TEXT = Kinds(frozenset({"string"}), "a string")
NUMBER = Kinds(frozenset({"integer", "number"}), "a number")
NUMBER_OR_TEXT = Kinds(frozenset({"integer", "number", "string"}), "a number or a string")
SIZED = Kinds(frozenset({"string", "list", "mapping"}), "a string, list or mapping")
LIST = Kinds(frozenset({"list"}), "a list")
MAPPING = Kinds(frozenset({"mapping"}), "a mapping")
# A string is read as ISO-8601 text only here (the language never converts one silently).
INSTANT = Kinds(frozenset({"timestamp", "string"}), "a timestamp or an ISO-8601 string")


@dataclass(frozen=True, slots=True)
class FilterSpec:
    """One filter. ``takes`` None: any value; ``gives`` None: the result's kind depends on the
    value; ``params`` names the arguments (the last one optional when ``optional``)."""

    name: str
    apply: Callable[[Any, list[Any]], Any]
    takes: Kinds | None
    gives: str | None
    summary: str
    params: tuple[str, ...] = ()
    optional: bool = False

    @property
    def min_args(self) -> int:
        return len(self.params) - (1 if self.optional else 0)

    @property
    def max_args(self) -> int:
        return len(self.params)

    def kind_problem(self, kind: str) -> str | None:
        """Why this filter refuses a value of ``kind``; None when it takes it."""
        if self.takes is None or kind in self.takes.names:
            return None
        return f"filter [{self.name}] needs {self.takes.text}, got {kind}"

    def call(self, value: Any, args: list[Any]) -> Any:
        problem = self.kind_problem(kind_of(value))
        if problem:
            raise ExprEvalError(problem)
        return self.apply(value, args)


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
    return len(value)


def _text(op: Callable[[str], str]) -> Callable[[Any, list[Any]], Any]:
    return lambda value, args: op(value)


def _string(value: Any, args: list[Any]) -> Any:
    return render_text(value)


def _int(value: Any, args: list[Any]) -> Any:
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExprEvalError(f"filter [int]: [{value}] has no integer value")
        return check_int(int(value))
    text = value.strip()
    if len(text) > 25 or not _INT_TEXT.fullmatch(text):
        raise ExprEvalError(f"filter [int]: [{value}] is not an integer")
    return check_int(int(text))


def _float(value: Any, args: list[Any]) -> Any:
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise ExprEvalError("filter [float]: integer too large") from None
    if isinstance(value, float):
        return value
    text = value.strip()
    if len(text) > 400 or not _FLOAT_TEXT.fullmatch(text):
        raise ExprEvalError(f"filter [float]: [{value}] is not a number")
    number = float(text)
    if not math.isfinite(number):
        raise ExprEvalError(f"filter [float]: [{value}] is too large")
    return number


def _json(value: Any, args: list[Any]) -> Any:
    return to_json_text(value)


def _first(value: Any, args: list[Any]) -> Any:
    return value[0] if value else None


def _last(value: Any, args: list[Any]) -> Any:
    return value[-1] if value else None


def _join(value: Any, args: list[Any]) -> Any:
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
    return list(value.keys())


def _values(value: Any, args: list[Any]) -> Any:
    return list(value.values())


def _round(value: Any, args: list[Any]) -> Any:
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


_SHIFT = (
    "the timestamp moved {} by the duration `d` (a duration or duration text); a date string "
    "means the start of that day"
)
_ROUND = (
    "rounded half away from zero on the decimal as written (`2.675 | round(2)` is `2.68`); "
    "without `n` an integer; `n` from 0 to 15"
)

FILTERS: Mapping[str, FilterSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            FilterSpec(
                "default",
                _default,
                None,
                None,
                "`v` when the value is null, else the value (`v` is evaluated only when needed)",
                ("v",),
            ),
            FilterSpec("length", _length, SIZED, "integer", "its length"),
            FilterSpec("upper", _text(str.upper), TEXT, "string", "the string upper-cased"),
            FilterSpec("lower", _text(str.lower), TEXT, "string", "the string lower-cased"),
            FilterSpec("trim", _text(str.strip), TEXT, "string", "the string without outer spaces"),
            FilterSpec("string", _string, None, "string", "its text form (see Text rendering)"),
            FilterSpec(
                "int",
                _int,
                NUMBER_OR_TEXT,
                "integer",
                "an integer; floats are truncated (`3.9 | int` is `3`); booleans refused",
            ),
            FilterSpec("float", _float, NUMBER_OR_TEXT, "number", "a number"),
            FilterSpec("json", _json, None, "string", "compact JSON text"),
            FilterSpec("first", _first, LIST, None, "the first item; `null` on an empty list"),
            FilterSpec("last", _last, LIST, None, "the last item; `null` on an empty list"),
            FilterSpec(
                "join",
                _join,
                LIST,
                "string",
                "its items as text joined with `sep`; a null item is an error",
                ("sep",),
            ),
            FilterSpec("keys", _keys, MAPPING, "list", "a list of its keys"),
            FilterSpec("values", _values, MAPPING, "list", "a list of its values"),
            FilterSpec("round", _round, NUMBER, "number", _ROUND, ("n",), optional=True),
            FilterSpec(
                "plus", _shift("plus", 1), INSTANT, "timestamp", _SHIFT.format("forward"), ("d",)
            ),
            FilterSpec(
                "minus", _shift("minus", -1), INSTANT, "timestamp", _SHIFT.format("back"), ("d",)
            ),
            FilterSpec("date", _date, INSTANT, "string", '`"YYYY-MM-DD"` (UTC)'),
        )
    }
)
