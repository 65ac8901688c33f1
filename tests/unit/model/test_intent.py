"""Intent files: file rules, entities, seeds and forms; the examples; the IR they compile into.

Process rules are in ``test_intent_process.py``. Each case lists the exact set of diagnostics the
file must produce (every expected substring matches a line; every line is expected).
"""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from diagnostic_cases import assert_exactly, case

from procflow.model.ir import (
    Application,
    Decision,
    Delegate,
    Notify,
    Process,
    ServiceTask,
    SetField,
    SetRelationField,
    UserTask,
    WaitRecord,
)
from procflow.model.validate import load_file, load_text

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

ENTITY = """\
name: t
entities:
  - name: Status
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: name, type: string, length: 10 }
  - name: Item
    fields:
      - { name: id, type: integer, primaryKey: true }
"""


def entity(*fields: str, relations: Sequence[str] = (), extra: str = "") -> str:
    """A file with the setting entity [Status] and an entity [Thing] with these fields."""
    body = "".join(
        f"      - {f}\n" for f in ("{ name: id, type: integer, primaryKey: true }", *fields)
    )
    rels = "    relations:\n" + "".join(f"      - {r}\n" for r in relations) if relations else ""
    return f"{ENTITY}  - name: Thing\n{extra}    fields:\n{body}{rels}"


SEEDS = "seeds:\n  - { name: s, entity: Status, rows: [ { id: 1, name: Open }, { id: 2, name: Done } ] }\n"


# the keys of the wider Intent File Specification that docs/reference/intent.md lists as "not run"
NOT_RUN_TOP = [
    "reports",
    "actions",
    "notifications",
    "integrations",
    "uses",
    "widgets",
    "prints",
    "generates",
    "rollups",
    "inbound",
    "transitions",
]
NOT_RUN_ENTITY = [
    "audit",
    "group",
    "icon",
    "label",
    "order",
    "imports",
    "multilingual",
    "checks",
    "lifecycle",
    "history",
    "hierarchy",
    "related",
    "view",
    "visibleTo",
]
NOT_RUN_FIELD = ["calculatedOnCreate", "calculatedOnUpdate", "pattern", "visibleTo"]


def check(text: str, expected: Sequence[str], project: Path) -> None:
    loaded = load_text(text, "t.intent", project_dir=str(project))
    lines = [d.format() for d in loaded.diagnostics]
    assert_exactly(lines, expected)


FILE = [
    case("minimal-file", "name: t\n"),
    case("version-is-a-free-label", "name: t\nversion: 1.5\ndescription: x\n"),
    case(
        "unknown-top-level-key-suggests",
        "name: t\nproceses: []\n",
        "t.intent:2:1: error: file: unknown key [proceses]; did you mean [processes]? (proceses)",
    ),
    case(
        "case-only-key-says-so",
        "name: t\nEntities: []\n",
        "file: unknown key [Entities]; did you mean [entities]? (names are case-sensitive)",
    ),
    case(
        "not-run-top-level-keys-warn",
        "name: t\nreports: []\nactions: {}\ntransitions: []\n",
        "t.intent:2:1: warning: file: key [reports] is not run by procflow (ignored) (reports)",
        "warning: file: key [actions] is not run by procflow",
        "warning: file: key [transitions] is not run by procflow",
    ),
    case(
        "name-required",
        "description: x\n",
        "t.intent:1:1: error: file: missing required key [name]",
    ),
    case("name-must-be-text", "name: [a]\n", "file: name must be a string, got a list (name)"),
    case("root-must-be-a-mapping", "- a\n", "file: an intent file is a mapping"),
    case(
        "collection-must-be-a-list",
        "name: t\nentities: { a: 1 }\n",
        "file: entities must be a list, got a mapping",
    ),
    case(
        "anchors-rejected",
        "name: &n t\ndescription: *n\n",
        "t.intent:1:7: error: anchors are not allowed (&n)",
        "t.intent:2:14: error: aliases are not allowed (*n)",
    ),
    case("tags-rejected", "name: !!str t\n", "t.intent:1:7: error: type tags are not allowed"),
    case(
        "duplicate-keys-rejected",
        "name: t\nname: u\n",
        "t.intent:2:1: error: duplicate key [name] (first at line 1); keep one of them",
    ),
    case(
        "multi-document-rejected",
        "name: t\n---\nname: u\n",
        "t.intent:2:1: error: a definition file holds one YAML document",
    ),
    case("yaml-syntax-error", "name: t\nentities: [\n", "error: YAML syntax error"),
    case(
        "name-must-not-be-empty",
        "name: ''\n",
        "t.intent:1:7: error: file: name must not be empty (name)",
    ),
    case(
        "bare-on-yes-keys-stay-strings",
        "name: t\non: x\nyes: 1\n",
        "t.intent:2:1: error: file: unknown key [on] (on)",
        "t.intent:3:1: error: file: unknown key [yes] (yes)",
    ),
    case(
        "every-not-run-top-level-key-warns",
        "name: t\n" + "".join(f"{k}: x\n" for k in NOT_RUN_TOP),
        *(
            f"t.intent:{i + 2}:1: warning: file: key [{k}] is not run by procflow (ignored) ({k})"
            for i, k in enumerate(NOT_RUN_TOP)
        ),
    ),
]

