"""The function table, and the readers the filters and functions share.

Implementations raise :class:`ExprEvalError` without an offset; the evaluator adds it. The
filters are in :mod:`procflow.expr.filters`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from procflow.errors import DurationError, ExprEvalError
from procflow.expr.context import EvalContext
from procflow.expr.duration import parse_duration
from procflow.expr.values import INT_MAX, kind_of, parse_timestamp, to_utc

__all__ = ["FUNCTIONS", "FunctionSpec", "arity_text", "as_duration", "as_timestamp", "check_int"]


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    name: str
    min_args: int
    max_args: int
    apply: Callable[[list[Any], EvalContext], Any]
    summary: str
    gives: str | None = None  # the result's kind (a kind_of name); None: it depends


def arity_text(min_args: int, max_args: int) -> str:
    if max_args == 0:
        return "no arguments"
    if min_args == max_args:
        return f"{min_args} argument" + ("s" if min_args != 1 else "")
    return f"{min_args} to {max_args} arguments"


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
            FunctionSpec("now", 0, 0, _now, "the current time (UTC)", "timestamp"),
            FunctionSpec(
                "duration", 1, 1, _duration, "a duration from text (30s, PT30S)", "duration"
            ),
            FunctionSpec(
                "timestamp", 1, 1, _timestamp, "a timestamp from ISO-8601 text", "timestamp"
            ),
            FunctionSpec("secret", 1, 1, _secret, "a secret's value, read when the step runs"),
        )
    }
)
