"""`procflow events send` through the real command, end to end, on both store backends.

Every command is its own `procflow` process on a store made by `procflow db init
--virtual-clock` (the clock starts at 2027-01-01T00:00:00Z), as in test_cli_flow.py. slack.post
runs in outbox mode (no SLACK_* in the environment) and mints the ts that `slack.approval`
correlates on. `events send` accepts the event and resumes the waiting runs; a worker
(`procflow worker --until-idle`, or `clock advance`) then takes them on.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from typing import Any

import cli_runner
import pytest
from projects import BIG_DEALS, DEAL_APPROVAL_START, SEED_APPROVAL, crm_connector, write

from procflow.runtime.engine import Engine
from procflow.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
ONBOARDING = ROOT / "examples" / "onboarding"

# `procflow db init` must create the schema itself: on PostgreSQL, db_url names an empty database.
pytestmark = pytest.mark.empty_store

DEAL_APPROVAL = (
    DEAL_APPROVAL_START
    + """\
output:
  status: "{{ approval.status }}"
  event: "{{ approval.event }}"
"""
)

ONBOARDING_INPUTS = (
    "--input", 'hire={"start_date": "2027-01-10", "name": "Ada"}',
    "--input", 'deal={"name": "Acme"}',
    "--input", 'ticket={"id": "T-1"}',
)  # fmt: skip


class Cli(cli_runner.Cli):
    """The shared runner, plus event helpers."""

    def send(self, *args: str, code: int = 0) -> Any:
        return self.json("events", "send", *args, code=code)

    def snapshot(self) -> dict[str, Any]:
        """Every stored event, wait and delivery, and every run as `runs show` prints it (read
        in-process, to keep the test quick)."""
        store = Store(self.url)
        try:
            reader = store.read()
            counts = {
                table: reader.c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("events", "waits", "deliveries", "timers", "outbox")
            }
        finally:
            store.close()
        eng = Engine(self.url, environ=dict(self.db_env), create=False)
        try:
            runs = {r.id: eng.show(r.id) for r in eng.list_runs()}
        finally:
            eng.close()
        return {**counts, "runs": runs}


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    cli = Cli(db_url, db_env, tmp_path)
    assert "virtual clock at 2027-01-01T00:00:00Z" in cli("db", "init", "--virtual-clock").stdout
    return cli


def entries(shown: dict[str, Any], type_: str, step: str | None = None) -> list[dict[str, Any]]:
    return [
        h
        for h in shown["history"]
        if h["type"] == type_ and (step is None or h.get("step") == step)
    ]


def block_actions(ts: str, value: str, username: str = "ada.lovelace") -> dict[str, Any]:
    """A Slack `block_actions` interactivity payload: a button clicked on message ``ts``."""
    action_id = "approve_button" if value == "approve" else "reject_button"
    return {
        "type": "block_actions",
        "user": {"id": "U024BE7LH", "username": username, "name": username, "team_id": "T0001"},
        "api_app_id": "A02N0SNT8EU",
        "token": "Shh_its_a_seekrit",
        "container": {
            "type": "message",
            "message_ts": ts,
            "channel_id": "C0SALESOPS",
            "is_ephemeral": False,
        },
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "team": {"id": "T0001", "domain": "acme"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": "C0SALESOPS", "name": "sales-ops"},
        "message": {
            "type": "message",
            "subtype": "bot_message",
            "text": "Approve Acme?",
            "ts": ts,
            "bot_id": "B0PROCFLOW",
            "blocks": [
                {
                    "type": "actions",
                    "block_id": "approval",
                    "elements": [
                        {"type": "button", "action_id": "approve_button", "value": "approve",
                         "text": {"type": "plain_text", "text": "Approve"}},
                        {"type": "button", "action_id": "reject_button", "value": "reject",
                         "text": {"type": "plain_text", "text": "Reject"}},
                    ],
                }
            ],
        },
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0001/1234567890/abcdefABCDEF",
        "actions": [
            {
                "action_id": action_id,
                "block_id": "approval",
                "text": {"type": "plain_text", "text": value.title(), "emoji": True},
                "value": value,
                "style": "primary" if value == "approve" else "danger",
                "type": "button",
                "action_ts": "1798761600.246810",
            }
        ],
    }  # fmt: skip


def report(
    event_id: str, resumed: list[str] | None = None, started: list[str] | None = None
) -> Any:
    return {
        "event_id": event_id,
        "duplicate": False,
        "resumed": resumed or [],
        "started": started or [],
    }


# --- the delivery report ---------------------------------------------------------------------


def test_events_send_prints_the_delivery_report_as_json_and_in_words(
    cli: Cli, tmp_path: Path
) -> None:
    flow = write(tmp_path / "deal-approval.flow.yaml", DEAL_APPROVAL)
    first = cli.json("run", flow, "--input", 'deal={"name": "Acme"}')
    second = cli.json("run", flow, "--input", 'deal={"name": "Globex"}')
    assert first["status"] == second["status"] == "waiting"
    ts = first["bindings"]["ask"]["ts"]
    assert first["tokens"][0]["waiting_for"] == {
        "kind": "event",
        "type": "slack.approval",
        "match": {"message": ts},
        "timeout_at": "2027-01-02T00:00:00Z",
    }

    # Another message: accepted, reaches nobody (0 is fine).
    got = cli.send("slack.approval", "--data", '{"message": "somebody else"}', "--id", "e0")
    assert got == report("e0")

    payload = {"message": ts, "approved": True, "user": "ops"}
    got = cli.send("slack.approval", "--data", json.dumps(payload), "--id", "e1")
    assert got == report("e1", [first["id"]])
    assert list(got) == ["event_id", "duplicate", "resumed", "started"]
    cli.work()
    shown = cli.show(first["id"])
    assert shown["status"] == "completed", shown["error"]
    assert shown["bindings"]["approval"] == {"status": "received", "event": payload}
    assert shown["output"] == {"status": "received", "event": payload}
    assert [h["event_id"] for h in entries(shown, "event.received")] == ["e1"]

    # A repeated id: acknowledged, nothing done.
    dup = cli.send("slack.approval", "--data", json.dumps(payload), "--id", "e1")
    assert dup == {"event_id": "e1", "duplicate": True, "resumed": [], "started": []}

    # Human output.
    other_ts = second["bindings"]["ask"]["ts"]
    data = json.dumps({"message": other_ts, "approved": False})
    done = cli("events", "send", "slack.approval", "--data", data, "--id", "e2")
    assert done.stdout == f"event e2: resumed 1 run(s), started 0\n  resumed {second['id']}\n"
    done = cli("events", "send", "slack.approval", "--data", data, "--id", "e2")
    assert done.stdout == "event e2: a duplicate; nothing done\n"
    done = cli("events", "send", "slack.approval", "--data", '{"message": "x"}', "--id", "e3")
    assert done.stdout == "event e3: resumed 0 run(s), started 0\n"
    assert done.stderr == ""

    # Without --id, procflow mints one.
    minted = cli.send("slack.approval", "--data", '{"message": "x"}')
    assert isinstance(minted["event_id"], str) and minted["event_id"]
    assert minted["duplicate"] is False


def test_events_send_starts_triggered_flows_and_reports_guards_that_fail(
    cli: Cli, tmp_path: Path
) -> None:
    project = crm_connector(tmp_path / "crm")
    cli("deploy", write(project / "big-deals.flow.yaml", BIG_DEALS))
    big = {"deal": {"id": 1}, "amount": 20000, "name": "Acme"}
    got = cli.send("crm.deal_won", "--data", json.dumps(big), "--id", "won-1")
    (started,) = got["started"]
    assert got == report("won-1", started=[started])
    cli.work()
    shown = cli.show(started)
    assert (shown["name"], shown["status"], shown["output"]) == ("big-deals", "completed", big)

    small = json.dumps({"deal": {"id": 2}, "amount": 5, "name": "Tiny"})
    done = cli("events", "send", "crm.deal_won", "--data", small, "--id", "won-2")
    assert done.stdout == "event won-2: resumed 0 run(s), started 0\n"

    bigger = json.dumps({"deal": {"id": 3}, "amount": 30000, "name": "Globex"})
    done = cli("events", "send", "crm.deal_won", "--data", bigger, "--id", "won-3")
    lines = done.stdout.splitlines()
    assert lines[0] == "event won-3: resumed 0 run(s), started 1"
    assert lines[1].startswith("  started ") and len(lines) == 2

    # A guard that cannot be evaluated: nothing started, the reason on stderr, exit 0.
    odd = json.dumps({"deal": {"id": 4}, "name": "Odd"})
    done = cli("events", "send", "crm.deal_won", "--data", odd, "--id", "won-4")
    assert done.stdout == "event won-4: resumed 0 run(s), started 0\n"
    assert "not started: flow [big-deals]: when:" in done.stderr
    got = cli.send("crm.deal_won", "--data", odd, "--id", "won-5")
    assert got["started"] == [] and got["errors"][0]["flow"] == "big-deals"
    assert len(cli.json("runs", "list")) == 2


def test_events_send_takes_whole_envelopes_plain_and_cloudevents(cli: Cli, tmp_path: Path) -> None:
    flow = write(tmp_path / "deal-approval.flow.yaml", DEAL_APPROVAL)
    plain_run = cli.json("run", flow, "--input", 'deal={"name": "Acme"}')
    cloud_run = cli.json("run", flow, "--input", 'deal={"name": "Globex"}')

    plain_data = {"message": plain_run["bindings"]["ask"]["ts"], "approved": True}
    plain = {"type": "slack.approval", "data": plain_data, "id": "env-1"}
    assert cli.send("--envelope", json.dumps(plain)) == report("env-1", [plain_run["id"]])

    cloud_data = {"message": cloud_run["bindings"]["ask"]["ts"], "approved": False, "user": "bo"}
    cloud = {
        "specversion": "1.0",
        "type": "slack.approval",
        "source": "https://slack.example.com/interactivity",
        "id": "ce-1",
        "time": "2027-01-01T00:00:00Z",
        "datacontenttype": "application/json",
        "data": cloud_data,
    }
    assert cli.send("--envelope", json.dumps(cloud)) == report("ce-1", [cloud_run["id"]])
    again = cli.send("--envelope", json.dumps(cloud))
    assert again == {"event_id": "ce-1", "duplicate": True, "resumed": [], "started": []}

    cli.work()
    assert cli.show(plain_run["id"])["output"] == {"status": "received", "event": plain_data}
    assert cli.show(cloud_run["id"])["output"] == {"status": "received", "event": cloud_data}


def test_slack_payload_of_a_button_click_resumes_the_run(cli: Cli, tmp_path: Path) -> None:
    flow = write(tmp_path / "deal-approval.flow.yaml", DEAL_APPROVAL)
    approve_run = cli.json("run", flow, "--input", 'deal={"name": "Acme"}')
    reject_run = cli.json("run", flow, "--input", 'deal={"name": "Globex"}')
    ts = approve_run["bindings"]["ask"]["ts"]

    click = json.dumps(block_actions(ts, "approve"))
    got = cli.send("--slack-payload", click)
    assert got == report(f"slack:{ts}:1798761600.246810", [approve_run["id"]])
    # Slack retries a click it thinks was lost: the same event id, a duplicate.
    assert cli.send("--slack-payload", click)["duplicate"] is True

    reject_ts = reject_run["bindings"]["ask"]["ts"]
    got = cli.send("--slack-payload", json.dumps(block_actions(reject_ts, "reject", "bo")))
    assert got["resumed"] == [reject_run["id"]]

    cli.work()
    shown = cli.show(approve_run["id"])
    assert shown["status"] == "completed", shown["error"]
    event = {"message": ts, "approved": True, "user": "ada.lovelace"}
    assert shown["bindings"]["approval"] == {"status": "received", "event": event}
    rejected = cli.show(reject_run["id"])["bindings"]["approval"]
    assert rejected == {
        "status": "received",
        "event": {"message": reject_ts, "approved": False, "user": "bo"},
    }


# --- bad input -----------------------------------------------------------------------------

CLOUD_NO_SOURCE = {"specversion": "1.0", "type": "slack.approval", "id": "c", "data": {}}

BAD: list[tuple[tuple[str, ...], list[str]]] = [
    (("slack.aproval", "--data", '{"message": "m"}'), ["slack.aproval", "did you mean [approval]"]),
    (("slak.approval", "--data", '{"message": "m"}'), ["no connector [slak]", "[slack]"]),
    (("slack.approval", "--data", '{"approved": true}'), ["missing correlation key [message]"]),
    (("slack.approval", "--data", '{"message": "m", "approved": "yes"}'), ["field [approved]"]),
    (("slack.approval", "--data", '{"message": 7}'), ["field [message]", "string"]),
    (("crm.paid", "--data", '{"invoice": 1}'), ["missing required field [amount]"]),
    (("crm.deal_won", "--data", '{"deal": {}}'), ["missing correlation key [deal.id]"]),
    (("slack.approval", "--data", '["m"]'), ["--data", "JSON object"]),
    (("slack.approval", "--data", '{"message": '), ["--data", "not valid JSON"]),
    (("--envelope", '{"type": "slack.approval", "data": "m"}'), ["data must be a JSON object"]),
    (("--envelope", json.dumps(CLOUD_NO_SOURCE)), ["CloudEvent", "[source]"]),
    (("--envelope", '{"specversion": "1.0", "type": "slack.approval"}'), ["[id, source]"]),
    (("--envelope", '{"data": {"message": "m"}}'), ["[type]"]),
    (("--slack-payload", '{"type": "view_submission"}'), ["block_actions"]),
    (("--slack-payload", '{"type": "block_actions", "actions": []}'), ["actions"]),
    ((), ["exactly one of TYPE"]),
    (("slack.approval", "--envelope", '{"type": "slack.approval"}'), ["exactly one of TYPE"]),
]


def test_bad_events_exit_2_with_a_message_and_change_nothing(cli: Cli, tmp_path: Path) -> None:
    project = crm_connector(tmp_path / "project")
    flow = write(project / "deal-approval.flow.yaml", DEAL_APPROVAL)
    cli("deploy", write(project / "big-deals.flow.yaml", BIG_DEALS))
    run = cli.json("run", flow, "--input", 'deal={"name": "Acme"}')
    ts = run["bindings"]["ask"]["ts"]
    before = cli.snapshot()
    assert (before["events"], before["waits"], len(before["runs"])) == (0, 1, 1)

    problems = []
    for args, fragments in [
        *BAD,
        (("slack.approval", "--data", json.dumps({"message": ts, "approved": 1})), ["approved"]),
    ]:
        message = cli.error("events", "send", *args)
        missing = [f for f in fragments if f not in message]
        if missing:
            problems.append((args, missing, message))
    assert problems == []
    assert cli.snapshot() == before


# --- the onboarding example, unmodified ------------------------------------------------------


def onboarding_copy(tmp_path: Path) -> Path:
    """The example as shipped, copied so the test can play the search service's index."""
    project = tmp_path / "onboarding"
    shutil.copytree(ONBOARDING, project)
    flow = project / "onboarding.flow.yaml"
    assert filecmp.cmp(flow, ONBOARDING / "onboarding.flow.yaml", shallow=False)
    assert SEED_APPROVAL in flow.read_text()
    return project