ENTITIES = [
    case("entity-kind-setting", entity(extra="    kind: setting\n")),
    case(
        "entity-name-not-identifier",
        ENTITY
        + "  - name: Bad Name\n    fields: [ { name: id, type: integer, primaryKey: true } ]\n",
        "error: entity #3: entity name [Bad Name] is not an identifier",
    ),
    case(
        "entity-declared-twice",
        ENTITY + "  - name: Item\n    fields: [ { name: id, type: integer, primaryKey: true } ]\n",
        "t.intent:11:11: error: entity [Item]: declared twice (first at line 8) (entities[2].name)",
    ),
    case(
        "entity-unknown-key-suggests",
        entity(extra="    relation: []\n"),
        "entity [Thing]: unknown key [relation]; did you mean [relations]? (entities[2].relation)",
    ),
    case(
        "entity-not-run-keys-warn",
        entity(extra="    icon: box\n    lifecycle: {}\n"),
        "warning: entity [Thing]: key [icon] is not run by procflow (ignored) (entities[2].icon)",
        "warning: entity [Thing]: key [lifecycle] is not run by procflow",
    ),
    case(
        "entity-function-unknown",
        entity(extra="    function: Settings\n"),
        "entity [Thing]: function [Settings] is not an entity function (Setting, Document, DocumentItem, Master, Detail, List); did you mean [Setting]?",
    ),
    case(
        "entity-kind-unknown",
        entity(extra="    kind: settings\n"),
        "entity [Thing]: kind [settings] is not an entity kind; the only one is [setting]; did you mean [setting]?",
    ),
    case(
        "entity-kind-contradicts-function",
        entity(extra="    function: Master\n    kind: setting\n"),
        "entity [Thing]: kind [setting] contradicts function [Master]; keep one",
    ),
    case(
        "field-not-run-keys-warn",
        entity("{ name: code, type: string, pattern: '[A-Z]+' }"),
        "warning: entity [Thing] field [code]: key [pattern] is not run by procflow (ignored) (entities[2].fields[1].pattern)",
    ),
    case(
        "field-unknown-key-case-hint",
        entity("{ name: code, type: string, Required: true }"),
        "entity [Thing] field [code]: unknown key [Required]; did you mean [required]? (names are case-sensitive)",
    ),
    case(
        "field-type-unknown-suggests",
        entity("{ name: code, type: strng }"),
        "entity [Thing] field [code]: type [strng] is not a field type (string text integer int long decimal double boolean date timestamp uuid); did you mean [string]?",
    ),
    case(
        "field-type-required",
        entity("{ name: code }"),
        "entity [Thing] field [code]: missing required key [type]",
    ),
    case(
        "field-name-required",
        entity("{ type: string }"),
        "entity [Thing]: missing required key [name]",
    ),
    case(
        "field-declared-twice",
        entity("{ name: id, type: integer }"),
        "entity [Thing]: field [id] is declared twice",
    ),
    case(
        "field-length-zero",
        entity("{ name: code, type: string, length: 0 }"),
        "entity [Thing] field [code]: length [0] must be a positive integer",
    ),
    case(
        "field-length-not-integer",
        entity("{ name: code, type: string, length: ten }"),
        "entity [Thing] field [code]: length must be an integer, got a string",
    ),
    case(
        "field-default-wrong-type",
        entity(
            "{ name: n, type: integer, defaultValue: 'x' }",
            "{ name: f, type: boolean, defaultValue: yes }",
        ),
        "entity [Thing] field [n]: defaultValue must be an integer, got the text [x]",
        "entity [Thing] field [f]: defaultValue must be true or false, got the text [yes]",
    ),
    case(
        "field-default-too-long",
        entity("{ name: code, type: string, length: 2, defaultValue: abc }"),
        "entity [Thing] field [code]: defaultValue is 3 characters long; the field holds at most 2",
    ),
    case(
        "field-default-date-and-timestamp",
        entity(
            "{ name: d, type: date, defaultValue: 2027-01-10 }",
            "{ name: ts, type: timestamp, defaultValue: '2027-01-10T09:30:00Z' }",
            "{ name: u, type: uuid, defaultValue: nope }",
        ),
        "entity [Thing] field [u]: defaultValue must be a UUID, got the text [nope]",
    ),
    case(
        "no-primary-key",
        ENTITY + "  - name: Thing\n    fields: [ { name: code, type: string } ]\n",
        "entity [Thing]: has no primary key; declare one integer field with primaryKey: true",
    ),
    case(
        "two-primary-keys",
        entity("{ name: other, type: integer, primaryKey: true }"),
        "entity [Thing] field [other]: is a second primary key (the first is [id]); an entity has exactly one",
    ),
    case(
        "primary-key-not-integer",
        ENTITY
        + "  - name: Thing\n    fields: [ { name: code, type: string, primaryKey: true } ]\n",
        "entity [Thing] field [code]: the primary key must be an integer field, not string",
    ),
    case(
        "relation-kind-unknown-suggests",
        entity(relations=["{ name: item, kind: manyToone, to: Item }"]),
        "entity [Thing] relation [item]: kind [manyToone] is not a relation kind (manyToOne, oneToOne, oneToMany, manyToMany); did you mean [manyToOne]? (names are case-sensitive)",
    ),
    case(
        "relation-to-unknown-entity",
        entity(relations=["{ name: item, kind: manyToOne, to: Itme }"]),
        "entity [Thing] relation [item]: to [Itme] is not a declared entity; did you mean [Item]?",
    ),
    case(
        "relation-named-like-a-field",
        entity(
            "{ name: item, type: integer }", relations=["{ name: item, kind: manyToOne, to: Item }"]
        ),
        "entity [Thing]: relation [item] has the same name as a field; rename it",
    ),
    case(
        "relation-required-keys",
        entity(relations=["{ name: item }"]),
        "entity [Thing] relation [item]: missing required key [kind]",
        "entity [Thing] relation [item]: missing required key [to]",
    ),
    case(
        "status-relation-to-non-setting",
        entity(relations=["{ name: st, kind: manyToOne, to: Item, function: EntityStatus }"]),
        "entity [Thing] relation [st]: a status relation must point to a setting entity; [Item] is not one (give it function: Setting)",
    ),
    case(
        "status-relation-to-many",
        entity(relations=["{ name: st, kind: oneToMany, to: Status, function: EntityStatus }"]),
        "entity [Thing] relation [st]: a status relation must be to-one (manyToOne or oneToOne), not oneToMany",
    ),
    case(
        "relation-function-unknown",
        entity(relations=["{ name: st, kind: manyToOne, to: Status, function: Status }"]),
        "entity [Thing] relation [st]: function [Status] is not a relation function; the only one is [EntityStatus]",
    ),
    case(
        "relation-init-resolves-names-and-ids",
        entity(
            relations=[
                "{ name: st, kind: manyToOne, to: Status, function: EntityStatus, init: Opne }",
                "{ name: st2, kind: manyToOne, to: Status, function: EntityStatus, init: 7 }",
            ]
        )
        + SEEDS,
        "entity [Thing] relation [st]: init [Opne] is not a seeded value of [Status]; did you mean [Open]? (entities[2].relations[0].init)",
        "entity [Thing] relation [st2]: init [7] is not a seeded value of [Status] (seeded ids: 1, 2)",
    ),
    case(
        "relation-init-needs-a-status-relation",
        entity(relations=["{ name: item, kind: manyToOne, to: Item, init: 1 }"]),
        "entity [Thing] relation [item]: init sets the initial status; it needs function: EntityStatus on this relation",
    ),
    case(
        "relation-init-without-seeds",
        entity(
            relations=[
                "{ name: st, kind: manyToOne, to: Status, function: EntityStatus, init: Open }"
            ]
        ),
        "entity [Thing] relation [st]: init [Open] cannot be resolved: [Status] has no seeds",
    ),
    case(
        "every-not-run-entity-key-warns",
        entity(extra="".join(f"    {k}: x\n" for k in NOT_RUN_ENTITY)),
        *(
            f"t.intent:{i + 12}:5: warning: entity [Thing]: key [{k}] is not run by procflow (ignored) (entities[2].{k})"
            for i, k in enumerate(NOT_RUN_ENTITY)
        ),
    ),
    case(
        "every-not-run-field-key-warns",
        entity("{ name: code, type: string, " + ", ".join(f"{k}: x" for k in NOT_RUN_FIELD) + " }"),
        *(
            f"warning: entity [Thing] field [code]: key [{k}] is not run by procflow (ignored) (entities[2].fields[1].{k})"
            for k in NOT_RUN_FIELD
        ),
    ),
]

