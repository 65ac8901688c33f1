"""Durations and timestamps at the edge of what procflow represents: a written duration is at
most 100 years, a timestamp falls in the years 0001 to 9999, and arithmetic that leaves either
range is an expression error (:class:`ExprEvalError`) with a clear message, never an
``OverflowError``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from procflow.errors import DurationError, ExprEvalError, ExprSyntaxError
from procflow.expr import EvalContext, parse, parse_duration, parse_timestamp
from procflow.expr.constants import constant_problems
from procflow.expr.duration import MAX_DURATION
from procflow.expr.evaluator import evaluate
from procflow.expr.hints import MAX_CANDIDATES, Match, close_match, hint_budget
from procflow.expr.values import years_problem

NOW = datetime(2027, 1, 1, tzinfo=UTC)
CTX = EvalContext(now=lambda: NOW)
TOO_LARGE = "is too large: procflow accepts at most 100 years (36525d)"
YEARS = "the years 0001 to 9999"


def run(text: str, **env: Any) -> Any:
    return evaluate(parse(text), env, CTX)


# --- written durations -----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["36525d", "P36525D", "5217w6d", "-36525d", "PT876600H"])
def test_up_to_a_hundred_years_is_a_duration(text: str) -> None:
    assert abs(parse_duration(text)) <= MAX_DURATION


@pytest.mark.parametrize(
    "text", ["36526d", "P36526D", "3000000d", "-3000000d", "PT876601H", "P36525DT0.001S", "5218w"]
)
def test_longer_is_refused(text: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == f"duration [{text.lstrip('-')}] {TOO_LARGE}"


def test_a_duration_literal_in_an_expression_is_refused_when_parsed() -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse("now() + 3000000d")
    assert info.value.message == f"invalid number or duration: duration [3000000d] {TOO_LARGE}"


# --- duration() and timestamp() at run time -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("duration('3000000d')", f"duration(): duration [3000000d] {TOO_LARGE}"),
        ("now() + duration('3000000d')", f"duration(): duration [3000000d] {TOO_LARGE}"),
        ("duration(d)", f"duration(): duration [P40000D] {TOO_LARGE}"),
        (
            "timestamp('10000-01-01T00:00:00Z')",
            f"timestamp [10000-01-01T00:00:00Z] is outside {YEARS}",
        ),
        ("timestamp('0000-12-31')", f"timestamp [0000-12-31] is outside {YEARS}"),
        (
            "timestamp('9999-12-31T23:00:00-05:00')",
            f"timestamp [9999-12-31T23:00:00-05:00] falls outside {YEARS} in UTC",
        ),
        (
            "timestamp('0001-01-01T00:00:00+01:00')",
            f"timestamp [0001-01-01T00:00:00+01:00] falls outside {YEARS} in UTC",
        ),
    ],
)
def test_functions_raise_expression_errors(text: str, message: str) -> None:
    with pytest.raises(ExprEvalError) as info:
        run(text, d="P40000D")
    assert info.value.message == message


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        (
            "now() + 36500d * 100",
            f"timestamp out of range: 2027-01-01T00:00:00Z + 3650000d falls outside {YEARS}",
            6,
        ),
        (
            "now() - 36500d * 1000",
            f"timestamp out of range: 2027-01-01T00:00:00Z - 36500000d falls outside {YEARS}",
            6,
        ),
        (
            "36500d * 100 + last",
            f"timestamp out of range: 9999-12-31T00:00:00Z + 3650000d falls outside {YEARS}",
            13,
        ),
        ("1d * 1e300", "duration out of range: beyond 999,999,999 days either way", 3),
        ("36500d * 27000 + 36500d * 27000", "duration out of range: beyond 999,999,999 days", 15),
        ("36500d * 27000 - -(36500d * 27000)", "duration out of range", 15),
        ("1d / 0.0000000001", "duration out of range", 3),
        ("now() | plus(36500d * 100)", "filter [plus]: timestamp out of range: ", 8),
        (
            "last | plus('1d')",
            "filter [plus]: timestamp out of range: 9999-12-31T00:00:00Z + 1d",
            7,
        ),
    ],
)
def test_arithmetic_out_of_range_is_an_expression_error(
    text: str, message: str, offset: int
) -> None:
    with pytest.raises(ExprEvalError) as info:
        run(text, last=datetime(9999, 12, 31, tzinfo=UTC))
    assert info.value.message.startswith(message)
    assert info.value.offset == offset


def test_arithmetic_in_range_still_works() -> None:
    assert run("now() + 36525d") == NOW + timedelta(days=36525)
    assert run("now() - timestamp('0001-01-01')") == NOW - datetime(1, 1, 1, tzinfo=UTC)
    assert run("36500d * 27000") == timedelta(days=36500 * 27000)
    assert parse_timestamp("9999-12-31T23:59:59Z") == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_years_problem() -> None:
    assert years_problem("2027-01-01") is None
    assert years_problem("not a date") is None
    assert years_problem("2027-01-01T00:00:00") is None  # no zone: not this function's problem
    assert years_problem("+12345-01-01") == f"timestamp [+12345-01-01] is outside {YEARS}"


# --- written-out arguments, checked when a definition is validated ------------------------------


def test_constant_problems() -> None:
    text = (
        "duration('3000000d') > 1d and timestamp('x') < now() and (now() | minus('P1M')) > now() "
        "and duration(text) > 1d and duration('1h') > 0s"
    )
    assert constant_problems(parse(text)) == [
        (0, f"duration(): duration [3000000d] {TOO_LARGE}"),
        (
            text.index("timestamp("),
            "[x] is not an ISO-8601 timestamp (e.g. 2027-01-10T09:00:00Z or 2027-01-10)",
        ),
        (
            text.index("minus("),
            "filter [minus]: [P1M]: months and years have no fixed length; use days, e.g. P30D",
        ),
    ]


# --- did-you-mean hints, bounded ---------------------------------------------------------------


def test_close_match() -> None:
    assert close_match("Total", ["total", "count"]) == Match("total", True)
    assert close_match("totl", ["total", "count"]) == Match("total", False)
    assert close_match("zzz", ["total", "count"]) is None
    assert close_match("x", []) is None


def test_a_hint_looks_at_the_first_candidates_only() -> None:
    names = [f"f{i}" for i in range(MAX_CANDIDATES)] + ["zebra"]
    assert close_match("zebar", names) is None
    assert close_match("zebar", ["zebra", *names]) == Match("zebra", False)


def test_a_budget_is_shared_by_the_hints_made_inside_it() -> None:
    with hint_budget(5):
        assert close_match("a1x", ["a1", "a2", "a3"]) == Match("a1", False)
        assert close_match("a3x", ["a1", "a2", "a3"]) is None  # 2 left: a3 is not looked at
        assert close_match("a1x", ["a1"]) is None  # none left
    assert close_match("a2x", ["a1", "a2", "a3"]) == Match("a2", False)  # outside: no budget
