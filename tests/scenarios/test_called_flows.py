"""`procflow test` of a flow that calls flows: a called flow of the project runs for real (its own
calls too), or is faked by its name with the action keys; `calls:` counts it, `waiting` knows the
kind `call`, a fake of no called flow is a problem of the file, and route coverage counts a call
step's timeout and optional routes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from scenario_helpers import Project, Ran, assert_all_pass, by_name

from procflow.errors import DefinitionError
from procflow.model.validate import compile_file
from procflow.runtime.interpret.flow_call import CALL_FAKES
from procflow.testing import run_scenarios, run_suite
from procflow.testing.coverage import coverage_of

Cli = Callable[..., Ran]

PARENT = """\
flow: parent
inputs:
  name: { type: string, default: acme }
steps:
  - build:
      call: child
      inputs: { name: "{{ name }}" }
      timeout: 1h
      retry: { count: 1, every: 5m }
  - notify:
      call: notifier
      inputs: { text: "{{ build.output.url }}" }
      detach: true
  - note:
      log.write: { message: "built {{ build.output.url }}" }
output:
  url: "{{ build.output.url }}"
"""
CHILD = """\
flow: child
inputs:
  name: { type: string, required: true }
steps:
  - settle:
      wait: { for: 10m }
  - stamp:
      call: grandchild
      inputs: { name: "{{ name }}" }
output:
  url: "https://{{ name }}.example.com/{{ stamp.output.stamp }}"
"""
GRANDCHILD = """\
flow: grandchild
inputs:
  name: { type: string, required: true }
steps:
  - made: { set: { stamp: "v1-{{ name }}" } }
output:
  stamp: "{{ made.stamp }}"
"""
NOTIFIER = """\
flow: notifier
inputs:
  text: { type: string, required: true }
steps:
  - post: { slack.post: { channel: "#ops", text: "{{ text }}" } }
"""


@pytest.fixture
def flows(tmp_path: Path) -> Project:
    """A project of four flows: parent calls child (which calls grandchild) and, detached,
    notifier. The grandchild lives in a subfolder: the project is the folder and what is below."""
    project = Project(tmp_path / "calls")
    project.write("parent.flow.yaml", PARENT)
    project.write("child.flow.yaml", CHILD)
    project.write("lib/grandchild.flow.yaml", GRANDCHILD)
    project.write("notifier.flow.yaml", NOTIFIER)
    return project


def _run(project: Project, scenarios: str) -> dict[str, object]:
    path = project.write("parent.test.yaml", "tests: parent.flow.yaml\nscenarios:\n" + scenarios)
    results = run_scenarios(str(path))
    assert_all_pass(results)
    return by_name(results)


def test_a_called_flow_of_the_project_runs_for_real_with_its_own_calls(flows: Project) -> None:
    _run(
        flows,
        """\
  - name: real children
    do:
      - expect: { waiting: { step: build, kind: call }, outbox: 0 }
      - advance: 10m
      - expect:
          status: completed
          output: { url: "https://acme.example.com/v1-acme" }
          bindings:
            build: { status: completed, output: { url: "https://acme.example.com/v1-acme" } }
          history: [call.started, call.ended, call.started, run.completed]
          outbox: [ { channel: slack, to: "#ops" } ]
""",
    )


def test_a_faked_flow_starts_no_child_and_binds_its_output(flows: Project) -> None:
    _run(
        flows,
        """\
  - name: faked
    fakes:
      child: { returns_each: [ { url: "https://one" } ] }
      notifier: { returns: null }
    do:
      - expect:
          status: completed
          bindings:
            build: { run_id: null, status: completed, output: { url: "https://one" } }
            notify: { run_id: null }
          calls: { child: 1, notifier: 1 }
          outbox: 0
""",
    )
    assert CALL_FAKES == {}  # uninstalled when the scenario ended


def test_fail_and_raise_fail_the_call_step_with_error_type_call(flows: Project) -> None:
    flows.write("parent.flow.yaml", PARENT.replace("      timeout: 1h\n", "      optional: true\n"))
    _run(
        flows,
        """\
  - name: fail once, then the retry succeeds
    fakes: { child: { fail: 1, message: quota exceeded, returns: { url: u } }, notifier: {} }
    do:
      - expect: { waiting: { step: build, kind: retry }, calls: { child: 1 } }
      - advance: 5m
      - expect: { status: completed, output: { url: u }, calls: { child: 2 } }
  - name: raise fails every attempt
    fakes: { child: { raise: quota exceeded }, notifier: {} }
    do:
      - advance: 5m
      - expect:
          bindings: { build: { error: { step: build, type: call, message: quota exceeded } } }
          calls: { child: 2 }
  - name: non_retryable skips the retry
    fakes: { child: { raise: no such tenant, non_retryable: true }, notifier: {} }
    do:
      - expect:
          bindings: { build: { error: { type: call, message: no such tenant } } }
          calls: { child: 1 }
