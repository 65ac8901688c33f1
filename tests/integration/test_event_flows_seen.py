"""An event is checked against the deployed flows as its process last read them, and stored
by a transaction that compares them with the store's: a flow deployed, or a flow disabled, by
another process since is never missed, the event being checked again against the flows as they
now are (``FlowsChanged``: nothing of the first try is committed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from projects import deploy_text, events_project

from procflow.model.ir import Flow
from procflow.runtime.definitions.catalog import Catalog
from procflow.runtime.engine import Engine
from procflow.store.store import Tx

MANIFEST = """\
connector: shop
description: Orders (events only).
events:
  ordered:
    payload:
      order: { type: string, required: true }
    correlate_on: [order]
"""


def triggered(name: str) -> str:
    return f"""\
flow: {name}
trigger: {{ event: shop.ordered, as: got }}
inputs:
  got: {{ type: object, required: true }}
steps:
  - note: {{ set: {{ order: "{{{{ got.order }}}}" }} }}
"""


class Two:
    """Two processes' engines on one store, the way two servers or a CLI and a server are."""

    def __init__(self, project: Path, url: str, env: dict[str, str]) -> None:
        self.project = project
        self.a = Engine.virtual(url, environ=dict(env), project_dir=str(project))
        self.b = Engine.virtual(url, environ=dict(env), project_dir=str(project))

    def deploy(self, engine: Engine, name: str) -> None:
        deploy_text(engine, self.project, triggered(name))

    def started_flows(self, report: dict[str, object]) -> list[str]:
        started = report["started"]
        assert isinstance(started, list)
        return sorted(self.a.show(run_id)["name"] for run_id in started)


@pytest.fixture
def two(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Two]:
    pair = Two(events_project(tmp_path, "shop", MANIFEST), db_url, db_env)
    try:
        yield pair
    finally:
        pair.a.close()
        pair.b.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times an event's check read the deployed flows from the store."""
    counted: list[int] = []
    original = Catalog.latest_flows

    def latest_flows(self: Catalog, tx: Tx) -> list[tuple[Flow, int]]:
        counted.append(1)
        return original(self, tx)

    monkeypatch.setattr(Catalog, "latest_flows", latest_flows)
    return counted


def test_the_check_reads_the_flows_once_while_nothing_is_deployed(
    two: Two, reads: list[int]
) -> None:
    two.deploy(two.a, "first")
    for n in range(3):
        report = two.a.send_event("shop.ordered", {"order": f"o{n}"})
        assert two.started_flows(report) == ["first"]
    assert len(reads) == 1


def test_a_flow_deployed_by_another_process_is_triggered_by_the_next_event(
    two: Two, reads: list[int]
) -> None:
    two.deploy(two.a, "first")
    assert two.started_flows(two.a.send_event("shop.ordered", {"order": "o1"})) == ["first"]
    two.deploy(two.b, "second")  # a's catalog has not seen it
    report = two.a.send_event("shop.ordered", {"order": "o2"})
    assert two.started_flows(report) == ["first", "second"]
    assert len(reads) == 2  # read again once the transaction found them changed
    events = two.a.store.read().c.execute("SELECT id FROM events").fetchall()
    assert len(events) == 2  # the first try stored nothing


def test_a_flow_disabled_by_another_process_is_not_triggered_by_the_next_event(
    two: Two,
) -> None:
    two.deploy(two.a, "first")
    two.deploy(two.a, "second")
    assert two.started_flows(two.a.send_event("shop.ordered", {"order": "o1"})) == [
        "first",
        "second",
    ]
    two.b.set_enabled("second", False)
    report = two.a.send_event("shop.ordered", {"order": "o2"})
    assert two.started_flows(report) == ["first"]


def test_a_redelivered_event_is_a_duplicate_whatever_was_deployed_since(two: Two) -> None:
    two.deploy(two.a, "first")
    two.a.send_event("shop.ordered", {"order": "o1"}, "event-1")
    two.deploy(two.b, "second")
    report = two.a.send_event("shop.ordered", {"order": "o1"}, "event-1")
    assert report["duplicate"] is True and report["started"] == []
