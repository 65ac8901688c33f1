from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from procflow.errors import ExprEvalError, ExprSyntaxError
from procflow.expr import (
    EvalContext,
    Template,
    compile_value,
    parse_template,
    render,
    render_text,
    render_value,
    value_exprs,
)
from procflow.expr.ast import Name, Path, to_source

CTX = EvalContext(now=lambda: datetime(2025, 1, 1, tzinfo=UTC))
ENV: dict[str, Any] = {
    "deal": {"name": "Acme", "amount": 12000, "owner": None},
    "items": [1, 2],
    "n": None,
    "t": datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "literal"),
        ("plain text", "literal"),
        ("a } b }} c {", "literal"),
        ("{{ x }}", "single"),
        ("{{x}}", "single"),
        ("{{\n  x + 1\n}}", "single"),
        (" {{ x }}", "text"),
        ("{{ x }} ", "text"),
        ("{{ x }}{{ y }}", "text"),
        ("Approve {{ deal.name }}?", "text"),
        ("{{ {'a': {'b': 1}} }}", "single"),
        ("{{ '}}' }}", "single"),
        ("{{ x }}}", "text"),
    ],
)
def test_template_kinds(text: str, kind: str) -> None:
    template = parse_template(text)
    assert template.kind == kind
    assert template.text == text
    assert (template.single is not None) == (kind == "single")


def test_template_offsets_are_absolute() -> None:
    text = "Hi {{ deal.name }}, {{  items | length }}!"
    template = parse_template(text)
    exprs = template.exprs()
    assert [offset for offset, _ in exprs] == [6, 24]
    assert text[6:15] == "deal.name"
    first = exprs[0][1]
    assert isinstance(first, Path)
    assert first.offset == 6
    assert isinstance(first.base, Name)
    assert to_source(exprs[1][1]) == "items | length"
    assert template.parts[0] == "Hi "
    assert template.parts[2] == ", "
    assert template.parts[4] == "!"


def test_single_offset() -> None:
    template = parse_template("{{   x }}")
    assert template.exprs()[0][0] == 5
    assert parse_template("literal").exprs() == []


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("Hi {{ name", "unterminated [{{]: missing [}}]", 3),
        ("{{ x }", "unterminated [{{]", 0),
        ("a {{ x } b", "unterminated [{{]", 2),
        ("a {{ x } b }}", "expected [}}], found [}]", 7),
        ("{{ }}", "empty expression", 3),
        ("x {{}}", "empty expression", 4),
        ("{{ x y }}", "expected [}}], found [y]", 5),
        ("ok {{ a + }}", "expected a value, found [}]", 10),
        ("{{ x | lenght }}", "unknown filter [lenght]; did you mean [length]?", 7),
        ("It's {{ it's }}", "unterminated string", 10),
        ("{{ (x }}", "expected [)] to close [(] at 3", 6),
    ],
)
def test_template_syntax_errors(text: str, message: str, offset: int) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_template(text)
    assert message in info.value.message
    assert info.value.offset == offset


def test_template_apostrophes_outside_expressions_are_fine() -> None:
    template = parse_template("It's {{ deal.name }}'s deal")
    assert render(template, ENV, CTX) == "It's Acme's deal"


