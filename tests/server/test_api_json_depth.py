"""JSON nested past the one limit (64 levels: ``procflow.store.codec.MAX_JSON_DEPTH``) over HTTP,
through the real ASGI app, on both store backends: on every route that reads a JSON body a body
nested 64 levels deep is read (and answered as any other body of its shape), one nested 65 levels
deep is a 400 problem saying so, and bodies nested 491, 1,000 and 5,000 deep (each once a 500
with a RecursionError somewhere past the parser) are the same clean 400. Nothing refused changes
anything in the store.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from api_site import MakeSite, Site, assert_problem
from projects import TOO_DEEP_LEVELS, nested_json

SLACK_SECRET = "slack-signing-secret-for-depth-tests"
WEBHOOK_KEY = b"procflow-depth-webhook-key-0123456789"
SECRETS = {
    "SLACK_SIGNING_SECRET": SLACK_SECRET,
    "PROCFLOW_WEBHOOK_SECRET": "whsec_" + base64.b64encode(WEBHOOK_KEY).decode(),
}
JSON = {"content-type": "application/json"}
TOO_DEEP = "is nested too deeply: more than 64 levels of objects and arrays (level 65 opens at"

# A flow that takes any object, and gives it back as its output at once.
NEST = """\
flow: nest
inputs:
  payload: { type: object, required: true }
steps:
  - done:
      set: { ok: true }
output:
  got: "{{ payload }}"
