"""The filter table is the one description of the filters: the run, validation and the reference
all follow it, so a filter added, changed or removed in one place only fails here."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.errors import ExprEvalError, ExprSyntaxError
from procflow.expr import FILTERS, EvalContext, FilterSpec, KindShape, StaticScope, evaluate, parse
from procflow.expr import check as check_expr
from procflow.expr.ast import Name
from procflow.expr.ast import Path as PathNode
from procflow.expr.kinds import filter_problems, kind_problems, static_kind
from procflow.expr.values import NUMERIC_KINDS, kind_of

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reference" / "expressions.md"
CTX = EvalContext(now=lambda: datetime(2027, 1, 1, tzinfo=UTC), secret=lambda name: None)

# Values of every kind a filter can be given (null never reaches a filter but ``default``).
SAMPLES: dict[str, list[Any]] = {
    "boolean": [True, False],
    "integer": [0, 7, -3],
    "number": [2.5, -0.5],
    "string": ["", "Hello", "42", "2027-01-10", "2027-01-10T09:30:00Z"],
    "list": [[], [1, "a"], ["x", "y"]],
    "mapping": [{}, {"k": 1}],
    "timestamp": [datetime(2027, 1, 10, 9, 30, tzinfo=UTC)],
    "duration": [timedelta(hours=1)],
}
ARGS: dict[str, list[Any]] = {"join": [","], "plus": [timedelta(days=1)], "minus": ["1d"]}
ARGS["default"] = ["fallback"]


def _signature(spec: FilterSpec) -> str:
    if not spec.params:
        return f"`{spec.name}`"
    full = f"`{spec.name}({', '.join(spec.params)})`"
    return f"`{spec.name}`, {full}" if spec.optional else full


def _doc_rows() -> dict[str, tuple[str, str, str]]:
    """The reference's filter table: name -> (first cell, takes, gives), pipes unescaped."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("| filter | takes | gives |")
    table = text[start : text.index("\n\n", start)].splitlines()[2:]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in table:
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        name = re.match(r"`(\w+)", cells[0])
        assert name, line
        rows[name.group(1)] = (cells[0], cells[1], cells[2])
    return rows


def test_the_reference_documents_every_filter_as_the_table_describes_it() -> None:
    rows = _doc_rows()
    assert set(rows) == set(FILTERS), "a filter without a row, or a row without a filter"
    for name, spec in FILTERS.items():
        takes = spec.takes.text if spec.takes else "anything"
        assert rows[name] == (_signature(spec), takes, spec.summary), name


def test_a_filter_names_each_argument_it_takes() -> None:
    for spec in FILTERS.values():
        assert 0 <= spec.min_args <= spec.max_args == len(spec.params), spec.name


def test_an_unknown_filter_with_no_close_name_lists_the_filters() -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse("x | zzzzzz")
    assert info.value.message == "unknown filter [zzzzzz]; the filters are " + ", ".join(
        sorted(FILTERS)
    )


def _run(name: str, value: Any) -> Any:
    args = "(a)" if FILTERS[name].max_args and name in ARGS else ""
    env = {"v": value, "a": ARGS.get(name, [None])[0]}
    return evaluate(parse(f"v | {name}{args}"), env, CTX)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(sorted(FILTERS)),
    st.sampled_from(sorted(SAMPLES)).flatmap(
        lambda kind: st.tuples(st.just(kind), st.sampled_from(SAMPLES[kind]))
    ),
)
def test_the_run_refuses_exactly_the_kinds_the_table_refuses(
    name: str, sample: tuple[str, Any]
) -> None:
    """A value of a kind the table refuses fails with the table's message, the one validation
    gives; any other fails, if at all, for a reason of its own (text that is no number)."""
    kind, value = sample
    refusal = FILTERS[name].kind_problem(kind)
    try:
        result = _run(name, value)
    except ExprEvalError as exc:
        assert (exc.message == refusal) if refusal else " needs " not in exc.message.split(":")[0]
        return
    assert refusal is None
    gives = FILTERS[name].gives
    if gives is not None:
        got = kind_of(result)
        assert got == gives or {got, gives} <= set(NUMERIC_KINDS), (name, value, result)


