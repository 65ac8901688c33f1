"""Fuzzing what users type: random JSON for every JSON flag, random YAML for definition files.

Whatever comes in, a command either succeeds or refuses in one clear line (a definition: one line
per problem) with exit 1 or 2, and a refused command leaves every table of the store as it was.
No input may end in a traceback, or in the last line of defence that turns an unexpected
exception into one line (that is a bug, found). Commands run in-process; the example counts are
kept moderate so the suite stays quick (`--hypothesis-show-statistics` shows them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_inprocess import FLOW, INTENT, Outcome, changes, dump, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.empty_store  # `db init` makes the store, as a user would

JSON_EXAMPLES = 60  # per JSON flag, per backend
YAML_EXAMPLES = 100  # per backend (each file validated, drawn and deployed)
FUZZ = settings(
    max_examples=JSON_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Store:
    """The store the fuzzed commands run against, and the check every outcome must pass."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = folder
        self.flow = folder / "greet.flow.yaml"
        self.flow.write_text(FLOW, encoding="utf-8")
        intent = folder / "shop.intent"
        intent.write_text(INTENT, encoding="utf-8")
        for args in (
            ("db", "init", "--virtual-clock"),
            ("deploy", str(intent), str(self.flow)),
            ("records", "create", "Order", "--data", '{"title": "first", "total": 3}'),
        ):
            assert invoke(*args, "--db", url).code == 0, args

    def run(self, *args: str, diagnostics: bool = False) -> Outcome:
        before = dump(self.url)
        done = invoke(*args, "--db", self.url)
        assert "Traceback" not in done.stderr + done.stdout, done.report(["a traceback"])
        assert "a bug in procflow" not in done.stderr, done.report(["an unexpected exception"])
        assert done.code in (0, 1, 2, 3), done.report([f"exit {done.code}"])
        if done.code not in (0, 3):
            problems = done.problems(diagnostics=diagnostics)
            assert not problems, done.report(problems)
            changed = changes(before, dump(self.url))
            assert not changed, done.report([f"refused, yet the store changed: {changed}"])
        return done


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Store:
    return Store(db_url, tmp_path)


# --- JSON ------------------------------------------------------------------------------------

FIELDS = ["title", "total", "Progress", "id", "who", "extra", "message", "approved", "user"]
NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 10**400, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=20))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def deep_json(draw: st.DrawFn) -> str:
    levels = draw(st.integers(min_value=60, max_value=3_000))
    opener, closer = draw(st.sampled_from([('{"a":', "}"), ("[", "]"), ('{"title":[', "]}")]))
    return opener * levels + draw(st.sampled_from(["1", '"x"', "[]", ""])) + closer * levels


@st.composite
def mangled(draw: st.DrawFn, text: str) -> str:
    """``text`` cut, or with a character inserted: most such texts are not JSON."""
    at = draw(st.integers(min_value=0, max_value=len(text)))
    if draw(st.booleans()):
        return text[:at]
    return text[:at] + draw(st.sampled_from(list('{}[]",:\\ 0-eE.\x00\ud800'))) + text[at:]


JSON_TEXTS = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=5).map(json.dumps),
    VALUES.map(json.dumps),
    deep_json(),
    VALUES.map(json.dumps).flatmap(mangled),
    st.text(max_size=40),
)


@FUZZ
@given(text=JSON_TEXTS)
def test_records_create_data(store: Store, text: str) -> None:
    store.run("records", "create", "Order", "--data", text)


@FUZZ
@given(text=JSON_TEXTS)
def test_records_update_data(store: Store, text: str) -> None:
    store.run("records", "update", "Order", "1", "--data", text)


@FUZZ
@given(text=JSON_TEXTS, command=st.sampled_from(["start", "run"]))
def test_flow_inputs(store: Store, text: str, command: str) -> None:
    target = "greet" if command == "start" else str(store.flow)
    store.run(command, target, "--inputs", text)


@FUZZ
@given(text=JSON_TEXTS, flag=st.sampled_from(["--data", "--envelope", "--slack-payload"]))
def test_events_send(store: Store, text: str, flag: str) -> None:
    kind = ("slack.approval",) if flag == "--data" else ()
    store.run("events", "send", *kind, flag, text)


