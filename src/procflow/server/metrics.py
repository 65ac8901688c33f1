"""Prometheus metrics of one process: ``GET /metrics`` on ``procflow serve`` and the listener of
``procflow worker --metrics-port``.

Each process has its own :class:`ProcessMetrics` and registry (never prometheus_client's global
one: two servers in one test process must not share counters). Its families:

- counted by this process as its work loop goes (per process, reset at start):
  ``procflow_step_attempts_total{definition,step,outcome}``,
  ``procflow_step_duration_seconds{definition}`` (histogram),
  ``procflow_runs_finished_total{definition,status}``,
  ``procflow_calls_total{flow,outcome}`` (calls of a flow started, and what came of them),
  ``procflow_schedule_slots_total{flow,schedule,outcome}`` (the slots its work loop fired, by
  what came of them), ``procflow_schedule_lag_seconds{flow,schedule}`` (histogram: how long
  after its nominal instant each due slot fired) and ``procflow_throttled_total{name}`` (step
  attempts that waited for a throttle budget instead of starting, by budget name);
- read from the store (the same in every process), cached for :data:`GAUGE_TTL` seconds, each
  one indexed query: ``procflow_runs{status,definition}``, ``procflow_runs_waiting{kind}``,
  ``procflow_runs_queued{flow}`` (runs waiting behind a concurrency limit),
  ``procflow_tasks_open``, ``procflow_oldest_due_seconds``, and ``procflow_store_up`` (0 when
  the store did not answer the last read: the counters are still served).

No label ever holds a run id, a task id or a value: only definition, step, flow, schedule and
throttle budget names, and the fixed outcome, status and kind words.
"""

from __future__ import annotations

import bisect
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from procflow.errors import ConfigError
from procflow.runtime.schedules.firing import Fired
from procflow.runtime.work.observe import CountingObserver, StoreGauges, read_gauges
from procflow.store.store import Store

__all__ = ["CONTENT_TYPE", "GAUGE_TTL", "ProcessMetrics", "StoreGaugeCollector"]

log = logging.getLogger("procflow.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what every Prometheus server reads
GAUGE_TTL = 5.0  # seconds a store reading is served before the store is asked again
# Attempts are mostly milliseconds (CPU) up to minutes (a call that waits on the world).
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0, 60.0, 300.0)  # fmt: skip
# A slot fires within a poll of its instant (seconds), later by its jitter (minutes), or hours
# late after downtime.
LAG_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0,
               21600.0, 86400.0)  # fmt: skip
SLOT_OUTCOMES = ("started", "skipped", "missed", "buffered")  # what becomes of a fired slot


class _Shard:
    """One thread's counts. Only its own thread writes it, so an attempt counts without a lock;
    a scrape reads every shard (a count in flight shows at the next scrape)."""

    __slots__ = ("attempts", "calls", "durations", "finished", "lags", "slots", "throttled")

    def __init__(self) -> None:
        self.attempts: dict[tuple[str, str, str], int] = {}
        # definition -> a count per bucket (the last: beyond them all), then the sum of seconds
        self.durations: dict[str, list[float]] = {}
        self.finished: dict[tuple[str, str], int] = {}
        self.calls: dict[tuple[str, str], int] = {}  # (called flow, outcome)
        self.slots: dict[tuple[str, str, str], int] = {}  # (flow, schedule, outcome)
        self.lags: dict[tuple[str, str], list[float]] = {}  # (flow, schedule): as durations
        self.throttled: dict[str, int] = {}  # budget name -> waits


