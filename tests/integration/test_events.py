"""Events and `wait_for` through the engine API, on both store backends.

Everything runs on a virtual-clock store (``Engine.virtual``, 2027-01-01T00:00:00Z): time only
moves with ``advance``, so "exactly at the timeout" is an instant, not a guess. ``slack.post``
runs in outbox mode (the engine sees no SLACK_TOKEN) and returns a ts minted by procflow, which is
what the seed's ``approval`` step correlates on. A project connector, ``crm``, declares events
with a dotted ``correlate_on`` path and a numeric key (``1 == 1.0``), and a triggered flow.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from projects import DEAL_APPROVAL_START, SEED_APPROVAL, crm_connector, deploy_text

from procflow.errors import EventError, UsageError
from procflow.runtime.data.events import envelope
from procflow.runtime.engine import Engine

# The example atop docs/reference/flow.md, minus the trigger: ask, wait for the click, nudge on a
# timeout.
DEAL_APPROVAL = (
    DEAL_APPROVAL_START
    + """\
  - escalate:
      if: "{{ approval.status == 'timeout' }}"
      steps:
        - nudge: { slack.post: { channel: "#sales-leads", text: "{{ deal.name }} is waiting" } }
  - after: { log.write: { message: "approval {{ approval.status }}" } }
output:
  status: "{{ approval.status }}"
  event: "{{ approval.event }}"
"""
)

# The same approval, then the run stays alive well past the approval's timeout instant.
HELD = (
    """\
flow: held
inputs:
  deal: { type: object, required: true }
steps:
  - ask:
      slack.post: { channel: "#sales-ops", text: "Approve {{ deal.name }}?" }
"""
    + SEED_APPROVAL
    + """\
  - hold:
      wait: { for: 2d }
output:
  status: "{{ approval.status }}"
"""
)

# Many runs waiting on one chosen message (the seed's step, correlated on an input instead).
KEYED = """\
flow: keyed
inputs:
  msg: { type: string, required: true }
steps:
  - approval:
      wait_for: slack.approval
      match: { message: "{{ msg }}" }
      timeout: 24h
  - after: { log.write: { message: "approval {{ approval.status }}" } }
output: "{{ approval }}"
"""

LOOKBACK = """\
flow: lookback
inputs:
  msg: { type: string, required: true }
steps:
  - first:
      wait_for: slack.approval
      match: { message: "{{ msg }}" }
      timeout: 1h
      lookback: 2h
  - second:
      wait_for: slack.approval
      match: { message: "{{ msg }}" }
      timeout: 1h
      lookback: 2h
output:
  first: "{{ first }}"
  second: "{{ second }}"
"""

WON_WAIT = """\
flow: won-wait
inputs:
  deal_id: { type: integer, required: true }
steps:
  - won:
      wait_for: crm.deal_won
      match: { deal.id: "{{ deal_id }}" }
      timeout: 1h
output: "{{ won }}"
"""

PAID_WAIT = """\
flow: paid-wait
inputs:
  invoice: { type: number, required: true }
steps:
  - paid:
      wait_for: crm.paid
      match: { invoice: "{{ invoice }}" }
      timeout: 1h
output: "{{ paid }}"
"""

BIG_DEALS = """\
flow: big-deals
trigger: { event: crm.deal_won, as: won, when: "{{ won.amount > 10000 }}" }
inputs:
  won: { type: object, required: true }
  region: { type: string, default: emea }
steps:
  - note: { log.write: { message: "won {{ won.name }} in {{ region }}" } }
output:
  won: "{{ won }}"
  region: "{{ region }}"