def onboarding_until_the_approval(cli: Cli, project: Path) -> tuple[str, str]:
    """Run the example to its approval step; (run id, the ask's ts)."""
    shown = cli.json("run", str(project / "onboarding.flow.yaml"), *ONBOARDING_INPUTS)
    run_id = shown["id"]
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["step"] == "cooling_off"
    cli.advance("2d", "2027-01-03T00:00:00Z")  # cooling_off
    assert cli.show(run_id)["tokens"][0]["step"] == "day_before"
    cli.advance("5d23h59m", "2027-01-08T23:59:00Z")
    assert cli.show(run_id)["tokens"][0]["step"] == "day_before"
    cli.advance("1m", "2027-01-09T00:00:00Z")  # the day before the start: ask, then wait
    shown = cli.show(run_id)
    ts = shown["bindings"]["ask"]["ts"]
    assert shown["tokens"] == [
        {
            "step": "approval",
            "state": "waiting",
            "waiting_for": {
                "kind": "event",
                "type": "slack.approval",
                "match": {"message": ts},
                "timeout_at": "2027-01-10T00:00:00Z",
            },
            "since": "2027-01-09T00:00:00Z",
        }
    ]
    (message,) = cli.json("outbox", "list")
    assert (message["to"], message["body"], message["run_id"]) == (
        "#sales-ops",
        "Approve Acme?",
        run_id,
    )
    return run_id, ts


