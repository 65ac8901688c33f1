"""Static kinds: comparing values of kinds known before the expression runs is reported."""

from __future__ import annotations

import pytest

from procflow.expr import ANY, KindShape, ListShape, ObjectShape, Problem, StaticScope, check, parse
from procflow.expr.ast import Name, Path
from procflow.expr.kinds import comparison_problems, static_kind

SCOPE = StaticScope(
    visible={
        "when": KindShape("timestamp"),
        "count": KindShape("integer"),
        "ratio": KindShape("number"),
        "label": KindShape("string"),
        "tags": ListShape(KindShape("string")),
        "deal": ObjectShape({"amount": KindShape("number"), "extra": ANY}),
        "free": ANY,
    }
)


def _unknown(node: Name | Path) -> str | None:
    return None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("1", "integer"),
        ("1.5", "number"),
        ("-2", "integer"),
        ("-1h", "duration"),
        ("'x'", "string"),
        ("null", "null"),
        ("true", "boolean"),
        ("1h30m", "duration"),
        ("[1]", "list"),
        ("{'a': 1}", "mapping"),
        ("1 < 2", "boolean"),
        ("not x", "boolean"),
        ("x and y", "boolean"),
        ("now()", "timestamp"),
        ("timestamp(x)", "timestamp"),
        ("duration(x)", "duration"),
        ("secret('A')", None),
        ("x | length", "integer"),
        ("x | upper", "string"),
        ("x | date", "string"),
        ("x | plus(1h)", "timestamp"),
        ("x | keys", "list"),
        ("x | float", "number"),
        ("x | first", None),
        ("x | default(1)", None),
        ("1 | default('a')", None),
        ("null | default('a')", "string"),
        ("'a' | default(null)", "string"),
        ("x | length | default(0)", "integer"),
        ("1 + 2.5 * 3", "number"),
        ("'a' + 'b'", "string"),
        ("'a' + x", None),
        ("now() - 1h", None),
        ("x", None),
        ("x.y", None),
        ("-x", None),
    ],
)
def test_static_kind(text: str, kind: str | None) -> None:
    assert static_kind(parse(text), _unknown) == kind


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("'a' == 1", [(4, "[==] cannot compare string with integer")]),
        ("1 != 'a'", [(2, "[!=] cannot compare integer with string")]),
        (
            "now() == '2027-01-01T00:00:00Z'",
            [
                (
                    6,
                    "[==] cannot compare timestamp with string; timestamp(text) reads ISO-8601 "
                    "text as a timestamp",
                )
            ],
        ),
        ("1 == 1.0", []),
        ("x == 'a'", []),
        ("null == 'a'", []),
        ("'a' != null", []),
        ("1 < 'a'", [(2, "[<] cannot compare integer with string")]),
        ("true >= false", [(5, "[>=] cannot order booleans")]),
        ("'a' < null", []),
        ("1 in ['a']", []),
        ("'a' == 'a' and 1 == true", [(17, "[==] cannot compare integer with boolean")]),
        (
            "(1 == 'a') == 2",
            [
                (3, "[==] cannot compare integer with string"),
                (11, "[==] cannot compare boolean with integer"),
            ],
        ),
    ],
)
def test_comparison_problems(text: str, problems: list[tuple[int, str]]) -> None:
    assert comparison_problems(parse(text), _unknown) == problems


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("when == '2027-01-01'", [Problem(5, "[==] cannot compare timestamp with string")]),
        ("when < now()", []),
        ("count == ratio", []),
        ("count == '3'", [Problem(6, "[==] cannot compare integer with string")]),
        ("label == 3", [Problem(6, "[==] cannot compare string with integer")]),
        ("tags[0] == 3", [Problem(8, "[==] cannot compare string with integer")]),
        ("tags == 'a'", [Problem(5, "[==] cannot compare list with string")]),
        ("deal.amount == 'a'", [Problem(12, "[==] cannot compare number with string")]),
        ("deal == 1", [Problem(5, "[==] cannot compare mapping with integer")]),
        ("deal.extra == 'a'", []),
        ("deal['amount'] == 'a'", []),
        ("free == 'a'", []),
        ("count == null", []),
        (
            "missing == 'a' and count == 'b'",
            [
                Problem(0, "unknown name [missing]"),
                Problem(25, "[==] cannot compare integer with string"),
            ],
        ),
    ],
)
def test_check_reports_comparisons_of_known_kinds(text: str, problems: list[Problem]) -> None:
    found = check(parse(text), SCOPE)
    assert [(p.offset, p.message.split(";")[0]) for p in found] == [
        (p.offset, p.message) for p in problems
    ]