"""


class Project:
    """A flow project in ``tmp_path`` (with the ``crm`` connector) and a virtual-clock engine
    that sees no Slack set-up (slack.post in outbox mode)."""

    def __init__(self, tmp_path: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.dir = crm_connector(tmp_path / "project")
        self.eng = Engine.virtual(db_url, environ=dict(db_env))

    def deploy(self, *flows: str) -> None:
        for text in flows:
            deploy_text(self.eng, self.dir, textwrap.dedent(text))

    def start(self, name: str, inputs: dict[str, Any]) -> str:
        run_id = self.eng.start_flow(name, inputs)
        self.eng.work()
        return run_id

    def send(self, type_: str, data: Any, id_: str | None = None) -> dict[str, Any]:
        report = self.eng.send_event(type_, data, id_)
        self.eng.work()
        return report

    def show(self, run_id: str) -> dict[str, Any]:
        return self.eng.show(run_id)

    def count(self, table: str, where: str = "", *args: Any) -> int:
        sql = f"SELECT count(*) FROM {table}" + (f" WHERE {where}" if where else "")
        return int(self.eng.store.read().c.execute(sql, args).fetchone()[0])

    def snapshot(self) -> dict[str, Any]:
        """Everything an event could change: stored events, waits, deliveries, timers, and
        every run as show() prints it."""
        return {
            "events": self.count("events"),
            "waits": self.count("waits"),
            "deliveries": self.count("deliveries"),
            "timers": self.count("timers"),
            "runs": {r.id: self.show(r.id) for r in self.eng.list_runs()},
        }

    def close(self) -> None:
        self.eng.close()


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    proj = Project(tmp_path, db_url, db_env)
    try:
        yield proj
    finally:
        proj.close()


def entries(run: dict[str, Any], type_: str, step: str | None = None) -> list[dict[str, Any]]:
    """History entries of one type (of one step, when given), without their seq."""
    return [
        {k: v for k, v in h.items() if k != "seq"}
        for h in run["history"]
        if h["type"] == type_ and (step is None or h.get("step") == step)
    ]


def report(
    event_id: str, resumed: Sequence[str] = (), started: Sequence[str] = (), **extra: Any
) -> dict[str, Any]:
    """The delivery report expected for a new (not duplicate) event."""
    return {
        "event_id": event_id,
        "duplicate": False,
        "resumed": list(resumed),
        "started": list(started),
        **extra,
    }


def sorted_report(got: dict[str, Any]) -> dict[str, Any]:
    return {**got, "resumed": sorted(got["resumed"]), "started": sorted(got["started"])}


def waiting_on(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [t["waiting_for"] for t in run["tokens"]]


# --- the seed's approval step -----------------------------------------------------------------


def test_matching_message_resumes_with_status_received_and_the_payload(project: Project) -> None:
    assert SEED_APPROVAL in DEAL_APPROVAL and SEED_APPROVAL in HELD  # the seed's step, verbatim
    project.deploy(DEAL_APPROVAL)
    run_id = project.start("deal-approval", {"deal": {"name": "Acme"}})
    waiting = project.show(run_id)
    ts = waiting["bindings"]["ask"]["ts"]
    assert isinstance(ts, str) and ts
    assert waiting["status"] == "waiting"
    assert waiting["tokens"] == [
        {
            "step": "approval",
            "state": "waiting",
            "waiting_for": {
                "kind": "event",
                "type": "slack.approval",
                "match": {"message": ts},
                "timeout_at": "2027-01-02T00:00:00Z",
            },
            "since": "2027-01-01T00:00:00Z",
        }
    ]
    assert [e["at"] for e in entries(waiting, "step.started", "approval")] == [
        "2027-01-01T00:00:00Z"
    ]
    assert [e["due"] for e in entries(waiting, "timer.armed", "approval")] == [
        "2027-01-02T00:00:00Z"
    ]

    # Another message's click: not for this run.
    other = {"message": ts + "-other", "approved": True, "user": "mallory"}
    assert project.send("slack.approval", other, "click-other") == report("click-other")
    assert project.show(run_id) == waiting

    project.eng.advance("1h")
    assert project.show(run_id) == waiting
    payload = {"message": ts, "approved": True, "user": "ops", "extra": {"kept": 1}}
    assert project.send("slack.approval", payload, "click-1") == report("click-1", [run_id])

    shown = project.show(run_id)
    assert shown["status"] == "completed", shown["error"]
    assert shown["error"] is None
    assert shown["bindings"]["approval"] == {"status": "received", "event": payload}
    assert shown["bindings"]["escalate"] is None  # skipped: no timeout
    assert shown["output"] == {"status": "received", "event": payload}
    assert entries(shown, "event.received") == [
        {
            "at": "2027-01-01T01:00:00Z",
            "type": "event.received",
            "step": "approval",
            "path": "approval",
            "attempt": 1,
            "event_type": "slack.approval",
            "event_id": "click-1",
        }
    ]
    assert entries(shown, "timer.fired") == []
    assert [e["message"] for e in entries(shown, "log")] == ["approval received"]
    assert shown["ended_at"] == "2027-01-01T01:00:00Z"
    assert project.count("deliveries", "run_id=?", run_id) == 1
    assert project.count("waits") == 0
    assert project.count("timers") == 0


def test_no_event_times_out_at_exactly_24h_and_the_run_goes_on(project: Project) -> None:
    project.deploy(DEAL_APPROVAL)
    run_id = project.start("deal-approval", {"deal": {"name": "Acme"}})
    waiting = project.show(run_id)
    ts = waiting["bindings"]["ask"]["ts"]

    project.eng.advance("23h59m")
    assert project.show(run_id) == waiting  # one minute early: still waiting
    project.eng.advance("59s")
    assert project.show(run_id) == waiting  # one second early too

    project.eng.advance("1s")
    shown = project.show(run_id)
    assert shown["status"] == "completed", shown["error"]
    assert shown["error"] is None
    assert shown["bindings"]["approval"] == {"status": "timeout", "event": None}
    assert shown["output"] == {"status": "timeout", "event": None}
    fired = entries(shown, "timer.fired", "approval")
    assert [e["at"] for e in fired] == ["2027-01-02T00:00:00Z"]
    assert entries(shown, "event.received") == []
    # A timeout is not a failure: no failure entries, and the later steps ran.
    assert entries(shown, "step.failed") == [] and entries(shown, "run.failed") == []
    outboxed = [(e["step"], e["to"]) for e in entries(shown, "message.outboxed")]
    assert outboxed == [("ask", "#sales-ops"), ("nudge", "#sales-leads")]
    assert [e["message"] for e in entries(shown, "log")] == ["approval timeout"]
    assert shown["ended_at"] == "2027-01-02T00:00:00Z"

    # After the timeout, a late click resumes nothing and changes nothing.
    before = project.snapshot()
    late = {"message": ts, "approved": True, "user": "ops"}
    assert project.send("slack.approval", late, "late-click") == report("late-click")
    after = project.snapshot()
    assert after["runs"] == before["runs"]
    assert after["deliveries"] == before["deliveries"] == 0


def test_after_the_event_the_timeout_instant_changes_nothing(project: Project) -> None:
    project.deploy(HELD)
    run_id = project.start("held", {"deal": {"name": "Acme"}})
    ts = project.show(run_id)["bindings"]["ask"]["ts"]
    project.eng.advance("23h")
    payload = {"message": ts, "approved": False}
    assert project.send("slack.approval", payload, "click") == report("click", [run_id])
    received = project.show(run_id)
    assert received["bindings"]["approval"] == {"status": "received", "event": payload}
    assert waiting_on(received) == [{"kind": "timer", "due": "2027-01-03T23:00:00Z"}]

    project.eng.advance("2h")  # past the approval's timeout instant (2027-01-02T00:00:00Z)
    assert project.show(run_id) == received
    assert entries(received, "timer.fired") == []

    # A second click for the same message finds no wait any more.
    again = {"message": ts, "approved": True}
    assert project.send("slack.approval", again, "click-again") == report("click-again")
    assert project.show(run_id) == received

    project.eng.advance("1d21h59m")
    assert project.show(run_id) == received  # the hold's timer: one minute to go
    project.eng.advance("1m")
    done = project.show(run_id)
    assert done["status"] == "completed", done["error"]
    assert done["output"] == {"status": "received"}
    assert done["bindings"]["approval"] == {"status": "received", "event": payload}
    assert len(entries(done, "event.received")) == 1
    assert [(e["step"], e["at"]) for e in entries(done, "timer.fired")] == [
        ("hold", "2027-01-03T23:00:00Z")
    ]


# --- fan-out and dedupe --------------------------------------------------------------------


def test_one_event_reaches_every_waiting_run_each_wait_once(project: Project) -> None:
    project.deploy(KEYED)
    runs = sorted(project.start("keyed", {"msg": "M-1"}) for _ in range(3))
    bystander = project.start("keyed", {"msg": "M-2"})
    bystander_before = project.show(bystander)

    payload = {"message": "M-1", "approved": True, "user": "ops"}
    got = project.eng.send_event("slack.approval", payload, "fan-out")
    assert sorted_report(got) == report("fan-out", runs)
    project.eng.work()
    for run_id in runs:
        shown = project.show(run_id)
        assert shown["status"] == "completed", shown["error"]
        assert shown["output"] == {"status": "received", "event": payload}
        received = entries(shown, "event.received")
        assert [e["event_id"] for e in received] == ["fan-out"]
    assert project.show(bystander) == bystander_before
    assert project.count("deliveries", "event_id=?", "fan-out") == 3

    # Each wait at most once: a second event on the key finds nobody left.
    got = project.send("slack.approval", payload, "fan-out-2")
    assert got == report("fan-out-2")


def test_a_duplicate_id_reaches_no_run(project: Project) -> None:
    project.deploy(KEYED)
    runs = sorted(project.start("keyed", {"msg": "D"}) for _ in range(3))
    payload = {"message": "D", "approved": True}
    got = project.eng.send_event("slack.approval", payload, "dup-1")
    assert sorted_report(got) == report("dup-1", runs)
    project.eng.work()

    fourth = project.start("keyed", {"msg": "D"})  # waits on the same key, after delivery
    before = project.snapshot()
    assert before["events"] == 1
    assert before["runs"][fourth]["status"] == "waiting"

    for data in (payload, {"message": "D", "approved": False, "user": "someone else"}):
        got = project.send("slack.approval", data, "dup-1")
        assert got == {"event_id": "dup-1", "duplicate": True, "resumed": [], "started": []}
        assert project.snapshot() == before

    # A new id on the key reaches the fourth run.
    assert project.send("slack.approval", payload, "dup-2") == report("dup-2", [fourth])
    assert project.show(fourth)["output"] == {"status": "received", "event": payload}


# --- lookback ------------------------------------------------------------------------------


def test_lookback_takes_an_event_accepted_before_the_wait_began(project: Project) -> None:
    project.deploy(LOOKBACK)
    early = {"message": "L", "approved": True, "user": "early"}
    assert project.send("slack.approval", early, "early") == report("early")  # nobody waits yet
    project.eng.advance("30m")

    run_id = project.start("lookback", {"msg": "L"})
    shown = project.show(run_id)
    # The first wait is satisfied at once by the event from 30 minutes ago...
    assert shown["bindings"].get("first") == {"status": "received", "event": early}, shown
    assert entries(shown, "event.received") == [
        {
            "at": "2027-01-01T00:30:00Z",
            "type": "event.received",
            "step": "first",
            "path": "first",
            "attempt": 1,
            "event_type": "slack.approval",
            "event_id": "early",
            "lookback": True,
        }
    ]
    # ... and the second, in the same run, does not take that event a second time.
    assert shown["status"] == "waiting"
    assert shown["tokens"] == [
        {
            "step": "second",
            "state": "waiting",
            "waiting_for": {
                "kind": "event",
                "type": "slack.approval",
                "match": {"message": "L"},
                "timeout_at": "2027-01-01T01:30:00Z",
            },
            "since": "2027-01-01T00:30:00Z",
        }
    ]
    assert project.count("deliveries", "run_id=?", run_id) == 1

    late = {"message": "L", "approved": False, "user": "late"}
    project.eng.advance("10m")
    assert project.send("slack.approval", late, "late") == report("late", [run_id])
    shown = project.show(run_id)
    assert shown["status"] == "completed", shown["error"]
    assert shown["output"] == {
        "first": {"status": "received", "event": early},
        "second": {"status": "received", "event": late},
    }
    received = [(e["event_id"], e.get("lookback")) for e in entries(shown, "event.received")]
    assert received == [("early", True), ("late", None)]


def test_lookback_ignores_an_event_older_than_its_window(project: Project) -> None:
    project.deploy(LOOKBACK)
    old = {"message": "O", "approved": True}
    assert project.send("slack.approval", old, "old") == report("old")
    project.eng.advance("2h1m")  # the window is 2h: the event is a minute too old

    run_id = project.start("lookback", {"msg": "O"})
    shown = project.show(run_id)
    assert shown["status"] == "waiting"
    assert [t["step"] for t in shown["tokens"]] == ["first"]
    assert entries(shown, "event.received") == []

    project.eng.advance("1h")  # first times out; second starts, the old event still too old
    shown = project.show(run_id)
    assert shown["bindings"]["first"] == {"status": "timeout", "event": None}
    assert [t["step"] for t in shown["tokens"]] == ["second"]
    assert entries(shown, "event.received") == []
    assert project.count("deliveries") == 0


def test_lookback_takes_the_earliest_undelivered_event_even_one_another_run_got(
    project: Project,
) -> None:
    project.deploy(KEYED, LOOKBACK)
    live = project.start("keyed", {"msg": "S"})
    one = {"message": "S", "approved": True, "user": "one"}
    two = {"message": "S", "approved": False, "user": "two"}
    assert project.send("slack.approval", one, "one") == report("one", [live])
    project.eng.advance("10m")
    assert project.send("slack.approval", two, "two") == report("two")
    project.eng.advance("10m")

    # "one" already reached another run; this run has had neither: both waits are met at once,
    # in order, each by a different event.
    run_id = project.start("lookback", {"msg": "S"})
    shown = project.show(run_id)
    assert shown["status"] == "completed", shown
    assert shown["output"] == {
        "first": {"status": "received", "event": one},
        "second": {"status": "received", "event": two},
    }
    received = [
        (e["step"], e["event_id"], e.get("lookback")) for e in entries(shown, "event.received")
    ]
    assert received == [("first", "one", True), ("second", "two", True)]
    assert project.count("deliveries", "run_id=?", run_id) == 2


LATE_WAIT = """\
flow: late
steps:
  - pause: {{ wait: {{ for: 30h }} }}
  - approval:
      wait_for: slack.approval
      match: {{ message: "m1" }}
      timeout: 1h
      lookback: {lookback}
