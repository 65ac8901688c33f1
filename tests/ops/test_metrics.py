"""Metrics: the store's gauges and the per-process counters, as ``GET /metrics`` and ``procflow
worker --metrics-port`` serve them, on both store backends; no label ever holds a run id."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from opsite import Site
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from procflow.runtime.work.observe import OUTCOMES, read_gauges
from procflow.server.app import create_app
from procflow.server.metrics import ProcessMetrics, StoreGaugeCollector
from procflow.server.state import ServerState
from procflow.store.store import Store

TOKEN = "ops-metrics-token-0123456789abcdef"
LABELS = {"status", "definition", "kind", "step", "outcome", "le", "flow", "schedule", "name"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a Prometheus text, by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def populate(site: Site) -> None:
    """2 completed, 1 failed, 1 cancelled, and runs waiting on a timer, an event, a retry."""
    site.start("done", 2)
    site.start("broken")
    site.start("sleepy", 2)
    site.start("eventful", order="o-1")
    site.start("flaky")
    site.engine.work()
    cancelled = site.start("sleepy")[0]
    site.engine.work()
    site.engine.cancel(cancelled)


def test_the_gauges_count_the_store(site: Site, db_url: str) -> None:
    populate(site)
    metrics = ProcessMetrics(db_url)
    found = samples(metrics.exposition().decode())
    assert value(found, "procflow_store_up") == 1
    runs = {
        (dict(labels)["status"], dict(labels)["definition"]): v
        for (name, labels), v in found.items()
        if name == "procflow_runs"
    }
    assert runs == {
        ("completed", "done"): 2,
        ("failed", "broken"): 1,
        ("waiting", "sleepy"): 2,
        ("cancelled", "sleepy"): 1,
        ("waiting", "eventful"): 1,
        ("waiting", "flaky"): 1,
    }
    waiting = {
        dict(labels)["kind"]: v for (name, labels), v in found.items()
        if name == "procflow_runs_waiting"
    }  # fmt: skip
    assert waiting == {
        "timer": 2, "event": 1, "retry": 1, "poll": 0, "record": 0, "task": 0, "call": 0,
        "queue": 0, "throttle": 0, "join": 0,
    }  # fmt: skip
    assert value(found, "procflow_tasks_open") == 0
    assert value(found, "procflow_oldest_due_seconds") == 0  # nothing is overdue yet


def test_oldest_due_is_how_late_the_most_overdue_timer_is_by_the_store_clock(
    site: Site, db_url: str
) -> None:
    site.start("sleepy")
    site.engine.work()
    with site.engine.store.tx() as tx:  # the clock moves on; no worker fires the timer
        tx.meta_set("clock_now", str(site.engine.now() + 90 * 60 * 1_000_000))
    found = samples(ProcessMetrics(db_url).exposition().decode())
    assert value(found, "procflow_oldest_due_seconds") == 30 * 60  # due at 1h, now at 1h30


def test_counters_count_this_process_attempts_and_finished_runs(site: Site, db_url: str) -> None:
    metrics = ProcessMetrics(db_url)
    site.engine.loop.advancer.observer = metrics.observer
    populate(site)
    site.engine.advance("10m")  # the flaky run's second attempt fails too: a retry again
    found = samples(metrics.exposition().decode())
    attempts = "procflow_step_attempts_total"
    assert value(found, attempts, definition="done", step="one", outcome="completed") == 2
    assert value(found, attempts, definition="done", step="two", outcome="completed") == 2
    assert value(found, attempts, definition="broken", step="boom", outcome="failed") == 1
    assert value(found, attempts, definition="flaky", step="ping", outcome="retry") == 2
    assert value(found, attempts, definition="sleepy", step="nap", outcome="waiting") == 3
    assert value(found, attempts, definition="eventful", step="approval", outcome="waiting") == 1
    finished = "procflow_runs_finished_total"
    assert value(found, finished, definition="done", status="completed") == 2
    assert value(found, finished, definition="broken", status="failed") == 1
    total = sum(v for (name, _), v in found.items() if name == attempts)
    assert value(found, "procflow_step_duration_seconds_count", definition="done") == 4
    durations = [
        v for (name, _), v in found.items() if name == "procflow_step_duration_seconds_count"
    ]
    assert sum(durations) == total
    assert {dict(labels)["outcome"] for (name, labels) in found if name == attempts} <= set(
        OUTCOMES
    )


SLOW = """\
flow: slow
trigger:
  schedule: { every: 1h, overlap: skip, missed: latest }
steps:
  - hold: { wait: { for: 90m } }
