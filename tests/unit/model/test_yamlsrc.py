"""The YAML loader: YAML 1.2 core scalars, positions and paths, and the constructs it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow.model.reading.yamlsrc import (
    MAX_DEPTH,
    YMap,
    YScalar,
    YSeq,
    load_yaml,
    read_yaml,
    to_plain,
)
from procflow.model.source import Diagnostics, suggest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load(text: str) -> tuple[object, list[str]]:
    diags = Diagnostics()
    node = load_yaml(text, "f.intent", diags)
    return node, [d.format() for d in diags.sorted()]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: on", "on"),
        ("a: yes", "yes"),
        ("a: no", "no"),
        ("a: 2027-01-10", "2027-01-10"),
        ("a: true", True),
        ("a: False", False),
        ("a: 12", 12),
        ("a: -3", -3),
        ("a: 0x1F", 31),
        ("a: 0o17", 15),
        ("a: 1.5", 1.5),
        ("a: 1e3", 1000.0),
        ("a: ~", None),
        ("a:", None),
        ("a: null", None),
        ("a: '12'", "12"),
        ('a: "true"', "true"),
        ("a: 1_000", "1_000"),  # YAML 1.1 underscores are not numbers in 1.2
        ("a: 010", 10),
    ],
)
def test_scalars_follow_the_yaml_1_2_core_schema(text: str, value: object) -> None:
    node, problems = load(text)
    assert problems == []
    assert to_plain(node) == {"a": value}  # type: ignore[arg-type]


def test_every_node_knows_its_line_column_and_path() -> None:
    node, _ = load(
        "processes:\n  - name: P\n    steps:\n      - { name: a, args: { retry: { count: 0 } } }\n"
    )
    assert isinstance(node, YMap)
    procs = node.get("processes")
    assert isinstance(procs, YSeq)
    step = procs.items[0]
    assert isinstance(step, YMap)
    steps = step.get("steps")
    assert isinstance(steps, YSeq)
    first = steps.items[0]
    assert isinstance(first, YMap)
    args = first.get("args")
    assert isinstance(args, YMap)
    retry = args.get("retry")
    assert isinstance(retry, YMap)
    count = retry.get("count")
    assert isinstance(count, YScalar)
    assert (count.pos.line, count.pos.col) == (4, 44)
    assert count.pos.path == "processes[0].steps[0].args.retry.count"
    assert retry.entries["count"].key_pos.col == 37


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x 1\nb: 2\n", "f.intent:1:4: error: anchors are not allowed (&x)"),
        ("a: 1\nb: *x\n", "f.intent:2:4: error: aliases are not allowed (*x)"),
        ("a: &x 1\nb: *x\n", "f.intent:2:4: error: aliases are not allowed (*x)"),
        ("a: !!str 1\n", "f.intent:1:4: error: type tags are not allowed (!!str)"),
        ("a: !custom 1\n", "type tags are not allowed (!custom)"),
        ("a: 1\na: 2\n", "f.intent:2:1: error: duplicate key [a] (first at line 1)"),
        ("a: 1\n---\nb: 2\n", "f.intent:2:1: error: a definition file holds one YAML document"),
        ("", "f.intent:1:1: error: the file is empty"),
        ("a: [1, 2\n", "error: YAML syntax error"),
        (
            "a: 1\nb: x\x07\n",
            "f.intent:2:5: error: YAML syntax error: unacceptable character #x0007: control "
            "characters are not allowed",
        ),
        ("? [a]\n: 1\n", "a mapping key must be a plain name"),
    ],
)
def test_refused_constructs_are_reported_with_position(text: str, message: str) -> None:
    _, problems = load(text)
    assert any(message in p for p in problems), problems


def test_all_problems_of_a_file_are_reported_at_once() -> None:
    _, problems = load("a: &x 1\nb: !t 2\nb: 3\n")
    assert len(problems) == 3


@pytest.mark.parametrize(
    ("name", "candidates", "clause"),
    [
        ("counts", ["count", "every"], "; did you mean [count]?"),
        ("Count", ["count", "every"], "; did you mean [count]? (names are case-sensitive)"),
        ("zzz", ["count", "every"], ""),
    ],
)
def test_suggestions(name: str, candidates: list[str], clause: str) -> None:
    assert suggest(name, candidates) == clause


# --- a ':' inside a flow collection: libyaml refuses it, YAML 1.2 (and the pure parser) reads it

DIRIGIBLE = """\
name: t
permissions:
  - { role: Clerk, can: [Member:read, Loan:create] }
  - role: realm:x
    can: [Loan:write]
