"""Flow control over HTTP, on both store backends: a start refused at a flow's concurrency limit
is a 409 that stores nothing, an event whose trigger is refused says so in its delivery report,
and ``GET /runs?waiting_for=queue|throttle`` lists the queued and the throttled runs (the same
items as ``procflow runs list --waiting-for``)."""

from __future__ import annotations

from api_site import Site
from projects import QUEUED
from projects import THROTTLED as POST

ONCE = """\
flow: once
trigger: { event: slack.approval, as: click }
concurrency: { limit: 1, key: "{{ click.message }}", on_limit: refuse }
inputs:
  click: { type: object, required: true }
steps:
  - nap: { wait: { for: 1h } }
"""

REFUSED = (
    "flow [once] has 1 of 1 places taken for key a; it refuses starts over its limit "
    "(concurrency.on_limit: refuse)"
)


def deploy(site: Site, name: str, text: str) -> None:
    answer = site.deploy(f"{name}.flow.yaml", text)
    assert answer.status_code == 201, answer.text


def test_a_start_over_a_refusing_limit_is_a_409_and_stores_nothing(site: Site) -> None:
    deploy(site, "once", ONCE)
    site.start("once", {"click": {"message": "a"}})
    body = site.refused(
        "POST",
        "/flows/once/runs",
        409,
        detail=REFUSED,
        json={"inputs": {"click": {"message": "a"}}},
    )
    assert body["detail"] == REFUSED
    refused_again = site.refused(
        "POST", "/flows/once/runs", 409, json={"inputs": {"click": {"message": "a"}}},
        headers={"Idempotency-Key": "sync-a-1"},
    )  # fmt: skip
    assert refused_again["detail"] == REFUSED  # and the key was not kept for a replay
    site.start("once", {"click": {"message": "b"}})  # another key has a place of its own


def test_an_event_triggering_a_refusing_flow_at_its_limit_reports_it(site: Site) -> None:
    deploy(site, "once", ONCE)
    first = site.client.post("/events", json={"type": "slack.approval", "data": {"message": "a"}})
    assert first.status_code == 200 and len(first.json()["started"]) == 1
    again = site.client.post("/events", json={"type": "slack.approval", "data": {"message": "a"}})
    assert again.status_code == 200
    report = again.json()
    assert report["started"] == [] and report["resumed"] == []
    assert report["errors"] == [{"flow": "once", "message": REFUSED}]
    assert len(site.engine.list_runs(name="once")) == 1


def test_runs_can_be_listed_by_what_they_wait_for(site: Site) -> None:
    deploy(site, "queued", QUEUED)
    deploy(site, "post", POST)
    queued = [site.start("queued") for _ in range(2)][1]  # queued when it starts: the 2nd
    posts = {site.start("post") for _ in range(2)}  # which one a worker attempts first is open
    site.work()
    for kind, expected in (("queue", {queued}), ("throttle", posts)):
        listed = site.client.get(f"/runs?waiting_for={kind}").json()["items"]
        assert len(listed) == 1 and listed[0]["id"] in expected
        assert listed == site.cli("runs", "list", "--waiting-for", kind)
    assert site.client.get("/runs?waiting_for=queue&name=post").json()["items"] == []
    refused = site.refused("GET", "/runs?waiting_for=lunch", 400, field="waiting_for")
    assert refused["detail"] == (
        "waiting_for must be one of timer, retry, poll, event, record, task, call, queue, "
        "throttle, join, not [lunch]"
    )
