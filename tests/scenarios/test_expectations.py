"""Every expectation, holding and not holding; the first failing check ends the scenario."""

from __future__ import annotations

import pytest
from scenario_helpers import Project, by_name

from procflow.testing import run_scenarios

# (key, a check that holds, one that does not), after: an order of 10 reviewed... see ORDERS
ORDER_CHECKS = [
    ("status", "waiting", "completed"),
    ("waiting", "{ step: review, kind: task }", "{ step: review, kind: timer }"),
    ("tasks", "[ { step: review, assignee: manager } ]", "[]"),
    ("record", "{ total: 10, Status: Draft }", "{ Status: Approved }"),
    ("history", "[run.started, step.started]", "[run.completed]"),
    ("outbox", "0", "[ { channel: email } ]"),
]
PROVISIONING_CHECKS = [
    ("path", "[createSchema, provisionApp, done]", "[createSchema, done]"),
    ("visited", "[provisionApp, done]", "[recordFailure]"),
    ("not_visited", "[recordFailure]", "[done]"),
    ("calls", "{ SchemaProvisioner: 1 }", "{ SchemaProvisioner: 2 }"),
    ("record", "{ ProvisioningStatus: Requested }", "{ ProvisioningStatus: Failed }"),
    ("record", "{ ProvisioningStatus: 1 }", "{ ProvisioningStatus: 3 }"),
]
PROBE_CHECKS = [
    ("output", "{ approved: false }", "{ approved: true }"),
    ("bindings", "{ answer: { status: timeout } }", "{ answer: { status: received } }"),
    ("error", None, "{ message: anything }"),
    ("outbox", "[ { channel: slack, to: '@ada' } ]", "[ { channel: slack, to: '@bob' } ]"),
]


def _scenarios(checks: list[tuple[str, str | None, str]], given: str, do: str) -> str:
    out = []
    for i, (key, holds, fails) in enumerate(checks):
        for verdict, value in (("holds", holds), ("fails", fails)):
            if value is not None:
                out.append(
                    f"  - name: {verdict} {key} {i}\n    given: {given}\n    do:\n{do}"
                    f"      - expect: {{ {key}: {value} }}\n"
                )
    return "".join(out)


@pytest.mark.parametrize(
    ("tests", "checks", "given", "do", "fakes"),
    [
        ("orders.intent", ORDER_CHECKS, "{ record: { total: 10 } }", "", ""),
        (
            "app.intent",
            PROVISIONING_CHECKS,
            "{ record: { title: acme } }",
            "",
            "fakes: { SchemaProvisioner: { produces: { dbPassword: long-enough-password } } }\n",
        ),
        ("probe.flow.yaml", PROBE_CHECKS, "{}", "      - advance: 2h\n", ""),
    ],
    ids=["intent-task", "intent-delegates", "flow"],
)
def test_each_check_holds_or_says_what_differs(
    project: Project,
    tests: str,
    checks: list[tuple[str, str | None, str]],
    given: str,
    do: str,
    fakes: str,
) -> None:
    path = project.write(
        "checks.test.yaml", f"tests: {tests}\n{fakes}scenarios:\n" + _scenarios(checks, given, do)
    )
    results = run_scenarios(str(path))
    assert len(results) == sum(2 if holds is not None else 1 for _, holds, _ in checks)
    for result in results:
        verdict, key, _ = result.name.split(" ")
        if verdict == "holds":
            assert result.passed, (result.name, result.failure)
        else:
            assert not result.passed, result.name
            assert result.failure is not None and result.failure.key == key


def test_the_first_failing_check_ends_the_scenario(project: Project) -> None:
    path = project.write(
        "first.test.yaml",
        """\
        tests: orders.intent
        scenarios:
          - name: two wrong checks, then an action never reached
            given: { record: { total: 10 } }
            do:
              - expect: { status: waiting, tasks: [], record: { Status: Approved } }
              - cancel: true
        """,
    )
    (result,) = run_scenarios(str(path))
    assert result.failure is not None
    assert result.failure.key == "tasks"
    assert result.failure.expected == []
    assert result.failure.actual == [{"step": "review", "assignee": "manager"}]
    assert result.failure.pos is not None and result.failure.pos.line == 6


def test_error_message_is_a_substring_and_step_must_match(project: Project) -> None:
    path = project.write(
        "error.test.yaml",
        """\
        tests: probe.flow.yaml
        fakes: { slack.post: { raise: "channel archived", non_retryable: true } }
        scenarios:
          - name: substring
            do: [ { expect: { status: failed, error: { step: post, message: archived } } } ]
          - name: wrong step
            do: [ { expect: { error: { step: answer } } } ]
        """,
    )
    results = by_name(run_scenarios(str(path)))
    assert results["substring"].passed
    wrong = results["wrong step"].failure
    assert wrong is not None and wrong.actual["step"] == "post"