"""


def test_schedule_slots_are_counted_by_outcome_with_their_lag(site: Site, db_url: str) -> None:
    metrics = ProcessMetrics(db_url)
    site.engine.loop.advancer.observer = metrics.observer
    (site.dir / "slow.flow.yaml").write_text(SLOW)
    site.engine.deploy(str(site.dir / "slow.flow.yaml"))
    # Each run holds 90 minutes: 01:00 starts, 02:00 is skipped, 03:00 starts, 04:00 skipped;
    # on the virtual clock each fires at its instant.
    site.engine.advance("PT4H")
    with site.engine.store.tx() as tx:  # then the worker is away until 07:30
        tx.meta_set("clock_now", str(site.engine.now() + 210 * 60 * 1_000_000))
    # 05:00 fires 2.5 h late: 05:00 and 06:00 are missed, and the latest (07:00) is skipped,
    # as the 03:00 run has not ended yet (its timer, due at 04:30, fires after the schedules).
    site.engine.work()
    found = samples(metrics.exposition().decode())
    slots = "procflow_schedule_slots_total"
    counted = {
        outcome: value(found, slots, flow="slow", schedule="slow", outcome=outcome)
        for outcome in ("started", "skipped", "missed", "buffered")
    }
    assert counted == {"started": 2, "skipped": 3, "missed": 2, "buffered": 0}
    lag = "procflow_schedule_lag_seconds"
    assert value(found, f"{lag}_count", flow="slow", schedule="slow") == 5  # one per firing
    assert value(found, f"{lag}_sum", flow="slow", schedule="slow") == 9000
    assert value(found, f"{lag}_bucket", flow="slow", schedule="slow", le="0.1") == 4
    assert value(found, f"{lag}_bucket", flow="slow", schedule="slow", le="3600.0") == 4
    assert value(found, f"{lag}_bucket", flow="slow", schedule="slow", le="21600.0") == 5
    shown = site.engine.schedules.show("slow")["counts"]
    assert {k: shown[k] for k in ("started", "skipped", "missed")} == {
        "started": 2, "skipped": 3, "missed": 2,
    }  # fmt: skip


def test_no_label_holds_a_run_id_or_anything_but_names(site: Site, db_url: str) -> None:
    metrics = ProcessMetrics(db_url)
    site.engine.loop.advancer.observer = metrics.observer
    populate(site)
    (site.dir / "slow.flow.yaml").write_text(SLOW)
    site.engine.deploy(str(site.dir / "slow.flow.yaml"))
    site.engine.advance("PT1H")  # a scheduled run: schedule labels, its id never one
    site.runs["slow"] = [r.id for r in site.engine.list_runs(name="slow")]
    run_ids = set(site.all_runs())
    assert len(run_ids) == 9
    found = samples(metrics.exposition().decode())
    for (name, labels), _ in found.items():
        assert name.startswith("procflow_"), name
        for label, text in labels:
            assert label in LABELS, (name, label)
            assert text not in run_ids, (name, label)
            assert not re.fullmatch(r"[0-9a-f]{16,}", text), (name, label, text)


def test_the_gauges_are_read_once_per_ttl() -> None:
    reads: list[float] = []

    def read() -> object:
        reads.append(time.monotonic())
        from procflow.runtime.work.observe import StoreGauges

        return StoreGauges({}, {}, 0, 0.0)

    collector = StoreGaugeCollector(read, ttl=60)  # type: ignore[arg-type]
    for _ in range(5):
        list(collector.collect())
    assert len(reads) == 1
    expired = StoreGaugeCollector(read, ttl=0)  # type: ignore[arg-type]
    list(expired.collect())
    list(expired.collect())
    assert len(reads) == 3


def test_a_store_that_does_not_answer_leaves_the_counters_served() -> None:
    def read() -> object:
        raise OSError("the store is away (simulated)")

    collector = StoreGaugeCollector(read)  # type: ignore[arg-type]
    families = {f.name: f for f in collector.collect()}
    assert set(families) == {"procflow_store_up"}
    assert families["procflow_store_up"].samples[0].value == 0


def test_get_metrics_serves_the_text_format_with_a_token(
    site: Site, db_url: str, db_env: dict[str, str]
) -> None:
    populate(site)
    state = ServerState.of(db_url, None, {**db_env, "PROCFLOW_API_TOKENS": f"{TOKEN}=ops:admin"})
    with TestClient(create_app(state)) as client:
        assert client.get("/metrics").status_code == 401
        answer = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(answer.text)
    assert value(found, "procflow_runs", status="completed", definition="done") == 2
    assert ("procflow_runs_waiting", (("kind", "timer"),)) in found


def test_the_served_worker_counts_its_attempts_on_the_same_registry(
    site: Site, db_url: str, db_env: dict[str, str]
) -> None:
    state = ServerState.of(db_url, None, db_env)
    site.engine.loop.advancer.observer = state.metrics.observer  # as serve's worker does
    site.start("done")
    site.engine.work()
    with TestClient(create_app(state)) as client:
        found = samples(client.get("/metrics").text)
    attempts = "procflow_step_attempts_total"
    assert value(found, attempts, definition="done", step="one", outcome="completed") == 1


# --- the queries use an index ----------------------------------------------------------------

QUERIES = {
    "runs": "SELECT status, name, count(*) FROM runs GROUP BY status, name",
    "timers": (
        "SELECT kind, count(DISTINCT run_id) FROM timers "
        "WHERE kind IN ('poll','retry','throttle','timer') GROUP BY kind"
    ),
    "waits": "SELECT kind, count(DISTINCT run_id) FROM waits GROUP BY kind",
    "task runs": "SELECT count(DISTINCT run_id) FROM tasks WHERE status='open'",
    "tasks": "SELECT count(*) FROM tasks WHERE status='open'",
    "due": "SELECT min(due_at) FROM timers",
    "queued": (
        "SELECT r.name, count(DISTINCT t.run_id) FROM tokens t JOIN runs r ON r.id = t.run_id "
        "WHERE t.wait_kind = 'queue' GROUP BY r.name"
    ),
}


def test_each_gauge_query_is_the_one_the_store_runs() -> None:
    from procflow.store.queries import metrics as queries

    ran = {
        queries.RUNS_BY_STATUS_AND_NAME, queries.WAITING_ON_TIMERS, queries.WAITING_ON_WAITS,
        queries.WAITING_ON_TASKS, queries.OPEN_TASKS, queries.EARLIEST_DUE,
        queries.QUEUED_BY_FLOW,
    }  # fmt: skip
    assert ran == set(QUERIES.values())


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_each_gauge_query_reads_an_index(query: str, db_url: str, backend: str) -> None:
    store = Store(db_url)
    try:
        if backend == "sqlite":
            steps = [str(r[-1]) for r in store.conn.execute(f"EXPLAIN QUERY PLAN {QUERIES[query]}")]
            reads = [s for s in steps if s.startswith(("SCAN", "SEARCH"))]
            assert reads and all("INDEX" in s for s in reads), steps
        else:
            # A tiny table is read whole by the planner's choice: forbid that to see whether an
            # index can serve the query at all.
            store.conn.execute("SET enable_seqscan = off")
            rows = store.conn.execute(f"EXPLAIN {QUERIES[query]}").fetchall()
            plan = " ".join(str(r[0]) for r in rows)
            assert "Index" in plan and "Seq Scan" not in plan, plan
    finally:
        store.close()


def test_read_gauges_matches_the_exposition(site: Site) -> None:
    populate(site)
    gauges = read_gauges(site.engine.store.read())
    assert gauges.runs[("completed", "done")] == 2
    assert gauges.waiting["timer"] == 2


# --- procflow worker --metrics-port -----------------------------------------------------------


def test_worker_serves_metrics_on_its_port_until_it_stops(
    site: Site, db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    site.start("done", 3)
    env = {"PATH": "/usr/bin:/bin", **db_env, "PF_OPS_SECRET": "x" * 20}
    worker = subprocess.Popen(
        [sys.executable, "-m", "procflow.cli", "worker", "--db", db_url, "--metrics-port", "0"],
        env=env, cwd=tmp_path, text=True, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert worker.stderr is not None
        line = ""
        deadline = time.monotonic() + 60
        while "metrics on" not in line and time.monotonic() < deadline:
            line = worker.stderr.readline()
        found_url = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", line)
        assert found_url, line
        found: Samples = {}
        wanted = [
            ("procflow_step_attempts_total", {"step": "two", "outcome": "completed"}),
            ("procflow_runs_finished_total", {"status": "completed"}),  # once committed
        ]
        while time.monotonic() < deadline:
            found = samples(httpx.get(found_url.group(1)).text)
            if all(value(found, name, definition="done", **labels) == 3 for name, labels in wanted):
                break
            time.sleep(0.05)
        assert [value(found, name, definition="done", **labels) for name, labels in wanted] == [
            3,
            3,
        ]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)
    assert worker.returncode == 0


def test_metrics_port_without_prometheus_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from procflow.cli import ops
    from procflow.errors import ProcflowError

    monkeypatch.setitem(sys.modules, "procflow.server.metrics", None)
    with pytest.raises(ProcflowError, match=r"needs the server extra.*procflow\[server\]"):
        ops._serve_metrics("sqlite:///unused.db", "127.0.0.1", 0, [])
