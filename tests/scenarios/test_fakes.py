"""Every kind of fake: returns, returns_each, fail (+ message), raise, non_retryable, sets,
produces, takes; and the calls they answer."""

from __future__ import annotations

from scenario_helpers import Project, assert_all_pass, by_name

from procflow.testing import run_scenarios


def test_returns_and_returns_each_give_the_results_in_turn(project: Project) -> None:
    project.write(
        "probe.test.yaml",
        """\
        tests: probe.flow.yaml
        scenarios:
          - name: returns
            fakes: { slack.post: { returns: { ts: "T-9", channel: "@ada" } } }
            do:
              - expect: { bindings: { post: { ts: "T-9" } }, calls: { slack.post: 1 } }
          - name: returns_each, the last repeating
            fakes:
              slack.post: { returns_each: [ { ts: one }, { ts: two } ], fail: 0 }
            do:
              - expect: { bindings: { post: { ts: one } } }
          - name: without a fake slack.post keeps its message in the outbox
            do:
              - expect: { outbox: [ { channel: slack, to: "@ada" } ] }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_returns_each_answers_call_by_call(project: Project) -> None:
    project.write(
        "calls.test.yaml",
        """\
        tests: app.intent
        fakes:
          AppProvisioner: { returns: null }
          SchemaProvisioner:
            returns_each: [ null ]
            produces: { dbPassword: "a-long-enough-password" }
        scenarios:
          - name: one call each
            given: { record: { title: acme } }
            do:
              - expect:
                  status: completed
                  calls: { SchemaProvisioner: 1, AppProvisioner: 1 }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_fail_n_fails_the_first_attempts_then_succeeds(project: Project) -> None:
    project.write(
        "fail.test.yaml",
        """\
        tests: app.intent
        fakes:
          AppProvisioner: { returns: null }
        scenarios:
          - name: two failures, retried
            fakes:
              SchemaProvisioner:
                { fail: 2, message: "schema busy", produces: { dbPassword: "long-enough-secret" } }
            given: { record: { title: acme } }
            do:
              - expect:
                  waiting: { step: createSchema, kind: retry }
                  calls: { SchemaProvisioner: 1 }
              - advance: PT30S
              - expect: { calls: { SchemaProvisioner: 2 } }
              - advance: PT30S
              - expect:
                  status: completed
                  path: [createSchema, provisionApp, done]
                  calls: { SchemaProvisioner: 3 }
          - name: the default message
            fakes: { SchemaProvisioner: { fail: 9 } }
            given: { record: { title: acme } }
            do:
              - advance: PT2M
              - expect:
                  record: { failureMessage: "fake failure" }
                  calls: { SchemaProvisioner: 4 }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_raise_fails_every_attempt_and_non_retryable_stops_at_once(project: Project) -> None:
    project.write(
        "raise.test.yaml",
        """\
        tests: app.intent
        scenarios:
          - name: raise, retried until retries run out
            fakes: { SchemaProvisioner: { raise: "no schema" } }
            given: { record: { title: acme } }
            do:
              - advance: PT5M
              - expect:
                  calls: { SchemaProvisioner: 4 }
                  record: { failureMessage: "no schema", ProvisioningStatus: Failed }
          - name: non_retryable
            fakes: { SchemaProvisioner: { raise: "bad tenant", non_retryable: true } }
            given: { record: { title: acme } }
            do:
              - expect:
                  calls: { SchemaProvisioner: 1 }
                  path: [createSchema, recordFailure, markFailed]
                  record: { failureMessage: "bad tenant" }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_sets_writes_the_record_and_produces_sets_the_vars(project: Project) -> None:
    # AppProvisioner is the project's real code: it refuses a password under 16 characters, so
    # the value the fake produced is what it read.
    project.write(
        "writes.test.yaml",
        """\
        tests: app.intent
        scenarios:
          - name: produces with a value the real code accepts
            fakes:
              SchemaProvisioner:
                sets: { failureMessage: "schema made" }
                produces: { dbPassword: "sixteen-or-more-characters" }
            given: { record: { title: acme } }
            do:
              - expect:
                  status: completed
                  path: [createSchema, provisionApp, done]
                  record: { failureMessage: "schema made" }
          - name: by default each produced var is fake-<var>, too short for the real code
            fakes: { SchemaProvisioner: { returns: null } }
            given: { record: { title: acme } }
            do:
              - advance: PT10M
              - expect:
                  path: [createSchema, provisionApp, recordFailure, markFailed]
                  record: { failureMessage: "schema password too short" }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_takes_longer_than_the_timeout_fails_the_attempt(project: Project) -> None:
    project.write(
        "takes.test.yaml",
        """\
        tests: probe.flow.yaml
        scenarios:
          - name: slow post times out on every attempt
            fakes: { slack.post: { takes: 1m, returns: { ts: x } } }
            do:
              - advance: 1m
              - expect:
                  status: failed
                  error: { step: post, message: "the attempt ran longer than 10s" }
                  calls: { slack.post: 2 }
          - name: the attempt fails when its timeout elapses on the virtual clock, not before
            fakes: { slack.post: { takes: 1m, returns: { ts: x } } }
            do:
              - advance: 9s
              - expect:
                  status: waiting
                  waiting: { step: post, kind: timer }
                  calls: { slack.post: 1 }
              - advance: 1s
              - expect:
                  waiting: { step: post, kind: retry }
                  history: [run.started, step.started, attempt.failed, retry.scheduled]
              - advance: 39s
              - expect: { status: waiting, calls: { slack.post: 2 } }
              - advance: 1s
              - expect:
                  status: failed
                  error: { step: post, message: "the attempt ran longer than 10s" }
          - name: quick enough
            fakes: { slack.post: { takes: 5s, returns: { ts: x } } }
            do:
              - expect: { waiting: { step: answer, kind: event }, calls: { slack.post: 1 } }
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_a_scenario_fake_replaces_the_file_fake_of_that_name(project: Project) -> None:
    project.write(
        "override.test.yaml",
        """\
        tests: probe.flow.yaml
        fakes: { slack.post: { returns: { ts: file } } }
        scenarios:
          - name: file fake
            do: [ { expect: { bindings: { post: { ts: file } } } } ]
          - name: own fake
            fakes: { slack.post: { returns: { ts: own } } }
            do: [ { expect: { bindings: { post: { ts: own } } } } ]
        """,
    )
    results = by_name(run_scenarios(str(project.root)))
    assert results["file fake"].passed and results["own fake"].passed