def test_onboarding_example_unmodified_runs_end_to_end_when_approved(
    cli: Cli, tmp_path: Path
) -> None:
    project = onboarding_copy(tmp_path)
    run_id, ts = onboarding_until_the_approval(cli, project)

    got = cli.send("--slack-payload", json.dumps(block_actions(ts, "approve")))
    assert got["resumed"] == [run_id]
    cli.work()  # the approval binds, and the first check finds the ticket not indexed yet
    shown = cli.show(run_id)
    assert shown["bindings"]["approval"] == {
        "status": "received",
        "event": {"message": ts, "approved": True, "user": "ada.lovelace"},
    }
    assert shown["tokens"][0]["waiting_for"] == {
        "kind": "poll",
        "iteration": 2,
        "of": 20,
        "due": "2027-01-09T00:00:30Z",
    }

    (project / "search-index.json").write_text(json.dumps({"T-1": "indexed"}))
    cli.advance("30s", "2027-01-09T00:00:30Z")
    shown = cli.show(run_id)
    assert shown["status"] == "completed", shown["error"]
    assert shown["error"] is None
    assert shown["output"] == {"approved": True, "polls": 2}
    assert shown["ended_at"] == "2027-01-09T00:00:30Z"
    assert shown["bindings"]["indexed"] == [
        {"check": {"status": "pending"}},
        {"check": {"status": "indexed"}},
    ]
    received = entries(shown, "event.received", "approval")
    assert [(h["event_id"], h["at"]) for h in received] == [
        (f"slack:{ts}:1798761600.246810", "2027-01-09T00:00:00Z")
    ]
    assert entries(shown, "timer.fired", "approval") == []
    assert entries(shown, "log", "note") == []  # recover never ran


def test_onboarding_example_unmodified_skips_indexing_when_rejected(
    cli: Cli, tmp_path: Path
) -> None:
    project = onboarding_copy(tmp_path)
    run_id, ts = onboarding_until_the_approval(cli, project)

    data = json.dumps({"message": ts, "approved": False, "user": "bo"})
    got = cli.send("slack.approval", "--data", data, "--id", "reject-1")
    assert got == report("reject-1", [run_id])
    cli.work()
    shown = cli.show(run_id)
    assert shown["status"] == "completed", shown["error"]
    assert shown["output"] == {"approved": False, "polls": 0}
    assert shown["bindings"]["approval"] == {
        "status": "received",
        "event": {"message": ts, "approved": False, "user": "bo"},
    }
    assert shown["bindings"]["indexed"] is None
    assert [h["step"] for h in entries(shown, "step.skipped")] == ["indexed"]
    assert entries(shown, "step.started", "check") == []
    assert shown["ended_at"] == "2027-01-09T00:00:00Z"
