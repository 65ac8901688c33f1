"""Flow control's metrics, on both store backends: ``procflow_runs_queued{flow}`` (a gauge read
from the store's wait-kind index), ``procflow_runs_waiting{kind="queue"|"throttle"}``, and
``procflow_throttled_total{name}`` (this process's throttled waits, by budget name)."""

from __future__ import annotations

import textwrap

from opsite import Site
from prometheus_client.parser import text_string_to_metric_families

from procflow.server.metrics import ProcessMetrics

FLOWS = {
    "sync": """
        flow: sync
        concurrency: { limit: 1, key: "{{ customer }}" }
        inputs:
          customer: { type: string, required: true }
        steps:
          - nap: { wait: { for: 1h } }
    """,
    "chat": """
        flow: chat
        inputs:
          channel: { type: string, required: true }
        steps:
          - post:
              log.write: { message: "to {{ channel }}" }
              throttle: { limit: 1, per: 10s, key: "{{ channel }}", name: slack }
    """,
    "mail": """
        flow: mail
        steps:
          - send: { log.write: { message: "mail" }, throttle: { limit: 1, per: 1m } }
    """,
}


def deploy(site: Site, db_url: str) -> ProcessMetrics:
    for name, text in FLOWS.items():
        path = site.dir / f"{name}.flow.yaml"
        path.write_text(textwrap.dedent(text))
        site.engine.deploy(str(path))
    return ProcessMetrics(db_url, ttl=0)


def scraped(metrics: ProcessMetrics, name: str, label: str) -> dict[str, float]:
    """The samples of the family ``name`` in a scrape, by the value of their one ``label``."""
    return {
        s.labels[label]: s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
        if s.name == name
    }


def test_queued_runs_are_a_gauge_by_flow_that_follows_the_queue(site: Site, db_url: str) -> None:
    metrics = deploy(site, db_url)
    first, second, third = site.start("sync", 3, customer="a")
    site.start("sync", customer="b")
    site.start("sleepy")
    site.engine.work()
    assert scraped(metrics, "procflow_runs_queued", "flow") == {"sync": 2}
    waiting = scraped(metrics, "procflow_runs_waiting", "kind")
    assert (waiting["queue"], waiting["timer"]) == (2, 3)  # the naps of a, b and sleepy

    site.engine.cancel(third)  # a queued run cancelled: no longer queued
    assert scraped(metrics, "procflow_runs_queued", "flow") == {"sync": 1}
    site.engine.advance("1h")  # the first ends; the second takes its place
    assert scraped(metrics, "procflow_runs_queued", "flow") == {}
    assert scraped(metrics, "procflow_runs_waiting", "kind")["queue"] == 0
    assert [site.engine.show(r)["status"] for r in (first, second)] == ["completed", "waiting"]


def test_throttled_waits_are_counted_by_budget_name(site: Site, db_url: str) -> None:
    metrics = deploy(site, db_url)
    site.engine.loop.advancer.observer = metrics.observer
    site.start("chat", 3, channel="general")
    site.start("chat", channel="random")  # another key of the same budget: its own window
    site.start("mail", 2)
    site.engine.work()
    # Two chat runs and one mail run over their budgets: each has waited once so far.
    assert scraped(metrics, "procflow_throttled_total", "name") == {"slack": 2, "mail/send": 1}
    assert scraped(metrics, "procflow_runs_waiting", "kind")["throttle"] == 3

    # The two waiting chat runs were told to come back a `per / limit` apart: at 10s the first
    # starts, the second is not due yet (nothing waits twice, nothing more is counted).
    site.engine.advance("10s")
    assert scraped(metrics, "procflow_throttled_total", "name") == {"slack": 2, "mail/send": 1}
    assert scraped(metrics, "procflow_runs_waiting", "kind")["throttle"] == 2
    site.engine.advance("1m")
    assert scraped(metrics, "procflow_runs_waiting", "kind")["throttle"] == 0
    assert [r.status for r in site.engine.list_runs(name="chat")] == ["completed"] * 4
