"""The YAML loader: YAML 1.2 core scalars, positions and paths, and the constructs it refuses."""

from __future__ import annotations

import pytest

from procflow.model.reading.yamlsrc import YMap, YScalar, YSeq, load_yaml, to_plain
from procflow.model.source import Diagnostics, suggest


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
