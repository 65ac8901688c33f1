"""Every action of ``do:``: advance, until, event (rendered over the run), complete (as a user),
update, create, delete, cancel; an action the store refuses fails the scenario."""

from __future__ import annotations

import pytest
from scenario_helpers import Project, assert_all_pass, by_name

from procflow.testing import run_scenarios


def test_advance_until_and_an_event_rendered_over_the_run(project: Project) -> None:
    project.write(
        "probe.test.yaml",
        """\
        tests: probe.flow.yaml
        scenarios:
          - name: the answer arrives
            given: { inputs: { who: "@bob" }, clock: "2030-05-01T08:00:00Z" }
            do:
              - advance: 30m
              - event:
                  type: slack.approval
                  data: { message: "{{ bindings.post.ts }}", approved: true, run: "{{ run.id }}" }
              - expect: { status: completed, output: { approved: true } }
          - name: no answer before the timeout
            given: { clock: "2030-05-01T08:00:00Z" }
            do:
              - until: "2030-05-01T08:59:59Z"
              - expect: { waiting: { step: answer, kind: event } }
              - until: "2030-05-01T09:00:00Z"
              - expect:
                  status: completed
                  output: { approved: false }
                  bindings: { answer: { status: timeout } }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_complete_update_create_delete_and_cancel(project: Project) -> None:
    project.write(
        "orders.test.yaml",
        """\
        tests: orders.intent
        scenarios:
          - name: complete as a member of the role
            given: { users: { mia: [manager] }, record: { total: 10 } }
            do:
              - complete: { task: review, action: reject, as: mia, data: { note: "too small" } }
              - expect: { record: { Status: Rejected, note: "too small" } }
          - name: update to the abort status
            given: { record: { total: 10 } }
            do:
              - update: { Status: 5 }
              - expect: { status: aborted }
          - name: create the reply the run waits for
            given: { record: { total: 10 } }
            do:
              - complete: { task: review, action: askCustomer }
              - create: { OrderMessage: { text: hi, internal: false, order: 1 } }
              - expect: { waiting: { step: review, kind: task } }
          - name: delete the record
            given: { record: { total: 10 } }
            do:
              - delete: true
              - expect: { status: cancelled, tasks: [] }
          - name: cancel the run
            given: { record: { total: 10 } }
            do:
              - cancel: true
              - expect: { status: cancelled, tasks: [], record: { Status: Draft } }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_an_action_the_store_refuses_fails_the_scenario_where_it_is(project: Project) -> None:
    path = project.write(
        "refused.test.yaml",
        """\
        tests: orders.intent
        scenarios:
          - name: not a member
            given: { record: { total: 10 } }
            do:
              - complete: { task: review, action: approve, as: stranger }
              - expect: { status: completed }
          - name: no such task
            given: { record: { total: 10 } }
            do:
              - complete: { task: cfoReview, action: approve }
        """,
    )
    results = by_name(run_scenarios(str(path)))
    stranger = results["not a member"].failure
    assert stranger is not None and stranger.key == "complete"
    assert stranger.pos is not None and stranger.pos.line == 6
    assert "[stranger] is not a member" in stranger.actual
    missing = results["no such task"].failure
    assert missing is not None
    assert missing.expected == "an open task at [cfoReview]" and missing.actual == ["review"]


def test_given_secrets_are_what_secret_reads(project: Project) -> None:
    project.write(
        "greet.flow.yaml",
        """\
        flow: greet
        steps:
          - hello: { slack.post: { channel: "#a", text: "{{ secret('GREETING') }}" } }
        """,
    )
    path = project.write(
        "greet.test.yaml",
        """\
        tests: greet.flow.yaml
        scenarios:
          - name: with the secret
            given: { secrets: { GREETING: "good morning, team" } }
            do: [ { expect: { status: completed, outbox: [ { channel: slack, to: "#a" } ] } } ]
          - name: without it
            do:
              - expect: { status: failed, error: { step: hello, message: "[GREETING] is not set" } }
        """,
    )
    assert_all_pass(run_scenarios(str(path)))


def test_the_token_table_gives_roles_to_complete_as(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCFLOW_API_TOKENS", "tok-mia-000000000000000000000000=mia:manager")
    path = project.write(
        "tokens.test.yaml",
        """\
        tests: orders.intent
        scenarios:
          - name: mia is a manager by the token table
            given: { record: { total: 10 } }
            do:
              - complete: { task: review, action: reject, as: mia }
              - expect: { record: { Status: Rejected } }
        """,
    )
    (result,) = run_scenarios(str(path))
    assert result.passed, result.failure
