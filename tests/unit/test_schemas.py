"""The editor schemas (procflow.schemas) agree with the compilers.

- both are valid JSON Schema draft 2020-12 and every property has a description (editors show it);
- every example definition validates against its dialect's schema, read as procflow reads YAML
  (1.2 core: ``on`` and ``2027-01-10`` stay strings);
- files procflow accepts in unusual spellings validate too (the schema is never stricter), and
  typos procflow rejects are rejected by the schema as well;
- the keys the schemas know are the keys the compilers know (their did-you-mean lists), so the
  schemas cannot drift from procflow unnoticed.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from procflow import schemas
from procflow.errors import DurationError
from procflow.expr import parse_duration
from procflow.model.access import ACTIONS
from procflow.model.connectors.registry import ConnectorRegistry
from procflow.model.flow import compiler as flow
from procflow.model.flow import control as flow_control
from procflow.model.flow import core as flow_core
from procflow.model.flow import ids as flow_ids
from procflow.model.flow import schedules as flow_schedules
from procflow.model.intent import compiler as intent
from procflow.model.intent import data as intent_data
from procflow.model.intent import permissions as intent_permissions
from procflow.model.intent import proc as intent_proc
from procflow.model.intent import process as intent_process
from procflow.model.intent import schedules as intent_schedules
from procflow.model.intent import seeds as intent_seeds
from procflow.model.intent import steps as intent_steps
from procflow.model.intent import sweep_generate, sweep_where
from procflow.model.intent import values as intent_values
from procflow.model.reading.yamlsrc import load_yaml, to_plain
from procflow.model.source import Diagnostics
from procflow.model.validate import load_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VALIDATORS = {d: Draft202012Validator(schemas.schema(d)) for d in schemas.DIALECTS}


def plain(text: str) -> Any:
    """The YAML text as plain data, resolved exactly as procflow resolves it."""
    diags = Diagnostics()
    root = load_yaml(text, "t", diags)
    assert root is not None and not diags.items, [d.message for d in diags.items]
    return to_plain(root)


def messages(errors: list[jsonschema.ValidationError]) -> list[str]:
    """Every error with its sub-errors (oneOf/anyOf branches), as `message @ path` lines."""

    def walk(error: jsonschema.ValidationError) -> Iterator[str]:
        yield f"{error.message} @ {error.json_path}"
        for sub in error.context or ():
            yield from walk(sub)

    return [line for error in errors for line in walk(error)]


def schema_errors(dialect: str, text: str) -> list[str]:
    return messages(list(VALIDATORS[dialect].iter_errors(plain(text))))


def procflow_errors(tmp_path: Path, dialect: str, text: str) -> list[str]:
    name = "t.intent" if dialect == "intent" else "t.flow.yaml"
    loaded = load_text(text, str(tmp_path / name), project_dir=str(tmp_path))
    return [d.message for d in loaded.diagnostics if d.severity == "error"]


# --- the package API -------------------------------------------------------------------------


def test_each_dialect_has_its_schema_text_and_mapping() -> None:
    assert schemas.DIALECTS == ("intent", "flow")
    for dialect in schemas.DIALECTS:
        text = schemas.schema_text(dialect)
        assert json.loads(text) == schemas.schema(dialect)
        assert text.endswith("}\n")
    assert "*.intent" in schemas.schema("intent")["title"]
    assert "*.flow.yaml" in schemas.schema("flow")["title"]


def test_schema_returns_a_fresh_mapping_each_time() -> None:
    first = schemas.schema("flow")
    first["properties"].clear()
    assert schemas.schema("flow")["properties"]


@pytest.mark.parametrize("name", ["yaml", "Intent", "", "flow.yaml"])
def test_an_unknown_dialect_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError) as raised:
        schemas.schema_text(name)
    assert str(raised.value) == f"no schema for dialect [{name}]; the dialects are intent, flow"
    with pytest.raises(ValueError):
        schemas.schema(name)


def test_the_schema_files_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "schemas/*.json" in config["tool"]["setuptools"]["package-data"]["procflow"]


# --- the schemas as schemas ------------------------------------------------------------------


@pytest.mark.parametrize("dialect", schemas.DIALECTS)
def test_the_schema_is_valid_draft_2020_12(dialect: str) -> None:
    document = schemas.schema(dialect)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(document)


# Conditions and the rules they apply only narrow properties described where they are declared.
NARROWING = ("if", "then", "else", "not", "contains", "dependentSchemas")


def described(node: Any, path: str = "") -> Iterator[tuple[str, bool]]:
    """(path, has a description) for every property declared under ``node``."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from described(item, f"{path}[{i}]")
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in NARROWING:
            continue
        if key in ("properties", "patternProperties"):
            for name, sub in value.items():
                yield f"{path}.{name}", isinstance(sub, dict) and "description" in sub
        yield from described(value, f"{path}.{key}")


