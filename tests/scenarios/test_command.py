"""`procflow test`: its output (file:line, expected vs actual, a diff), the summary line, exit
codes 0/1/2, invalid files (nothing runs), --json, --name, --junit, and scenario independence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree as ET

from scenario_helpers import Project, Ran

from procflow.testing import run_scenarios
from procflow.testing.runner import run_suite

Cli = Callable[..., Ran]

PASSING_AND_FAILING = """\
tests: app.intent
fakes:
  SchemaProvisioner: { produces: { dbPassword: "a-long-enough-password" } }
scenarios:
  - name: clean tenant
    given: { record: { title: acme } }
    do:
      - expect: { status: completed, path: [createSchema, provisionApp, done] }
  - name: wrong expectations
    given: { record: { title: acme } }
    do:
      - expect:
          status: completed
          path: [createSchema, done]
"""


def test_a_failing_check_prints_where_the_key_expected_actual_and_a_diff(
    project: Project, cli: Cli
) -> None:
    project.write("app.test.yaml", PASSING_AND_FAILING)
    ran = cli("test", cwd=project.root)
    assert ran.code == 1
    lines = ran.out.splitlines()
    assert lines[0] == "PASS clean tenant (app.test.yaml:5)"
    assert lines[1] == "FAIL wrong expectations (app.test.yaml:9)"
    assert lines[2] == "    app.test.yaml:14: expect.path"
    assert lines[3] == '      expected: ["createSchema", "done"]'
    assert lines[4] == '      actual:   ["createSchema", "provisionApp", "done"]'
    assert '    +  "provisionApp",' in ran.out
    assert lines[-1] == "1 passed, 1 failed"


def test_all_passing_is_exit_0(project: Project, cli: Cli) -> None:
    project.write("app.test.yaml", PASSING_AND_FAILING.split("  - name: wrong")[0])
    ran = cli("test", str(project.root))
    assert (ran.code, ran.out.splitlines()[-1]) == (0, "1 passed, 0 failed")


def test_an_invalid_file_is_exit_2_every_problem_at_once_and_nothing_runs(
    project: Project, cli: Cli
) -> None:
    project.write("app.test.yaml", PASSING_AND_FAILING)  # valid, and still not run
    project.write(
        "bad.test.yaml",
        """\
        tests: app.intent
        fakes:
          SchemaProvisoner: { retruns: 1 }
        scenarios:
          - name: typos
            given: { recrod: { title: x } }
            do:
              - advance: soon
              - expect: { stauts: completed, waiting: { kind: clock } }
              - wait: 1
        """,
    )
    ran = cli("test", cwd=project.root)
    assert ran.code == 2
    assert "PASS" not in ran.out and "FAIL" not in ran.out
    assert ran.err == "error: 8 problem(s); no scenario ran\n"  # the problems: on stdout
    err = ran.out
    assert "bad.test.yaml:3:3: error: fakes: [SchemaProvisoner] is not a delegate" in err
    assert "did you mean [SchemaProvisioner]?" in err
    assert "unknown key [retruns]; did you mean [returns]?" in err
    assert "bad.test.yaml:6:14: error: given: unknown key [recrod]; did you mean [record]?" in err
    assert "bad.test.yaml:8:18: error: advance: [soon] is not a valid duration" in err
    assert "unknown key [stauts]; did you mean [status]?" in err
    assert "[clock] is not a wait kind" in err
    assert "an action: unknown key [wait]" in err
    assert "expected { NAME" not in err  # an unknown key is reported once, not checked further


def test_a_test_of_an_invalid_definition_reports_the_definitions_problems(
    project: Project, cli: Cli
) -> None:
    project.write("broken.flow.yaml", "flow: broken\nsteps:\n  - a: { sleep: 1 }\n")
    project.write(
        "broken.test.yaml", "tests: broken.flow.yaml\nscenarios:\n  - { name: x, do: [] }\n"
    )
    ran = cli("test", str(project.root / "broken.test.yaml"))
    assert ran.code == 2
    assert "the definition [broken.flow.yaml] is invalid" in ran.out
    assert "broken.flow.yaml:3:" in ran.out


def test_an_http_request_without_a_fake_is_refused(project: Project, cli: Cli) -> None:
    project.write(
        "web.flow.yaml",
        "flow: web\nsteps:\n  - get: { http.request: { method: GET, url: 'https://x.test' } }\n",
    )
    project.write("web.test.yaml", "tests: web.flow.yaml\nscenarios:\n  - { name: x, do: [] }\n")
    ran = cli("test", str(project.root / "web.test.yaml"))
    assert ran.code == 2
    assert "calls http.request, which needs a fake (a test never reaches the network)" in ran.out
    project.write(
        "web.test.yaml",
        "tests: web.flow.yaml\nfakes: { http.request: { returns: { status: 200 } } }\n"
        "scenarios:\n  - { name: x, do: [ { expect: { status: completed } } ] }\n",
    )
    assert cli("test", str(project.root / "web.test.yaml")).code == 0


def test_no_such_path_or_no_test_file_is_exit_2(project: Project, cli: Cli) -> None:
    ran = cli("test", str(project.root / "nowhere"))
    assert ran.code == 2 and "no test file or folder" in ran.err
    ran = cli("test", cwd=project.root / "custom")
    assert ran.code == 2 and "no *.test.yaml files in this folder" in ran.err


def test_json_and_name(project: Project, cli: Cli) -> None:
    project.write("app.test.yaml", PASSING_AND_FAILING)
    ran = cli("test", "--json", cwd=project.root)
    assert ran.code == 1
    shown = json.loads(ran.out)
    assert shown[0] == {
        "file": "app.test.yaml", "line": 5, "name": "clean tenant", "status": "pass",
        "failure": None,
    }  # fmt: skip
    assert shown[1]["status"] == "fail"
    assert shown[1]["failure"] == {
        "key": "path",
        "expected": ["createSchema", "done"],
        "actual": ["createSchema", "provisionApp", "done"],
    }
    only = cli("test", "--name", "clean", cwd=project.root)
    assert only.code == 0 and only.out.splitlines() == [
        "PASS clean tenant (app.test.yaml:5)", "1 passed, 0 failed",
    ]  # fmt: skip


def test_junit_xml_is_well_formed_with_one_testcase_per_scenario(
    project: Project, cli: Cli, tmp_path: Path
) -> None:
    project.write("app.test.yaml", PASSING_AND_FAILING)
    report = tmp_path / "junit.xml"
    assert cli("test", "--junit", str(report), cwd=project.root).code == 1
    root = ET.parse(report).getroot()
    cases = root.findall("./testsuite/testcase")
    assert [(c.get("name"), c.get("classname")) for c in cases] == [
        ("clean tenant", "app.test.yaml"),
        ("wrong expectations", "app.test.yaml"),
    ]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "app.test.yaml:14: expect.path"
    assert "provisionApp" in (failure.text or "")
    assert root.get("tests") == "2" and root.get("failures") == "1"


def test_scenarios_are_independent(project: Project) -> None:
    # Each scenario has a store of its own: its record is always id 1, its run the only one,
    # its fakes' calls counted from zero, whatever ran before it (in this process or another).
    scenario = """\
  - name: tenant {n}
    given: {{ record: {{ title: t{n} }} }}
    do:
      - expect:
          record: {{ id: 1, title: t{n} }}
          calls: {{ SchemaProvisioner: 1 }}
          outbox: 0
"""
    body = "".join(scenario.format(n=n) for n in range(30))
    project.write(
        "many.test.yaml",
        "tests: app.intent\nfakes:\n  SchemaProvisioner: { produces: { dbPassword: "
        "'a-long-enough-password' } }\nscenarios:\n" + body,
    )
    serial = run_suite([str(project.root)], workers=1)
    parallel = run_suite([str(project.root)], workers=2)
    assert serial.ok and parallel.ok
    assert [r.name for r in serial.results] == [r.name for r in parallel.results]
    assert len(run_scenarios(str(project.root), name="tenant 2")) == 1 + 10  # 2, 20..29
