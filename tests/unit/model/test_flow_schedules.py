"""Scheduled starts in flow files (docs/reference/flow.md, "Scheduled starts"): ``trigger: {
schedule }``, a list of triggers, and every rule and message of a schedule, at its line:col."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_flow import LOG, F, case, compile_ok, run_cases

from procflow.model.schedule import Missed, Overlap, Schedule

STEPS = f"steps:\n  - a: {LOG}\n"


def lone(body: str, inputs: str = "") -> str:
    """A flow whose trigger is one schedule; its body is on line 3, from column 13."""
    return f"flow: t\ntrigger:\n  schedule: {{ {body} }}\n{inputs}{STEPS}"


def listed(*items: str, inputs: str = "") -> str:
    """A flow whose trigger is a list; item n is on line 2 + n, from column 5."""
    return "flow: t\ntrigger:\n" + "".join(f"  - {i}\n" for i in items) + inputs + STEPS


def micros(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp()) * 1_000_000


# --- what compiles --------------------------------------------------------------------------


def test_a_lone_schedule_is_named_after_the_flow_and_keeps_every_key(tmp_path: Path) -> None:
    flow = compile_ok(
        tmp_path,
        "flow: nightly-report\ntrigger:\n  schedule:\n    cron: '0 6 * * MON-FRI'\n"
        "    timezone: Europe/Berlin\n    jitter: 2m\n    overlap: buffer_one\n    missed: all\n"
        "    grace: PT5M\n    start: 2027-01-01T00:00:00Z\n    end: 2027-12-31T23:59:59+01:00\n"
        "inputs:\n  region: { type: string, default: eu }\nsteps:\n"
        "  - report:\n      log.write: { message: 'for {{ run.scheduled_at }} ({{ region }})' }\n",
    )
    assert flow.trigger is None
    (schedule,) = flow.schedules
    assert schedule == Schedule(
        name="nightly-report",
        pos=schedule.pos,
        cron="0 6 * * MON-FRI",
        timezone="Europe/Berlin",
        jitter=timedelta(minutes=2),
        overlap=Overlap.BUFFER_ONE,
        missed=Missed.ALL,
        grace=timedelta(minutes=5),
        start=micros("2027-01-01T00:00:00+00:00"),
        end=micros("2027-12-31T23:59:59+01:00"),
    )
    assert (schedule.pos.line, schedule.pos.col) == (4, 5)


def test_a_trigger_list_holds_one_event_trigger_and_named_schedules_in_order(
    tmp_path: Path,
) -> None:
    flow = compile_ok(
        tmp_path,
        listed(
            "{ event: slack.approval, as: evt }",
            "schedule: { name: morning, cron: '0 6 * * MON-FRI', timezone: Europe/Berlin }",
            "schedule: { name: often, every: 15m, start: 2027-01-01 }",
            "schedule: { name: once, at: '2027-06-01T12:00:00Z' }",
            inputs="inputs:\n  evt: { type: object, default: {} }\n",
        ),
    )
    assert flow.trigger is not None and flow.trigger.event == "slack.approval"
    assert [s.name for s in flow.schedules] == ["morning", "often", "once"]
    morning, often, once = flow.schedules
    assert (morning.cron, morning.timezone, morning.overlap, morning.missed, morning.grace) == (
        "0 6 * * MON-FRI",
        "Europe/Berlin",
        Overlap.SKIP,
        Missed.LATEST,
        timedelta(minutes=1),
    )
    assert (often.every, often.start) == (timedelta(minutes=15), micros("2027-01-01T00:00Z"))
    assert once.at == int(datetime(2027, 6, 1, 12, tzinfo=UTC).timestamp()) * 1_000_000
    assert (once.cron, once.every, once.jitter) == (None, None, timedelta(0))


def test_a_list_of_schedules_alone_has_no_event_trigger(tmp_path: Path) -> None:
    flow = compile_ok(tmp_path, listed("schedule: { name: s, cron: '@daily' }"))
    assert flow.trigger is None and flow.schedules[0].cron == "@daily"


def test_run_scheduled_at_is_a_name_steps_and_output_may_read(tmp_path: Path) -> None:
    flow = compile_ok(
        tmp_path,
        "flow: t\nsteps:\n"
        "  - a: { log.write: { message: '{{ run.scheduled_at | default(0) }}' } }\n"
        "output: '{{ run.scheduled_at }}'\n",
    )
    assert flow.schedules == ()


# --- the problems of one schedule -----------------------------------------------------------

SCHEDULE_CASES = [
    case(
        "a lone schedule takes no name",
        lone("name: n, every: 1h"),
        F + "3:15: error: trigger schedule: a lone schedule is named after the flow ([t]); "
        "[name] is for each schedule of a trigger list",
    ),
    case(
        "none of cron, every, at",
        lone("timezone: UTC"),
        F + "3:13: error: trigger schedule: needs exactly one of [cron], [every] or [at] (when "
        "it starts)",
    ),
    case(
        "cron and every",
        lone("cron: '* * * * *', every: 1h"),
        F + "3:34: error: trigger schedule: has both [cron] and [every]; give exactly one of "
        "cron, every, at",
    ),
    case(
        "cron, every and at, each still checked",
        lone("cron: '61 * * * *', every: 1h, at: 2027-01-01T00:00:00Z"),
        F + "3:21: error: trigger schedule: cron [61 * * * *]: bad minute field [61] (minute: "
        "0-59)",
        F + "3:35: error: trigger schedule: has both [cron] and [every]",
        F + "3:46: error: trigger schedule: has both [cron] and [at]",
    ),
    case(
        "a bad cron field",
        lone("cron: '0 6 * * FUNDAY'"),
        F + "3:21: error: trigger schedule: cron [0 6 * * FUNDAY]: bad day-of-week field "
        "[FUNDAY] (day-of-week: 0-7 or SUN-SAT, 5L, MON#2)",
    ),
    case(
        "a six-field cron",
        lone("cron: '0 0 6 * * ?'"),
        F + "3:21: error: trigger schedule: cron [0 0 6 * * ?] has 6 fields; it needs 5 (minute "
        "hour day-of-month month day-of-week); for seconds use every",
    ),
    case(
        "an unknown cron name",
        lone("cron: '@dialy'"),
        F + "3:21: error: trigger schedule: cron [@dialy]: unknown name [@dialy]; did you mean "
        "[@daily]?",
    ),
    case(
        "a cron that is no string",
        lone("cron: 5"),
        F + '3:21: error: trigger schedule: cron must be five fields, e.g. "0 6 * * MON-FRI", '
        "got an integer",
    ),
    case(
        "a cron expression",
        lone("cron: '{{ c }}'"),
        F + "3:21: error: trigger schedule: cron must be a literal, not an expression: a "
        "schedule is fixed when the flow is deployed",
    ),
    case(
        "every under a second",
        lone("every: 500ms"),
        F + "3:22: error: trigger schedule: every must be at least 1s, got 500ms",
    ),
    case(
        "every zero",
        lone("every: 0s"),
        F + "3:22: error: trigger schedule: every must be longer than zero, got 0s",
    ),
    case(
        "every no duration",
        lone("every: often"),
        F + "3:22: error: trigger schedule: every: ",
    ),
    case(
        "every an expression",
        lone("every: '{{ d }}'"),
        F + "3:22: error: trigger schedule: every must be a literal, not an expression",
    ),
    case(
        "an unknown zone",
        lone("cron: '0 6 * * *', timezone: Europe/Berlim"),
        F + "3:44: error: trigger schedule: timezone: [Europe/Berlim] is not an IANA time zone; "
        "did you mean [Europe/Berlin]?",
    ),
    case(
        "a zone that is no string",
        lone("cron: '0 6 * * *', timezone: [UTC]"),
        F + "3:44: error: trigger schedule: timezone must be an IANA time zone name "
        "(Europe/Berlin), got a list",
    ),
    case(
        "a zone on every is a warning",
        lone("every: 1h, timezone: Europe/Berlin"),
        F + "3:26: warning: trigger schedule: timezone does not apply to [every], which counts "
        "exact elapsed time",
    ),
    case(
        "a zone on at is a warning",
        lone("at: 2027-01-01T00:00:00Z, timezone: UTC"),
        F + "3:41: warning: trigger schedule: timezone does not apply to [at], which names one "
        "instant",
    ),
    case(
        "end before start",
        lone("every: 1h, start: 2027-02-01T00:00:00Z, end: 2027-01-01"),
        F + "3:60: error: trigger schedule: end 2027-01-01T00:00:00Z is before start "
        "2027-02-01T00:00:00Z; no slot could fall",
    ),
    case(
        "at before start",
        lone("at: 2027-01-01T00:00:00Z, start: 2027-02-01T00:00:00Z"),
        F + "3:19: error: trigger schedule: at 2027-01-01T00:00:00Z is before start "
        "2027-02-01T00:00:00Z; its one slot could never fall",
    ),
    case(
        "at after end",
        lone("at: 2027-03-01T00:00:00Z, end: 2027-02-01"),
        F + "3:19: error: trigger schedule: at 2027-03-01T00:00:00Z is after end "
        "2027-02-01T00:00:00Z; its one slot could never fall",
    ),
    case(
        "a start without a zone",
        lone("every: 1h, start: '2027-01-01T06:00'"),
        F + "3:33: error: trigger schedule: start: timestamp [2027-01-01T06:00] has no time zone; "
        "add Z (UTC) or an offset such as +02:00",
    ),
    case(
        "an end that is no timestamp",
        lone("every: 1h, end: tomorrow"),
        F + "3:31: error: trigger schedule: end: [tomorrow] is not an ISO-8601 timestamp (e.g. "
        "2027-01-10T09:00:00Z or 2027-01-10)",
    ),
    case(
        "an at that is a number",
        lone("at: 1700000000"),
        F + "3:19: error: trigger schedule: at must be an ISO-8601 timestamp with a zone, e.g. "
        "2027-01-01T06:00:00Z, got an integer",
    ),
    case(
        "an at beyond year 9999",
        lone("at: 10000-01-01T00:00:00Z"),
        F + "3:19: error: trigger schedule: at: timestamp [10000-01-01T00:00:00Z] is outside",
    ),
    case(
        "unknown overlap and missed",
        lone("every: 1h, overlap: skipp, missed: everything"),
        F + "3:35: error: trigger schedule: overlap [skipp] is not one of skip, allow, "
        "buffer_one, cancel_previous; did you mean [skip]?",
        F + "3:50: error: trigger schedule: missed [everything] is not one of latest, all, none",
    ),
    case(
        "jitter and grace that are no durations",
        lone("every: 1h, jitter: a bit, grace: 0s"),
        F + "3:34: error: trigger schedule: jitter: ",
        F + "3:48: error: trigger schedule: grace must be longer than zero, got 0s",
    ),
    case(
        "an unknown key",
        lone("every: 1h, timzone: UTC"),
        F + "3:26: error: trigger schedule: unknown key [timzone]; did you mean [timezone]?",
    ),
    case(
        "a schedule that is no mapping",
        "flow: t\ntrigger:\n  schedule: daily\n" + STEPS,
        F + "3:13: error: trigger schedule: schedule must be a mapping, got a string",
    ),
]


@pytest.mark.parametrize(("text", "expected"), SCHEDULE_CASES)
def test_schedule(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)


# --- the trigger's shape, names, inputs -----------------------------------------------------

TRIGGER_CASES = [
    case(
        "a list schedule needs a name",
        listed("schedule: { every: 1h }"),
        F + "3:15: error: trigger schedule: missing required key [name] (each schedule of a "
        "trigger list is named)",
    ),
    case(
        "a schedule name is an identifier",
        listed("schedule: { name: a-b, every: 1h }"),
        F + "3:23: error: trigger schedule: the schedule name [a-b] is not an identifier",
    ),
    case(
        "schedule names are unique",
        listed("schedule: { name: s, every: 1h }", "schedule: { name: s, every: 2h }"),
        F + "4:23: error: schedule [s]: the name [s] is used twice (first at line 3); schedule "
        "names are unique in a flow",
    ),
    case(
        "the problems of a listed schedule name it",
        listed("schedule: { name: s, every: 1h, overlap: no }"),
        F + "3:46: error: schedule [s]: overlap [no] is not one of skip, allow, buffer_one, "
        "cancel_previous",
    ),
    case(
        "two event triggers",
        listed(
            "{ event: slack.approval, as: evt }",
            "{ event: slack.approval, as: evt }",
            inputs="inputs:\n  evt: { type: object }\n",
        ),
        F + "4:5: error: trigger: a flow has at most one event trigger; the first is at line 3",
    ),
    case(
        "an item that is no mapping",
        listed(
            "schedule",
            "{ event: slack.approval, as: evt }",
            inputs="inputs:\n  evt: { type: object }\n",
        ),
        F + "3:5: error: trigger: each trigger must be a mapping, got a string",
    ),
    case(
        "an empty list",
        "flow: t\ntrigger: []\n" + STEPS,
        F + "2:10: error: trigger: the list is empty; give a trigger or drop [trigger]",
    ),
    case(
        "a trigger that is a string",
        "flow: t\ntrigger: daily\n" + STEPS,
        F + "2:10: error: trigger: trigger must be a mapping (an event trigger or a schedule) or "
        "a list of them, got a string",
    ),
    case(
        "a schedule key beside schedule",
        listed("schedule: { every: 1h }\n    name: s"),
        F + "3:15: error: trigger schedule: missing required key [name]",
        F + "4:5: error: trigger: [name] belongs inside [schedule]",
    ),
    case(
        "an event beside a lone schedule",
        "flow: t\ntrigger: { schedule: { every: 1h }, event: slack.approval }\n" + STEPS,
        F + "2:37: error: trigger: an event trigger and a schedule together are a list: trigger: "
        "[ { event: ..., as: ... }, { schedule: { name: ..., ... } } ]",
    ),
    case(
        "an unknown key beside schedule",
        "flow: t\ntrigger: { schedule: { every: 1h }, sched: 1 }\n" + STEPS,
        F + "2:37: error: trigger: unknown key [sched] beside [schedule]; a schedule is "
        "`schedule: {...}`",
    ),
    case(
        "a schedule key in an event trigger",
        "flow: t\ntrigger: { event: slack.approval, as: evt, cron: '0 6 * * *' }\n"
        "inputs:\n  evt: { type: object }\n" + STEPS,
        F + "2:44: error: trigger: [cron] belongs to a schedule: trigger: { schedule: { cron: ... "
        "} }",
    ),
    case(
        "a misspelt schedule",
        "flow: t\ntrigger: { schedul: { every: 1h } }\n" + STEPS,
        F + "2:10: error: trigger: missing required key [event]",
        F + "2:10: error: trigger: missing required key [as]",
        F + "2:12: error: trigger: unknown key [schedul]; did you mean [schedule]?",
    ),
    case(
        "inputs of a scheduled flow need defaults",
        lone(
            "every: 1h",
            inputs="inputs:\n  region: { type: string }\n  deal: { type: object, required: true }\n"
            "  ok: { type: string, default: x }\n",
        ),
        F + "5:11: error: input [region]: needs a default: schedule [t] starts runs without inputs",
        F + "6:9: error: input [deal]: is required, but schedule [t] starts runs without inputs; "
        "drop [required] and give it a default",
    ),
    case(
        "the event's input too, once, naming the first schedule",
        listed(
            "{ event: slack.approval, as: evt }",
            "schedule: { name: nightly, cron: '0 2 * * *' }",
            "schedule: { name: weekly, cron: '@weekly' }",
            inputs="inputs:\n  evt: { type: object }\n  other: { type: string }\n",
        ),
        F + "7:8: error: input [evt]: needs a default: schedule [nightly] starts runs without "
        "inputs",
        F + "8:10: error: input [other]: needs a default: schedule [nightly] starts runs without "
        "inputs",
    ),
    case(
        "inputs are checked also when the flow's name is wrong",
        'flow: "a b"\ntrigger:\n  schedule: { every: 1h }\ninputs:\n  x: { type: string }\n'
        + STEPS,
        F + "1:7: error: flow: the flow name [a b] may hold",
        F + "5:6: error: input [x]: needs a default: the flow's schedule starts runs without "
        "inputs",
    ),
    case(
        "inputs are checked also when the schedule is wrong",
        listed("schedule: { name: s, every: 0s }", inputs="inputs:\n  x: { type: string }\n"),
        F + "3:33: error: schedule [s]: every must be longer than zero, got 0s",
        F + "5:6: error: input [x]: needs a default: schedule [s] starts runs without inputs",
    ),
]


@pytest.mark.parametrize(("text", "expected"), TRIGGER_CASES)
def test_trigger(tmp_path: Path, text: str, expected: list[str]) -> None:
    run_cases(tmp_path, text, expected)