output: "{{{{ approval.status }}}}"
"""


def test_event_pruning_keeps_what_the_lookback_of_a_running_older_version_still_needs(
    project: Project,
) -> None:
    project.deploy(LATE_WAIT.format(lookback="48h"))
    run_id = project.start("late", {})
    project.eng.advance("1h")
    project.eng.send_event("slack.approval", {"message": "m1", "approved": True}, "early")
    # A new version with a shorter window; the running run stays pinned to version 1, whose
    # wait_for will look back 48 hours.
    project.deploy(LATE_WAIT.format(lookback="1h"))
    project.eng.advance("25h")  # T0+26h
    project.eng.send_event("slack.approval", {"message": "unrelated"}, "later")  # prunes
    project.eng.advance("5h")  # T0+31h: the wait_for began at T0+30h and timed out at T0+31h
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    # The event accepted at T0+1h lies inside the 48h window of the version the run runs.
    assert shown["output"] == "received"


# --- cancel --------------------------------------------------------------------------------


def test_cancelling_a_waiting_run_removes_its_wait(project: Project) -> None:
    project.deploy(KEYED)
    run_id = project.start("keyed", {"msg": "C"})
    assert project.count("waits", "run_id=?", run_id) == 1
    project.eng.cancel(run_id)
    cancelled = project.show(run_id)
    assert cancelled["status"] == "cancelled"
    assert project.count("waits", "run_id=?", run_id) == 0
    assert project.count("timers", "run_id=?", run_id) == 0

    assert project.send("slack.approval", {"message": "C"}, "after-cancel") == report(
        "after-cancel"
    )
    project.eng.advance("25h")  # past its timeout instant too
    assert project.show(run_id) == cancelled
    assert entries(cancelled, "event.received") == entries(cancelled, "timer.fired") == []
    assert project.count("deliveries") == 0


# --- correlation values ----------------------------------------------------------------------


def test_dotted_and_numeric_correlation_values_match_by_json_equality(project: Project) -> None:
    project.deploy(WON_WAIT, PAID_WAIT)
    won = project.start("won-wait", {"deal_id": 42})
    assert waiting_on(project.show(won))[0]["match"] == {"deal.id": 42}
    seven = project.start("paid-wait", {"invoice": 7})
    eight = project.start("paid-wait", {"invoice": 8.0})

    # The text "42" is not the number 42.
    as_text = {"deal": {"id": "42"}, "amount": 1}
    assert project.send("crm.deal_won", as_text, "won-text") == report("won-text")
    as_float = {"deal": {"id": 42.0, "stage": "won"}, "amount": 1, "name": "Acme"}
    assert project.send("crm.deal_won", as_float, "won-float") == report("won-float", [won])
    assert project.show(won)["output"] == {"status": "received", "event": as_float}

    assert project.send("crm.paid", {"invoice": 9, "amount": 1}, "p9") == report("p9")
    paid7 = {"invoice": 7.0, "amount": 10, "paid_by": "card"}
    assert project.send("crm.paid", paid7, "p7") == report("p7", [seven])
    paid8 = {"invoice": 8, "amount": 5}
    assert project.send("crm.paid", paid8, "p8") == report("p8", [eight])
    assert project.show(seven)["output"] == {"status": "received", "event": paid7}
    assert project.show(eight)["output"] == {"status": "received", "event": paid8}


# --- event triggers ------------------------------------------------------------------------


def test_event_trigger_starts_one_run_per_event_whose_guard_holds(project: Project) -> None:
    project.deploy(BIG_DEALS)
    big = {"deal": {"id": 1}, "amount": 20000, "name": "Acme"}
    got = project.send("crm.deal_won", big, "won-1")
    assert got["duplicate"] is False and got["resumed"] == [] and "errors" not in got
    (run_id,) = got["started"]
    shown = project.show(run_id)
    assert shown["name"] == "big-deals"
    assert shown["status"] == "completed", shown["error"]
    assert shown["output"] == {"won": big, "region": "emea"}
    assert [e["message"] for e in entries(shown, "log")] == ["won Acme in emea"]

    # The guard is false: no run.
    small = {"deal": {"id": 2}, "amount": 500, "name": "Tiny"}
    assert project.send("crm.deal_won", small, "won-2") == report("won-2")
    # The same event id again: acknowledged, nothing started.
    dup = project.send("crm.deal_won", big, "won-1")
    assert dup == {"event_id": "won-1", "duplicate": True, "resumed": [], "started": []}
    assert [r.id for r in project.eng.list_runs()] == [run_id]

    # A guard that cannot be evaluated (amount missing: null > 10000) starts nothing, says so.
    got = project.send("crm.deal_won", {"deal": {"id": 3}, "name": "Odd"}, "won-3")
    assert (got["started"], got["resumed"], got["duplicate"]) == ([], [], False)
    (error,) = got["errors"]
    assert error["flow"] == "big-deals"
    assert error["message"].startswith("when:"), error
    assert "amount" in error["message"], error
    assert [r.id for r in project.eng.list_runs()] == [run_id]

    # Another big deal: one more run, with its own payload.
    bigger = {"deal": {"id": 4}, "amount": 10001.5, "name": "Globex"}
    got = project.send("crm.deal_won", bigger, "won-4")
    (second,) = got["started"]
    assert second != run_id
    assert project.show(second)["output"] == {"won": bigger, "region": "emea"}
    assert len(project.eng.list_runs()) == 2


def test_an_event_resumes_waiting_runs_and_starts_triggered_ones_at_once(
    project: Project,
) -> None:
    project.deploy(WON_WAIT, BIG_DEALS)
    waiter = project.start("won-wait", {"deal_id": 7})
    got = project.send("crm.deal_won", {"deal": {"id": 7}, "amount": 50000}, "won-7")
    assert got["resumed"] == [waiter]
    assert len(got["started"]) == 1
    assert project.show(got["started"][0])["name"] == "big-deals"


# --- envelopes -----------------------------------------------------------------------------


def test_plain_and_cloudevents_envelopes_are_accepted(project: Project) -> None:
    project.deploy(KEYED)
    plain_run = project.start("keyed", {"msg": "P"})
    cloud_run = project.start("keyed", {"msg": "CE"})
    minted_run = project.start("keyed", {"msg": "N"})

    plain = {"type": "slack.approval", "data": {"message": "P", "approved": True}, "id": "env-1"}
    got = project.eng.accept_event(envelope(plain))
    assert got == report("env-1", [plain_run])

    cloud = {
        "specversion": "1.0",
        "type": "slack.approval",
        "source": "https://slack.example.com/interactivity",
        "id": "ce-1",
        "time": "2027-01-01T00:00:00Z",
        "datacontenttype": "application/json",
        "data": {"message": "CE", "approved": False, "user": "ops"},
    }
    assert project.eng.accept_event(envelope(cloud)) == report("ce-1", [cloud_run])
    again = project.eng.accept_event(envelope(cloud))
    assert again == {"event_id": "ce-1", "duplicate": True, "resumed": [], "started": []}

    # Without an id, procflow mints one (so two such events are never duplicates).
    anonymous = {"type": "slack.approval", "data": {"message": "N"}}
    got = project.eng.accept_event(envelope(anonymous))
    assert got["resumed"] == [minted_run] and got["duplicate"] is False
    assert isinstance(got["event_id"], str) and got["event_id"]
    assert project.eng.accept_event(envelope(anonymous))["event_id"] != got["event_id"]

    project.eng.work()
    assert project.show(plain_run)["output"]["event"] == plain["data"]
    assert project.show(cloud_run)["output"]["event"] == cloud["data"]
    received = entries(project.show(cloud_run), "event.received")
    assert [e["event_id"] for e in received] == ["ce-1"]


# --- bad input -----------------------------------------------------------------------------

CLOUD = {"specversion": "1.0", "type": "slack.approval", "data": {"message": "B"}}

BAD: dict[str, tuple[Callable[[Engine], Any], list[str]]] = {
    "unknown-event": (
        lambda e: e.send_event("slack.aproval", {"message": "B"}, "bad"),
        ["unknown event type [slack.aproval]", "did you mean [approval]", "slack.approval"],
    ),
    "unknown-connector": (
        lambda e: e.send_event("slak.approval", {"message": "B"}, "bad"),
        ["unknown event type [slak.approval]", "no connector [slak]", "did you mean [slack]"],
    ),
    "not-connector-dot-event": (
        lambda e: e.send_event("approval", {"message": "B"}, "bad"),
        ["[approval]", "<connector>.<event>"],
    ),
    "wrong-type": (
        lambda e: e.send_event("slack.approval", {"message": "B", "approved": "yes"}, "bad"),
        ["field [approved]", "boolean", "string"],
    ),
    "key-of-wrong-type": (
        lambda e: e.send_event("slack.approval", {"message": 5}, "bad"),
        ["field [message]", "must be a string"],
    ),
    "missing-correlation-key": (
        lambda e: e.send_event("slack.approval", {"approved": True}, "bad"),
        ["missing correlation key [message]"],
    ),
    "missing-dotted-key": (
        lambda e: e.send_event("crm.deal_won", {"deal": {"name": "x"}, "amount": 1}, "bad"),
        ["missing correlation key [deal.id]"],
    ),
    "missing-required-field": (
        lambda e: e.send_event("crm.paid", {"invoice": 7}, "bad"),
        ["missing required field [amount]"],
    ),
    "every-problem-at-once": (
        lambda e: e.send_event("crm.paid", {"amount": "ten", "paid_by": 3}, "bad"),
        ["missing correlation key [invoice]", "field [amount]", "field [paid_by]"],
    ),
    "data-a-list": (
        lambda e: e.send_event("slack.approval", ["B"], "bad"),
        ["data must be a JSON object", "list"],
    ),
    "data-a-string": (
        lambda e: e.send_event("slack.approval", "B", "bad"),
        ["data must be a JSON object"],
    ),
    "empty-id": (
        lambda e: e.send_event("slack.approval", {"message": "B"}, ""),
        ["id must be a non-empty string"],
    ),
    "envelope-not-object": (
        lambda e: e.accept_event(envelope(["slack.approval"])),
        ["must be a JSON object"],
    ),
    "envelope-without-type": (
        lambda e: e.accept_event(envelope({"data": {"message": "B"}, "id": "bad"})),
        ["[type]"],
    ),
    "envelope-data-not-object": (
        lambda e: e.accept_event(envelope({"type": "slack.approval", "data": [1], "id": "bad"})),
        ["data must be a JSON object"],
    ),
    "envelope-id-not-string": (
        lambda e: e.accept_event(
            envelope({"type": "slack.approval", "data": {"message": "B"}, "id": 5})
        ),
        ["id must be a non-empty string"],
    ),
    "envelope-unknown-type": (
        lambda e: e.accept_event(envelope({"type": "slack.aproval", "data": {"message": "B"}})),
        ["unknown event type [slack.aproval]", "did you mean [approval]"],
    ),
    "envelope-bad-payload": (
        lambda e: e.accept_event(
            envelope({"type": "slack.approval", "data": {"user": 1}, "id": "bad"})
        ),
        ["missing correlation key [message]", "field [user]"],
    ),
    "cloudevent-without-id-and-source": (
        lambda e: e.accept_event(envelope(CLOUD)),
        ["CloudEvent", "[id, source]"],
    ),
    "cloudevent-without-source": (
        lambda e: e.accept_event(envelope({**CLOUD, "id": "bad"})),
        ["CloudEvent", "[source]"],
    ),
    "cloudevent-without-id": (
        lambda e: e.accept_event(envelope({**CLOUD, "source": "/x"})),
        ["CloudEvent", "[id]"],
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_rejected_with_a_clear_message_and_changes_nothing(
    project: Project, case: str
) -> None:
    project.deploy(DEAL_APPROVAL, KEYED, LOOKBACK, WON_WAIT, PAID_WAIT, BIG_DEALS)
    project.start("deal-approval", {"deal": {"name": "Acme"}})
    project.start("keyed", {"msg": "B"})
    project.start("lookback", {"msg": "B"})
    project.start("won-wait", {"deal_id": 1})
    project.start("paid-wait", {"invoice": 7})
    # (No event is accepted beforehand: the rejection is checked on its own, whatever else.)
    before = project.snapshot()
    assert (before["events"], before["waits"], len(before["runs"])) == (0, 5, 5)

    call, fragments = BAD[case]
    with pytest.raises(EventError) as caught:
        call(project.eng)
    assert isinstance(caught.value, UsageError)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "Traceback" not in message

    project.eng.work()
    assert project.snapshot() == before
