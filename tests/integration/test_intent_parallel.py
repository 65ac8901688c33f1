"""The intent ``parallel`` step end to end, on both stores: the fork puts a token on each
branch, the join waits for every branch, one token goes on at ``next``."""

# ruff: noqa: E501 -- the processes are written one step a line, as files are

from __future__ import annotations

import pytest
from test_intent_runtime import Project, project

__all__ = ["project"]  # the shared fixture

TWO_TASKS = """\
- name: P
  trigger: { onCreate: Tenant }
  steps:
    - { name: reviews, kind: parallel, args: { branches: [tech, legal], next: consolidate } }
    - { name: tech, kind: userTask, args: { assignee: engineer, next: techSignoff } }
    - { name: techSignoff, kind: serviceTask, args: { setField: state, value: tech } }
    - { name: legal, kind: userTask, args: { assignee: lawyer, setField: route, value: legal } }
    - { name: consolidate, kind: serviceTask, args: { setRelationField: Progress, value: Done } }
"""

# The spec's example: a nested fork joins into its enclosing join; a decision in a branch
# either escalates or goes straight to the join.
NESTED = """\
- name: P
  trigger: { onCreate: Tenant }
  steps:
    - { name: reviews, kind: parallel, args: { branches: [techReview, commercial], next: consolidate } }
    - { name: techReview, kind: userTask, args: { assignee: engineer, next: techSignoff } }
    - { name: techSignoff, kind: serviceTask, args: { setField: state, value: tech } }
    - { name: commercial, kind: parallel, args: { branches: [pricing, legal] } }
    - { name: pricing, kind: decision, args: { if: "amount > 1000", then: escalate, else: join } }
    - { name: escalate, kind: userTask, args: { assignee: manager, setField: x, value: escalated } }
    - { name: legal, kind: userTask, args: { assignee: lawyer, setField: route, value: legal } }
    - { name: consolidate, kind: serviceTask, args: { setRelationField: Progress, value: Done } }
"""


def task_of(project: Project, assignee: str) -> int:
    tasks = [t for t in project.engine.list_tasks() if t["assignee"] == assignee]
    assert len(tasks) == 1, tasks
    return int(tasks[0]["id"])


def waiting(project: Project, run_id: str) -> dict[str, object]:
    """Each waiting token's step → its waiting_for kind (the join lists its branches)."""
    out: dict[str, object] = {}
    for token in project.show(run_id)["tokens"]:
        wait = token.get("waiting_for") or {}
        out[token["step"]] = wait.get("branches", wait.get("kind"))
    return out


@pytest.mark.parametrize("first", ["engineer", "lawyer"])
def test_the_join_waits_for_both_branches_in_either_order(project: Project, first: str) -> None:
    project.deploy(TWO_TASKS)
    record, run_id = project.start()
    assert waiting(project, run_id) == {
        "reviews": ["tech", "legal"],
        "tech": "task",
        "legal": "task",
    }
    second = "lawyer" if first == "engineer" else "engineer"
    project.engine.complete_task(task_of(project, first))
    project.engine.work()
    shown = project.show(run_id)
    assert shown["status"] == "waiting"
    left = "legal" if first == "engineer" else "tech"
    assert waiting(project, run_id) == {"reviews": [left], left: "task"}
    assert project.record(record["id"])["Progress"] == 1  # the join still waits
    project.engine.complete_task(task_of(project, second))
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    after = project.record(record["id"])
    # Each branch's write survives the other's commit, and the join went on once.
    assert (after["state"], after["route"], after["Progress"]) == ("tech", "legal", 2)
    assert (
        len([h for h in project.history(run_id, "step.completed") if h["step"] == "consolidate"])
        == 1
    )
    forked = project.history(run_id, "token.forked")
    assert [(h["step"], h["from"]) for h in forked] == [("tech", "reviews"), ("legal", "reviews")]
    joined = project.history(run_id, "token.joined")
    assert [h["waiting"] for h in joined] == [[left], []]


def test_runs_show_says_what_the_join_waits_for(project: Project) -> None:
    from procflow.runtime.operations.views import why_line

    project.deploy(TWO_TASKS)
    _, run_id = project.start()
    join = next(t for t in project.show(run_id)["tokens"] if t["step"] == "reviews")
    assert join["state"] == "waiting"
    assert (
        why_line("reviews", join["waiting_for"]) == "reviews: join waiting for branches tech, legal"
    )


@pytest.mark.parametrize(("amount", "escalated"), [(5000, True), (10, False)])
def test_nested_forks_and_a_decision_taking_either_arm(
    project: Project, amount: int, escalated: bool
) -> None:
    project.deploy(NESTED)
    record, run_id = project.start(amount=amount)
    expected: dict[str, object] = {
        "reviews": ["techReview", "commercial"], "techReview": "task",
        "commercial": ["pricing", "legal"] if escalated else ["legal"], "legal": "task",
    }  # fmt: skip
    if escalated:
        expected["escalate"] = "task"
    assert waiting(project, run_id) == expected
    project.engine.complete_task(task_of(project, "lawyer"))
    project.engine.complete_task(task_of(project, "engineer"))
    project.engine.work()
    if escalated:
        assert waiting(project, run_id) == {
            "reviews": ["commercial"],
            "commercial": ["pricing"],
            "escalate": "task",
        }
        project.engine.complete_task(task_of(project, "manager"))
        project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    after = project.record(record["id"])
    assert (after["state"], after["route"], after["Progress"]) == ("tech", "legal", 2)
    assert after["x"] == ("escalated" if escalated else None)


