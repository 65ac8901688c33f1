"""Events over HTTP, through the real ASGI app (Starlette's TestClient), on both store backends:
``POST /events`` in its three forms, ``POST /webhooks/slack`` and ``POST /webhooks/events`` with
signatures computed here (``hmac`` directly, not procflow's signer), and the onboarding example
driven end to end with its Slack click arriving as a signed webhook.

Every refused request is checked to have changed nothing: every table of the store is dumped
before and after. Signature timestamps come from the machine's real clock, while the store runs
on a virtual clock (2027): the webhooks must judge freshness by the real one.
"""

from __future__ import annotations

import base64
import filecmp
import hashlib
import hmac
import json
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner
from projects import BIG_DEALS, crm_connector, write_flow
from starlette.testclient import TestClient
from store_dump import Dump, dump

from procflow.cli import _run
from procflow.runtime.engine import Engine
from procflow.server.app import create_app
from procflow.server.state import ServerState

ROOT = Path(__file__).resolve().parents[2]
ONBOARDING = ROOT / "examples" / "onboarding"

SLACK_SECRET = "slack-signing-secret-for-tests"
WEBHOOK_KEY = b"procflow-test-webhook-key-0123456789"
WHSEC = "whsec_" + base64.b64encode(WEBHOOK_KEY).decode()
TOKEN = "ann-token-" + "a" * 24
FORM = "application/x-www-form-urlencoded"
PROBLEM = "application/problem+json"

PAY_WAIT = """\
flow: pay-wait
inputs:
  invoice: { type: number, required: true }
steps:
  - paid:
      wait_for: crm.paid
      match: { invoice: "{{ invoice }}" }
      timeout: 24h
output:
  amount: "{{ paid.event.amount }}"
"""

DEAL_APPROVAL = """\
flow: deal-approval
inputs:
  deal: { type: object, required: true }
steps:
  - ask:
      slack.post: { channel: "#sales-ops", text: "Approve {{ deal.name }}?" }
  - approval:
      wait_for: slack.approval
      match: { message: "{{ ask.ts }}" }
      timeout: 24h
output:
  event: "{{ approval.event }}"
"""


# --- the server under test -------------------------------------------------------------------


class Server:
    """A TestClient on the app over one store, and an engine on the same store (virtual clock)
    to deploy, start and work runs."""

    def __init__(self, client: TestClient, engine: Engine, url: str) -> None:
        self.client = client
        self.engine = engine
        self.url = url

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.client.post(path, **kwargs)

    def dump(self) -> Dump:
        """Every row of every table, to show a refused request changed nothing."""
        return dump(self.url)

    def events(self) -> list[tuple[Any, ...]]:
        return self.dump()["events"]


def crm_project(root: Path) -> Path:
    for text in (PAY_WAIT, BIG_DEALS, DEAL_APPROVAL):
        write_flow(root, text)
    return crm_connector(root)


@contextmanager
def serve(db_url: str, db_env: dict[str, str], project: Path, **settings: str) -> Iterator[Server]:
    environ = {**db_env, **settings}
    engine = Engine.virtual(db_url, environ=environ, project_dir=str(project))
    try:
        state = ServerState.of(db_url, str(project), environ)
        with TestClient(create_app(state)) as client:
            yield Server(client, engine, db_url)
    finally:
        engine.close()


SECRETS = {"SLACK_SIGNING_SECRET": SLACK_SECRET, "PROCFLOW_WEBHOOK_SECRET": WHSEC}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return crm_project(tmp_path / "project")


@pytest.fixture
def server(db_url: str, db_env: dict[str, str], project: Path) -> Iterator[Server]:
    with serve(db_url, db_env, project, **SECRETS) as running:
        yield running


def deploy(server: Server, project: Path, *names: str) -> None:
    for name in names:
        server.engine.deploy(str(project / f"{name}.flow.yaml"))


def report(
    event_id: str, resumed: list[str] | None = None, started: list[str] | None = None
) -> Any:
    return {"event_id": event_id, "duplicate": False, "resumed": resumed or [],
            "started": started or []}  # fmt: skip


def duplicate(event_id: str) -> Any:
    return {"event_id": event_id, "duplicate": True, "resumed": [], "started": []}


