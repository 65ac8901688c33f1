"""Intent processes: triggers, steps, routing, resilience, vars, decisions, waits, abortOn,
delegates, notify and user tasks.

Each case is a process (over a fixed set of entities) and the exact set of diagnostics it must
produce: every expected substring matches a reported line, and every reported line is expected.
"""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import pytest
from diagnostic_cases import assert_exactly, case

from procflow.model.intent.compiler import compile_intent
from procflow.model.ir import Application, Decision, Delegate, ServiceTask, UserTask
from procflow.model.reading.yamlsrc import YMap, load_yaml
from procflow.model.source import Diagnostics
from procflow.model.validate import load_text

BASE = """\
name: t
entities:
  - name: OrderStatus
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: name, type: string, length: 20 }
  - name: Customer
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: email, type: string }
      - { name: creditLimit, type: decimal }
      - { name: manager, type: string }
    relations:
      - { name: parent, kind: manyToOne, to: Customer }
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: total, type: decimal }
      - { name: note, type: string, length: 12 }
      - { name: qty, type: integer, required: true }
      - { name: urgent, type: boolean }
      - { name: validUntil, type: date }
    relations:
      - { name: customer, kind: manyToOne, to: Customer }
      - { name: Status, kind: manyToOne, to: OrderStatus, function: EntityStatus, init: Draft }
      - { name: messages, kind: oneToMany, to: OrderMessage }
  - name: OrderMessage
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: internal, type: boolean }
    relations:
      - { name: order, kind: manyToOne, to: Order }
seeds:
  - name: statuses
    entity: OrderStatus
    rows: [ { id: 1, name: Draft }, { id: 2, name: Approved }, { id: 3, name: Cancelled } ]
forms:
  - { name: Approve, forEntity: Order, fields: [note], actions: [approve, reject] }
  - { name: CustomerForm, forEntity: Customer, fields: [email], actions: [ok] }
processes:
"""

DELEGATES = """\
class Ok:
    def execute(self, ctx):
        pass


def notify_ops(ctx):
    pass


class NoExecute:
    pass
"""

P = "processes[0]"  # the node path of the process under test


def process(*steps: str, head: str = "    trigger: { onCreate: Order }\n") -> str:
    """A file with one process [P]: ``head`` lines (trigger, vars, abortOn), then one step a line."""
    lines = "".join(f"      - {s}\n" for s in steps)
    return f"{BASE}  - name: P\n{head}    steps:\n{lines}"


def svc(name: str, args: str) -> str:
    return f"{{ name: {name}, kind: serviceTask, args: {{ {args} }} }}"


