"""Route coverage: every route of the IR, the ones a scenario took, the untaken ones listed at
the position of the route's value; --min-coverage."""

from __future__ import annotations

from collections.abc import Callable

from scenario_helpers import Project, Ran

from procflow.model.ir import Application, Flow
from procflow.model.validate import compile_file
from procflow.testing.coverage import coverage_of

Cli = Callable[..., Ran]

HAPPY = """\
tests: app.intent
fakes:
  SchemaProvisioner: { produces: { dbPassword: "a-long-enough-password" } }
scenarios:
  - name: clean
    given: { record: { title: acme } }
    do: [ { expect: { status: completed } } ]
  - name: refused
    fakes: { AppProvisioner: { raise: refused, non_retryable: true } }
    given: { record: { title: initech } }
    do: [ { expect: { record: { ProvisioningStatus: Failed } } } ]
"""
ON_ERROR = """\
  - name: schema down
    fakes: { SchemaProvisioner: { raise: down, non_retryable: true } }
    given: { record: { title: umbrella } }
    do: [ { expect: { path: [createSchema, recordFailure, markFailed] } } ]
"""


def test_coverage_before_and_after_a_scenario_for_an_onerror_route(
    project: Project, cli: Cli
) -> None:
    project.write("app.test.yaml", HAPPY)
    before = cli("test", "--coverage", "app.test.yaml", cwd=project.root)
    assert before.code == 0
    assert before.out.splitlines()[-4:] == [
        "",
        "app.intent (TenantProvisioning): steps 5/5, routes 5/6 (83%)",
        "    app.intent:31:20: route createSchema → recordFailure (onError)",
        "2 passed, 0 failed",
    ]
    assert cli("test", "--min-coverage", "90", cwd=project.root).code == 1
    project.write("app.test.yaml", HAPPY + ON_ERROR)
    after = cli("test", "--coverage", cwd=project.root)
    assert after.out.splitlines()[-2:] == [
        "app.intent (TenantProvisioning): steps 5/5, routes 6/6 (100%)",
        "3 passed, 0 failed",
    ]
    assert cli("test", "--min-coverage", "100", cwd=project.root).code == 0


def test_every_route_kind_of_an_intent_process_is_counted(project: Project) -> None:
    app = compile_file(str(project.root / "orders.intent"))
    assert isinstance(app, Application)
    routes = coverage_of(str(project.root / "orders.intent"), app.processes[0]).routes
    assert {r.kind for r in routes} == {"abortOn", "else", "expire", "next", "then", "timeout"}
    shown = {(r.source, r.kind, r.target, r.pos.line, r.pos.col) for r in routes}
    assert ("OrderApproval", "abortOn", "markVoid", 45, 41) in shown
    assert ("review", "timeout", "remind", 52, 40) in shown
    assert ("review", "expire", "markExpired", 53, 47) in shown
    assert ("markVoid", "next", "end", 65, 9) in shown  # a fall-through: the step's position
    assert len(routes) == 20


def test_every_route_kind_of_a_flow_is_counted(project: Project) -> None:
    path = project.write(
        "kinds.flow.yaml",
        """\
        flow: kinds
        steps:
          - ping:
              slack.post: { channel: "#a", text: hi }
              timeout: 5s
              optional: true
          - answer:
              wait_for: slack.approval
              match: { message: "{{ ping.ts | default('x') }}" }
              timeout: 1h
          - poll:
              if: "{{ answer.status == 'received' }}"
              repeat: { every: 1m, max: 2, until: "{{ false }}" }
              steps:
                - look: { set: { n: 1 } }
              recover:
                - shrug: { set: { n: 0 } }
          - stop: { fail: "no" }
        recover:
          - note: { log.write: { message: stopped } }
        """,
    )
    flow = compile_file(str(path))
    assert isinstance(flow, Flow)
    routes = coverage_of(str(path), flow).routes
    found = {(r.source, r.kind, r.target) for r in routes}
    assert found == {
        ("ping", "next", "answer"),
        ("ping", "timeout", "answer"),
        ("ping", "optional", "answer"),
        ("answer", "event", "poll"),
        ("answer", "wait_for timeout", "poll"),
        ("poll", "then", "poll"),
        ("poll", "else", "stop"),
        ("poll", "next", "stop"),
        ("poll", "repeat exhausted", "note"),
        ("look", "next", "poll"),
        ("poll", "recover", "shrug"),
        ("shrug", "next", "poll"),
        ("kinds", "recover", "note"),
        ("note", "next", "end"),
    }