SEEDS_AND_FORMS = [
    case(
        "seed-unknown-entity-suggests",
        ENTITY + "seeds:\n  - { name: s, entity: Stauts, rows: [] }\n",
        "seed [s]: entity [Stauts] is not a declared entity; did you mean [Status]?",
    ),
    case(
        "seed-row-unknown-key-suggests",
        ENTITY + "seeds:\n  - { name: s, entity: Status, rows: [ { id: 1, nme: Open } ] }\n",
        "seed [s] row 1: unknown key [nme]; did you mean [name]? (seeds[0].rows[0].nme)",
    ),
    case(
        "seed-row-values-typed-like-records",
        ENTITY
        + "seeds:\n  - { name: s, entity: Status, rows: [ { id: one, name: Open }, { id: 2, name: Much too long } ] }\n",
        "seed [s] row 1: field [id] must be an integer, got the text [one]",
        "seed [s] row 2: field [name] is 13 characters long; the field holds at most 10",
    ),
    case(
        "seed-row-required-field-missing",
        entity("{ name: code, type: string, required: true }")
        + "seeds:\n  - { name: s, entity: Thing, rows: [ { id: 1 } ] }\n",
        "seed [s] row 1: required field [code] is missing",
    ),
    case(
        "seed-duplicate-ids",
        ENTITY
        + "seeds:\n  - { name: a, entity: Status, rows: [ { id: 1, name: A } ] }\n  - { name: b, entity: Status, rows: [ { id: 1, name: B } ] }\n",
        "seed [b] row 1: id [1] of [Status] is seeded twice (first at line 12)",
    ),
    case(
        "seed-relation-takes-an-id",
        entity(relations=["{ name: item, kind: manyToOne, to: Item }"])
        + "seeds:\n  - { name: s, entity: Thing, rows: [ { id: 1, item: first } ] }\n",
        "seed [s] row 1: relation [item] must be the related id, got the text [first]",
    ),
    case(
        "seed-keys",
        ENTITY + "seeds:\n  - { entity: Status, row: [] }\n",
        "seed #1: unknown key [row]; did you mean [rows]?",
        "seed #1: missing required key [name]",
        "seed #1: missing required key [rows]",
    ),
    case(
        "form-checks",
        ENTITY
        + "forms:\n  - { name: F, forEntity: Item, fields: [idd], actions: [ok, not-ok, ok] }\n",
        "form [F]: [idd] is not a field of [Item]; did you mean [id]?",
        "form [F]: action [not-ok] is not an identifier",
        "form [F]: action [ok] is listed twice",
    ),
    case(
        "form-unknown-entity-and-no-actions",
        ENTITY + "forms:\n  - { name: F, forEntity: Items }\n",
        "form [F]: forEntity [Items] is not a declared entity; did you mean [Item]?",
        "form [F]: declares no actions; a task with this form could never be completed",
    ),
    case(
        "form-declared-twice",
        ENTITY
        + "forms:\n  - { name: F, forEntity: Item, actions: [ok] }\n  - { name: F, forEntity: Item, actions: [ok] }\n",
        "form [F]: declared twice",
    ),
    case(
        "seed-row-required-field-null",
        entity("{ name: code, type: string, required: true }")
        + "seeds:\n  - { name: s, entity: Thing, rows: [ { id: 1, code: null } ] }\n",
        "t.intent:16:54: error: seed [s] row 1: required field [code] is null (seeds[0].rows[0].code)",
    ),
    case(
        "seed-row-without-primary-key",
        ENTITY + "seeds:\n  - { name: s, entity: Status, rows: [ { name: Open } ] }\n",
        "t.intent:12:40: error: seed [s] row 1: the primary key [id] is missing; seed rows are loaded by id (seeds[0].rows[0])",
    ),
    case(
        "form-field-listed-twice",
        ENTITY + "forms:\n  - { name: F, forEntity: Item, fields: [id, id], actions: [ok] }\n",
        "t.intent:12:46: error: form [F]: field [id] is listed twice (forms[0].fields[1])",
    ),
]