"""


@pytest.fixture
def site(make_site: MakeSite) -> Site:
    made = make_site(environ=SECRETS)
    assert made.deploy("nest.flow.yaml", NEST).status_code == 201
    return made


def events(site: Site) -> int:
    return len(site.dump()["events"])


def slack_signed(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    mac = hmac.new(SLACK_SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    return {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": ts,
        "x-slack-signature": "v0=" + mac.hexdigest(),
    }


def webhook_signed(body: bytes, msg_id: str) -> dict[str, str]:
    ts = str(int(time.time()))
    mac = hmac.new(WEBHOOK_KEY, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {**JSON, "webhook-id": msg_id, "webhook-timestamp": ts,
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}  # fmt: skip


@dataclass(frozen=True)
class Route:
    """A route that reads a JSON body: ``send(site, levels)`` posts a body nested ``levels``
    deep; ``what`` names the JSON the refusal speaks of."""

    name: str
    send: Callable[[Site, int], httpx.Response]
    what: str = "the body"


def _post(site: Site, path: str, body: str, headers: dict[str, str] | None = None) -> Any:
    return site.client.post(path, content=body.encode(), headers=headers or JSON)


def _event_body(levels: int, **envelope: str) -> str:
    """``{type, data: {message, extra}, ...}`` nested ``levels`` deep (extra from level 3)."""
    head = json.dumps({"type": "slack.approval", **envelope})[:-1]
    return f'{head}, "data": {{"message": "m", "extra": {nested_json(levels - 2)}}}}}'


def _slack(site: Site, levels: int) -> Any:
    payload = {"type": "block_actions", "message": {"ts": "1798761600.000001"},
               "actions": [{"value": "approve", "action_ts": str(levels)}]}  # fmt: skip
    text = json.dumps(payload)[:-1] + f', "extra": {nested_json(levels - 1)}}}'
    body = f"payload={quote(text)}".encode()
    return site.client.post("/webhooks/slack", content=body, headers=slack_signed(body))


def _webhook(site: Site, levels: int) -> Any:
    body = _event_body(levels).encode()
    msg_id = f"w-{levels}"
    return site.client.post("/webhooks/events", content=body, headers=webhook_signed(body, msg_id))


def _binary(site: Site, levels: int) -> Any:
    headers = {**JSON, "ce-specversion": "1.0", "ce-type": "slack.approval",
               "ce-id": f"b-{levels}", "ce-source": "/tests"}  # fmt: skip
    data = f'{{"message": "m", "extra": {nested_json(levels - 1)}}}'
    return _post(site, "/events", data, headers)


def _structured(site: Site, levels: int) -> Any:
    body = _event_body(levels, specversion="1.0", id=f"c-{levels}", source="/tests")
    return _post(site, "/events", body, {"content-type": "application/cloudevents+json"})


def _task(site: Site, levels: int) -> Any:
    task_id = site.client.get("/tasks").json()["items"][0]["id"]
    body = f'{{"action": "approve", "data": {{"note": {nested_json(levels - 2)}}}}}'
    return _post(site, f"/tasks/{task_id}/complete", body)


def _patch(site: Site, levels: int) -> Any:
    body = f'{{"note": {nested_json(levels - 1)}}}'
    return site.client.patch("/entities/Order/1", content=body.encode(), headers=JSON)


ROUTES = {
    "flow start": Route("flow start", lambda site, levels: _post(
        site, "/flows/nest/runs", f'{{"inputs": {{"payload": {nested_json(levels - 2)}}}}}')),
    "process start": Route("process start", lambda site, levels: _post(
        site, "/processes/Manual/runs",
        f'{{"record": {{"entity": {nested_json(levels - 2)}, "id": 1}}}}')),
    "event": Route("event", lambda site, levels: _post(site, "/events", _event_body(levels))),
    "structured CloudEvent": Route("structured CloudEvent", _structured),
    "binary CloudEvent": Route("binary CloudEvent", _binary),
    "Slack webhook": Route("Slack webhook", _slack, "the form field [payload]"),
    "Standard webhook": Route("Standard webhook", _webhook),
    "record create": Route("record create", lambda site, levels: _post(
        site, "/entities/Order", f'{{"title": "t", "note": {nested_json(levels - 1)}}}')),
    "record change": Route("record change", _patch),
    "task completion": Route("task completion", _task),
}  # fmt: skip


def refused_too_deep(site: Site, route: Route, levels: int) -> None:
    """A body ``levels`` deep is a 400 saying the JSON is too deep, and changes nothing."""
    before = site.dump()
    answer = route.send(site, levels)
    body = assert_problem(answer, 400, detail=f"{route.what} {TOO_DEEP}")
    assert "RecursionError" not in body["detail"]
    assert site.dump() == before, (route.name, levels)


@pytest.mark.parametrize("name", list(ROUTES))
def test_a_body_past_64_levels_is_a_400_that_changes_nothing(site: Site, name: str) -> None:
    site.order("desk")  # the Order record 1, and (worked) its open review task
    site.work()
    for levels in TOO_DEEP_LEVELS:
        refused_too_deep(site, ROUTES[name], levels)


def test_the_refusal_says_where_level_65_opens(site: Site) -> None:
    # 11 characters of '{"inputs": ', 63 openers of levels 2 to 64 (32 '{"d":', 31 '['): 202
    body = '{"inputs": ' + nested_json(64) + "}"
    answer = site.client.post("/flows/nest/runs", content=body.encode(), headers=JSON)
    assert answer.json()["detail"] == (
        "the body is nested too deeply: more than 64 levels of objects and arrays (level 65 "
        "opens at character 203)"
    )


# --- 64 levels: read, and answered as any body of that shape ---------------------------------


def test_a_flow_started_with_inputs_64_levels_deep_runs_to_its_end(site: Site) -> None:
    started = ROUTES["flow start"].send(site, 64)
    assert started.status_code == 201, started.text
    site.work()
    run = site.client.get(f"/runs/{started.json()['id']}").json()
    assert run["status"] == "completed", run["error"]
    assert run["output"] == {"got": json.loads(nested_json(62))}  # levels 3 to 64


def test_events_64_levels_deep_are_accepted_in_every_form(site: Site) -> None:
    for name in ("event", "structured CloudEvent", "binary CloudEvent", "Slack webhook",
                 "Standard webhook"):  # fmt: skip
        before = events(site)
        answer = ROUTES[name].send(site, 64)
        assert answer.status_code == 200, (name, answer.text)
        assert events(site) == before + 1, name


def test_records_and_task_data_64_levels_deep_reach_the_engines_own_checks(site: Site) -> None:
    """No field holds an object: a 64-level body is read, and refused for its field's type."""
    site.order("desk")
    site.work()
    cases = [("record create", "note"), ("record change", "note"),
             ("task completion", "note"), ("process start", "record.entity")]  # fmt: skip
    for name, field in cases:
        before = site.dump()
        body = assert_problem(ROUTES[name].send(site, 64), 422, field=field)
        assert "nested too deeply" not in body["detail"], (name, body)
        assert site.dump() == before, name