"""


def test_a_colon_inside_a_flow_list_reads_as_part_of_the_scalar() -> None:
    assert read_yaml(DIRIGIBLE, "f.intent", pure=False).flow_colon  # libyaml's 1.1 rule
    node, problems = load(DIRIGIBLE)
    assert problems == []
    assert to_plain(node) == {  # type: ignore[arg-type]
        "name": "t",
        "permissions": [
            {"role": "Clerk", "can": ["Member:read", "Loan:create"]},
            {"role": "realm:x", "can": ["Loan:write"]},
        ],
    }
    assert isinstance(node, YMap)
    permissions = node.get("permissions")
    assert isinstance(permissions, YSeq)
    first, second = permissions.items
    assert isinstance(first, YMap) and isinstance(second, YMap)
    can = first.get("can")
    assert isinstance(can, YSeq)
    assert [(i.pos.line, i.pos.col, i.pos.path) for i in can.items] == [
        (3, 26, "permissions[0].can[0]"),
        (3, 39, "permissions[0].can[1]"),
    ]
    assert first.entries["can"].key_pos[1:] == (3, 20, "permissions[0].can")
    assert second.entries["can"].key_pos[1:] == (5, 5, "permissions[1].can")


def examples() -> list[Path]:
    found = [*EXAMPLES.rglob("*.intent"), *EXAMPLES.rglob("*.yaml")]
    assert len(found) >= 8
    return sorted(found)


@pytest.mark.parametrize("path", examples(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_both_parsers_build_the_same_tree_with_the_same_positions(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast, pure = read_yaml(text, "f", pure=False), read_yaml(text, "f", pure=True)
    assert fast.root is not None and fast.diags.items == []
    assert pure.root == fast.root and pure.diags.items == []


# Each breaks a reading rule in a file that needs the pure parser: the rule holds there too.
PURE_PATH_RULES = [
    ("a: &x [b:c]\n", "f.intent:1:4: error: anchors are not allowed (&x)"),
    ("a: [b:c]\nb: *x\n", "f.intent:2:4: error: aliases are not allowed (*x)"),
    ("a: !!str [b:c]\n", "f.intent:1:4: error: type tags are not allowed (!!str)"),
    ("a: [b:c]\na: 2\n", "f.intent:2:1: error: duplicate key [a] (first at line 1)"),
    ("a: [b:c]\n---\nb: 2\n", "f.intent:2:1: error: a definition file holds one YAML document"),
    ("a: [b:c]\nb: [1, 2\n", "f.intent:3:1: error: YAML syntax error: expected ',' or ']'"),
    (  # libyaml reads ahead: the character is found first unless it is far on
        "a: [b:c]\n" + "".join(f"k{i}: v\n" for i in range(3000)) + "z: x\x07\n",
        "f.intent:3002:5: error: YAML syntax error: unacceptable character #x0007: control "
        "characters are not allowed",
    ),
]


@pytest.mark.parametrize(("text", "message"), PURE_PATH_RULES)
def test_the_pure_parser_keeps_every_reading_rule(text: str, message: str) -> None:
    assert read_yaml(text, "f.intent", pure=False).flow_colon
    _, problems = load(text)
    assert len(problems) == 1 and message in problems[0], problems


def test_the_pure_parser_reads_yaml_1_2_scalars() -> None:
    node, problems = load("a: [b:c, on, 2027-01-10, 0x1F, 1_000, ~]\n")
    assert problems == []
    assert to_plain(node) == {"a": ["b:c", "on", "2027-01-10", 31, "1_000", None]}  # type: ignore[arg-type]


@pytest.mark.parametrize("inner", ["b", "b:c"])  # read by libyaml; by the pure parser
def test_nesting_past_the_limit_is_reported_once_on_either_parser(inner: str) -> None:
    depth = MAX_DEPTH * 20  # deep enough that descending once per level would fail
    text = "a: " + "[" * depth + inner + "]" * depth + "\n"
    assert read_yaml(text, "f.intent", pure=False).flow_colon == (":" in inner)
    _, problems = load(text)
    assert len(problems) == 1, problems
    assert "f.intent:1:" in problems[0] and "nested too deeply: more than 64 levels" in problems[0]


def test_a_mapping_in_a_flow_list_is_not_a_colon_problem() -> None:
    """``[Order: read]`` (a space after the colon) is a mapping in YAML 1.1 and 1.2 alike: libyaml
    reads it, and the compiler names the slip (tests/unit/model/test_intent_permissions.py)."""
    reading = read_yaml("a: [Order: read]\n", "f.intent", pure=False)
    assert not reading.flow_colon and reading.diags.items == []
    assert to_plain(reading.root) == {"a": [{"Order": "read"}]}  # type: ignore[arg-type]