""",
    )


def test_takes_longer_than_the_timeout_waits_then_times_out(flows: Project) -> None:
    _run(
        flows,
        """\
  - name: too slow on both attempts
    fakes: { child: { takes: 90m }, notifier: {} }
    do:
      - expect: { waiting: { step: build, kind: timer }, calls: { child: 1 } }
      - advance: 59m
      - expect: { waiting: { step: build, kind: timer } }
      - advance: 1m
      - expect: { waiting: { step: build, kind: retry } }
      - advance: 65m
      - expect:
          status: failed
          error: { step: build, message: "the faked run of child did not end within 1h" }
          calls: { child: 2 }
  - name: quick enough answers at once
    fakes: { child: { takes: 1h, returns: { url: fast } }, notifier: {} }
    do:
      - expect: { status: completed, output: { url: fast } }
""",
    )


def test_a_faked_detached_call_goes_on_whatever_its_fake_does(flows: Project) -> None:
    _run(
        flows,
        """\
  - name: the detached fake fails, the parent does not notice
    fakes: { child: { returns: { url: u } }, notifier: { raise: slack is down } }
    do:
      - expect:
          status: completed
          bindings: { notify: { run_id: null } }
          calls: { notifier: 1 }
""",
    )


def test_a_fake_of_no_called_flow_is_a_problem_at_its_position(flows: Project, cli: Cli) -> None:
    flows.write(
        "parent.test.yaml",
        """\
        tests: parent.flow.yaml
        fakes:
          chidl: { returns: {} }
        scenarios:
          - name: typo
            do: [ { expect: { waiting: { kind: cal } } } ]
        """,
    )
    ran = cli("test", "parent.test.yaml", cwd=flows.root)
    assert ran.code == 2
    assert (
        "parent.test.yaml:3:3: error: fakes: [chidl] is not a connector action or called flow "
        "of the definition; did you mean [child]? (known: child, log.write, notifier)"
    ) in ran.out
    assert "[cal] is not a wait kind; did you mean [call]?" in ran.out


def test_a_called_flow_neither_faked_nor_in_the_project_is_a_problem(flows: Project) -> None:
    (flows.root / "lib" / "grandchild.flow.yaml").unlink()
    path = flows.write(
        "parent.test.yaml",
        """\
        tests: parent.flow.yaml
        scenarios:
          - name: the grandchild is missing
            do: []
          - name: faking the child needs no grandchild
            fakes: { child: { returns: { url: u } } }
            do: []
        """,
    )
    with pytest.raises(DefinitionError) as caught:
        run_scenarios(str(path))
    problems = [d.format() for d in caught.value.diagnostics]
    assert problems == [
        f"{path}:3:5: error: scenario [the grandchild is missing]: step [stamp] (of the called "
        f"flow [child]) calls flow [grandchild], which is not a flow of this project "
        f"({flows.root}); add its file or a fake of [child] (scenarios[0])"
    ]


def test_route_coverage_counts_a_call_steps_timeout_and_optional_routes(flows: Project) -> None:
    optional = PARENT.replace("      retry:", "      optional: true\n      retry:")
    flows.write("parent.flow.yaml", optional)
    flow = compile_file(str(flows.root / "parent.flow.yaml"))
    routes = {(r.source, r.kind): r.target for r in coverage_of("parent.flow.yaml", flow).routes}
    assert routes[("build", "timeout")] == "build"  # with retry: the next attempt
    assert routes[("build", "optional")] == "notify"
    real = """\
        tests: parent.flow.yaml
        fakes: { notifier: {} }
        scenarios:
          - name: real
            do: [ { advance: 10m }, { expect: { status: completed } } ]
        """
    flows.write("parent.test.yaml", real)
    (coverage,) = run_suite([str(flows.root / "parent.test.yaml")]).coverage
    assert sorted(r.kind for r in coverage.untaken) == ["optional", "timeout"]
    slow = """\
          - name: slow on both attempts, then optional
            fakes: { child: { takes: 2h } }
            do:
              - advance: 3h
              - expect: { bindings: { build: { error: { type: timeout } } }, calls: { child: 2 } }
        """
    flows.write("parent.test.yaml", real.rstrip(" ") + slow)
    suite = run_suite([str(flows.root / "parent.test.yaml")])
    assert suite.ok, [r.failure for r in suite.results]
    assert suite.coverage[0].percent == 100.0