@pytest.mark.parametrize("dialect", schemas.DIALECTS)
def test_every_property_has_a_description(dialect: str) -> None:
    found = list(described(schemas.schema(dialect)))
    assert len(found) > 40
    assert [path for path, ok in found if not ok] == []


# --- what procflow accepts, the schema accepts ---------------------------------------------


def example_files() -> list[Path]:
    return sorted(
        p for p in EXAMPLES.rglob("*") if p.name.endswith((".intent", ".flow.yaml", ".flow.yml"))
    )


def test_the_examples_cover_both_dialects() -> None:
    names = [p.name for p in example_files()]
    assert any(n.endswith(".intent") for n in names)
    assert any(n.endswith(".flow.yaml") for n in names)


@pytest.mark.parametrize("path", example_files(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_validates_against_its_schema(path: Path) -> None:
    dialect = "intent" if path.name.endswith(".intent") else "flow"
    assert schema_errors(dialect, path.read_text(encoding="utf-8")) == []


# ```yaml title=NAME blocks: the docs' complete examples (their own test runs procflow on them)
FENCE = re.compile(
    r"^(`{3,})[^\n`]*\btitle=(?P<name>\S+)[^\n`]*\n(?P<body>.*?)^\1[ \t]*$", re.S | re.M
)


def documented_definitions() -> list[Any]:
    found = []
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        for match in FENCE.finditer(page.read_text(encoding="utf-8")):
            name = match.group("name")
            if name.endswith((".intent", ".flow.yaml", ".flow.yml")):
                where = f"{page.relative_to(ROOT)}:{name}"
                found.append(pytest.param(name, match.group("body"), id=where))
    return found


@pytest.mark.parametrize(("name", "text"), documented_definitions())
def test_every_documented_example_validates_against_its_schema(name: str, text: str) -> None:
    dialect = "intent" if name.endswith(".intent") else "flow"
    assert schema_errors(dialect, text) == []


PROJECT = {
    "custom/__init__.py": "class Ok:\n    def execute(self, ctx):\n        pass\n",
    "connectors/noop/manifest.yaml": "connector: noop\nactions:\n  ping: { description: x }\n",
    "connectors/noop/__init__.py": "def ping(ctx):\n    return {}\n",
}
INTENT_HEAD = """\
name: t
description:
version: 2
reports: ignored by procflow
entities:
  - name: Status
    kind: setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, length: 20, defaultValue: null, pattern: x }
  - name: Thing
    description:
    fields:
      - { name: id, type: long, primaryKey: true }
      - { name: due, type: date, defaultValue: 2027-01-10 }
      - { name: at, type: timestamp }
      - { name: flag, type: boolean, defaultValue: false }
      - { name: note, type: text, defaultValue: yes }
      - { name: total, type: decimal, defaultValue: 3, precision: 10, scale: 2 }
      - { name: owner, type: string }
    relations:
      - { name: Status, kind: oneToOne, to: Status, function: EntityStatus, init: 1 }
      - { name: others, kind: oneToMany, to: Thing }
seeds:
  - { name: s, entity: Status, rows: [ { id: 1, name: Open }, { id: 2, name: no } ] }
  - { name: none, entity: Thing, rows: }
forms:
  - { name: F, forEntity: Thing, fields: note, actions: approve }
  - { name: G, forEntity: Thing, actions: [ok] }
permissions:
  - { role: Clerk, can: [Thing:read, Thing:write, Status:read] }
  - role: tenant-admins
    can:
      - Thing:delete
  - { role: realm:x, can: [] }
"""
# Each is accepted by procflow (no error; warnings allowed) in a spelling a schema could get wrong.
ACCEPTED = [
    pytest.param("intent", "name: t\nentities:\nseeds: []\nprocesses:\nforms:\n", id="empty-lists"),
    pytest.param(
        "intent",
        INTENT_HEAD
        + """\
processes:
  - name: P
    description:
    trigger: { onUpdate: Thing, when: ["flag == true", "note != 'x'"], businessKey: note }
    vars: [ { name: pw, clearAfter: b } ]
    abortOn: { status: [2, Open], then: end }
    steps:
      - name: a
        kind: serviceTask
        args: { delegate: custom.Ok, fields: { n: 1, s: x, b: true, z: null }, produces: pw,
                retry: { count: 1, every: " PT0.5S " }, onError: fail }
      - { name: b, kind: serviceTask, args: { delegate: Ok, uses: [pw] } }
      - { name: s, kind: script, args: { setField: note, value: on } }
      - name: n
        kind: serviceTask
        args: { notify: { to: owner }, retry: { count: 2, every: P1W }, onError: end }
      - name: u
        kind: userTask
        args:
          assignee: { path: owner, fallback: staff }
          form: F
          timeout: { after: P1DT2H, then: n }
          expire: { until: due, then: end }
          setRelationField: Status
          value: Open
      - { name: p, kind: userTask, args: { assignee: personal, setField: flag, value: true } }
      - { name: d, kind: decision, args: { if: "action == 'approve'", then: end } }
      - { name: w, kind: wait, args: { onUpdate: Thing, when: "flag == true", next: end } }
      - { name: fail, kind: serviceTask, args: { setField: note, value: "{error}" } }
      - { name: end, kind: end, args: {} }
""",
        id="every-intent-construct",
    ),
    pytest.param(
        "flow",
        """\
flow: a.b-c_1
version: 1.5
trigger: { event: slack.approval, as: evt, when: "{{ evt.approved }}" }
inputs:
  evt: { type: object }
  n: { type: integer, default: 3, description: a count }
  at: { type: timestamp, default: 2027-01-10 }
  on: { type: boolean, default: false }
steps:
  - quiet:
      noop.ping:
      if: false
      description: args may be left empty
  - post: { slack.post: { channel: c, text: t, thread_ts: "{{ n }}" }, timeout: " 1h30m ",
            retry: { count: 2, every: PT0.5S }, optional: true }
  - day: { wait: { until: 2027-01-10 } }
  - later: { wait: { for: "{{ duration('1h') }}" } }
  - reply:
      wait_for: slack.approval
      match: { message: "{{ post.ts }}" }
      timeout: 1w2d
      lookback: P1D
  - each: { for_each: "{{ [1, 2] }}", steps: [ { x: { set: { v: "{{ item }}" } } } ],
            recover: [ { r: { fail: "{{ error.message }}" } } ] }
  - poll:
      repeat: { every: 500ms, max: 1, until: "{{ true }}" }
      steps:
        - tick: { log.write: { message: m } }
  - g: { steps: [ { inner: { fail: stop, optional: true } } ] }
recover:
  - note: { log.write: { message: "{{ error.step }}" } }
output: [1, "{{ n }}", { a: null }]
""",
        id="every-flow-construct",
    ),
    pytest.param(
        "flow",
        """\
flow: t
trigger:
  schedule: { cron: "0 6 * * MON-FRI", timezone: Europe/Berlin, jitter: 2m, overlap: skip,
              missed: latest, grace: PT1M, start: 2027-01-01, end: 2027-12-31T23:59:59Z }
inputs:
  region: { type: string, default: eu }
steps:
  - a: { log.write: { message: "{{ run.scheduled_at }} {{ region }}" } }
""",
        id="lone-schedule",
    ),
    pytest.param(
        "flow",
        """\
flow: t
trigger:
  - { event: slack.approval, as: evt }
  - schedule: { name: often, every: 15m, start: "2027-01-01T00:00:00+01:00" }
  - schedule: { name: once, at: 2027-06-01T12:00:00Z, overlap: cancel_previous, missed: all }
  - schedule: { name: hourly, cron: "@hourly", overlap: buffer_one, missed: none }
inputs:
  evt: { type: object, default: {} }
steps:
  - a: { log.write: { message: m } }
""",
        id="trigger-list",
    ),
]


@pytest.mark.parametrize(("dialect", "text"), ACCEPTED)
def test_files_procflow_accepts_validate(tmp_path: Path, dialect: str, text: str) -> None:
    for name, content in PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content, encoding="utf-8")
    assert procflow_errors(tmp_path, dialect, text) == []
    assert schema_errors(dialect, text) == []


# --- what procflow rejects as a typo, the schema rejects -----------------------------------

INTENT_OK = """\
name: t
entities:
  - name: Thing
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: note, type: string }
processes:
  - name: P
    trigger: { onCreate: Thing }
    steps:
      - name: a
        kind: serviceTask
        args: { notify: { to: a@b.c }, retry: { count: 1, every: PT1M } }
      - { name: b, kind: serviceTask, args: { setField: note, value: x } }
"""
FLOW_OK = """\
flow: t
trigger:
  - schedule: { name: s, every: 1h, overlap: allow }
steps:
  - a: { log.write: { message: m }, retry: { count: 1, every: 1m } }
  - w: { wait: { for: 1s } }
"""


def typo(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


TYPOS = [
    pytest.param("intent", typo(INTENT_OK, "processes:", "proceses:"), "proceses", id="intent-top"),
    pytest.param("intent", typo(INTENT_OK, "{ name: b, kind", "{ nme: b, kind"), "nme", id="step"),
    pytest.param("intent", typo(INTENT_OK, "count: 1", "counts: 1"), "counts", id="intent-retry"),
    pytest.param("intent", typo(INTENT_OK, "args: { set", "arg: { set"), "arg", id="step-args"),
    pytest.param(
        "intent", typo(INTENT_OK, "value: x", "value: x, assignee: boss"), "assignee", id="arg"
    ),
    pytest.param(
        "intent", typo(INTENT_OK, "type: string", "type: string, lenght: 5"), "lenght", id="field"
    ),
    pytest.param("intent", typo(INTENT_OK, "onCreate:", "oncreate:"), "oncreate", id="trigger"),
    pytest.param(
        "intent",
        INTENT_OK + "permissions: [ { role: Clerk, cna: [Thing:read] } ]\n",
        "cna",
        id="permission",
    ),
    pytest.param("flow", typo(FLOW_OK, "steps:", "step:"), "step", id="flow-top"),
    pytest.param("flow", typo(FLOW_OK, "retry:", "retyr:"), "retyr", id="flow-step"),
    pytest.param("flow", typo(FLOW_OK, "every: 1m", "evry: 1m"), "evry", id="flow-retry"),
    pytest.param("flow", typo(FLOW_OK, "for: 1s", "fro: 1s"), "fro", id="wait"),
    pytest.param("flow", typo(FLOW_OK, "overlap:", "overlpa:"), "overlpa", id="schedule"),
    pytest.param("flow", typo(FLOW_OK, "- schedule:", "- schedul:"), "schedul", id="trigger"),
    pytest.param(
        "flow", typo(FLOW_OK, "for: 1s }", "for: 1s }, retry: 1"), "retry", id="misplaced"
    ),
]


@pytest.mark.parametrize(("dialect", "text", "key"), TYPOS)
def test_a_typo_is_rejected_by_procflow_and_the_schema(
    tmp_path: Path, dialect: str, text: str, key: str
) -> None:
    assert any(f"[{key}]" in m for m in procflow_errors(tmp_path, dialect, text))
    found = schema_errors(dialect, text)
    assert any(f"'{key}'" in m or m.endswith(f".{key}") for m in found), found


# --- the schemas know exactly the keys the compilers know ----------------------------------


def at(dialect: str, *path: str) -> Any:
    """The subschema at ``path``: each step names a ``$defs`` entry or a property."""
    node = schemas.schema(dialect)
    for step in path:
        node = node["$defs"][step] if step in node.get("$defs", {}) else node["properties"][step]
    return node


def props(dialect: str, *path: str) -> set[str]:
    return set(at(dialect, *path)["properties"])


def not_run(dialect: str, *path: str) -> set[str]:
    """The properties marked as known to the wider specification but not run by procflow."""
    return {k for k, v in at(dialect, *path)["properties"].items() if v.get("deprecated")}


INTENT_KEYS = [
    pytest.param((), intent.TOP_KEYS, intent.TOP_NOT_RUN, id="top"),
    pytest.param(("entity",), intent_data.ENTITY_KEYS, intent_data.ENTITY_NOT_RUN, id="entity"),
    pytest.param(("field",), intent_data.FIELD_KEYS, intent_data.FIELD_NOT_RUN, id="field"),
    pytest.param(("relation",), intent_data.RELATION_KEYS, (), id="relation"),
    pytest.param(("seed",), intent_seeds.SEED_KEYS, (), id="seed"),
    pytest.param(("form",), intent_seeds.FORM_KEYS, (), id="form"),
    pytest.param(("permission",), intent_permissions.PERMISSION_KEYS, (), id="permission"),
    pytest.param(
        ("schedule",),
        intent_schedules.SCHEDULE_KEYS,
        intent_schedules.SCHEDULE_NOT_RUN,
        id="schedule",
    ),
    pytest.param(("whereCondition",), sweep_where.WHERE_KEYS, (), id="where"),
    pytest.param(
        ("generate",),
        sweep_generate.GENERATE_KEYS,
        sweep_generate.GENERATE_NOT_RUN,
        id="generate",
    ),
    pytest.param(("process",), intent_process.PROCESS_KEYS, (), id="process"),
    pytest.param(("process", "trigger"), intent_process.TRIGGER_KEYS, (), id="trigger"),
    pytest.param(("step",), intent_steps.STEP_KEYS, (), id="step"),
    *(
        pytest.param((f"{kind}Args",), args, (), id=f"{kind}-args")
        for kind, args in intent_proc.KIND_ARGS.items()
    ),
]


@pytest.mark.parametrize(("path", "keys", "ignored"), INTENT_KEYS)
def test_intent_schema_keys_are_the_compilers(
    path: tuple[str, ...], keys: tuple[str, ...], ignored: tuple[str, ...]
) -> None:
    assert props("intent", *path) == set(keys) | set(ignored)
    assert not_run("intent", *path) == set(ignored)


def enum(dialect: str, *path: str) -> list[Any]:
    return list(at(dialect, *path)["enum"])


def test_intent_schema_names_are_the_compilers() -> None:
    assert enum("intent", "step", "kind") == list(intent_proc.KINDS)
    assert enum("intent", "field", "type") == list(intent_values.FIELD_TYPES)
    assert enum("intent", "entity", "function") == list(intent_data.ENTITY_FUNCTIONS)
    assert enum("intent", "relation", "kind") == list(intent_data.RELATION_KINDS)
    assert set(schemas.schema("intent")["$defs"]) >= {f"{k}Args" for k in intent_proc.KINDS}
    token = at("intent", "permission", "can")["items"]["pattern"]
    assert token == "^[^\\s:]+:(" + "|".join(ACTIONS) + ")$"
    role = at("intent", "permission", "role")["pattern"]
    assert role == intent_permissions.ROLE_NAME.pattern
    assert enum("intent", "whereCondition", "op") == list(sweep_where.OPS)
    assert enum("intent", "schedule", "missed") == list(intent_schedules.MISSED)


FLOW_KEYS = [
    pytest.param((), flow.TOP_KEYS, id="top"),
    pytest.param(("input",), flow.INPUT_KEYS, id="input"),
    pytest.param(("eventTrigger",), flow.TRIGGER_KEYS, id="trigger"),
    pytest.param(("schedule",), flow_schedules.SCHEDULE_KEYS, id="schedule"),
    pytest.param(("stepBody", "retry"), flow_core.RETRY_KEYS, id="retry"),
    pytest.param(("stepBody", "repeat"), flow_core.REPEAT_KEYS, id="repeat"),
    pytest.param(("stepBody", "wait"), flow_core.WAIT_KEYS, id="wait"),
    pytest.param(("concurrency",), flow_control.CONCURRENCY_KEYS, id="concurrency"),
    pytest.param(("stepBody", "throttle"), flow_control.THROTTLE_KEYS, id="throttle"),
]


@pytest.mark.parametrize(("path", "keys"), FLOW_KEYS)
def test_flow_schema_keys_are_the_compilers(path: tuple[str, ...], keys: tuple[str, ...]) -> None:
    assert props("flow", *path) == set(keys)


def test_flow_step_keys_are_the_compilers() -> None:
    known = {
        *flow_core.CONSTRUCTS,
        *flow_core.COMMON_MODIFIERS,
        *(k for keys in flow_core.CONSTRUCT_KEYS.values() for k in keys),
    }
    assert {k for k in props("flow", "stepBody") if "." not in k} == known
    assert enum("flow", "input", "type") == list(flow.INPUT_TYPES)
    assert enum("flow", "schedule", "overlap") == list(flow_schedules.OVERLAPS)
    assert enum("flow", "schedule", "missed") == list(flow_schedules.MISSED)
    names = schemas.schema("flow")["$defs"]["step"]["propertyNames"]
    assert names["not"]["enum"] == list(flow_ids.RESERVED)


def test_the_built_in_actions_are_documented_as_their_manifests_declare(tmp_path: Path) -> None:
    registry = ConnectorRegistry(str(tmp_path))
    builtins = [m for n in registry.names() if (m := registry.get(n)) and m.source == "builtin"]
    assert builtins
    body = schemas.schema("flow")["$defs"]["stepBody"]
    documented = {k: v for k, v in body["properties"].items() if "." in k}
    declared = {f"{m.name}.{a}": spec for m in builtins for a, spec in m.actions.items()}
    assert set(documented) == set(declared)
    for key, spec in declared.items():
        assert set(documented[key]["properties"]) == set(spec.args or {}), key
        # documented, not enforced: a project connector of the same name replaces the built-in
        assert "required" not in documented[key] and "additionalProperties" not in documented[key]
    events = sorted(f"{m.name}.{e}" for m in builtins for e in m.events)
    assert sorted(body["properties"]["wait_for"]["examples"]) == events


# --- each flow construct takes exactly the keys the compiler allows on it -------------------

INNER = "[ { i: { fail: x } } ]"
CONSTRUCT_BODIES = {
    "action": "{ log.write: { message: m } }",
    "wait": "{ wait: { for: 1s } }",
    "wait_for": "{ wait_for: slack.approval, match: { message: x }, timeout: 1h }",
    "repeat": "{ repeat: { every: 1s, max: 2, until: '{{ true }}' }, steps: " + INNER + " }",
    "for_each": "{ for_each: '{{ [1] }}', steps: " + INNER + " }",
    "group": "{ steps: " + INNER + " }",
    "set": "{ set: { v: 1 } }",
    "fail": "{ fail: stop }",
    "call": "{ call: other }",
}
EXTRA_VALUES = {
    "retry": "{ count: 1, every: 1s }",
    "timeout": "1s",
    "match": "{ message: x }",
    "lookback": "1h",
    "as": "x",
    "steps": "[ { j: { fail: x } } ]",
    "recover": "[ { r: { fail: x } } ]",
    "if": "'{{ true }}'",
    "optional": "true",
    "description": "d",
    "inputs": "{ a: 1 }",
    "detach": "true",
    "throttle": "{ limit: 1, per: 1s }",
}


def with_key(construct: str, key: str) -> str:
    body = CONSTRUCT_BODIES[construct]
    if f"{key}:" in body:
        return f"flow: t\nsteps:\n  - s: {body}\n"
    return f"flow: t\nsteps:\n  - s: {body[:-1]}, {key}: {EXTRA_VALUES[key]} }}\n"


PLACEMENTS = [
    pytest.param(construct, key, id=f"{construct}-{key}")
    for construct in flow_core.CONSTRUCT_KEYS
    for key in EXTRA_VALUES
]


@pytest.mark.parametrize(("construct", "key"), PLACEMENTS)
def test_a_key_is_allowed_on_a_construct_exactly_when_procflow_allows_it(
    tmp_path: Path, construct: str, key: str
) -> None:
    allowed = key in (*flow_core.COMMON_MODIFIERS, *flow_core.CONSTRUCT_KEYS[construct])
    text = with_key(construct, key)
    assert (procflow_errors(tmp_path, "flow", text) == []) is allowed
    assert (schema_errors("flow", text) == []) is allowed


# --- durations: every one procflow accepts matches the schema's pattern ---------------------


ISO_UNITS = "WDHMS"
SHORT_UNITS = ("w", "d", "h", "m", "s", "ms")


def iso_text(parts: list[tuple[str, str]]) -> str:
    """``P<weeks, days>T<hours, minutes, seconds>`` from (unit, number) pairs in unit order."""
    date = "".join(n + u for u, n in parts if u in "WD")
    time = "".join(n + u for u, n in parts if u in "HMS")
    return f"P{date}" + (f"T{time}" if time else "")


def iso_durations() -> st.SearchStrategy[str]:
    whole = st.integers(0, 999).map(str)
    fraction = st.builds(lambda w, sep, f: f"{w}{sep}{f}", whole, st.sampled_from(".,"), whole)
    pairs = st.lists(
        st.tuples(st.sampled_from(ISO_UNITS), st.one_of(whole, fraction)),
        min_size=1,
        unique_by=lambda p: p[0],
    )
    return pairs.map(lambda ps: iso_text(sorted(ps, key=lambda p: ISO_UNITS.index(p[0]))))


def short_durations() -> st.SearchStrategy[str]:
    pairs = st.lists(
        st.tuples(st.sampled_from(SHORT_UNITS), st.integers(0, 9999)),
        min_size=1,
        unique_by=lambda p: p[0],
    )
    return pairs.map(
        lambda ps: "".join(f"{n}{u}" for u, n in sorted(ps, key=lambda p: SHORT_UNITS.index(p[0])))
    )


def accepted(text: str, *, iso_only: bool) -> bool:
    try:
        return parse_duration(text, iso_only=iso_only) > timedelta(0)
    except DurationError:
        return False


INTENT_EVERY = schemas.schema("intent")["$defs"]["serviceTaskArgs"]["properties"]["retry"]
FLOW_EVERY = schemas.schema("flow")["$defs"]["stepBody"]["properties"]["retry"]


@given(st.one_of(iso_durations(), short_durations()), st.sampled_from(["", " ", "\t"]))
def test_every_duration_procflow_accepts_matches_the_schema(text: str, pad: str) -> None:
    written = pad + text + pad
    every_flow = FLOW_EVERY["properties"]["every"]["pattern"]
    every_intent = INTENT_EVERY["properties"]["every"]["pattern"]
    assume(accepted(written, iso_only=False))  # most generated texts are; zero ones are not
    assert re.search(every_flow, written), written
    if accepted(written, iso_only=True):
        assert re.search(every_intent, written), written


@pytest.mark.parametrize("text", ["30s", "PT30S", "1h30m", "500ms", "P1W", "PT0.5S", "P1DT2H"])
def test_common_durations_match_and_month_units_do_not(text: str) -> None:
    every = FLOW_EVERY["properties"]["every"]["pattern"]
    assert re.search(every, text)
    assert not re.search(every, "P1M") and not re.search(every, "30 sec")
    assert not re.search(every, "{{ x }}") and not re.search(every, "-30s")