@pytest.mark.parametrize(("text", "expected"), FILE + ENTITIES + SEEDS_AND_FORMS)
def test_file_and_data_rules(text: str, expected: list[str]) -> None:
    check(text, expected, EXAMPLES)  # no delegates here: any project directory will do


# --- the examples ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["provisioning/app.intent", "orders/orders.intent"])
def test_examples_validate_with_no_diagnostics(path: str) -> None:
    loaded = load_file(str(EXAMPLES / path))
    assert [d.format() for d in loaded.diagnostics] == []
    assert loaded.ok


def test_provisioning_compiles_into_the_expected_ir() -> None:
    app = load_file(str(EXAMPLES / "provisioning/app.intent")).definition
    assert isinstance(app, Application)
    status = app.entity("TenantApplication")
    assert status is not None and status.status_relation is not None
    assert status.status_relation.init == 1  # "Requested", resolved to its seed id
    process = app.processes[0]
    create, provision, record, mark, done = process.steps
    assert isinstance(create, ServiceTask) and isinstance(create.action, Delegate)
    assert (create.action.module, create.action.attr) == ("custom", "SchemaProvisioner")
    assert create.retry is not None and create.retry.count == 3
    assert create.retry.every == timedelta(seconds=30) and create.retry.attempts == 4
    assert (create.on_error, create.produces) == ("recordFailure", ("dbPassword",))
    assert isinstance(provision, ServiceTask) and provision.uses == ("dbPassword",)
    assert isinstance(record, ServiceTask) and record.action == SetField(
        "failureMessage", "{error}", True
    )
    assert isinstance(mark, ServiceTask) and mark.action == SetRelationField(
        "ProvisioningStatus", 3
    )
    assert done.kind == "end"
    assert [(v.name, v.clear_after) for v in process.vars] == [("dbPassword", "provisionApp")]