class PrometheusObserver(CountingObserver, Collector):
    """Counts attempts and finished runs, and is the collector that exposes them. Counting is a
    thread-local lookup and a few dict and list updates (no lock: each thread has its shard);
    prometheus_client's own metric objects take a lock per increment and cost several times
    more per attempt."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._shards: list[_Shard] = []
        self._shards_lock = threading.Lock()

    def _shard(self) -> _Shard:
        shard: _Shard | None = getattr(self._local, "shard", None)
        if shard is None:
            shard = self._local.shard = _Shard()
            with self._shards_lock:
                self._shards.append(shard)
        return shard

    def count_attempt(
        self, definition: str, step: str, outcome: str, seconds: float | None
    ) -> None:
        shard = self._shard()
        key = (definition, step, outcome)
        shard.attempts[key] = shard.attempts.get(key, 0) + 1
        if seconds is None:
            return
        row = shard.durations.get(definition)
        if row is None:
            row = shard.durations[definition] = [0.0] * (len(DURATION_BUCKETS) + 2)
        row[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def count_finished(self, definition: str, status: str) -> None:
        shard = self._shard()
        key = (definition, status)
        shard.finished[key] = shard.finished.get(key, 0) + 1

    def count_call(self, flow: str, outcome: str) -> None:
        shard = self._shard()
        key = (flow, outcome)
        shard.calls[key] = shard.calls.get(key, 0) + 1

    def count_throttled(self, budget: str) -> None:
        shard = self._shard()
        shard.throttled[budget] = shard.throttled.get(budget, 0) + 1

    def slots_fired(self, flow: str, schedule: str, fired: Fired) -> None:
        """Each outcome counted by its number (a firing that catches up on missed slots counts
        them all); the lag once per firing (``Fired.lag`` is in microseconds)."""
        shard = self._shard()
        counts = (len(fired.started), fired.skipped, fired.missed, fired.buffered)
        for outcome, count in zip(SLOT_OUTCOMES, counts, strict=True):
            key = (flow, schedule, outcome)
            shard.slots[key] = shard.slots.get(key, 0) + count
        row = shard.lags.get((flow, schedule))
        if row is None:
            row = shard.lags[(flow, schedule)] = [0.0] * (len(LAG_BUCKETS) + 2)
        seconds = fired.lag / 1_000_000
        row[bisect.bisect_left(LAG_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        with self._shards_lock:
            shards = list(self._shards)
        yield from _step_families(shards)
        yield from _schedule_families(shards)
        yield _throttled_family(shards)


def _step_families(shards: list[_Shard]) -> Iterator[Metric]:
    attempts: dict[tuple[str, str, str], int] = {}
    finished: dict[tuple[str, str], int] = {}
    for shard in shards:
        _add(attempts, dict(shard.attempts))
        _add(finished, dict(shard.finished))
    counted = CounterMetricFamily(
        "procflow_step_attempts",
        "Step attempts this process made, by what came of them.",
        labels=("definition", "step", "outcome"),
    )
    for key, count in sorted(attempts.items()):
        counted.add_metric(list(key), count)
    yield counted
    timed = HistogramMetricFamily(
        "procflow_step_duration_seconds",
        "How long the step attempts this process made took (wall clock).",
        labels=("definition",),
    )
    for definition, row in sorted(_merged([s.durations for s in shards]).items()):
        timed.add_metric([definition], _cumulative(row, DURATION_BUCKETS), sum_value=row[-1])
    yield timed
    ended = CounterMetricFamily(
        "procflow_runs_finished",
        "Runs this process's work loop brought to completed, failed, cancelled or aborted.",
        labels=("definition", "status"),
    )
    for pair, count in sorted(finished.items()):
        ended.add_metric(list(pair), count)
    yield ended
    yield _calls_family(shards)


def _calls_family(shards: list[_Shard]) -> Metric:
    calls: dict[tuple[str, str], int] = {}
    for shard in shards:
        _add(calls, dict(shard.calls))
    counted = CounterMetricFamily(
        "procflow_calls",
        "Calls of a flow this process's work loop started, and what came of those a call step "
        "took back: completed, failed, timed_out, cancelled.",
        labels=("flow", "outcome"),
    )
    for key, count in sorted(calls.items()):
        counted.add_metric(list(key), count)
    return counted


def _schedule_families(shards: list[_Shard]) -> Iterator[Metric]:
    slots: dict[tuple[str, str, str], int] = {}
    for shard in shards:
        _add(slots, dict(shard.slots))
    counted = CounterMetricFamily(
        "procflow_schedule_slots",
        "Schedule slots this process's work loop fired, by what came of them: started a run, "
        "skipped or buffered by the overlap rule, missed.",
        labels=("flow", "schedule", "outcome"),
    )
    for key, count in sorted(slots.items()):
        counted.add_metric(list(key), count)
    yield counted
    lag = HistogramMetricFamily(
        "procflow_schedule_lag_seconds",
        "How long after its nominal instant each due schedule slot fired (its jitter included).",
        labels=("flow", "schedule"),
    )
    for pair, row in sorted(_merged([s.lags for s in shards]).items()):
        lag.add_metric(list(pair), _cumulative(row, LAG_BUCKETS), sum_value=row[-1])
    yield lag


def _throttled_family(shards: list[_Shard]) -> Metric:
    throttled: dict[str, int] = {}
    for shard in shards:
        _add(throttled, dict(shard.throttled))
    counted = CounterMetricFamily(
        "procflow_throttled",
        "Step attempts this process's work loop did not start because their throttle budget "
        "was spent (each a wait until the budget allows one), by budget name.",
        labels=("name",),
    )
    for name, count in sorted(throttled.items()):
        counted.add_metric([name], count)
    return counted


def _add(total: dict[Any, int], counts: dict[Any, int]) -> None:
    for key, count in counts.items():
        total[key] = total.get(key, 0) + count


def _merged(rows: list[dict[Any, list[float]]]) -> dict[Any, list[float]]:
    """The histogram rows of every shard, added up by key."""
    total: dict[Any, list[float]] = {}
    for shard_rows in rows:
        for key, row in dict(shard_rows).items():
            into = total.setdefault(key, [0.0] * len(row))
            for i, value in enumerate(list(row)):
                into[i] += value
    return total


def _cumulative(row: list[float], bounds: tuple[float, ...]) -> list[tuple[str, float]]:
    """Prometheus buckets (``le`` → observations at or below it) from per-bucket counts."""
    buckets, running = [], 0.0
    for bound, count in zip((*map(floatToGoString, bounds), "+Inf"), row, strict=False):
        running += count
        buckets.append((bound, running))
    return buckets


class StoreGaugeCollector(Collector):
    """The store's gauges, read by ``read`` at most once every ``ttl`` seconds (a scrape every
    few seconds by several Prometheus servers costs the store one reading)."""

    def __init__(self, read: Callable[[], StoreGauges], ttl: float = GAUGE_TTL) -> None:
        self._read = read
        self._ttl = ttl
        self._last: StoreGauges | None = None
        self._lock = threading.Lock()

    def gauges(self) -> StoreGauges | None:
        """The latest reading (a fresh one when the cached one is older than the TTL); None
        when the store does not answer."""
        with self._lock:
            if self._last is None or time.monotonic() - self._last.read_at >= self._ttl:
                try:
                    self._last = self._read()
                except Exception as exc:  # the counters are still worth serving
                    log.warning("metrics: the store did not answer: %s", exc)
                    self._last = None
            return self._last

    def describe(self) -> Iterator[Metric]:
        return iter(())  # registering must not read the store

    def collect(self) -> Iterator[Metric]:
        read = self.gauges()
        up = GaugeMetricFamily(
            "procflow_store_up", "1 when the store answered the last reading of the gauges."
        )
        up.add_metric([], 1.0 if read is not None else 0.0)
        yield up
        if read is None:
            return
        runs = GaugeMetricFamily(
            "procflow_runs",
            "Runs in the store by status and definition.",
            labels=("status", "definition"),
        )
        for (status, name), count in sorted(read.runs.items()):
            runs.add_metric([status, name], count)
        yield runs
        waiting = GaugeMetricFamily(
            "procflow_runs_waiting", "Runs waiting, by what they wait for.", labels=("kind",)
        )
        for kind, count in sorted(read.waiting.items()):
            waiting.add_metric([kind], count)
        yield waiting
        queued = GaugeMetricFamily(
            "procflow_runs_queued",
            "Runs waiting for a place under their flow's concurrency limit, by flow.",
            labels=("flow",),
        )
        for flow, count in sorted(read.queued.items()):
            queued.add_metric([flow], count)
        yield queued
        yield GaugeMetricFamily("procflow_tasks_open", "Open user tasks.", value=read.open_tasks)
        yield GaugeMetricFamily(
            "procflow_oldest_due_seconds",
            "How late the most overdue due timer is, by the store's clock (0: none overdue).",
            value=read.oldest_due_seconds,
        )


class ProcessMetrics:
    """One process's registry: its observer (to set on each work loop's advancer) and the
    store's gauges, read on a connection of their own opened for each reading."""

    def __init__(self, url: str, ttl: float = GAUGE_TTL) -> None:
        self.url = url
        self.registry = CollectorRegistry(auto_describe=False)
        self.observer = PrometheusObserver()
        self.registry.register(self.observer)
        self.gauges = StoreGaugeCollector(self._read, ttl)
        self.registry.register(self.gauges)

    def _read(self) -> StoreGauges:
        store = Store(self.url, create=False)
        try:
            return read_gauges(store.read())
        finally:
            store.close()

    def exposition(self) -> bytes:
        """The Prometheus text of every family."""
        return generate_latest(self.registry)

    def serve(self, host: str, port: int) -> tuple[int, Callable[[], None]]:
        """Listen on ``host:port`` (port 0: one the system picks), answering every path with
        the metrics, on a thread of its own; returns the port and the function that stops it."""
        listener = _Listener6 if ":" in host else _Listener
        try:
            server = make_server(
                host, port, make_wsgi_app(self.registry), listener, handler_class=_Quiet
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
            ) from None
        # A short poll: stopping waits for the loop to notice (the default half second would
        # be added to every worker's stop).
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05},
            name="procflow-metrics", daemon=True,
        )  # fmt: skip
        thread.start()

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        return int(server.server_port), stop


class _Listener(ThreadingMixIn, WSGIServer):
    """One thread per scrape (a slow scrape never holds the next), none kept at exit."""

    daemon_threads = True


class _Listener6(_Listener):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds is not worth a line."""
