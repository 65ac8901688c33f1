"""Property tests: no input makes the expression package raise anything but its own errors."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow.errors import DurationError, ExprError, ExprEvalError, ExprSyntaxError
from procflow.expr import (
    ANY,
    FILTERS,
    FUNCTIONS,
    EvalContext,
    StaticScope,
    check,
    compile_value,
    format_duration,
    kind_of,
    parse,
    parse_duration,
    parse_placeholders,
    parse_template,
    render,
    render_text,
    root_paths,
    to_source,
)
from procflow.expr.duration import MAX_DURATION
from procflow.expr.evaluator import evaluate

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = datetime(2025, 1, 1, tzinfo=UTC)
CTX = EvalContext(now=lambda: NOW, secret=lambda name: "v")
NAMES = ["a", "b", "deal", "items", "x"]

TOKENS = [
    *NAMES,
    *(f"| {f}" for f in FILTERS),
    *(f"| {f}(" for f in FILTERS),
    *(f"{f}(" for f in FUNCTIONS),
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    ".",
    "'k'",
    '"s"',
    "'2025-01-01'",
    "'30s'",
    "0",
    "1",
    "-1",
    "2.5",
    "1e3",
    "1h30m",
    "500ms",
    "1d",
    "9223372036854775807",
    "true",
    "false",
    "null",
    "and",
    "or",
    "not",
    "in",
    "not in",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "'",
    "\\",
    "{{",
    "}}",
    "=",
    "!",
    "#",
    "é",
    " ",
]


def _token_text() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join)


def _expr_text() -> st.SearchStrategy[str]:
    """Mostly well-formed expressions, so that evaluation gets exercised deeply."""
    leaf = st.one_of(
        st.sampled_from(NAMES),
        st.sampled_from(
            [
                "0",
                "1",
                "-2",
                "2.5",
                "'k'",
                "'2025-01-01'",
                "'30s'",
                "1h",
                "null",
                "true",
                "false",
                "[]",
                "{}",
                "now()",
                "9223372036854775807",
            ]
        ),
        st.builds(
            lambda n, k: f"{n}.{k}", st.sampled_from(NAMES), st.sampled_from(["k", "a", "0"])
        ),
        st.builds(lambda n, i: f"{n}[{i}]", st.sampled_from(NAMES), st.integers(-3, 3)),
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        filters = st.sampled_from(sorted(FILTERS))
        return st.one_of(
            st.builds(
                lambda a, op, b: f"({a} {op} {b})",
                inner,
                st.sampled_from(
                    ["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
                ),
                inner,
            ),
            st.builds(lambda a: f"not {a}", inner),
            st.builds(lambda a: f"-{a}", inner),
            st.builds(
                lambda a, f: f"{a} | {f}", inner, filters.filter(lambda f: FILTERS[f].min_args == 0)
            ),
            st.builds(
                lambda a, f, b: f"{a} | {f}({b})",
                inner,
                filters.filter(lambda f: FILTERS[f].max_args >= 1),
                inner,
            ),
            st.builds(lambda a, b: f"[{a}, {b}]", inner, inner),
            st.builds(lambda a: f"{{'k': {a}}}", inner),
            st.builds(lambda a: f"duration({a})", inner),
            st.builds(lambda a: f"timestamp({a})", inner),
            st.builds(lambda a, b: f"{a}[{b}]", inner, inner),
        )

    return st.recursive(leaf, extend, max_leaves=12)


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.sampled_from(["k", "a", "0", "30s", "PT1M", "2025-01-01", "2025-01-01T00:00:00Z"]),
        st.datetimes(timezones=st.just(UTC)),
        st.timedeltas(),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.sampled_from(["k", "a", "0", "x"]), inner, max_size=4),
        ),
        max_leaves=10,
    )


ENVS = st.fixed_dictionaries({n: _json_values() for n in NAMES})


@FAST
@given(st.text(max_size=200))
def test_parse_arbitrary_text_raises_only_syntax_errors(text: str) -> None:
    with contextlib.suppress(ExprSyntaxError):
        parse(text)
    with contextlib.suppress(ExprSyntaxError):
        parse_template(text)
    with contextlib.suppress(ExprSyntaxError):
        parse_placeholders(text)


@FAST
@given(_token_text())
def test_parse_token_soup_raises_only_syntax_errors(text: str) -> None:
    for candidate in (text, "{{ " + text + " }}", "x {{ " + text):
        try:
            tree = parse(candidate) if candidate is text else parse_template(candidate)
        except ExprSyntaxError:
            continue
        if candidate is text:
            assert not isinstance(tree, type(None))
            again = parse(to_source(tree))  # type: ignore[arg-type]
            assert to_source(again) == to_source(tree)  # type: ignore[arg-type]


@FAST
@given(_expr_text(), ENVS)
def test_evaluate_raises_only_expr_errors(text: str, env: dict[str, Any]) -> None:
    try:
        expr = parse(text)
    except ExprSyntaxError:
        return
    assert to_source(parse(to_source(expr))) == to_source(expr)
    root_paths(expr)
    check(expr, StaticScope(visible={"a": ANY}))
    try:
        value = evaluate(expr, env, CTX)
    except ExprError:
        return
    with contextlib.suppress(ExprError):
        render_text(value)


def _family(value: Any) -> str:
    kind = kind_of(value)
    return "number" if kind == "integer" else kind


@FAST
@given(_json_values(), _json_values(), st.sampled_from(["==", "!="]))
def test_equality_compares_one_kind_and_refuses_two(a: Any, b: Any, op: str) -> None:
    """``==``/``!=`` give a boolean for values of one kind (or null), an error naming both kinds
    otherwise; integers and numbers are one kind."""
    try:
        result = evaluate(parse(f"a {op} b"), {"a": a, "b": b}, CTX)
    except ExprEvalError as exc:
        assert None not in (a, b) and _family(a) != _family(b)
        assert f"cannot compare {kind_of(a)} with {kind_of(b)}" in exc.message
        return
    assert isinstance(result, bool)
    assert None in (a, b) or _family(a) == _family(b)


@FAST
@given(_token_text(), ENVS)
def test_evaluate_token_soup_raises_only_expr_errors(text: str, env: dict[str, Any]) -> None:
    try:
        expr = parse(text)
    except ExprSyntaxError:
        return
    with contextlib.suppress(ExprError):
        evaluate(expr, env, CTX)


@FAST
@given(st.text(max_size=60), ENVS)
def test_templates_render_or_raise_expr_errors(text: str, env: dict[str, Any]) -> None:
    try:
        template = parse_template("{{ " + text + " }} and {{ a }}")
        compile_value({"k": [text]})
    except ExprSyntaxError:
        return
    with contextlib.suppress(ExprError):
        render(template, env, CTX)


@FAST
@given(st.text(max_size=40))
def test_parse_duration_raises_only_duration_errors(text: str) -> None:
    for iso_only in (False, True):
        with contextlib.suppress(DurationError):
            parse_duration(text, iso_only=iso_only)


@FAST
@given(st.timedeltas(min_value=-MAX_DURATION, max_value=MAX_DURATION))
def test_format_duration_round_trips(td: timedelta) -> None:
    assert parse_duration(format_duration(td)) == td
    assert parse_duration(format_duration(td), iso_only=True) == td


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["(", "[", "not ", "- ", "-", "{'k': ", "x | default(", "duration("]))
def test_deep_nesting_is_a_clean_syntax_error(opener: str) -> None:
    closer = {"(": ")", "[": "]", "{'k': ": "}", "x | default(": ")", "duration(": ")"}.get(
        opener, ""
    )
    for depth in (200, 2000):
        text = opener * depth + "1" + closer * depth
        try:
            parse(text)
        except ExprSyntaxError:
            continue
        raise AssertionError(f"{depth}-deep {opener!r} was accepted")


def test_ten_thousand_characters() -> None:
    for text in ("1 + " * 2500, "(" * 10_000, "a" * 10_000, "'" + "x" * 9_999):
        try:
            parse(text)
        except ExprSyntaxError as exc:
            assert exc.offset is not None
        else:
            raise AssertionError("a 10,000-character expression was accepted")
