from __future__ import annotations

from datetime import timedelta

import pytest

from procflow.errors import ExprSyntaxError
from procflow.expr import MAX_DEPTH, MAX_LENGTH, parse
from procflow.expr.ast import (
    Attr,
    BoolOp,
    Call,
    Chain,
    Compare,
    Expr,
    Item,
    ListLit,
    Literal,
    MapLit,
    Name,
    Path,
    Pipe,
    Unary,
    to_source,
)


def tree(node: Expr) -> str:
    """Fully parenthesized form, to make the parse structure visible in assertions."""
    match node:
        case Literal() | Name():
            return to_source(node)
        case ListLit(items=items):
            return "[" + ", ".join(tree(i) for i in items) + "]"
        case MapLit(entries=entries):
            return "{" + ", ".join(f"{k}: {tree(v)}" for k, v in entries) + "}"
        case Path(base=base, steps=steps):
            out = tree(base)
            for s in steps:
                out += f".{s.name}" if isinstance(s, Attr) else f"[{tree(s.index)}]"
            return out
        case Call(name=name, args=args):
            return f"{name}(" + ", ".join(tree(a) for a in args) + ")"
        case Pipe(target=target, filters=filters):
            out = tree(target)
            for f in filters:
                out = f"({out} | {f.name}" + "".join(f" {tree(a)}" for a in f.args) + ")"
            return out
        case Unary(op=op, operand=operand):
            return f"({op} {tree(operand)})"
        case Chain(first=first, rest=rest):
            out = tree(first)
            for op, _, e in rest:
                out = f"({out} {op} {tree(e)})"
            return out
        case Compare(op=op, left=left, right=right):
            return f"({tree(left)} {op} {tree(right)})"
        case BoolOp(op=op, operands=operands):
            return "(" + f" {op} ".join(tree(o) for o in operands) + ")"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a or b and c", "(a or (b and c))"),
        ("a and b or c", "((a and b) or c)"),
        ("a or b or c", "(a or b or c)"),
        ("not a and b", "((not a) and b)"),
        ("not a == b", "(not (a == b))"),
        ("not not a", "(not (not a))"),
        ("a == b + c", "(a == (b + c))"),
        ("a + b * c", "(a + (b * c))"),
        ("a * b + c", "((a * b) + c)"),
        ("a - b - c", "((a - b) - c)"),
        ("a / b % c", "((a / b) % c)"),
        ("-a * b", "((- a) * b)"),
        ("- - a", "(- (- a))"),
        ("items | length > 2", "((items | length) > 2)"),
        ("-x | f_upper".replace("f_upper", "upper"), "(- (x | upper))"),
        ("a + b | length", "(a + (b | length))"),
        ("a | default(1) | length", "((a | default 1) | length)"),
        ("a.b.c", "a.b.c"),
        ("a[0]", "a[0]"),
        ("a[-1]", "a[-1]"),
        ("a['key']", "a['key']"),
        ("a[b.c]", "a[b.c]"),
        ("a.b[0].c | upper", "(a.b[0].c | upper)"),
        ("x in [1, 2]", "(x in [1, 2])"),
        ("x not in y", "(x not in y)"),
        ("not x in y", "(not (x in y))"),
        ("a <= b", "(a <= b)"),
        ("a >= b", "(a >= b)"),
        ("a != b", "(a != b)"),
        ("a < b", "(a < b)"),
        ("a > b", "(a > b)"),
        ("(a or b) and c", "((a or b) and c)"),
        ("now()", "now()"),
        ("duration('30s')", "duration('30s')"),
        ("{'a': 1, b: 2}", "{a: 1, b: 2}"),
        ("[1, 2,]", "[1, 2]"),
        ("a.in.not", "a.in.not"),
        ("(x | last).name", "(x | last).name"),
    ],
)
def test_precedence_and_structure(text: str, expected: str) -> None:
    assert tree(parse(text)) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("3.5", 3.5),
        ("1e3", 1000.0),
        ("2.5E-1", 0.25),
        ("'text'", "text"),
        ('"text"', "text"),
        ("'it\\'s'", "it's"),
        ('"a\\"b"', 'a"b'),
        ("'\\n\\t\\\\\\u00e9'", "\n\t\\é"),
        ("true", True),
        ("false", False),
        ("null", None),
        ("500ms", timedelta(milliseconds=500)),
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("-1", -1),
        ("-1h", timedelta(hours=-1)),
        ("9223372036854775807", 2**63 - 1),
    ],
)
def test_literals(text: str, value: object) -> None:
    node = parse(text)
    assert isinstance(node, Literal)
    assert node.value == value
    assert type(node.value) is type(value)


