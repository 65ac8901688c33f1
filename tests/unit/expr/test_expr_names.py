from __future__ import annotations

import pytest

from procflow.expr import (
    ANY,
    ListShape,
    ObjectShape,
    PathRef,
    Problem,
    StaticScope,
    check,
    parse,
    parse_template,
    root_paths,
)


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("deal", [PathRef("deal", (), 0)]),
        ("deal.name", [PathRef("deal", ("name",), 0)]),
        ("a[0].b['c'][-1]", [PathRef("a", (0, "b", "c", -1), 0)]),
        ("a.b[i].c", [PathRef("a", ("b",), 0), PathRef("i", (), 4)]),
        ("a[i.j + 1].c", [PathRef("a", (), 0), PathRef("i", ("j",), 2)]),
        (
            "x + y.z | default(w)",
            [PathRef("x", (), 0), PathRef("y", ("z",), 4), PathRef("w", (), 18)],
        ),
        ("now() + 1h", []),
        ("{'a': b}", [PathRef("b", (), 6)]),
        ("{a: 1}", []),
        ("(x | last).name", [PathRef("x", (), 1)]),
        ("[a, a.b]", [PathRef("a", (), 1), PathRef("a", ("b",), 4)]),
        ("not a and b in c", [PathRef("a", (), 4), PathRef("b", (), 10), PathRef("c", (), 15)]),
    ],
)
def test_root_paths(text: str, refs: list[PathRef]) -> None:
    assert root_paths(parse(text)) == refs


ASK = ObjectShape({"ts": ANY, "channel": ANY})
SCOPE = StaticScope(
    visible={
        "deal": ANY,
        "ask": ASK,
        "approval": ObjectShape(
            {"status": ANY, "event": ObjectShape({"approved": ANY, "user": ANY})}
        ),
        "indexed": ListShape(ObjectShape({"check": ObjectShape({"status": ANY})})),
        "cfg": ObjectShape({"a": ANY}, open=True),
        "run": ObjectShape({"id": ANY, "started_at": ANY}),
    },
    later={"report": "it is bound by step [report] further down", "late": ""},
    reserved_hint={"error": "[error] is only visible inside recover steps"},
)


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("deal.anything.at[0].all", []),
        ("ask.ts", []),
        ("ask", []),
        ("approval.event.approved", []),
        ("indexed[-1].check.status", []),
        ("indexed[i].check.status", [Problem(8, "unknown name [i]")]),
        ("cfg.a", []),
        ("cfg.other.x", []),
        ("run.id", []),
        ("ask.tss", [Problem(4, "[ask] has no field [tss]; did you mean [ts]?")]),
        ("ask['tss']", [Problem(3, "[ask] has no field [tss]; did you mean [ts]?")]),
        ("ask.zzzz", [Problem(4, "[ask] has no field [zzzz]")]),
        (
            "approval.event.aproved",
            [Problem(15, "[approval.event] has no field [aproved]; did you mean [approved]?")],
        ),
        ("ask[0]", [Problem(3, "[ask] is a mapping, not a list; [0] is null")]),
        (
            "indexed.check",
            [Problem(8, "[indexed] is a list; it has no field [check] (index it, e.g. [0])")],
        ),
        (
            "indexed[0].chek",
            [Problem(11, "[indexed[0]] has no field [chek]; did you mean [check]?")],
        ),
        (
            "report.x",
            [
                Problem(
                    0, "[report] is not bound yet here; it is bound by step [report] further down"
                )
            ],
        ),
        ("late", [Problem(0, "[late] is not bound yet here")]),
        (
            "error.message",
            [
                Problem(
                    0, "[error] is not available here; [error] is only visible inside recover steps"
                )
            ],
        ),
        ("dael.name", [Problem(0, "unknown name [dael]; did you mean [deal]?")]),
        ("qqqq", [Problem(0, "unknown name [qqqq]")]),
        ("now", [Problem(0, "unknown name [now]; did you mean now()?")]),
        (
            "dael.x + ask.tss",
            [
                Problem(0, "unknown name [dael]; did you mean [deal]?"),
                Problem(13, "[ask] has no field [tss]; did you mean [ts]?"),
            ],
        ),
    ],
)
def test_check(text: str, problems: list[Problem]) -> None:
    assert check(parse(text), SCOPE) == problems


def test_check_template_offsets_are_absolute() -> None:
    template = parse_template("Approve {{ dael.name }}?")
    [(offset, expr)] = template.exprs()
    assert offset == 11
    assert check(expr, SCOPE) == [Problem(11, "unknown name [dael]; did you mean [deal]?")]


def test_scope_defaults() -> None:
    scope = StaticScope(visible={"a": ANY})
    assert check(parse("a + b"), scope) == [Problem(4, "unknown name [b]")]