def waiting_for_payment(server: Server, project: Path, invoice: int) -> str:
    deploy(server, project, "pay-wait")
    run_id = server.engine.start_flow("pay-wait", {"invoice": invoice})
    server.engine.work()
    assert server.engine.show(run_id)["tokens"][0]["waiting_for"]["kind"] == "event"
    return run_id


def entries(run: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [h for h in run["history"] if h["type"] == type_]


def refused(response: Any, status: int) -> dict[str, Any]:
    """The problem document of a refusal (and that it carries no traceback)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert "Traceback" not in response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    return body


# --- POST /events: the three forms -----------------------------------------------------------


def test_a_plain_event_resumes_its_run_and_answers_the_delivery_report(
    server: Server, project: Path
) -> None:
    run_id = waiting_for_payment(server, project, 7)
    event = {"type": "crm.paid", "data": {"invoice": 7, "amount": 120}, "id": "pay-7"}
    got = server.post("/events", json=event, headers={"traceparent": "00-" + "a" * 32 + "-" +
                                                      "b" * 16 + "-01"})  # fmt: skip
    assert got.status_code == 200, got.text
    assert got.json() == report("pay-7", [run_id])
    assert list(got.json()) == ["event_id", "duplicate", "resumed", "started"]

    # The same id again: acknowledged, and nothing at all changes.
    before = server.dump()
    again = server.post("/events", json=event)
    assert (again.status_code, again.json()) == (200, duplicate("pay-7"))
    assert server.dump() == before

    server.engine.work()
    shown = server.engine.show(run_id)
    assert (shown["status"], shown["output"]) == ("completed", {"amount": 120})
    (received,) = entries(shown, "event.received")
    assert (received["event_id"], received["by"]) == ("pay-7", "local")  # the caller


def test_an_event_without_id_gets_one_and_a_trigger_starts_its_flow(
    server: Server, project: Path
) -> None:
    deploy(server, project, "big-deals")
    won = {"deal": {"id": 1}, "amount": 20000, "name": "Acme"}
    got = server.post("/events", json={"type": "crm.deal_won", "data": won}).json()
    (started,) = got["started"]
    assert got == report(got["event_id"], started=[started])
    assert got["event_id"].startswith("pf-")
    server.engine.work()
    assert server.engine.show(started)["output"] == won

    # A guard that cannot be evaluated: reported as in `events send --json`, nothing started.
    odd = server.post("/events", json={"type": "crm.deal_won", "data": {"deal": {"id": 2}}})
    assert odd.status_code == 200
    assert odd.json()["started"] == [] and odd.json()["errors"][0]["flow"] == "big-deals"


def test_a_structured_cloudevent_is_accepted_once(server: Server, project: Path) -> None:
    run_id = waiting_for_payment(server, project, 8)
    cloud = {
        "specversion": "1.0",
        "type": "crm.paid",
        "source": "https://crm.example.com",
        "id": "ce-8",
        "time": "2027-01-01T00:00:00Z",
        "datacontenttype": "application/json",
        "data": {"invoice": 8, "amount": 80},
    }
    headers = {"content-type": "application/cloudevents+json; charset=utf-8"}
    got = server.post("/events", content=json.dumps(cloud), headers=headers)
    assert (got.status_code, got.json()) == (200, report("ce-8", [run_id]))
    again = server.post("/events", content=json.dumps(cloud), headers=headers)
    assert again.json() == duplicate("ce-8")
    server.engine.work()
    assert server.engine.show(run_id)["output"] == {"amount": 80}


def test_a_binary_mode_cloudevent_is_accepted_once(server: Server, project: Path) -> None:
    run_id = waiting_for_payment(server, project, 9)
    headers = {
        "ce-specversion": "1.0",
        "ce-type": "crm.paid",
        "ce-id": "bin%2D9",  # percent-encoded, as the CloudEvents HTTP binding allows
        "ce-source": "/crm",
        "ce-time": "2027-01-01T00:00:00Z",
        "content-type": "application/json",
    }
    body = json.dumps({"invoice": 9, "amount": 90})
    got = server.post("/events", content=body, headers=headers)
    assert (got.status_code, got.json()) == (200, report("bin-9", [run_id]))
    again = server.post("/events", content=body, headers=headers)
    assert again.json() == duplicate("bin-9")
    server.engine.work()
    assert server.engine.show(run_id)["output"] == {"amount": 90}


def test_the_http_report_is_the_cli_report(server: Server, project: Path) -> None:
    run_id = waiting_for_payment(server, project, 10)
    event = {"type": "crm.paid", "data": {"invoice": 10, "amount": 1}, "id": "both-faces"}
    over_http = server.post("/events", json=event).json()
    assert over_http == report("both-faces", [run_id])

    def cli(*args: str) -> Any:
        runner = CliRunner()
        with runner.isolation() as (out, _err, _):
            code = _run(["events", "send", *args, "--db", server.url, "--json",
                         "--project", str(project)])  # fmt: skip
        assert code == 0
        return json.loads(out.getvalue())

    assert cli("--envelope", json.dumps(event)) == server.post("/events", json=event).json()
    nobody = {"invoice": 99, "amount": 1}
    by_cli = cli("crm.paid", "--data", json.dumps(nobody), "--id", "cli-1")
    by_http = server.post("/events", json={"type": "crm.paid", "data": nobody, "id": "http-1"})
    assert by_cli == report("cli-1") and by_http.json() == report("http-1")


# --- POST /events: refusals ------------------------------------------------------------------

JSON = {"content-type": "application/json"}
CLOUD = {"content-type": "application/cloudevents+json"}
BINARY = {"ce-specversion": "1.0", "ce-type": "crm.paid", "ce-id": "b-1", "ce-source": "/crm",
          "content-type": "application/json"}  # fmt: skip
GOOD_DATA = {"invoice": 7, "amount": 1}

CE = {"specversion": "1.0", "type": "crm.paid", "id": "c", "source": "/s", "data": GOOD_DATA}


def plain(type_: str | None, data: Any = GOOD_DATA, **more: Any) -> dict[str, Any]:
    return {"data": data, **more} if type_ is None else {"type": type_, "data": data, **more}


def cloud(**changes: Any) -> dict[str, Any]:
    return {k: v for k, v in {**CE, **changes}.items() if v is not None}


def binary(**changes: str | None) -> dict[str, str]:
    return {k: v for k, v in {**BINARY, **changes}.items() if v is not None}


# (what, headers, body, the field named, fragments of the message)
REJECTED: list[tuple[str, dict[str, str], Any, str, list[str]]] = [
    ("unknown event", JSON, plain("crm.payed"), "type", ["crm.payed", "[paid]"]),
    ("unknown connector", JSON, plain("crn.paid"), "type", ["no connector [crn]"]),
    ("not connector.event", JSON, plain("paid"), "type", ["<connector>.<event>"]),
    ("no type", JSON, plain(None), "type", ["[type]"]),
    ("missing field", JSON, plain("crm.paid", {"invoice": 7}), "amount",
     ["missing required field [amount]"]),
    ("missing key", JSON, plain("crm.paid", {"amount": 1}), "invoice",
     ["missing correlation key [invoice]"]),
    ("wrong type", JSON, plain("crm.paid", {"invoice": "7", "amount": 1}), "invoice",
     ["field [invoice]"]),
    ("data not an object", JSON, plain("crm.paid", [1]), "data", ["data must be a JSON object"]),
    ("empty id", JSON, plain("crm.paid", id=""), "id", ["id must be a non-empty"]),
    ("cloudevent 0.3", CLOUD, cloud(specversion="0.3"), "specversion",
     ["specversion [0.3]", "only 1.0"]),
    ("cloudevent without source", CLOUD, cloud(source=None), "source",
     ["CloudEvent without [source]"]),
    ("cloudevent without specversion", CLOUD, cloud(specversion=None), "specversion",
     ['[specversion] "1.0"']),
    ("cloudevent data_base64", CLOUD, cloud(data=None, data_base64="e30="), "data_base64",
     ["data_base64"]),
    ("cloudevent unknown type", CLOUD, cloud(type="crm.nope"), "type", ["crm.nope"]),
    ("binary 0.3", binary(**{"ce-specversion": "0.3"}), GOOD_DATA, "ce-specversion",
     ["only 1.0"]),
    ("binary without source", binary(**{"ce-source": None}), GOOD_DATA, "ce-source",
     ["CloudEvent without [source]"]),
    ("binary without id", binary(**{"ce-id": None}), GOOD_DATA, "ce-id",
     ["CloudEvent without [id]"]),
    ("binary without specversion", binary(**{"ce-specversion": None}), GOOD_DATA,
     "ce-specversion", ["ce-specversion header"]),
    ("binary unknown type", binary(**{"ce-type": "crm.nope"}), GOOD_DATA, "ce-type",
     ["crm.nope"]),
    ("binary bad payload", BINARY, {"invoice": 7}, "amount", ["missing required field [amount]"]),
    ("binary data not object", BINARY, [1], "data", ["data must be a JSON object"]),
]  # fmt: skip

BATCH = {"content-type": "application/cloudevents-batch+json"}
NAN = b'{"type": "crm.paid", "data": {"invoice": NaN, "amount": 1}}'

UNREADABLE: list[tuple[str, dict[str, str], bytes, list[str]]] = [
    ("bad json", JSON, b'{"type": ', ["not valid JSON"]),
    ("not utf-8", JSON, b'{"type": "\xff"}', ["not UTF-8"]),
    ("text/plain", {"content-type": "text/plain"}, b'{"type": "crm.paid"}', ["application/json"]),
    ("no content type", {}, b'{"type": "crm.paid"}', ["application/json", "[none]"]),
    ("an array", JSON, b"[]", ["must be a JSON object"]),
    ("a number", JSON, b"3", ["must be a JSON object"]),
    ("cloudevent bad json", CLOUD, b"{", ["not valid JSON"]),
    ("cloudevent array", CLOUD, b"[]", ["must be a JSON object"]),
    ("batch", BATCH, b"[]", ["one event per request"]),
    ("binary data not json", binary(**{"content-type": "text/plain"}), b"hi", ["application/json"]),
    ("NaN", JSON, NAN, ["not valid JSON"]),
]  # fmt: skip


def test_rejected_events_are_422_naming_the_field_and_change_nothing(
    server: Server, project: Path
) -> None:
    waiting_for_payment(server, project, 7)
    before = server.dump()
    problems = []
    for name, headers, body, field, fragments in REJECTED:
        got = server.post("/events", content=json.dumps(body), headers=headers)
        problem = refused(got, 422)
        (error,) = problem["errors"]
        missing = [f for f in fragments if f not in problem["detail"]]
        if error["field"] != field or missing or error["message"] != problem["detail"]:
            problems.append((name, problem))
    assert problems == []
    assert server.dump() == before


def test_unreadable_bodies_are_400_and_change_nothing(server: Server, project: Path) -> None:
    waiting_for_payment(server, project, 7)
    before = server.dump()
    problems = []
    for name, headers, body, fragments in UNREADABLE:
        problem = refused(server.post("/events", content=body, headers=headers), 400)
        if [f for f in fragments if f not in problem["detail"]]:
            problems.append((name, problem["detail"]))
    assert problems == []
    assert server.dump() == before


def test_events_need_a_bearer_token_when_tokens_are_configured_and_record_the_caller(
    db_url: str, db_env: dict[str, str], project: Path
) -> None:
    with serve(db_url, db_env, project, PROCFLOW_API_TOKENS=f"{TOKEN}=ann:operator",
                        **SECRETS) as server:  # fmt: skip
        run_id = waiting_for_payment(server, project, 7)
        event = {"type": "crm.paid", "data": GOOD_DATA, "id": "t-1"}
        before = server.dump()
        refused(server.post("/events", json=event), 401)
        refused(server.post("/events", json=event, headers={"authorization": "Bearer nope"}), 401)
        assert server.dump() == before
        got = server.post("/events", json=event, headers={"authorization": f"Bearer {TOKEN}"})
        assert got.json() == report("t-1", [run_id])
        server.engine.work()
        (received,) = entries(server.engine.show(run_id), "event.received")
        assert received["by"] == "ann"
        # The webhooks stay public: their signature is their credential.
        body = json.dumps({"type": "crm.paid", "data": {"invoice": 1, "amount": 1}}).encode()
        signed = server.post("/webhooks/events", content=body, headers=webhook_headers(body, "w1"))
        assert signed.json() == report("w1")


# --- POST /webhooks/slack --------------------------------------------------------------------


def click(ts: str, value: str = "approve", username: str = "ada.lovelace") -> dict[str, Any]:
    """A Slack block_actions payload: a button clicked on message ``ts``."""
    return {
        "type": "block_actions",
        "user": {"id": "U024BE7LH", "username": username, "name": username},
        "container": {"type": "message", "message_ts": ts, "channel_id": "C0SALESOPS"},
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "message": {"type": "message", "text": "Approve Acme?", "ts": ts},
        "actions": [{"action_id": f"{value}_button", "block_id": "approval", "value": value,
                     "type": "button", "action_ts": "1798761600.246810"}],
    }  # fmt: skip


def slack_form(payload: Any) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def slack_headers(
    body: bytes, secret: str = SLACK_SECRET, at: float | None = None
) -> dict[str, str]:
    ts = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {"content-type": FORM, "x-slack-request-timestamp": ts,
            "x-slack-signature": "v0=" + mac.hexdigest()}  # fmt: skip


def awaiting_approval(server: Server, project: Path) -> tuple[str, str]:
    deploy(server, project, "deal-approval")
    run_id = server.engine.start_flow("deal-approval", {"deal": {"name": "Acme"}})
    server.engine.work()
    return run_id, server.engine.show(run_id)["bindings"]["ask"]["ts"]


def test_a_signed_slack_click_resumes_the_run_once(server: Server, project: Path) -> None:
    run_id, ts = awaiting_approval(server, project)
    body = slack_form(click(ts))
    got = server.post("/webhooks/slack", content=body, headers=slack_headers(body))
    event_id = f"slack:{ts}:1798761600.246810"
    assert (got.status_code, got.json()) == (200, report(event_id, [run_id]))
    # Slack retries a click it thinks was lost: newly signed, the same click, a duplicate.
    before = server.dump()
    again = server.post("/webhooks/slack", content=body, headers=slack_headers(body))
    assert again.json() == duplicate(event_id)
    assert server.dump() == before

    server.engine.work()
    shown = server.engine.show(run_id)
    assert shown["status"] == "completed", shown["error"]
    assert shown["output"] == {"event": {"message": ts, "approved": True, "user": "ada.lovelace"}}
    (received,) = entries(shown, "event.received")
    assert "by" not in received  # a webhook names no procflow user


def test_badly_signed_slack_requests_are_401_and_accept_nothing(
    server: Server, project: Path
) -> None:
    _run_id, ts = awaiting_approval(server, project)
    body = slack_form(click(ts))
    # Well past the five minutes: the unit tests hold the exact bound, and whole seconds here
    # (the header's unit) must not bring a request back inside it.
    now = time.time()
    good = slack_headers(body)
    virtual_now = server.engine.now() / 1_000_000  # 2027: the store's clock, not the machine's
    cases: list[tuple[str, bytes, dict[str, str], str]] = [
        ("tampered body", slack_form(click(ts, "reject")), good, "X-Slack-Signature"),
        ("wrong secret", body, slack_headers(body, secret="not-the-secret"), "X-Slack-Signature"),
        ("stale", body, slack_headers(body, at=now - 310), "X-Slack-Request-Timestamp"),
        ("from the future", body, slack_headers(body, at=now + 310), "X-Slack-Request-Timestamp"),
        ("signed at the virtual time", body, slack_headers(body, at=virtual_now),
         "X-Slack-Request-Timestamp"),
        ("no signature", body, {k: v for k, v in good.items() if k != "x-slack-signature"},
         "X-Slack-Signature"),
        ("no timestamp", body, {k: v for k, v in good.items() if k != "x-slack-request-timestamp"},
         "X-Slack-Request-Timestamp"),
        ("no headers", body, {"content-type": FORM}, "X-Slack-Signature"),
    ]  # fmt: skip
    before = server.dump()
    problems = []
    for name, sent, headers, field in cases:
        problem = refused(server.post("/webhooks/slack", content=sent, headers=headers), 401)
        if problem["errors"] != [{"field": field, "message": problem["detail"]}]:
            problems.append((name, problem))
    assert problems == []
    assert server.dump() == before
    assert before["events"] == []


def test_signed_slack_requests_that_are_not_a_click_are_refused(
    server: Server, project: Path
) -> None:
    awaiting_approval(server, project)
    before = server.dump()
    cases: list[tuple[bytes, str, int, str]] = [
        (slack_form({"type": "view_submission"}), FORM, 422, "block_actions"),
        (slack_form({"type": "block_actions", "actions": []}), FORM, 422, "no [actions]"),
        (slack_form({"type": "block_actions", "actions": [{"value": "approve"}]}), FORM, 422,
         "names no message"),
        (b"payload=%7B", FORM, 400, "not valid JSON"),
        (b"other=1", FORM, 400, "exactly one form field [payload]"),
        (b"payload=1&payload=2", FORM, 400, "exactly one form field [payload]"),
        (json.dumps(click("1.2")).encode(), "application/json", 400, FORM),
    ]  # fmt: skip
    problems = []
    for body, media, status, fragment in cases:
        headers = {**slack_headers(body), "content-type": media}
        problem = refused(server.post("/webhooks/slack", content=body, headers=headers), status)
        if fragment not in problem["detail"]:
            problems.append(problem)
        if status == 422 and problem["errors"][0]["field"] != "payload":
            problems.append(problem)
    assert problems == []
    assert server.dump() == before


def test_a_click_reaching_no_run_is_accepted_with_nobody_resumed(
    server: Server, project: Path
) -> None:
    body = slack_form(click("1798761600.000001"))
    got = server.post("/webhooks/slack", content=body, headers=slack_headers(body))
    assert got.json() == report("slack:1798761600.000001:1798761600.246810")
    assert len(server.events()) == 1


# --- POST /webhooks/events (Standard Webhooks) -----------------------------------------------


def webhook_headers(
    body: bytes, msg_id: str, key: bytes = WEBHOOK_KEY, at: float | None = None
) -> dict[str, str]:
    ts = str(int(time.time() if at is None else at))
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {"content-type": "application/json", "webhook-id": msg_id, "webhook-timestamp": ts,
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}  # fmt: skip


def test_a_signed_webhook_resumes_its_run_and_a_redelivery_is_a_duplicate(
    server: Server, project: Path
) -> None:
    run_id = waiting_for_payment(server, project, 11)
    body = json.dumps({"type": "crm.paid", "timestamp": "2027-01-01T00:00:00Z",
                       "data": {"invoice": 11, "amount": 5}, "id": "ignored"}).encode()  # fmt: skip
    got = server.post("/webhooks/events", content=body, headers=webhook_headers(body, "msg_11"))
    assert (got.status_code, got.json()) == (200, report("msg_11", [run_id]))
    before = server.dump()
    later = webhook_headers(body, "msg_11", at=time.time() + 2)  # a retry: new time, same id
    assert server.post("/webhooks/events", content=body, headers=later).json() == duplicate(
        "msg_11"
    )
    assert server.dump() == before
    server.engine.work()
    assert server.engine.show(run_id)["output"] == {"amount": 5}


def test_a_webhook_signed_with_a_retired_key_too_is_accepted(server: Server) -> None:
    body = json.dumps({"type": "crm.paid", "data": {"invoice": 1, "amount": 1}}).encode()
    headers = webhook_headers(body, "msg_rot")
    old = webhook_headers(body, "msg_rot", key=b"the key before rotation")["webhook-signature"]
    headers["webhook-signature"] = f"{old} {headers['webhook-signature']}"
    assert server.post("/webhooks/events", content=body, headers=headers).json() == report(
        "msg_rot"
    )


def test_a_raw_text_webhook_secret_is_the_key_itself(
    db_url: str, db_env: dict[str, str], project: Path
) -> None:
    with serve(db_url, db_env, project, PROCFLOW_WEBHOOK_SECRET="just some text") as server:
        body = json.dumps({"type": "crm.paid", "data": {"invoice": 1, "amount": 1}}).encode()
        headers = webhook_headers(body, "msg_raw", key=b"just some text")
        assert server.post("/webhooks/events", content=body, headers=headers).json() == report(
            "msg_raw"
        )


def test_badly_signed_webhooks_are_401_and_accept_nothing(server: Server, project: Path) -> None:
    waiting_for_payment(server, project, 12)
    body = json.dumps({"type": "crm.paid", "data": {"invoice": 12, "amount": 5}}).encode()
    good = webhook_headers(body, "msg_12")
    now = time.time()
    virtual_now = server.engine.now() / 1_000_000

    def without(name: str) -> dict[str, str]:
        return {k: v for k, v in good.items() if k != name}

    cases: list[tuple[str, bytes, dict[str, str], str]] = [
        ("tampered body", body.replace(b"5", b"6"), good, "webhook-signature"),
        ("wrong secret", body, webhook_headers(body, "msg_12", key=b"wrong"), "webhook-signature"),
        ("the secret's text as key", body, webhook_headers(body, "msg_12", key=WHSEC.encode()),
         "webhook-signature"),
        ("another id", body, {**good, "webhook-id": "msg_13"}, "webhook-signature"),
        ("stale", body, webhook_headers(body, "msg_12", at=now - 310), "webhook-timestamp"),
        ("future", body, webhook_headers(body, "msg_12", at=now + 310), "webhook-timestamp"),
        ("at the virtual time", body, webhook_headers(body, "msg_12", at=virtual_now),
         "webhook-timestamp"),
        ("no id", body, without("webhook-id"), "webhook-id"),
        ("no timestamp", body, without("webhook-timestamp"), "webhook-timestamp"),
        ("no signature", body, without("webhook-signature"), "webhook-signature"),
        ("v1a only", body, {**good, "webhook-signature": "v1a,AAAA"}, "webhook-signature"),
        ("bad timestamp", body, {**good, "webhook-timestamp": "yesterday"}, "webhook-timestamp"),
    ]  # fmt: skip
    before = server.dump()
    problems = []
    for name, sent, headers, field in cases:
        problem = refused(server.post("/webhooks/events", content=sent, headers=headers), 401)
        if problem["errors"] != [{"field": field, "message": problem["detail"]}]:
            problems.append((name, problem))
    assert problems == []
    assert server.dump() == before


def test_well_signed_webhooks_with_a_bad_event_are_refused(server: Server, project: Path) -> None:
    waiting_for_payment(server, project, 7)
    before = server.dump()
    cases: list[tuple[bytes, int, str | None, str]] = [
        (b'{"type": "crm.nope", "data": {}}', 422, "type", "crm.nope"),
        (b'{"data": {"invoice": 7, "amount": 1}}', 422, "type", "[type]"),
        (b'{"type": "crm.paid", "data": {"invoice": 7}}', 422, "amount", "[amount]"),
        (b'{"type": "crm.paid", "data": "x"}', 422, "data", "JSON object"),
        (b'{"type": ', 400, None, "not valid JSON"),
        (b"[1]", 400, None, "{type, data}"),
    ]
    problems = []
    for number, (body, status, field, fragment) in enumerate(cases):
        headers = webhook_headers(body, f"msg_bad_{number}")
        problem = refused(server.post("/webhooks/events", content=body, headers=headers), status)
        errors = problem.get("errors", [])
        if fragment not in problem["detail"] or (field and errors[0]["field"] != field):
            problems.append(problem)
    assert problems == []
    assert server.dump() == before


# --- the webhooks without their secrets ------------------------------------------------------


def test_the_webhooks_are_off_without_their_secrets(
    db_url: str, db_env: dict[str, str], project: Path
) -> None:
    with serve(db_url, db_env, project) as server:
        body = slack_form(click("1.2"))
        problem = refused(server.post("/webhooks/slack", content=body,
                                      headers=slack_headers(body)), 404)  # fmt: skip
        assert (
            problem["detail"]
            == "POST /webhooks/slack is off: the server has no SLACK_SIGNING_SECRET"
        )
        body = b'{"type": "crm.paid", "data": {"invoice": 1, "amount": 1}}'
        problem = refused(server.post("/webhooks/events", content=body,
                                      headers=webhook_headers(body, "m")), 404)  # fmt: skip
        assert problem["detail"] == (
            "POST /webhooks/events is off: the server has no PROCFLOW_WEBHOOK_SECRET"
        )
        assert server.events() == []


def test_a_whsec_secret_that_is_not_base64_is_a_server_error_naming_the_setting(
    db_url: str, db_env: dict[str, str], project: Path
) -> None:
    with serve(db_url, db_env, project, PROCFLOW_WEBHOOK_SECRET="whsec_not base64!") as server:
        body = b'{"type": "crm.paid", "data": {"invoice": 1, "amount": 1}}'
        got = server.post("/webhooks/events", content=body, headers=webhook_headers(body, "m"))
        problem = refused(got, 500)
        assert problem["detail"] == (
            "PROCFLOW_WEBHOOK_SECRET starts with whsec_ but what follows is not a base64 key"
        )
        assert "not base64!" not in got.text
        assert server.events() == []


def test_openapi_describes_the_event_routes(server: Server) -> None:
    paths = server.client.get("/openapi.json").json()["paths"]
    assert paths["/events"]["post"]["responses"]["200"]["content"]["application/json"]
    for path in ("/webhooks/slack", "/webhooks/events"):
        operation = paths[path]["post"]
        assert operation["security"] == []  # public: the signature is the credential
        assert {"200", "401", "404", "422"} <= set(operation["responses"])


# --- the onboarding example, over HTTP -------------------------------------------------------


def test_onboarding_example_end_to_end_with_the_click_as_a_signed_webhook(
    db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "onboarding"
    shutil.copytree(ONBOARDING, project)
    flow = project / "onboarding.flow.yaml"
    assert filecmp.cmp(flow, ONBOARDING / "onboarding.flow.yaml", shallow=False)
    with serve(db_url, db_env, project, **SECRETS) as server:
        engine = server.engine  # the worker: it runs what is due and moves the virtual clock
        deployed = server.post(
            "/definitions?filename=onboarding.flow.yaml",
            content=flow.read_bytes(),
            headers={"content-type": "application/yaml"},
        )
        assert deployed.status_code == 201, deployed.text
        inputs = {"hire": {"start_date": "2027-01-10", "name": "Ada"}, "deal": {"name": "Acme"},
                  "ticket": {"id": "T-1"}}  # fmt: skip
        started = server.post("/flows/hire-onboarding/runs", json={"inputs": inputs})
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        engine.advance("8d")  # cooling off, then the day before the start: ask, then wait
        shown = engine.show(run_id)
        ts = shown["bindings"]["ask"]["ts"]
        assert shown["tokens"][0]["waiting_for"] == {
            "kind": "event", "type": "slack.approval", "match": {"message": ts},
            "timeout_at": "2027-01-10T00:00:00Z",
        }  # fmt: skip

        body = slack_form(click(ts))
        got = server.post("/webhooks/slack", content=body, headers=slack_headers(body))
        assert (got.status_code, got.json()) == (
            200, report(f"slack:{ts}:1798761600.246810", [run_id])
        )  # fmt: skip
        engine.work()  # the approval binds; the first check finds the ticket not indexed yet
        (project / "search-index.json").write_text(json.dumps({"T-1": "indexed"}))
        engine.advance("30s")
        shown = server.client.get(f"/runs/{run_id}").json()
        assert shown == engine.show(run_id)
        assert shown["status"] == "completed", shown["error"]
        assert shown["output"] == {"approved": True, "polls": 2}
        assert shown["bindings"]["approval"] == {
            "status": "received",
            "event": {"message": ts, "approved": True, "user": "ada.lovelace"},
        }
        assert shown["ended_at"] == "2027-01-09T00:00:30Z"


def test_the_request_threads_engines_share_their_transactions(
    db_url: str, db_env: dict[str, str]
) -> None:
    """Each request thread has an engine (a connection) of its own, and events accepted at once
    by several of them are committed together (``procflow.runtime.operations.grouping``)."""
    Engine.virtual(db_url, environ=dict(db_env)).close()
    state = ServerState.of(db_url, None, db_env)
    engines: list[Engine] = []
    try:
        for _ in range(2):
            thread = threading.Thread(target=lambda: engines.append(state.engines.get()))
            thread.start()
            thread.join(10)
        first, second = engines
        assert first is not second and first.store is not second.store
        assert first.writes is second.writes
    finally:
        state.engines.close()