def failing(delegate: str, on_error: bool) -> str:
    """A fork whose branch [call] fails (routed to [recover] in the branch, or not)."""
    route = ", onError: recover" if on_error else ""
    recover = (
        '    - { name: recover, kind: serviceTask, args: { setField: failureMessage, value: "{error}" } }\n'
        if on_error
        else ""
    )
    return (
        "- name: P\n"
        "  trigger: { onCreate: Tenant }\n"
        "  steps:\n"
        "    - { name: f, kind: parallel, args: { branches: [call, review], next: done } }\n"
        f"    - {{ name: call, kind: serviceTask, args: {{ delegate: {delegate}, fields: {{ failures: 1 }}{route} }} }}\n"
        f"{recover}"
        "    - { name: review, kind: userTask, args: { assignee: lawyer } }\n"
        "    - { name: done, kind: serviceTask, args: { setRelationField: Progress, value: Done } }\n"
    )


def test_a_failure_routed_by_on_error_stays_in_its_branch(project: Project) -> None:
    project.deploy(failing("Fatal", on_error=True))
    record, run_id = project.start()
    assert waiting(project, run_id) == {"f": ["review"], "review": "task"}
    assert project.record(record["id"])["failureMessage"] == "refused for good"
    project.engine.complete_task(task_of(project, "lawyer"))
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    assert project.record(record["id"])["Progress"] == 2


def test_an_unrouted_failure_fails_the_run_and_retry_resumes_its_branch(project: Project) -> None:
    project.deploy(failing("FailsFirstCalls", on_error=False))
    record, run_id = project.start()
    shown = project.show(run_id)
    assert shown["status"] == "failed"
    assert shown["error"]["step"] == "call"
    states = {t["step"]: t["state"] for t in shown["tokens"]}
    # the other branch's token stays where it was, as any token of a failed run does
    assert states == {"f": "waiting", "call": "failed", "review": "ready"}
    project.engine.advance("PT1H")
    assert project.engine.list_tasks() == [] and project.show(run_id)["status"] == "failed"
    project.engine.retry(run_id)
    project.engine.work()
    assert waiting(project, run_id) == {"f": ["review"], "review": "task"}
    assert project.record(record["id"])["x"] == "call 2"
    project.engine.complete_task(task_of(project, "lawyer"))
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"


def test_cancel_withdraws_every_branch(project: Project) -> None:
    project.deploy(NESTED)
    _, run_id = project.start(amount=5000)
    assert len(project.engine.list_tasks()) == 3
    project.engine.cancel(run_id)
    shown = project.show(run_id)
    assert (shown["status"], shown["tokens"]) == ("cancelled", [])
    assert project.engine.list_tasks() == []


def test_abort_on_withdraws_every_branch(project: Project) -> None:
    project.deploy(
        TWO_TASKS.replace("  steps:\n", "  abortOn: { status: Failed, then: end }\n  steps:\n", 1)
    )
    record, run_id = project.start()
    project.engine.update_record("Tenant", record["id"], {"Progress": 3})
    project.engine.work()
    shown = project.show(run_id)
    assert (shown["status"], shown["tokens"]) == ("aborted", [])
    assert project.engine.list_tasks() == []


def test_record_writes_of_two_branches_in_one_round_are_both_kept(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - { name: f, kind: parallel, args: { branches: [a, b], next: end } }
            - { name: a, kind: serviceTask, args: { setField: state, value: a, next: a2 } }
            - { name: a2, kind: serviceTask, args: { setField: junk, value: a2 } }
            - { name: b, kind: serviceTask, args: { setField: route, value: b } }
        """)
    record, run_id = project.start()
    assert project.show(run_id)["status"] == "completed"
    after = project.record(record["id"])
    assert (after["state"], after["junk"], after["route"]) == ("a", "a2", "b")
    assert project.show(run_id)["tokens"] == []


def test_route_coverage_counts_each_branch_route_and_the_join(project: Project) -> None:
    from procflow.model.ir import Application
    from procflow.model.validate import compile_file
    from procflow.testing.coverage import coverage_of, taken

    project.deploy(NESTED)
    _, run_id = project.start(amount=10)
    app = compile_file(str(project.file))
    assert isinstance(app, Application)
    process = app.processes[0]
    cov = coverage_of(str(project.file), process)
    forks = {
        (r.source, r.kind, r.target) for r in cov.routes if r.source in ("reviews", "commercial")
    }
    assert forks == {
        ("reviews", "branch techReview", "techReview"), ("reviews", "branch commercial", "commercial"),
        ("reviews", "join", "consolidate"),
        ("commercial", "branch pricing", "pricing"), ("commercial", "branch legal", "legal"),
        ("commercial", "join", "join"),
    }  # fmt: skip
    branch = next(r for r in cov.routes if r.kind == "branch legal")
    assert (branch.pos.line, branch.pos.col) == (37, 73)  # the branch's name in the list
    cov.add([], taken(process, project.history(run_id)))
    untaken = {(r.source, r.kind) for r in cov.untaken}
    assert ("commercial", "branch legal") not in untaken and ("reviews", "join") in untaken
    project.engine.complete_task(task_of(project, "lawyer"))
    project.engine.complete_task(task_of(project, "engineer"))
    project.engine.work()
    cov.add([], taken(process, project.history(run_id)))
    assert {(r.source, r.kind) for r in cov.untaken} == {("pricing", "then"), ("escalate", "next")}