OK = svc("ok", "delegate: Ok")
END_STEP = "{ name: done, kind: end }"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project directory with delegates; nothing writes to it, so the module shares one."""
    tmp_path = tmp_path_factory.mktemp("project")
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "__init__.py").write_text(DELEGATES)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("from .impl import Worker\nLIMIT = 3\n")
    (tmp_path / "broken.py").write_text("def oops(:\n")
    return tmp_path


def diagnostics(text: str, project: Path) -> tuple[Application | None, list[str]]:
    """What ``load_text`` reports for ``text``, parsing the shared entities only once.

    Parsing YAML costs ~20 ms for the entities alone, so a file that starts with ``BASE`` is loaded
    as ``BASE``'s cached tree plus its own part, padded with blank lines so every position is what
    the whole file gives. ``test_the_fast_path_is_load_text`` holds it to that.
    """
    if not text.startswith(BASE):
        return slow_diagnostics(text, project)
    diags = Diagnostics()
    padding = "\n" * (BASE.count("\n") - 1)  # ``processes:`` stays on its line
    part = load_yaml(padding + "processes:\n" + text[len(BASE) :], "t.intent", diags)
    assert isinstance(part, YMap)
    base = _base_tree()
    root = YMap(base.pos, {**base.entries, **part.entries})
    app = compile_intent(root, "t.intent", str(project), diags)
    return app, [d.format() for d in diags.sorted()]


def slow_diagnostics(text: str, project: Path) -> tuple[Application | None, list[str]]:
    loaded = load_text(text, "t.intent", project_dir=str(project))
    app = loaded.definition
    assert app is None or isinstance(app, Application)
    return app, [d.format() for d in loaded.diagnostics]


@functools.cache
def _base_tree() -> YMap:
    diags = Diagnostics()
    root = load_yaml(BASE, "t.intent", diags)
    assert isinstance(root, YMap) and not diags.items
    return root


def check(text: str, expected: Sequence[str], project: Path) -> None:
    """Every expected substring is reported, and nothing else is."""
    _, lines = diagnostics(text, project)
    assert_exactly(lines, expected)


VALID = [
    case("delegate-bare-name", process(OK)),
    case("delegate-dotted", process(svc("a", "delegate: custom.notify_ops"))),
    case("delegate-reexported-import", process(svc("a", "delegate: pkg.mod.Worker"))),
    case("delegate-assignment", process(svc("a", "delegate: pkg.mod.LIMIT"))),
    case("delegate-fields", process(svc("a", "delegate: Ok, fields: { region: eu, n: 2 }"))),
    case(
        "retry-and-onError-on-notify",
        process(
            svc(
                "a",
                "notify: { to: ops@x.io, subject: hi }, retry: { count: 2, every: PT1M }, "
                "onError: end",
            ),
        ),
    ),
    case(
        "error-value-only-after-onError",
        process(
            svc("a", "delegate: Ok, onError: fail, next: end"),
            svc("fail", 'setField: note, value: "{error}"'),
        ),
    ),
    case(
        "error-value-on-chain-after-onError",
        process(
            svc("a", "delegate: Ok, onError: fail, next: end"),
            svc("fail", "setRelationField: Status, value: Cancelled"),
            svc("record", 'setField: note, value: "{error}"'),
        ),
    ),
    case(
        "guard-list-and-literals",
        process(
            OK,
            head="    trigger: { onUpdate: Order, when: "
            "[\"note == 'x'\", 'urgent != true', 'total != null', 'qty == -1'] }\n",
        ),
    ),
    case(
        "guard-literal-first",
        process(OK, head="    trigger: { onCreate: Order, when: \"'x' == note\" }\n"),
    ),
    case("business-key", process(OK, head="    trigger: { onCreate: Order, businessKey: note }\n")),
    case(
        "decision-comparisons-of-one-kind",
        process(
            "{ name: d, kind: decision, args: { if: \"validUntil == '2027-01-01' and total == 1 "
            'and note != null and qty < 2.5 and customer == 3 and urgent != false", then: end } }',
            OK,
        ),
    ),
    case(
        "decision-one-hop-and-action",
        process(
            "{ name: review, kind: userTask, args: { assignee: manager, form: Approve } }",
            "{ name: d, kind: decision, args: { if: \"action == 'approve' and customer.creditLimit"
            ' > total", then: done } }',
            OK,
            END_STEP,
        ),
    ),
    case(
        "decision-action-after-usertask-and-its-timer-path",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: P1D, then: r } } }",
            "{ name: d, kind: decision, args: { if: \"action == 'ok'\", then: end } }",
            svc("r", "notify: { to: a@b.c, subject: late }, next: end"),
        ),
    ),
    case(
        "decision-boolean-field",
        process("{ name: d, kind: decision, args: { if: urgent, then: end } }", OK),
    ),
    case(
        "wait-same-entity-without-via",
        process("{ name: w, kind: wait, args: { onUpdate: Order, when: 'urgent == true' } }", OK),
    ),
    case(
        "wait-via-relation",
        process(
            "{ name: w, kind: wait, args: { onCreate: OrderMessage, via: order, when: 'not internal' } }"
        ),
    ),
    case(
        "usertask-everything",
        process(
            "{ name: t, kind: userTask, args: { assignee: { path: customer.parent.manager, "
            "fallback: sales }, form: Approve, timeout: { after: P2D, then: remind }, expire: "
            "{ until: validUntil, then: expired }, setField: urgent, value: false, next: end } }",
            svc(
                "remind",
                "notify: { to: customer.email, subject: 'Order {id}', body: '{customer.email}' }, next: end",
            ),
            svc("expired", "setRelationField: Status, value: 3"),
        ),
    ),
    case("usertask-personal", process("{ name: t, kind: userTask, args: { assignee: personal } }")),
    case(
        "abortOn-cleanup",
        process(
            svc("a", "delegate: Ok, next: end"),
            svc("void", "setField: note, value: void"),
            head="    trigger: { onCreate: Order }\n    abortOn: { status: [Cancelled, 2], then: void }\n",
        ),
    ),
    case(
        "vars-produced-used-cleared",
        process(
            svc("a", "delegate: Ok, produces: [pw]"),
            svc("b", "delegate: Ok, uses: pw"),
            head="    trigger: { onCreate: Order }\n    vars: [ { name: pw, clearAfter: b } ]\n",
        ),
    ),
    case("end-step-named-end", process(OK, "{ name: end, kind: end }")),
    case(
        "no-trigger-delegate-only",
        process(OK, svc("n", "notify: { to: a@b.c, subject: x }"), head=""),
    ),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_processes_have_no_diagnostics(text: str, expected: list[str], project: Path) -> None:
    check(text, expected, project)


RESILIENCE = [
    case(
        "retry-unknown-key-suggests",
        process(svc("a", "delegate: Ok, retry: { counts: 3, every: PT1M }")),
        f"error: process [P] step [a]: unknown key [counts]; did you mean [count]? ({P}.steps[0].args.retry.counts)",
        "process [P] step [a]: retry needs [count]: the further attempts, an integer >= 1",
    ),
    case(
        "retry-not-a-mapping",
        process(svc("a", "delegate: Ok, retry: 3")),
        f"process [P] step [a]: retry must be a mapping {{ count, every }}, got an integer ({P}.steps[0].args.retry)",
    ),
    case(
        "retry-count-missing",
        process(svc("a", "delegate: Ok, retry: { every: PT1M }")),
        "step [a]: retry needs [count]: the further attempts, an integer >= 1",
    ),
    case(
        "retry-count-fractional",
        process(svc("a", "delegate: Ok, retry: { count: 2.5, every: PT1M }")),
        "step [a]: retry count [2.5] must be an integer >= 1",
    ),
    case(
        "retry-count-zero",
        process(svc("a", "delegate: Ok, retry: { count: 0, every: PT1M }")),
        f"step [a]: retry count [0] must be an integer >= 1 ({P}.steps[0].args.retry.count)",
    ),
    case(
        "retry-count-negative",
        process(svc("a", "delegate: Ok, retry: { count: -2, every: PT1M }")),
        "step [a]: retry count [-2] must be an integer >= 1",
    ),
    case(
        "retry-count-boolean",
        process(svc("a", "delegate: Ok, retry: { count: true, every: PT1M }")),
        "step [a]: retry count [true] must be an integer >= 1",
    ),
    case(
        "retry-count-quoted",
        process(svc("a", "delegate: Ok, retry: { count: '3', every: PT1M }")),
        "step [a]: retry count [3] must be an integer >= 1 (it is quoted text)",
    ),
    case(
        "retry-every-missing",
        process(svc("a", "delegate: Ok, retry: { count: 3 }")),
        "step [a]: retry needs [every]: an ISO-8601 duration such as PT30S",
    ),
    case(
        "retry-every-short-form",
        process(svc("a", "delegate: Ok, retry: { count: 3, every: 30s }")),
        f"step [a]: retry every [30s] is not an ISO-8601 duration; write PT30S ({P}.steps[0].args.retry.every)",
    ),
    case(
        "retry-every-garbage",
        process(svc("a", "delegate: Ok, retry: { count: 3, every: soon }")),
        "step [a]: retry every [soon] is not an ISO-8601 duration; write e.g. PT30S",
    ),
    case(
        "retry-every-months",
        process(svc("a", "delegate: Ok, retry: { count: 3, every: P1M }")),
        "step [a]: retry every [P1M]: months and years have no fixed length",
    ),
    case(
        "retry-every-zero",
        process(svc("a", "delegate: Ok, retry: { count: 3, every: PT0S }")),
        "step [a]: retry every [PT0S] must be longer than zero",
    ),
    case(
        "onError-unknown-target-suggests",
        process(
            svc("a", "delegate: Ok, onError: recrd"), svc("record", "setField: note, value: x")
        ),
        f"step [a]: onError [recrd] is not a step of this process; did you mean [record]? ({P}.steps[0].args.onError)",
    ),
    case(
        "retry-on-setField-step",
        process(svc("a", "setField: note, value: x, retry: { count: 1, every: PT1M }")),
        "step [a]: retry applies only to a serviceTask whose action is delegate or notify; [setField] does not fail",
    ),
    case(
        "onError-on-setRelationField-step",
        process(svc("a", "setRelationField: Status, value: Approved, onError: end")),
        "step [a]: onError applies only to a serviceTask whose action is delegate or notify",
    ),
    case(
        "retry-on-script",
        process(
            "{ name: s, kind: script, args: { delegate: Ok, retry: { count: 1, every: PT1M } } }"
        ),
        "step [s]: declares arg [retry] but is a script — retry is a serviceTask argument",
    ),
    case(
        "retry-on-decision",
        process(
            "{ name: d, kind: decision, args: { if: urgent, then: end, retry: { count: 1 } } }", OK
        ),
        f"error: process [P] step [d]: declares arg [retry] but is a decision — retry is a serviceTask argument ({P}.steps[0].args.retry)",
    ),
    case(
        "onError-on-usertask",
        process("{ name: t, kind: userTask, args: { assignee: x, onError: end } }"),
        "step [t]: declares arg [onError] but is a userTask — onError is a serviceTask argument",
    ),
    case(
        "error-value-reached-without-failure",
        process(
            svc("a", "delegate: Ok, onError: fail"), svc("fail", 'setField: note, value: "{error}"')
        ),
        "step [fail]: {error} would be empty here: it is reached without a failure: a → fail",
    ),
    case(
        "error-value-never-after-onError",
        process(OK, END_STEP, svc("fail", 'setField: note, value: "{error}"')),
        "step [fail]: {error} is set only by a failure, but no onError route leads to this step",
        "warning: process [P] step [fail]: no route reaches this step, so it never runs",
    ),
    case(
        "error-value-after-rejoining-normal-flow",
        process(
            svc("a", "delegate: Ok, onError: fix"),
            svc("b", "delegate: Ok, next: record"),
            svc("fix", "setRelationField: Status, value: Cancelled, next: b"),
            svc("record", 'setField: note, value: "{error}"'),
        ),
        "step [record]: {error} would be empty here: it is reached without a failure: a → b → record",
    ),
    case(
        "error-value-in-larger-string",
        process(
            svc("a", "delegate: Ok, onError: f, next: end"),
            svc("f", 'setField: note, value: "failed: {error}"'),
        ),
        "step [f]: {error} must be the whole value, not part of [failed: {error}]",
    ),
    case(
        "error-value-unquoted",
        process(
            svc("a", "delegate: Ok, onError: f, next: end"),
            "{ name: f, kind: serviceTask, args: { setField: note, value: {error} } }",
        ),
        'step [f]: write the value as "{error}" in quotes; unquoted, {error} is a YAML mapping',
    ),
    case(
        "error-value-into-integer-field",
        process(
            svc("a", "delegate: Ok, onError: f, next: end"),
            svc("f", 'setField: qty, value: "{error}"'),
        ),
        "step [f]: {error} is text, but [qty] is an integer field",
    ),
    case(
        "other-placeholder-in-setField",
        process(svc("a", 'setField: note, value: "{total}"')),
        "step [a]: {total} is not filled in: a setField value is a literal",
    ),
    case(
        "error-placeholder-in-notify",
        process(
            svc("a", "delegate: Ok, onError: n, next: end"),
            svc("n", "notify: { to: a@b.c, subject: 'failed: {error}' }"),
        ),
        "step [n]: notify subject: {error} is available only as the whole value of a setField",
    ),
    case(
        "retry-every-not-a-scalar",
        process(svc("a", "delegate: Ok, retry: { count: 1, every: { s: 1 } }")),
        f"t.intent:45:87: error: process [P] step [a]: retry every must be an ISO-8601 duration, got a mapping ({P}.steps[0].args.retry.every)",
    ),
]

VARS = [
    case(
        "produces-undeclared-suggests",
        process(
            svc("a", "delegate: Ok, produces: [pasword]"), head="    vars: [ { name: password } ]\n"
        ),
        f"step [a]: produces [pasword] is not a declared var; did you mean [password]? ({P}.steps[0].args.produces[0])",
        "process [P] var [password]: no step produces this var",
    ),
    case(
        "uses-undeclared",
        process(
            svc("a", "delegate: Ok, produces: pw"),
            svc("b", "delegate: Ok, uses: [pw, token]"),
            head="    vars: [ { name: pw } ]\n",
        ),
        "step [b]: uses [token] is not a declared var",
    ),
    case(
        "produces-without-vars-block",
        process(svc("a", "delegate: Ok, produces: [pw]")),
        "step [a]: produces [pw] names a var, but the process declares no vars; declare it under vars:",
    ),
    case(
        "duplicate-var",
        process(
            svc("a", "delegate: Ok, produces: [pw]"),
            head="    vars: [ { name: pw }, { name: pw } ]\n",
        ),
        "process [P] vars: var [pw] is declared twice",
    ),
    case(
        "nameless-var",
        process(OK, head="    vars: [ { clearAfter: ok } ]\n"),
        "process [P] vars: a var needs a name",
    ),
    case(
        "non-identifier-var",
        process(OK, head="    vars: [ { name: db-password } ]\n"),
        "process [P] vars: var name [db-password] is not an identifier",
    ),
    case(
        "var-unknown-key",
        process(
            svc("a", "delegate: Ok, produces: pw"),
            head="    vars: [ { name: pw, clearAftr: a } ]\n",
        ),
        "process [P] vars: unknown key [clearAftr]; did you mean [clearAfter]?",
    ),
    case(
        "clearAfter-unknown-step",
        process(
            svc("provision", "delegate: Ok, produces: pw"),
            head="    vars: [ { name: pw, clearAfter: provison } ]\n",
        ),
        f"t.intent:43:37: error: process [P] var [pw]: clearAfter [provison] is not a step of this process; did you mean [provision]? ({P}.vars[0].clearAfter)",
    ),
    case(
        "clearAfter-end",
        process(
            svc("a", "delegate: Ok, produces: pw"),
            head="    vars: [ { name: pw, clearAfter: end } ]\n",
        ),
        "process [P] var [pw]: clearAfter [end] names no step",
    ),
    case(
        "clearAfter-decision",
        process(
            svc("a", "delegate: Ok, produces: pw"),
            "{ name: d, kind: decision, args: { if: urgent, then: end } }",
            head="    trigger: { onCreate: Order }\n    vars: [ { name: pw, clearAfter: d } ]\n",
        ),
        "process [P] var [pw]: clearAfter [d] names a decision step",
    ),
    case(
        "clearAfter-wait-step",
        process(
            svc("a", "delegate: Ok, produces: pw"),
            "{ name: w, kind: wait, args: { onUpdate: Order } }",
            head="    trigger: { onCreate: Order }\n    vars: [ { name: pw, clearAfter: w } ]\n",
        ),
        f"t.intent:44:37: error: process [P] var [pw]: clearAfter [w] names a wait step, which never completes work; name a serviceTask, script or userTask ({P}.vars[0].clearAfter)",
    ),
    case(
        "clearAfter-an-end-step",
        process(
            svc("a", "delegate: Ok, produces: pw"),
            END_STEP,
            head="    trigger: { onCreate: Order }\n    vars: [ { name: pw, clearAfter: done } ]\n",
        ),
        "process [P] var [pw]: clearAfter [done] names an end step, which never completes work",
    ),
    case(
        "produces-on-notify",
        process(
            svc("a", "notify: { to: a@b.c }, produces: [pw]"), head="    vars: [ { name: pw } ]\n"
        ),
        "step [a]: produces applies only to a delegate serviceTask",
    ),
    case(
        "uses-on-script",
        process(
            "{ name: s, kind: script, args: { delegate: Ok, uses: [pw] } }",
            head="    vars: [ { name: pw } ]\n",
        ),
        "step [s]: declares arg [uses] but is a script — uses is a serviceTask argument",
        "var [pw]: no step produces this var",
    ),
]

ROUTING = [
    case(
        "next-unknown-suggests",
        process(
            svc("a", "delegate: Ok, next: revew"),
            "{ name: review, kind: userTask, args: { assignee: x } }",
        ),
        f"step [a]: next [revew] is not a step of this process; did you mean [review]? ({P}.steps[0].args.next)",
    ),
    case(
        "then-and-else-unknown",
        process("{ name: d, kind: decision, args: { if: urgent, then: nope, else: ok2 } }", OK),
        "step [d]: then [nope] is not a step of this process",
        "step [d]: else [ok2] is not a step of this process; did you mean [ok]?",
    ),
    case(
        "timer-routes-unknown",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: P1D, then: x1 }, expire: { until: validUntil, then: x2 } } }"
        ),
        "step [t]: timeout then [x1] is not a step of this process",
        "step [t]: expire then [x2] is not a step of this process",
    ),
    case(
        "next-to-itself",
        process(svc("a", "delegate: Ok, next: a")),
        f"step [a]: next [a] routes the step to itself ({P}.steps[0].args.next)",
    ),
    case(
        "decision-to-itself",
        process("{ name: d, kind: decision, args: { if: urgent, then: d } }", OK),
        "step [d]: then [d] routes the step to itself",
    ),
    case(
        "decision-else-to-itself",
        process("{ name: d, kind: decision, args: { if: urgent, then: end, else: d } }"),
        f"t.intent:45:73: error: process [P] step [d]: else [d] routes the step to itself ({P}.steps[0].args.else)",
    ),
    case(
        "onError-to-itself",
        process(svc("a", "delegate: Ok, onError: a")),
        f"t.intent:45:70: error: process [P] step [a]: onError [a] routes the step to itself ({P}.steps[0].args.onError)",
    ),
    case(
        "timer-routes-to-itself",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: P1D, then: t }, "
            "expire: { until: validUntil, then: t } } }"
        ),
        "step [t]: timeout then [t] routes the step to itself",
        "step [t]: expire then [t] routes the step to itself",
    ),
    case(
        "route-not-a-name",
        process(svc("a", "delegate: Ok, next: [b]")),
        "step [a]: next must name a step or end, got a list",
    ),
    case(
        "unreachable-step-warns",
        process(svc("a", "delegate: Ok, next: end"), svc("b", "delegate: Ok")),
        f"t.intent:46:9: warning: process [P] step [b]: no route reaches this step, so it never runs ({P}.steps[1])",
    ),
    case(
        "unreachable-cycle-warns",
        process(
            svc("a", "delegate: Ok, next: end"),
            svc("b", "delegate: Ok"),
            svc("c", "delegate: Ok, next: b"),
        ),
        "step [b]: no route reaches this step",
        "step [c]: no route reaches this step",
    ),
    case(
        "reached-only-by-onError-or-timer-is-fine",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: PT1H, then: nudge }, next: end } }",
            svc("nudge", "notify: { to: ops@x.io }, onError: fail, next: end"),
            svc("fail", "setField: note, value: failed"),
        ),
    ),
]

STEPS = [
    case(
        "unknown-kind-case-hint",
        process("{ name: a, kind: servicetask, args: { delegate: Ok } }"),
        "step [a]: kind [servicetask] is not a step kind (serviceTask, script, userTask, decision, wait, parallel, end); did you mean [serviceTask]? (names are case-sensitive)",
    ),
    case(
        "missing-kind-and-name",
        process("{ args: { delegate: Ok } }"),
        "process [P] step #1: missing required key [name]",
        "process [P] step #1: missing required key [kind]",
    ),
    case(
        "duplicate-step-name",
        process(OK, svc("ok", "delegate: Ok")),
        "process [P] step [ok]: step name [ok] is used twice (first at line 45)",
    ),
    case(
        "step-name-not-identifier",
        process(svc("do-it", "delegate: Ok")),
        "process [P] step #1: step name [do-it] is not an identifier",
    ),
    case(
        "end-name-on-a-task",
        process(svc("end", "delegate: Ok")),
        "step [end]: the name [end] is reserved for an end step (kind: end)",
    ),
    case(
        "unknown-step-key",
        process("{ name: a, kind: serviceTask, arg: { delegate: Ok } }"),
        "step [a]: unknown key [arg]; did you mean [args]?",
        "step [a]: a serviceTask needs exactly one action",
    ),
    case(
        "unknown-arg-suggests",
        process(svc("a", "delegate: Ok, nxt: end")),
        f"step [a]: unknown key [nxt]; did you mean [next]? ({P}.steps[0].args.nxt)",
    ),
    case(
        "args-on-end-step",
        process(OK, "{ name: done, kind: end, args: { next: ok } }"),
        "step [done]: declares arg [next] but is an end step — next is a serviceTask, userTask, wait or parallel argument",
    ),
    case(
        "args-not-a-mapping",
        process("{ name: a, kind: serviceTask, args: [delegate] }"),
        "step [a]: args must be a mapping, got a list",
        "step [a]: a serviceTask needs exactly one action",
    ),
    case(
        "service-without-action",
        process(svc("a", "next: end")),
        "step [a]: a serviceTask needs exactly one action: setField+value, setRelationField+value, notify or delegate",
    ),
    case(
        "two-actions",
        process(svc("a", "delegate: Ok, setField: note, value: x")),
        "step [a]: declares both [setField] and [delegate]; a serviceTask has exactly one action",
    ),
    case(
        "notify-with-another-action",
        process(svc("a", "notify: { to: a@b.c }, delegate: Ok")),
        "step [a]: a notify step carries no other action; move [delegate] to a step of its own",
    ),
    case(
        "fields-without-delegate",
        process(svc("a", "notify: { to: a@b.c }, fields: { x: 1 }")),
        "step [a]: fields belongs to a delegate",
    ),
    case(
        "steps-missing",
        f"{BASE}  - name: P\n    trigger: {{ onCreate: Order }}\n",
        "process [P]: missing required key [steps] (a non-empty list)",
    ),
    case(
        "steps-empty",
        f"{BASE}  - name: P\n    steps: []\n",
        "process [P]: steps is empty; a process needs at least one step",
    ),
    case(
        "duplicate-process",
        process(OK) + f"  - name: P\n    steps:\n      - {OK}\n",
        "process [P]: declared twice (first at line 42)",
    ),
    case(
        "process-unknown-key",
        process(OK, head="    trigger: { onCreate: Order }\n    var: []\n"),
        "process [P]: unknown key [var]; did you mean [vars]?",
    ),
    case(
        "value-on-a-delegate",
        process(svc("a", "delegate: Ok, value: 1")),
        f"t.intent:45:61: error: process [P] step [a]: value belongs to setField or setRelationField ({P}.steps[0].args.value)",
    ),
    case(
        "value-on-a-notify",
        process(svc("a", "notify: { to: a@b.c }, value: 1")),
        "t.intent:45:70: error: process [P] step [a]: value belongs to setField or setRelationField",
    ),
]

SET_FIELD = [
    case(
        "setField-unknown-field-suggests",
        process(svc("a", "setField: nte, value: x")),
        f"step [a]: setField [nte] is not a field of [Order]; did you mean [note]? ({P}.steps[0].args.setField)",
    ),
    case(
        "setField-on-a-relation",
        process(svc("a", "setField: customer, value: 1")),
        "step [a]: setField [customer] is not a field of [Order]; it is a relation — use setRelationField",
    ),
    case(
        "setField-wrong-type",
        process(svc("a", "setField: qty, value: many")),
        "step [a]: value for [qty] must be an integer, got the text [many]",
    ),
    case(
        "setField-too-long",
        process(svc("a", "setField: note, value: abcdefghijklmnop")),
        "step [a]: value for [note] is 16 characters long; the field holds at most 12",
    ),
    case(
        "setField-null-into-required",
        process(svc("a", "setField: qty, value: null")),
        "step [a]: value for [qty] is required, so it cannot be set to null",
    ),
    case(
        "setField-bad-date",
        process(svc("a", "setField: validUntil, value: 2027-02-30")),
        "step [a]: value for [validUntil] must be a date written YYYY-MM-DD",
    ),
    case(
        "setField-missing-value",
        process(svc("a", "setField: note")),
        "step [a]: missing required key [value] (the value setField writes)",
    ),
    case(
        "setRelationField-resolves-names",
        process(svc("a", "setRelationField: Status, value: Aproved")),
        f"step [a]: value [Aproved] is not a seeded value of [OrderStatus]; did you mean [Approved]? ({P}.steps[0].args.value)",
    ),
    case(
        "setRelationField-unknown-id",
        process(svc("a", "setRelationField: Status, value: 9")),
        "step [a]: value [9] is not a seeded value of [OrderStatus] (seeded ids: 1, 2, 3)",
    ),
    case(
        "setRelationField-unknown-relation",
        process(svc("a", "setRelationField: status, value: 1")),
        "step [a]: setRelationField [status] is not a to-one relation of [Order]; did you mean [Status]? (names are case-sensitive)",
    ),
    case(
        "setRelationField-to-many",
        process(svc("a", "setRelationField: messages, value: 1")),
        "step [a]: setRelationField [messages] is not a to-one relation of [Order]; it is a oneToMany relation",
    ),
    case(
        "setRelationField-unseeded-entity",
        process(svc("a", "setRelationField: customer, value: 1")),
        "step [a]: value [1] cannot be resolved: [Customer] has no seeds",
    ),
    case(
        "onDelete-may-not-write",
        process(
            svc("a", "setField: note, value: x"),
            svc("b", "setRelationField: Status, value: 2"),
            "{ name: t, kind: userTask, args: { assignee: x, form: Approve } }",
            head="    trigger: { onDelete: Order }\n",
        ),
        "step [a]: setField writes the record, but the process runs onDelete",
        "step [b]: setRelationField writes the record, but the process runs onDelete",
        "step [t]: form [Approve] writes the record, but the process runs onDelete",
    ),
    case(
        "no-trigger-setField",
        process(svc("a", "setField: note, value: x"), head=""),
        "step [a]: setField reads the trigger record, but the process has no trigger",
    ),
    case(
        "setRelationField-value-not-a-scalar",
        process(svc("a", "setRelationField: Status, value: [1]")),
        f"t.intent:45:80: error: process [P] step [a]: value must be a seed id or seeded name, got a list ({P}.steps[0].args.value)",
    ),
    case(
        "setRelationField-value-boolean",
        process(svc("a", "setRelationField: Status, value: true")),
        "step [a]: value must be a seed id or seeded name, got a boolean",
    ),
]

TRIGGER = [
    case(
        "trigger-no-event",
        process(OK, head="    trigger: { when: 'urgent == true' }\n"),
        "process [P] trigger: needs one of onCreate, onUpdate, onDelete: <Entity>",
    ),
    case(
        "trigger-two-events",
        process(OK, head="    trigger: { onCreate: Order, onUpdate: Order }\n"),
        "process [P] trigger: declares both [onCreate] and [onUpdate]; a process starts on one event kind",
    ),
    case(
        "trigger-unknown-entity",
        process(OK, head="    trigger: { onCreate: Ordr }\n"),
        f"process [P] trigger: onCreate [Ordr] is not a declared entity; did you mean [Order]? ({P}.trigger.onCreate)",
    ),
    case(
        "trigger-unknown-key",
        process(OK, head="    trigger: { onCreate: Order, business_key: id }\n"),
        "process [P] trigger: unknown key [business_key]; did you mean [businessKey]?",
    ),
    case(
        "guard-bare-word-needs-quotes",
        process(OK, head="    trigger: { onCreate: Order, when: note == Approved }\n"),
        "t.intent:43:47: error: process [P] trigger: [Approved] is not a field of [Order]; write 'Approved' in quotes for text",
    ),
    case(
        "guard-unknown-field-suggests",
        process(OK, head="    trigger: { onCreate: Order, when: 'totl != 0' }\n"),
        "t.intent:43:40: error: process [P] trigger: [totl] is not a field of [Order]; did you mean [total]?",
    ),
    case(
        "guard-not-equality",
        process(OK, head="    trigger: { onCreate: Order, when: 'total > 0' }\n"),
        "process [P] trigger: guard [total > 0] must be <field> == <literal> or <field> != <literal>",
    ),
    case(
        "guard-compares-two-fields",
        process(OK, head="    trigger: { onCreate: Order, when: 'total == qty' }\n"),
        "process [P] trigger: [qty] is a field; a guard compares a field with a literal, not two fields",
    ),
    case(
        "guard-literal-type",
        process(OK, head="    trigger: { onCreate: Order, when: \"total == 'big'\" }\n"),
        "process [P] trigger: compares decimal field [total] with the text 'big'",
    ),
    case(
        "guard-syntax-error-offset",
        process(OK, head="    trigger: { onCreate: Order, when: 'total == ' }\n"),
        "t.intent:43:49: error: process [P] trigger: when [total == ]: expected a value, found end of expression",
    ),
    case(
        "guard-list-reports-each",
        process(OK, head="    trigger: { onCreate: Order, when: ['urgnt == true', 'qty == x'] }\n"),
        "[urgnt] is not a field of [Order]; did you mean [urgent]?",
        "[x] is not a field of [Order]; write 'x' in quotes for text",
    ),
    case(
        "business-key-unknown",
        process(OK, head="    trigger: { onCreate: Order, businessKey: nte }\n"),
        "process [P] trigger: businessKey [nte] is not a field of [Order]; did you mean [note]?",
    ),
    case(
        "guard-left-side-not-a-field",
        process(OK, head="    trigger: { onCreate: Order, when: '1 == 2' }\n"),
        f"t.intent:43:40: error: process [P] trigger: guard [1 == 2] must be <field> == <literal> or <field> != <literal> ({P}.trigger.when)",
    ),
    case(
        "guard-right-side-not-a-literal",
        process(OK, head="    trigger: { onCreate: Order, when: 'qty == 1 + 1' }\n"),
        "t.intent:43:47: error: process [P] trigger: guard [qty == 1 + 1] must be <field> == <literal> or <field> != <literal>",
    ),
]

DECISION = [
    case(
        "decision-unknown-one-hop-field",
        process(
            "{ name: d, kind: decision, args: { if: 'customer.creditLimt > 0', then: end } }", OK
        ),
        "step [d]: [creditLimt] is not a field of [Customer] (via [customer]); did you mean [creditLimit]?",
    ),
    case(
        "decision-two-hops",
        process(
            "{ name: d, kind: decision, args: { if: \"customer.parent.email == 'x'\", then: end } }",
            OK,
        ),
        "step [d]: [customer.parent.email] goes more than one hop; only fields of directly related records are read",
    ),
    case(
        "decision-to-many-relation",
        process("{ name: d, kind: decision, args: { if: 'messages.id == 1', then: end } }", OK),
        "step [d]: [messages] is a oneToMany relation; only to-one relations can be read",
    ),
    case(
        "decision-unknown-name-suggests",
        process("{ name: d, kind: decision, args: { if: 'totl > 5', then: end } }", OK),
        "t.intent:45:49: error: process [P] step [d]: [totl] is not a field or relation of [Order]; did you mean [total]?",
    ),
    case(
        "decision-field-has-no-parts",
        process("{ name: d, kind: decision, args: { if: 'note.x == 1', then: end } }", OK),
        "step [d]: [note] is a field of [Order]; it has no parts to read",
    ),
    case(
        "decision-not-a-condition-arithmetic",
        process("{ name: d, kind: decision, args: { if: 'total + 1', then: end } }", OK),
        "step [d]: if [total + 1] is arithmetic, not a condition",
    ),
    case(
        "decision-not-a-condition-text-field",
        process("{ name: d, kind: decision, args: { if: note, then: end } }", OK),
        "step [d]: if [note] reads a string value, not a condition",
    ),
    case(
        "decision-not-a-condition-integer-field",
        process("{ name: d, kind: decision, args: { if: qty, then: end } }", OK),
        "step [d]: if [qty] reads an integer value, not a condition",
    ),
    case(
        "decision-not-a-condition-constant",
        process("{ name: d, kind: decision, args: { if: '5', then: end } }", OK),
        "step [d]: if [5] is a constant, not a condition",
    ),
    case(
        "decision-syntax-error",
        process("{ name: d, kind: decision, args: { if: 'total >', then: end } }", OK),
        "step [d]: if [total >]: expected a value",
    ),
    case(
        "decision-unknown-filter",
        process("{ name: d, kind: decision, args: { if: 'note | upper2 == 1', then: end } }", OK),
        "step [d]: if [note | upper2 == 1]: unknown filter [upper2]",
    ),
    case(
        "decision-missing-if-and-then",
        process("{ name: d, kind: decision, args: { else: end } }", OK),
        "step [d]: missing required key [if] (a condition)",
        "step [d]: missing required key [then] (the step taken when true)",
    ),
    case(
        "decision-without-trigger",
        process(
            "{ name: t, kind: userTask, args: { assignee: x } }",
            "{ name: d, kind: decision, args: { if: \"urgent or action == 'x'\", then: end } }",
            OK,
            head="",
        ),
        "step [d]: if [urgent] reads the trigger record, but the process has no trigger",
    ),
    case(
        "decision-action-before-any-usertask",
        process(
            "{ name: d, kind: decision, args: { if: \"action == 'approve'\", then: end } }",
            "{ name: t, kind: userTask, args: { assignee: x } }",
        ),
        f"t.intent:45:49: error: process [P] step [d]: [action] would be empty here: no userTask is completed before this step on the path d; action is the action that completed the most recent userTask ({P}.steps[0].args.if)",
    ),
    case(
        "decision-action-on-a-timeout-path",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: P1D, then: d }, next: end } }",
            "{ name: d, kind: decision, args: { if: \"urgent and action == 'ok'\", then: end } }",
        ),
        "step [d]: [action] would be empty here: no userTask is completed before this step on the path t → d",
    ),
    case(
        "decision-action-after-a-usertask-on-one-branch-only",
        process(
            "{ name: c, kind: decision, args: { if: urgent, then: d } }",
            "{ name: t, kind: userTask, args: { assignee: x } }",
            "{ name: d, kind: decision, args: { if: \"action == 'ok'\", then: end } }",
        ),
        "step [d]: [action] would be empty here: no userTask is completed before this step on the path c → d",
    ),
]

WAIT = [
    case(
        "wait-needs-trigger",
        process("{ name: w, kind: wait, args: { onCreate: OrderMessage, via: order } }", head=""),
        "step [w]: a wait needs the process to have a trigger",
    ),
    case(
        "wait-needs-an-event",
        process("{ name: w, kind: wait, args: { next: end } }"),
        "step [w]: a wait needs onCreate or onUpdate: <Entity>",
    ),
    case(
        "wait-two-events",
        process("{ name: w, kind: wait, args: { onCreate: Order, onUpdate: Order } }"),
        "step [w]: declares both [onCreate] and [onUpdate]; a wait waits for one event kind",
    ),
    case(
        "wait-on-delete-is-not-an-event",
        process("{ name: w, kind: wait, args: { onDelete: Order } }"),
        f"t.intent:45:38: error: process [P] step [w]: a wait needs onCreate or onUpdate: <Entity> (the event it awaits) ({P}.steps[0].args)",
        f"t.intent:45:40: error: process [P] step [w]: unknown key [onDelete]; did you mean [onCreate]? ({P}.steps[0].args.onDelete)",
    ),
    case(
        "wait-unknown-entity",
        process("{ name: w, kind: wait, args: { onCreate: OrderMesage } }"),
        "step [w]: onCreate [OrderMesage] is not a declared entity; did you mean [OrderMessage]?",
    ),
    case(
        "wait-missing-via",
        process("{ name: w, kind: wait, args: { onCreate: OrderMessage } }"),
        "step [w]: a wait for [OrderMessage] needs via: the to-one relation of [OrderMessage] to the trigger record's [Order] (e.g. via: order)",
    ),
    case(
        "wait-via-wrong",
        process("{ name: w, kind: wait, args: { onCreate: OrderMessage, via: ordr } }"),
        "step [w]: via [ordr] is not a to-one relation of [OrderMessage] to [Order]; did you mean [order]?",
    ),
    case(
        "wait-via-to-other-entity",
        process("{ name: w, kind: wait, args: { onCreate: Order, via: customer } }"),
        "step [w]: via [customer] is not a to-one relation of [Order] to [Order] (candidates: none)",
    ),
    case(
        "wait-when-checks-event-entity",
        process(
            "{ name: w, kind: wait, args: { onCreate: OrderMessage, via: order, when: 'urgent == true' } }"
        ),
        "step [w]: [urgent] is not a field or relation of [OrderMessage]",
    ),
    case(
        "wait-unknown-arg",
        process("{ name: w, kind: wait, args: { onUpdate: Order, until: x } }"),
        "step [w]: unknown key [until]",
    ),
]

ABORT = [
    case(
        "abortOn-needs-trigger",
        process(
            OK, svc("v", "delegate: Ok"), head="    abortOn: { status: Cancelled, then: end }\n"
        ),
        "process [P] abortOn: status reads the trigger record, but the process has no trigger",
    ),
    case(
        "abortOn-needs-status-relation",
        process(
            OK, head="    trigger: { onCreate: Customer }\n    abortOn: { status: 1, then: end }\n"
        ),
        "process [P] abortOn: [Customer] has no status relation",
    ),
    case(
        "abortOn-unknown-status",
        process(
            OK,
            head="    trigger: { onCreate: Order }\n    abortOn: { status: [Canceled, 7], then: end }\n",
        ),
        "process [P] abortOn: status [Canceled] is not a seeded value of [OrderStatus]; did you mean [Cancelled]?",
        "process [P] abortOn: status [7] is not a seeded value of [OrderStatus] (seeded ids: 1, 2, 3)",
    ),
    case(
        "abortOn-then-unknown",
        process(
            OK, head="    trigger: { onCreate: Order }\n    abortOn: { status: 3, then: cleanup }\n"
        ),
        "process [P] abortOn: then [cleanup] is not a step of this process",
    ),
    case(
        "abortOn-then-not-a-write",
        process(
            svc("a", "delegate: Ok, next: end"),
            svc("v", "delegate: Ok"),
            head="    trigger: { onCreate: Order }\n    abortOn: { status: 3, then: v }\n",
        ),
        "process [P] abortOn: then [v] is a serviceTask with delegate; the cleanup that runs alone after an abort must be a setField or setRelationField serviceTask",
    ),
    case(
        "abortOn-then-reachable-from-main-flow",
        process(
            OK,
            svc("v", "setField: note, value: void"),
            head="    trigger: { onCreate: Order }\n    abortOn: { status: 3, then: v }\n",
        ),
        "process [P] abortOn: step [v] is also reached by the main flow (ok → v)",
    ),
    case(
        "abortOn-in-onDelete",
        process(
            OK, head="    trigger: { onDelete: Order }\n    abortOn: { status: 3, then: end }\n"
        ),
        "process [P] abortOn: never fires: an onDelete process runs after the record is gone",
    ),
    case(
        "abortOn-missing-keys",
        process(OK, head="    trigger: { onCreate: Order }\n    abortOn: { stat: 3 }\n"),
        "process [P] abortOn: unknown key [stat]; did you mean [status]?",
        "process [P] abortOn: missing required key [status]",
        "process [P] abortOn: missing required key [then]",
    ),
    case(
        "abortOn-empty-status-list",
        process(
            svc("a", "delegate: Ok, next: end"),
            svc("void", "setField: note, value: v"),
            head="    trigger: { onCreate: Order }\n    abortOn: { status: [], then: void }\n",
        ),
        f"t.intent:44:24: error: process [P] abortOn: status lists no statuses ({P}.abortOn.status)",
    ),
]

DELEGATE = [
    case(
        "delegate-unknown-attr-suggests",
        process(svc("a", "delegate: Okk")),
        f"step [a]: delegate [Okk]: custom/__init__.py defines no [Okk]; did you mean [Ok]? ({P}.steps[0].args.delegate)",
    ),
    case(
        "delegate-missing-module-names-files",
        process(svc("a", "delegate: billing.Charge")),
        "step [a]: delegate [billing.Charge]: no module [billing] in the project directory",
        "(looked for billing.py and billing/__init__.py)",
    ),
    case(
        "delegate-module-syntax-error",
        process(svc("a", "delegate: broken.oops")),
        "step [a]: delegate [broken.oops]: broken.py cannot be parsed (line 1:",
    ),
    case(
        "delegate-class-without-execute",
        process(svc("a", "delegate: NoExecute")),
        "step [a]: delegate [NoExecute]: class [NoExecute] in custom/__init__.py has no execute(ctx) method",
    ),
    case(
        "delegate-malformed-name",
        process(svc("a", "delegate: 'custom..Ok'")),
        "step [a]: delegate [custom..Ok] is not a Python name",
    ),
    case(
        "delegate-fields-must-be-scalars",
        process(svc("a", "delegate: Ok, fields: { regions: [eu, us], 2x: 1 }")),
        "step [a]: delegate field [regions] must be a single value (text, number, boolean or null), got a list",
        "step [a]: delegate field [2x] must be an identifier",
    ),
]

NOTIFY = [
    case(
        "notify-to-unknown-field",
        process(svc("a", "notify: { to: emial }")),
        "step [a]: notify to is neither an address (with @) nor a text field: [emial] is not a field or relation of [Order]",
    ),
    case(
        "notify-to-one-hop-unknown",
        process(svc("a", "notify: { to: customer.mail }")),
        "[mail] is not a field of [Customer] (via [customer]); did you mean [email]?",
    ),
    case(
        "notify-to-number-field",
        process(svc("a", "notify: { to: customer.creditLimit }")),
        "[customer.creditLimit] is a decimal field; an address is text",
    ),
    case(
        "notify-to-relation-id",
        process(svc("a", "notify: { to: customer }")),
        "[customer] is a relation (an id); name a text field of it, e.g. customer.email",
    ),
    case(
        "notify-to-required",
        process(svc("a", "notify: { subject: hi }")),
        "step [a]: missing required key [to]",
    ),
    case(
        "notify-placeholder-unknown",
        process(
            svc("a", "notify: { to: a@b.c, subject: 'Order {totl}', body: '{customer.emial}' }")
        ),
        "t.intent:45:84: error: process [P] step [a]: notify subject: [totl] is not a field or relation of [Order]; did you mean [total]?",
        "step [a]: notify body: [emial] is not a field of [Customer] (via [customer]); did you mean [email]?",
    ),
    case(
        "notify-placeholder-syntax",
        process(svc("a", "notify: { to: a@b.c, body: 'Hi {name' }")),
        "step [a]: notify body: unterminated placeholder",
    ),
    case(
        "notify-unknown-key",
        process(svc("a", "notify: { to: a@b.c, subjet: x }")),
        "step [a]: unknown key [subjet]; did you mean [subject]?",
    ),
    case(
        "no-trigger-notify-to-a-field",
        process(svc("n", "notify: { to: email, subject: x }"), head=""),
        f"t.intent:44:61: error: process [P] step [n]: notify to [email] reads the trigger record, but the process has no trigger, so its entity is unknown; add trigger: {{ onCreate: <Entity> }} ({P}.steps[0].args.notify.to)",
    ),
    case(
        "no-trigger-notify-placeholder",
        process(svc("n", "notify: { to: a@b.c, subject: 'x {note}' }"), head=""),
        "t.intent:44:80: error: process [P] step [n]: notify subject placeholder {note} reads the trigger record, but the process has no trigger",
    ),
]

USER_TASK = [
    case(
        "usertask-assignee-required",
        process("{ name: t, kind: userTask, args: { form: Approve } }"),
        "step [t]: missing required key [assignee]",
    ),
    case(
        "usertask-assignee-path-bad-relation",
        process(
            "{ name: t, kind: userTask, args: { assignee: { path: custmer.manager, fallback: x } } }"
        ),
        "step [t]: assignee path [custmer.manager]: [custmer] is not a to-one relation of [Order]; did you mean [customer]?",
    ),
    case(
        "usertask-assignee-path-not-text",
        process(
            "{ name: t, kind: userTask, args: { assignee: { path: customer.creditLimit, fallback: x } } }"
        ),
        "step [t]: assignee path [customer.creditLimit]: [creditLimit] is a decimal field of [Customer]; a user name is text",
    ),
    case(
        "usertask-assignee-fallback-required",
        process("{ name: t, kind: userTask, args: { assignee: { path: customer.manager } } }"),
        "step [t]: missing required key [fallback]",
    ),
    case(
        "usertask-assignee-not-a-name",
        process("{ name: t, kind: userTask, args: { assignee: [a, b] } }"),
        "step [t]: assignee must be a role name, personal or { path, fallback }, got a list",
    ),
    case(
        "usertask-form-undeclared",
        process("{ name: t, kind: userTask, args: { assignee: x, form: Aprove } }"),
        "step [t]: form [Aprove] is not declared under forms:; did you mean [Approve]?",
    ),
    case(
        "usertask-form-other-entity",
        process("{ name: t, kind: userTask, args: { assignee: x, form: CustomerForm } }"),
        "step [t]: form [CustomerForm] is for [Customer]; the record is [Order]",
    ),
    case(
        "usertask-timeout-short-duration",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: 2d, then: end } } }"
        ),
        "step [t]: timeout after [2d] is not an ISO-8601 duration; write P2D",
    ),
    case(
        "usertask-timeout-then-required",
        process("{ name: t, kind: userTask, args: { assignee: x, timeout: { after: P2D } } }"),
        "step [t]: missing required key [then]",
    ),
    case(
        "usertask-expire-not-a-date",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, expire: { until: note, then: end } } }"
        ),
        "step [t]: expire until [note] is a string field; it must name a date or timestamp field",
    ),
    case(
        "usertask-expire-unknown-field",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, expire: { until: validUntl, then: end } } }"
        ),
        "step [t]: expire until [validUntl] is not a field of [Order]; it must name a date or timestamp field; did you mean [validUntil]?",
    ),
    case(
        "usertask-delegate-not-allowed",
        process("{ name: t, kind: userTask, args: { assignee: x, delegate: Ok } }"),
        "step [t]: declares arg [delegate] but is a userTask — delegate is a serviceTask argument",
    ),
    case(
        "usertask-on-complete-value-checked",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, setField: urgent, value: maybe } }"
        ),
        "step [t]: value for [urgent] must be true or false, got the text [maybe]",
    ),
    case(
        "usertask-two-completion-writes",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, setField: note, setRelationField: Status, value: '1' } }"
        ),
        f"t.intent:45:73: error: process [P] step [t]: declares both [setField] and [setRelationField]; a userTask sets at most one ({P}.steps[0].args.setRelationField)",
    ),
    case(
        "usertask-value-without-a-write",
        process("{ name: t, kind: userTask, args: { assignee: x, value: 1 } }"),
        f"t.intent:45:57: error: process [P] step [t]: value belongs to setField or setRelationField ({P}.steps[0].args.value)",
    ),
    case(
        "usertask-timeout-after-not-a-scalar",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: [P1D], then: end } } }"
        ),
        f"t.intent:45:75: error: process [P] step [t]: timeout after must be an ISO-8601 duration, got a list ({P}.steps[0].args.timeout.after)",
    ),
]

# One pass: a route that names no step does not hide the routing problems of the routes that do
# resolve; a problem that a broken route might explain (an unreachable step, an {error} with no
# onError route) is withheld rather than guessed.
ONE_PASS = [
    case(
        "onError-typo-and-error-value-reached-without-failure",
        process(
            svc("a", "delegate: Ok, onError: fial"),
            svc("fail", 'setField: note, value: "{error}"'),
        ),
        f"t.intent:45:70: error: process [P] step [a]: onError [fial] is not a step of this process; did you mean [fail]? ({P}.steps[0].args.onError)",
        "t.intent:46:73: error: process [P] step [fail]: {error} would be empty here: it is reached without a failure: a → fail;",
        f"through an onError route ({P}.steps[1].args.value)",
    ),
    case(
        "onError-typo-withholds-what-it-may-explain",
        process(
            svc("a", "delegate: Ok, onError: fial, next: end"),
            svc("fail", 'setField: note, value: "{error}"'),
        ),
        "step [a]: onError [fial] is not a step of this process; did you mean [fail]?",
    ),
    case(
        "next-typo-on-an-unreached-step-keeps-the-warning",
        process(svc("a", "delegate: Ok, next: end"), svc("b", "delegate: Ok, next: nope")),
        f"t.intent:46:67: error: process [P] step [b]: next [nope] is not a step of this process ({P}.steps[1].args.next)",
        f"t.intent:46:9: warning: process [P] step [b]: no route reaches this step, so it never runs ({P}.steps[1])",
    ),
    case(
        "next-typo-does-not-fall-through",
        process(
            svc("a", "delegate: Ok, onError: fail, next: nope"),
            svc("fail", 'setField: note, value: "{error}"'),
        ),
        "step [a]: next [nope] is not a step of this process",
    ),
    case(
        "unknown-kind-and-error-value-reached-without-failure",
        process(
            svc("a", "delegate: Ok, onError: fail"),
            svc("fail", 'setField: note, value: "{error}", next: end'),
            "{ name: z, kind: bogus }",
        ),
        "step [z]: kind [bogus] is not a step kind",
        "step [fail]: {error} would be empty here: it is reached without a failure: a → fail",
        f"t.intent:47:9: warning: process [P] step [z]: no route reaches this step, so it never runs ({P}.steps[2])",
    ),
    case(
        "decision-without-then-and-error-value-reached-without-failure",
        process(
            "{ name: d, kind: decision, args: { if: urgent } }",
            svc("fail", 'setField: note, value: "{error}"'),
        ),
        "step [d]: missing required key [then]",
        "step [fail]: {error} would be empty here: it is reached without a failure: d → fail",
    ),
    case(
        "timeout-without-then-and-action-read-without-user-task",
        process(
            "{ name: d, kind: decision, args: { if: \"action == 'ok'\", then: t } }",
            "{ name: t, kind: userTask, args: { assignee: x, timeout: { after: P1D } } }",
        ),
        "step [t]: missing required key [then]",
        "step [d]: [action] would be empty here: no userTask is completed before this step on the path d",
    ),
    case(
        "duplicate-step-and-error-value-reached-without-failure",
        process(
            svc("a", "delegate: Ok, onError: f"),
            svc("f", 'setField: note, value: "{error}", next: end'),
            svc("a", "delegate: Ok, next: end"),
        ),
        "step [a]: step name [a] is used twice (first at line 45)",
        "step [f]: {error} would be empty here: it is reached without a failure: a → f",
        f"t.intent:47:9: warning: process [P] step [a]: no route reaches this step, so it never runs ({P}.steps[2])",
    ),
    case(
        "route-to-a-duplicate-name-withholds-what-it-may-explain",
        process(
            svc("a", "delegate: Ok, next: b"),
            svc("b", "delegate: Ok, next: end"),
            svc("b", "delegate: Ok, next: end"),
        ),
        "step [b]: step name [b] is used twice (first at line 46)",
    ),
    case(
        "abortOn-then-typo-and-cleanup-reached-elsewhere",
        process(
            svc("a", "delegate: Ok, onError: fail"),
            svc("fail", 'setField: note, value: "{error}", next: end'),
            svc("cleanup", "setField: note, value: void"),
            head="    trigger: { onCreate: Order }\n    abortOn: { status: 3, then: clenup }\n",
        ),
        "process [P] abortOn: then [clenup] is not a step of this process; did you mean [cleanup]?",
        "step [fail]: {error} would be empty here: it is reached without a failure: a → fail",
    ),
]

# A condition comparing values of different kinds fails when it runs; where a field's type or a
# literal makes both kinds known, validation says so at the operator.
KINDS = [
    case(
        "decision-integer-field-with-text",
        process("{ name: d, kind: decision, args: { if: \"qty == 'many'\", then: end } }", OK),
        f"t.intent:45:53: error: process [P] step [d]: if [qty == 'many']: [==] cannot compare integer with string ({P}.steps[0].args.if)",
    ),
    case(
        "decision-two-literals",
        process("{ name: d, kind: decision, args: { if: \"'a' != 1\", then: end } }", OK),
        "step [d]: if ['a' != 1]: [!=] cannot compare string with integer",
    ),
    case(
        "decision-status-relation-with-a-name",
        process(
            "{ name: d, kind: decision, args: { if: \"Status == 'Approved'\", then: end } }", OK
        ),
        "step [d]: if [Status == 'Approved']: [==] cannot compare integer with string",
    ),
    case(
        "decision-one-hop-number-with-text",
        process(
            "{ name: d, kind: decision, args: { if: \"customer.creditLimit > '5'\", then: end } }",
            OK,
        ),
        "step [d]: if [customer.creditLimit > '5']: [>] cannot compare number with string",
    ),
    case(
        "decision-action-with-a-number",
        process(
            "{ name: t, kind: userTask, args: { assignee: x, form: Approve } }",
            "{ name: d, kind: decision, args: { if: 'action == 1', then: end } }",
        ),
        "step [d]: if [action == 1]: [==] cannot compare string with integer",
    ),
    case(
        "wait-when-boolean-field-with-text",
        process(
            "{ name: w, kind: wait, args: { onCreate: OrderMessage, via: order, when: \"internal == 'yes'\" } }"
        ),
        "step [w]: when [internal == 'yes']: [==] cannot compare boolean with string",
    ),
    case(
        "decision-integer-field-given-to-a-text-filter",
        process("{ name: d, kind: decision, args: { if: \"qty | upper == 'A'\", then: end } }", OK),
        f"t.intent:45:55: error: process [P] step [d]: if [qty | upper == 'A']: filter [upper] needs a string, got integer ({P}.steps[0].args.if)",
    ),
]

TABLES = {
    "resilience": RESILIENCE,
    "vars": VARS,
    "routing": ROUTING,
    "steps": STEPS,
    "set_field": SET_FIELD,
    "trigger": TRIGGER,
    "decision": DECISION,
    "wait": WAIT,
    "abort": ABORT,
    "delegate": DELEGATE,
    "notify": NOTIFY,
    "user_task": USER_TASK,
    "one_pass": ONE_PASS,
    "kinds": KINDS,
}


ALL_INVALID = [p for table in TABLES.values() for p in table]


@pytest.mark.parametrize(("text", "expected"), ALL_INVALID)
def test_invalid_processes_report_exactly_these_problems(
    text: str, expected: list[str], project: Path
) -> None:
    check(text, expected, project)


@pytest.mark.parametrize(
    ("text", "expected"), [VALID[0], ALL_INVALID[0], ALL_INVALID[20], ALL_INVALID[-1], ROUTING[6]]
)
def test_the_fast_path_is_load_text(text: str, expected: list[str], project: Path) -> None:
    assert diagnostics(text, project)[1] == slow_diagnostics(text, project)[1]
    assert diagnostics(text, project)[0] == slow_diagnostics(text, project)[0]


def test_resolved_names_reach_the_ir(project: Path) -> None:
    text = process(
        "{ name: t, kind: userTask, args: { assignee: { path: customer.manager, fallback: "
        "sales }, setRelationField: Status, value: Approved } }",
        "{ name: d, kind: decision, args: { if: \"action == 'approve'\", then: go } }",
        svc(
            "go",
            "delegate: pkg.mod.Worker, fields: { region: eu }, retry: { count: 2, every: P1D }",
        ),
    )
    app, lines = diagnostics(text, project)
    assert lines == [] and app is not None
    task, decision, go = app.processes[0].steps
    assert isinstance(task, UserTask) and task.assignee.path == ("customer", "manager")
    assert task.assignee.role == "sales" and task.on_complete is not None
    assert task.on_complete.value == 2  # type: ignore[union-attr]
    assert isinstance(decision, Decision) and decision.source == "action == 'approve'"
    assert decision.else_ is None  # false falls through to [go]
    assert isinstance(go, ServiceTask) and go.action == Delegate(
        "pkg.mod.Worker", "pkg.mod", "Worker", {"region": "eu"}
    )
    assert go.retry is not None and go.retry.attempts == 3