def test_offsets() -> None:
    node = parse("a + b.c | upper")
    assert isinstance(node, Chain)
    assert node.offset == 0
    assert node.rest[0][1] == 2
    pipe = node.rest[0][2]
    assert isinstance(pipe, Pipe)
    assert pipe.offset == 4
    assert pipe.filters[0].offset == 10
    path = pipe.target
    assert isinstance(path, Path)
    assert isinstance(path.steps[0], Attr)
    assert path.steps[0].offset == 6  # the field name, where a static check points
    cmp = parse("x  ==  'y'")
    assert isinstance(cmp, Compare)
    assert cmp.op_offset == 3
    assert isinstance(cmp.right, Literal)
    assert cmp.right.offset == 7
    item = parse("a[ 0 ]")
    assert isinstance(item, Path)
    assert isinstance(item.steps[0], Item)
    assert item.steps[0].offset == 1


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("", "empty expression", 0),
        ("   ", "empty expression", 3),
        ("1 +", "expected a value, found end of expression", 3),
        ("(1", "expected [)] to close [(] at 0, found end of expression", 2),
        ("[1, 2", "expected []]", 5),
        ("{'a' 1}", "expected [:]", 5),
        ("{1: 2}", "expected a mapping key", 1),
        ("{'a': 1, 'a': 2}", "duplicate key [a]", 9),
        ("a b", "unexpected [b] after the end of the expression", 2),
        ("a = b", "unexpected [=]; write == to compare", 2),
        ("!a", "write != to compare, or not to negate", 0),
        ("a && b", "write and", 2),
        ("a # b", "unexpected character [#]", 2),
        ("'abc", "unterminated string", 0),
        ("'a\\qb'", "invalid escape [\\q]", 2),
        ("'\\u12'", "\\u needs 4 hex digits", 1),
        ("'\\ud800'", "surrogate", 1),
        ("x | lenght", "unknown filter [lenght]; did you mean [length]?", 4),
        ("x | ", "expected a filter name after [|]", 4),
        ("x | join", "filter [join] takes 1 argument, got 0", 4),
        ("x | length(1)", "filter [length] takes no arguments, got 1", 4),
        ("x | round(1, 2)", "filter [round] takes 0 to 1 arguments, got 2", 4),
        ("x | default", "filter [default] takes 1 argument, got 0", 4),
        ("nwo()", "unknown function [nwo]; did you mean [now]?", 0),
        ("upper(x)", "[upper] is a filter, write value | upper", 0),
        ("now(1)", "function [now] takes no arguments, got 1", 0),
        ("secret()", "function [secret] takes 1 argument, got 0", 0),
        ("a < b < c", "comparisons cannot be chained", 6),
        ("a == b != c", "comparisons cannot be chained", 7),
        ("a == not b", "[not] needs parentheses here", 5),
        ("1 + not b", "[not] needs parentheses here", 4),
        ("x | last.name", "a path cannot follow a filter", 8),
        ("a.", "expected a field name after [.]", 2),
        ("a.1", "expected a field name after [.]", 2),
        ("3abc", "invalid number or duration", 0),
        ("1.5h", "durations take whole numbers", 0),
        ("30m1h", "largest to smallest", 0),
        ("1and 2", "invalid number or duration", 0),
        ("9223372036854775808", "is too large", 0),
        ("1e999", "is too large", 0),
        ("a[]", "expected a value, found []]", 2),
        ("a.b(1)", "unexpected [(]", 3),
        (" {{ total > 0 }}", "write the expression without [{{ }}] here", 1),
    ],
)
def test_syntax_errors(text: str, message: str, offset: int) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse(text)
    assert message in info.value.message
    assert info.value.offset == offset


def test_length_limit() -> None:
    ok = "1" + " " * (MAX_LENGTH - 1)
    assert parse(ok) == Literal(0, 1)
    with pytest.raises(ExprSyntaxError, match="longer than 4000 characters"):
        parse("1" + " " * MAX_LENGTH)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "(" * n + "1" + ")" * n,
        lambda n: "[" * n + "1" + "]" * n,
        lambda n: "{'a':" * n + "1" + "}" * n,
        lambda n: "not " * n + "true",
        lambda n: "- " * n + "1",
        lambda n: "-" * n + "1",
        lambda n: "x | default(" * n + "1" + ")" * n,
        lambda n: "a[" * n + "0" + "]" * n,
        lambda n: "now(" * 0 + "duration(" * n + "'1s'" + ")" * n,
        lambda n: "1 + (" * n + "1" + ")" * n,
        lambda n: "a or (b and (c == (d + (e * (" * (n // 5) + "f" + ")))))" * (n // 5),
    ],
)
def test_depth_limit(make: object) -> None:
    assert callable(make)
    parse(make(10))
    for n in (MAX_DEPTH + 1, 200):
        with pytest.raises(ExprSyntaxError, match="nested too deeply"):
            parse(make(n))
    with pytest.raises(ExprSyntaxError):
        parse(make(5000))


def test_long_flat_chains_are_fine() -> None:
    # Long chains are flat in the tree, so they are not "deep".
    text = " + ".join(["1"] * 1000)
    node = parse(text)
    assert isinstance(node, Chain)
    assert len(node.rest) == 999
    assert isinstance(parse(" and ".join(["true"] * 400)), BoolOp)
    assert isinstance(parse("a" + ".b" * 1900), Path)
    assert isinstance(parse("a" + " | length" * 300), Pipe)


def test_non_text_is_refused() -> None:
    with pytest.raises(ExprSyntaxError):
        parse(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "a + b * c",
        "(a + b) * c",
        "a - (b - c)",
        "-(a + b)",
        "-(x | length)",
        "(-x) | string",
        "not (a and b)",
        "(a or b) and c",
        "a.b[0]['k'] | default({'x': [1, 2.5, null]}) | length",
        "x == 'it\\'s \"q\"\\n'",
        "now() - 1h30m >= timestamp('2024-01-01')",
        "a not in b",
        "(a == b) == c",
        "- -1",
    ],
)
def test_to_source_round_trips(text: str) -> None:
    node = parse(text)
    again = parse(to_source(node))
    assert tree(again) == tree(node)