@FUZZ
@given(text=JSON_TEXTS)
def test_tasks_complete_data(store: Store, text: str) -> None:
    store.run("tasks", "complete", "1", "--data", text)


# --- YAML ------------------------------------------------------------------------------------

KEYS = [
    "name", "flow", "steps", "entities", "fields", "relations", "processes", "trigger", "inputs",
    "type", "args", "kind", "wait", "for", "set", "for_each", "as", "retry", "seeds", "rows",
    "output", "recover", "optional", "onCreate", "primaryKey", "log.write", "message", "to",
]  # fmt: skip
PLAIN = [
    "~", "null", "yes", "no", "on", "true", "1", "-0x1F", "0o17", ".nan", "-.inf", "2027-01-10",
    "1e400", "123456789012345678901234567890", "1d", "PT1H", "string", "integer", "{{ x }}",
    "Order", "userTask", "'single'", '"dq \\u00e9"', "''", "!!str 3", "!custom x", "*a1",
]  # fmt: skip
WORDS = st.text(alphabet="abcxyzAB019_-. ", min_size=1, max_size=8).map(lambda w: f'"{w}"')
DECORATION = st.sampled_from(["", "", "", "&a1 ", "!!map ", "!!seq ", "!tag ", "&a2 !!str "])


def node(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    key = st.sampled_from(KEYS) | WORDS
    mapping = st.lists(st.tuples(key, children), max_size=4).map(
        lambda items: "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    )
    sequence = st.lists(children, max_size=4).map(lambda items: "[" + ", ".join(items) + "]")
    return st.tuples(DECORATION, mapping | sequence).map("".join)


YAML_NODES = st.recursive(st.sampled_from(PLAIN) | WORDS, node, max_leaves=15)


@st.composite
def deep_yaml(draw: st.DrawFn) -> str:
    levels = draw(st.integers(min_value=60, max_value=2_000))
    if draw(st.booleans()):  # flow style
        return "[" * levels + "]" * levels
    # Block style grows with the square of its depth: at most 1,000 levels (about 1 MB), so that
    # four of them stay under the 10 MiB a definition file may have (a larger one is refused,
    # exit 2, which is tested apart).
    levels = min(levels, 1_000)
    return "\n" + "".join("  " * (i + 1) + "- k:\n" for i in range(levels)) + "  " * levels + "  v"


@st.composite
def definition_file(draw: st.DrawFn) -> tuple[str, str]:
    """A definition's name and text: block-style top keys with random (sometimes very deep)
    values, now and then a second document, a duplicate key or garbage."""
    name = draw(st.sampled_from(["fuzz.flow.yaml", "fuzz.intent"]))
    top = "flow" if name.endswith(".flow.yaml") else "name"
    lines = [f"{top}: fuzz"]
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        key = draw(st.sampled_from(KEYS))
        value = draw(YAML_NODES | deep_yaml())
        lines.append(f"{key}: {value}")
    lines.append(draw(st.sampled_from(["", "", "---\nname: second", f"{top}: twice", "\t: x"])))
    return name, "\n".join(lines) + "\n"


@settings(FUZZ, max_examples=YAML_EXAMPLES)
@given(definition=definition_file())
def test_definition_files(store: Store, definition: tuple[str, str]) -> None:
    name, text = definition
    path = store.folder / name
    path.write_text(text, encoding="utf-8")
    checked = invoke("validate", str(path))
    assert checked.code in (0, 1), checked.report([f"validate exit {checked.code}"])
    assert "Traceback" not in checked.stderr and "a bug in procflow" not in checked.stderr, (
        checked.report(["validate crashed"])
    )
    drawn = invoke("graph", str(path))
    assert "Traceback" not in drawn.stderr and "a bug in procflow" not in drawn.stderr, (
        drawn.report(["graph crashed"])
    )
    assert drawn.code in (0, 1, 2), drawn.report([f"graph exit {drawn.code}"])
    store.run("deploy", str(path), diagnostics=True)
