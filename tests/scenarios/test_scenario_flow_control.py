"""`procflow test` honours flow control on its virtual clock: a throttled step waits (`waiting:
{ kind: throttle }`) until `advance` reaches its budget; runs over a concurrency limit queue
(`waiting: { kind: queue }`) when a scenario has several runs (its schedules' slots, or its
events' triggers beside its own run); an unknown wait kind suggests the right one."""

from __future__ import annotations

import pytest
from scenario_helpers import Project, assert_all_pass

from procflow.errors import DefinitionError
from procflow.testing import run_scenarios

NOTIFY = """\
flow: notify
inputs:
  channels: { type: array, default: [a, b, c] }
steps:
  - each:
      for_each: "{{ channels }}"
      as: channel
      steps:
        - post:
            log.write: { message: "to {{ channel }}" }
            throttle: { limit: 1, per: 1m, name: chat }
"""

HOURLY = """\
flow: hourly
trigger:
  schedule: { every: 1h, overlap: allow }
concurrency: { limit: 1 }
steps:
  - hold: { wait: { for: 90m } }
"""

SYNC = """\
flow: sync
trigger: { event: slack.approval, as: click }
concurrency: { limit: 1, key: "{{ click.message }}" }
inputs:
  click: { type: object, required: true }
steps:
  - hold: { wait: { for: 1h } }
"""


def test_a_throttled_step_waits_until_advance_reaches_its_budget(project: Project) -> None:
    project.write("notify.flow.yaml", NOTIFY)
    project.write(
        "notify.test.yaml",
        """\
        tests: notify.flow.yaml
        scenarios:
          - name: one post a minute
            given: { inputs: {} }
            do:
              - expect:
                  status: waiting
                  waiting: { step: "each[1].post", kind: throttle }
                  history: [step.completed, step.throttled]
              - advance: 59s
              - expect: { waiting: { step: "each[1].post", kind: throttle } }
              - advance: 1s
              - expect: { waiting: { step: "each[2].post", kind: throttle } }
              - advance: 1m
              - expect:
                  status: completed
                  path: ["each[0].post", "each[1].post", "each[2].post", each]
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_runs_of_a_schedule_queue_behind_the_limit(project: Project) -> None:
    project.write("hourly.flow.yaml", HOURLY)
    project.write(
        "hourly.test.yaml",
        """\
        tests: hourly.flow.yaml
        scenarios:
          - name: the second slot's run waits for the first
            do:
              - advance: 2h
              - expect:
                  runs: [ { status: waiting }, { status: waiting } ]
                  waiting: { step: hold, kind: queue }
              - advance: 30m
              - expect:
                  runs: [ { status: completed }, { status: waiting } ]
                  waiting: { step: hold, kind: timer }
                  history: [run.started, run.dequeued, step.started]
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_runs_an_event_triggers_queue_behind_the_scenarios_own_run(project: Project) -> None:
    project.write("sync.flow.yaml", SYNC)
    project.write(
        "sync.test.yaml",
        """\
        tests: sync.flow.yaml
        scenarios:
          - name: one sync per message
            given: { inputs: { click: { message: m1 } } }
            do:
              - advance: 100ms  # runs started at one instant have no order between them
              - event: { type: slack.approval, data: { message: m1 } }
              - advance: 100ms
              - event: { type: slack.approval, data: { message: m2 } }
              - expect:
                  waiting: { step: hold, kind: timer }
                  runs: [ { status: waiting }, { status: waiting }, { status: waiting } ]
              - advance: 1h
              - expect:
                  status: completed
                  runs: [ { status: completed }, { status: waiting }, { status: completed } ]
        """,
    )
    assert_all_pass(run_scenarios(str(project.root)))


def test_an_unknown_wait_kind_suggests_queue_or_throttle(project: Project) -> None:
    project.write("hourly.flow.yaml", HOURLY)
    project.write(
        "hourly.test.yaml",
        """\
        tests: hourly.flow.yaml
        scenarios:
          - name: misspelt
            do:
              - expect: { waiting: { kind: queued } }
        """,
    )
    with pytest.raises(DefinitionError) as unusable:
        run_scenarios(str(project.root))
    shown = str(unusable.value)
    assert "expect.waiting.kind: [queued] is not a wait kind; did you mean [queue]?" in shown
    assert "queue, throttle, join)" in shown