def test_orders_compiles_into_the_expected_ir() -> None:
    app = load_file(str(EXAMPLES / "orders/orders.intent")).definition
    assert isinstance(app, Application)
    process: Process = app.processes[0]
    assert process.trigger is not None and process.trigger.when_source == ("total != 0",)
    assert process.abort_on is not None and process.abort_on.statuses == (5,)
    assert process.abort_on.then == "markVoid"
    review = process.step("review")
    assert isinstance(review, UserTask) and review.assignee.role == "manager"
    assert review.timeout is not None and review.timeout.after == timedelta(days=2)
    assert review.expire is not None and review.expire.field == "validUntil"
    wait = process.step("awaitReply")
    assert isinstance(wait, WaitRecord) and (wait.entity, wait.via) == ("OrderMessage", "order")
    decision = process.step("bigOrder")
    assert isinstance(decision, Decision) and decision.else_ == "approve"
    ask = process.step("askCustomer")
    assert isinstance(ask, ServiceTask) and isinstance(ask.action, Notify)
    assert ask.action.to.path == ("customer", "email")
    assert [r.path for r in ask.action.subject.refs()] == [("id",)]


# --- all at once ----------------------------------------------------------------------------

MANY_ERRORS = """\
name: t
reports: []
entities:
  - name: Order
    fields:
      - { name: id, type: integr, primaryKey: true }
      - { name: note, type: string, lenght: 5 }
processes:
  - name: P
    trigger: { onCreate: Ordr }
    steps:
      - { name: a, kind: serviceTask, args: { delegate: Missing, retry: { count: 0, every: 30s } } }
      - { name: b, kind: decision, args: { if: 'x >', then: nowhere } }
"""