def _kinds(**known: str) -> Any:
    def kind(node: Name | PathNode) -> str | None:
        return known.get(node.name) if isinstance(node, Name) else None

    return kind


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("count | upper", [(8, "filter [upper] needs a string, got integer")]),
        ("count | string | upper", []),
        ("label | upper | length", []),
        ("label | length | upper", [(17, "filter [upper] needs a string, got integer")]),
        ("label | round", [(8, "filter [round] needs a number, got string")]),
        ("ratio | round(2)", []),
        ("count | round", []),
        ("flag | int", [(7, "filter [int] needs a number or a string, got boolean")]),
        ("count | first", [(8, "filter [first] needs a list, got integer")]),
        ("count | last", [(8, "filter [last] needs a list, got integer")]),
        ("label | join(',')", [(8, "filter [join] needs a list, got string")]),
        ("tags | keys", [(7, "filter [keys] needs a mapping, got list")]),
        ("tags | values", [(7, "filter [values] needs a mapping, got list")]),
        ("count | length", [(8, "filter [length] needs a string, list or mapping, got integer")]),
        ("count | float", []),
        ("flag | lower", [(7, "filter [lower] needs a string, got boolean")]),
        ("flag | trim", [(7, "filter [trim] needs a string, got boolean")]),
        (
            "count | date",
            [(8, "filter [date] needs a timestamp or an ISO-8601 string, got integer")],
        ),
        (
            "count | plus(1d)",
            [(8, "filter [plus] needs a timestamp or an ISO-8601 string, got integer")],
        ),
        (
            "1h | minus(1d)",
            [(5, "filter [minus] needs a timestamp or an ISO-8601 string, got duration")],
        ),
        ("label | date", []),
        ("now() | date", []),
        ("count | json | upper", []),
        ("count | default(1) | upper", [(21, "filter [upper] needs a string, got integer")]),
        ("count | default('a') | upper", []),  # integer or string: unknown, not judged
        ("free | upper", []),
        ("null | upper", []),  # null is refused by the run, naming the path
        ("free | first | upper", []),
        (
            "[count | upper, 1 | trim]",
            [
                (9, "filter [upper] needs a string, got integer"),
                (20, "filter [trim] needs a string, got integer"),
            ],
        ),
    ],
)
def test_filter_problems(text: str, problems: list[tuple[int, str]]) -> None:
    names = _kinds(count="integer", ratio="number", label="string", flag="boolean", tags="list")
    assert filter_problems(parse(text), names) == problems


def test_kind_problems_report_comparisons_and_filters_in_source_order() -> None:
    found = kind_problems(parse("(count | upper) == 1 and 'a' == 2"), _kinds(count="integer"))
    assert found == [
        (9, "filter [upper] needs a string, got integer"),
        (16, "[==] cannot compare string with integer"),
        (29, "[==] cannot compare string with integer"),
    ]


def test_validation_reports_a_filter_given_a_known_kind_it_does_not_take() -> None:
    scope = StaticScope({"count": KindShape("integer"), "label": KindShape("string")})
    problems = check_expr(parse("count | upper"), scope)
    assert [(p.offset, p.message) for p in problems] == [
        (8, "filter [upper] needs a string, got integer")
    ]
    assert check_expr(parse("label | upper"), scope) == []


def test_a_filter_table_entry_gives_the_static_kind() -> None:
    unknown = _kinds()
    for name, spec in FILTERS.items():
        if name != "default":
            args = "(1)" if spec.min_args else ""
            assert static_kind(parse(f"x | {name}{args}"), unknown) == spec.gives, name
