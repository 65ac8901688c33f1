from __future__ import annotations

from typing import Any

import pytest

from procflow.errors import ExprSyntaxError
from procflow.expr import PlaceholderRef, parse_placeholders


def test_parse_placeholders() -> None:
    text = "Order {id} for {customer.name}: {total} } done"
    ph = parse_placeholders(text)
    assert ph.refs() == [
        PlaceholderRef(("id",), 6),
        PlaceholderRef(("customer", "name"), 15),
        PlaceholderRef(("total",), 32),
    ]
    assert ph.parts[0] == "Order "
    assert ph.parts[-1] == " } done"
    assert ph.refs()[1].text == "{customer.name}"


def test_no_placeholders() -> None:
    ph = parse_placeholders("plain } text")
    assert ph.refs() == []
    assert ph.render(lambda path: None) == ("plain } text", [])
    assert parse_placeholders("").parts == ()


def test_render_placeholders() -> None:
    values: dict[tuple[str, ...], Any] = {
        ("id",): 42,
        ("customer", "name"): "Acme",
        ("note",): None,
        ("blank",): "",
        ("flag",): True,
        ("price",): 2.5,
    }
    ph = parse_placeholders("#{id} {customer.name} [{note}] [{blank}] {flag} {price} {note}")
    text, empty = ph.render(values.__getitem__)
    assert text == "#42 Acme [] [] true 2.5 "
    assert empty == [("note",), ("blank",)]


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("a { } b", "invalid placeholder [{ }]", 2),
        ("{}", "invalid placeholder [{}]", 0),
        ("x {a.b.c}", "more than one relation deep", 2),
        ("{a.}", "invalid placeholder [{a.}]", 0),
        ("{1abc}", "invalid placeholder [{1abc}]", 0),
        ("{a b}", "invalid placeholder [{a b}]", 0),
        ("ok {name", "unterminated placeholder", 3),
        ("{{ name }}", "[{{ }}] is not used in notify texts", 0),
        ("{ok} and {bad-name}", "invalid placeholder [{bad-name}]", 9),
    ],
)
def test_placeholder_errors(text: str, message: str, offset: int) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_placeholders(text)
    assert message in info.value.message
    assert info.value.offset == offset


def test_placeholders_refuse_non_text() -> None:
    with pytest.raises(ExprSyntaxError):
        parse_placeholders(None)  # type: ignore[arg-type]