def test_template_expression_length_limit() -> None:
    with pytest.raises(ExprSyntaxError, match="longer than 4000"):
        parse_template("{{ " + "1 + " * 1100 + "1 }}")
    long_text = "x" * 10_000 + "{{ 1 }}"
    assert render(parse_template(long_text), {}, CTX) == "x" * 10_000 + "1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("{{ deal.amount }}", 12000),
        ("{{ deal.owner }}", None),
        ("{{ items }}", [1, 2]),
        ("{{ deal.amount > 10000 }}", True),
        ("Approve {{ deal.name }}?", "Approve Acme?"),
        ("{{ deal.amount }}!", "12000!"),
        ("{{ items }} / {{ t }}", "[1,2] / 2025-01-02T03:04:05Z"),
        ("{{ deal.owner | default('nobody') }} owns it", "nobody owns it"),
        ("{{ n | default('') }}|", "|"),
        ("{{ '{{' }}", "{{"),
    ],
)
def test_render(text: str, expected: Any) -> None:
    assert render(parse_template(text), ENV, CTX) == expected


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("Owner: {{ deal.owner }}", "[deal.owner] is null and cannot be rendered into text", 10),
        ("{{ n }} and more", "[n] is null", 3),
        ("x {{ 1 / 0 }}", "division by zero", 7),
        ("{{ 1 }}{{ deal.nope.x + 1 }}", "[deal.nope.x] is null", 10),
        ("v={{ bad }}", "not finite", 5),
    ],
)
def test_render_errors(text: str, message: str, offset: int) -> None:
    with pytest.raises(ExprEvalError) as info:
        render(parse_template(text), {**ENV, "bad": float("inf")}, CTX)
    assert message in info.value.message
    assert info.value.offset == offset


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("text", "text"),
        ("", ""),
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (-3, "-3"),
        (3.5, "3.5"),
        (2.0, "2.0"),
        (1e16, "1e+16"),
        (0.1, "0.1"),
        (datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), "2025-01-02T03:04:05Z"),
        (datetime(2025, 1, 2, 3, 4, 5, 120000, tzinfo=UTC), "2025-01-02T03:04:05.120Z"),
        (datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), "2025-01-02T03:04:05.123456Z"),
        (
            datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
            "2025-01-02T01:04:05Z",
        ),
        (datetime(2025, 1, 2), "2025-01-02T00:00:00Z"),
        (timedelta(seconds=30), "PT30S"),
        (timedelta(days=1), "P1D"),
        (timedelta(hours=1, minutes=30), "PT1H30M"),
        (timedelta(milliseconds=500), "PT0.5S"),
        ([1, "a", None, True, 2.5], '[1,"a",null,true,2.5]'),
        ({"a": [1, {"b": None}], "é": "ü"}, '{"a":[1,{"b":null}],"é":"ü"}'),
        (
            [datetime(2025, 1, 1, tzinfo=UTC), timedelta(minutes=5)],
            '["2025-01-01T00:00:00Z","PT5M"]',
        ),
        ((1, 2), "[1,2]"),
        ([], "[]"),
        ({}, "{}"),
    ],
)
def test_render_text(value: Any, text: str) -> None:
    assert render_text(value) == text


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "null cannot be rendered as text"),
        (float("nan"), "not finite"),
        (float("inf"), "not finite"),
        ([float("inf")], "cannot be written as JSON"),
        (object(), "unsupported value of type [object]"),
        ([object()], "unsupported value of type [object]"),
        pytest.param(10**5000, "too long to render", id="huge-int"),
    ],
)
def test_render_text_errors(value: Any, message: str) -> None:
    with pytest.raises(ExprEvalError) as info:
        render_text(value)
    assert message in info.value.message


def test_compile_and_render_value() -> None:
    obj = {
        "channel": "#sales-ops",
        "text": "Approve {{ deal.name }}?",
        "amount": "{{ deal.amount }}",
        "flags": [True, None, 3, 2.5, "{{ items | length }}"],
        "nested": {"who": "{{ deal.owner }}", "deeper": [{"x": "{{ items[0] }}"}]},
    }
    tree = compile_value(obj)
    assert isinstance(tree, dict)
    assert isinstance(tree["text"], Template)
    assert render_value(tree, ENV, CTX) == {
        "channel": "#sales-ops",
        "text": "Approve Acme?",
        "amount": 12000,
        "flags": [True, None, 3, 2.5, 2],
        "nested": {"who": None, "deeper": [{"x": 1}]},
    }
    found = [(path, offset, to_source(expr)) for path, offset, expr in value_exprs(tree)]
    assert found == [
        (("text",), 11, "deal.name"),
        (("amount",), 3, "deal.amount"),
        (("flags", 4), 3, "items | length"),
        (("nested", "who"), 3, "deal.owner"),
        (("nested", "deeper", 0, "x"), 3, "items[0]"),
    ]


def test_compile_value_scalars() -> None:
    assert compile_value(None) is None
    assert compile_value(3) == 3
    assert render_value(compile_value("{{ 1 + 1 }}"), {}, CTX) == 2
    assert render_value(compile_value(("a", "b")), {}, CTX) == ["a", "b"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": ["ok", "{{ x"]}, "unterminated"),
        (datetime(2025, 1, 1), "unsupported value of type [datetime]"),
        ({"a": {1, 2}}, "unsupported value of type [set]"),
    ],
)
def test_compile_value_errors(value: Any, message: str) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        compile_value(value)
    assert message in info.value.message


def test_compile_value_depth_is_bounded() -> None:
    value: Any = "x"
    for _ in range(500):
        value = [value]
    with pytest.raises(ExprSyntaxError, match="nested more than 100 levels"):
        compile_value(value)


def test_parse_template_refuses_non_text() -> None:
    with pytest.raises(ExprSyntaxError):
        parse_template(5)  # type: ignore[arg-type]