def test_every_problem_is_reported_in_one_pass_sorted_by_position(tmp_path: Path) -> None:
    loaded = load_text(MANY_ERRORS, "t.intent", project_dir=str(tmp_path))
    lines = [d.format() for d in loaded.diagnostics]
    expected = [
        "t.intent:2:1: warning: file: key [reports] is not run by procflow",
        "t.intent:6:27: error: entity [Order] field [id]: type [integr] is not a field type",
        "t.intent:7:37: error: entity [Order] field [note]: unknown key [lenght]; did you mean [length]?",
        "t.intent:10:26: error: process [P] trigger: onCreate [Ordr] is not a declared entity",
        "t.intent:12:57: error: process [P] step [a]: delegate [Missing]: no module [custom]",
        "t.intent:12:82: error: process [P] step [a]: retry count [0] must be an integer >= 1",
        "t.intent:12:92: error: process [P] step [a]: retry every [30s] is not an ISO-8601 duration; write PT30S",
        "t.intent:13:52: error: process [P] step [b]: if [x >]: expected a value",
        "t.intent:13:61: error: process [P] step [b]: then [nowhere] is not a step of this process",
    ]
    assert len(lines) == len(expected), "\n".join(lines)
    for line, want in zip(lines, expected, strict=True):
        assert line.startswith(want), f"{line}\n!= {want}"
    positions = [tuple(map(int, re.findall(r":(\d+):(\d+):", line)[0])) for line in lines]
    assert positions == sorted(positions)
    assert loaded.definition is not None  # the application is still returned, for tools


def test_the_spec_message_shape(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "provisioning" / "custom", tmp_path / "custom")
    text = (EXAMPLES / "provisioning" / "app.intent").read_text().replace("count: 3", "count: 0")
    loaded = load_text(text, "app.intent", project_dir=str(tmp_path))
    assert [d.format() for d in loaded.diagnostics] == [
        "app.intent:30:29: error: process [TenantProvisioning] step [createSchema]: retry count "
        "[0] must be an integer >= 1 (processes[0].steps[0].args.retry.count)"
    ]
