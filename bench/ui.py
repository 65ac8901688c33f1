"""Benchmark: the web UI's pages of ``procflow serve`` on a store of 1,000,000 runs (SQLite).

One ``procflow serve`` process (with its worker, as deployed by default) on a SQLite store holding
1,000,000 completed runs with 4 history entries each, inserted by SQL from one real run (the
helpers of ``bench/http.py``, loaded by path), plus one real run whose ``for_each`` left 10,000+
history entries. One client thread on loopback with a keep-alive connection (so requests never
queue behind one another) measures, per page, p50 and p99 of:

- the server's own time, from the ``Server-Timing`` header (``total;dur=MS`` or the sum of its
  durations) when the pages send one;
- the client-side latency (request sent → body read), always: on loopback, one client, this is the
  server's time plus a fraction of a millisecond.

Pages: ``GET /ui/runs`` (the newest page and counts per status), ``GET /ui/runs?status=completed
&name=quick``, ``GET /ui/runs/{id}`` (ids drawn at random), and the long run's page followed
through its "Older entries" links (each timeline page must be bounded: at most ``--max-entries``
entries and ``--max-kib`` KiB, and no two pages alike). Target: p50 under 150 ms for every page.

Run: ``.venv/bin/python bench/ui.py [--runs 1000000] [--history 10000] [--requests 400]
[--pages 20]``. Wall-clock figures on a shared machine: other load shows in them (the load average
is printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

_BENCH = Path(__file__).resolve().parent


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", _BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# bench/http.py takes this folder off sys.path as it loads (its name shadows the standard
# library's http, which httpx needs): loaded first, before httpx is imported anywhere.
_http = _sibling("http")

TARGET_P50_MS = 150.0
LONG_FLOW = """\
flow: long-history
inputs:
  items: { type: array, required: true }
steps:
  - each:
      for_each: "{{ items }}"
      steps:
        - note: { set: { seen: "{{ item }}" } }
"""
ENTRY_TYPES = re.compile(
    r"\b(run\.started|run\.completed|step\.started|step\.completed|token\.forked|token\.ended)\b"
)
OLDER = re.compile(r'<a\b[^>]*href="([^"]+)"[^>]*>\s*Older entries\s*</a>')
SERVER_TIMING = re.compile(r"(?:^|,)\s*([\w-]+)[^,]*?;\s*dur=([\d.]+)")


@dataclass
class Measured:
    """Latencies of one page: client-side always, server-side when Server-Timing was sent."""

    label: str
    client_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)

    def add(self, seconds: float, answer: httpx.Response) -> None:
        self.client_ms.append(seconds * 1000)
        timing = server_time_ms(answer.headers.get("server-timing", ""))
        if timing is not None:
            self.server_ms.append(timing)


def server_time_ms(header: str) -> float | None:
    """``total;dur=`` (or ``app``) if sent, else the sum of every ``dur``; None without any."""
    metrics = {name: float(ms) for name, ms in SERVER_TIMING.findall(header)}
    if not metrics:
        return None
    for name in ("total", "app"):
        if name in metrics:
            return metrics[name]
    return sum(metrics.values())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def report(measured: Measured) -> bool:
    """Prints the page's line; whether its p50 met the target."""
    source = measured.server_ms if measured.server_ms else measured.client_ms
    kind = "server (Server-Timing)" if measured.server_ms else "client, 1 thread, loopback"
    p50 = percentile(source, 0.5)
    met = p50 < TARGET_P50_MS
    extra = ""
    if measured.server_ms:
        extra = f"  client p50 {percentile(measured.client_ms, 0.5):6.1f} ms"
    print(
        f"  {measured.label:<46} p50 {p50:6.1f} ms  p99 {percentile(source, 0.99):6.1f} ms  "
        f"[{kind}, {len(source)} requests]{extra}  "
        f"(target p50 < {TARGET_P50_MS:g} ms: {'met' if met else 'MISSED'})",
        flush=True,
    )
    return met


def measure(client: httpx.Client, label: str, count: int, url_of: Callable[[int], str]) -> Measured:
    measured = Measured(label)
    for item in range(count):
        started = time.perf_counter()
        answer = client.get(url_of(item))
        answer.read()
        seconds = time.perf_counter() - started
        assert answer.status_code == 200, f"{label}: {answer.status_code} {answer.text[:300]}"
        measured.add(seconds, answer)
    return measured


def make_long_run(url: str, project: Path, history: int) -> tuple[str, int]:
    """A real run whose ``for_each`` leaves at least ``history`` entries; (its id, the count)."""
    (project / "long.flow.yaml").write_text(LONG_FLOW)
    items = list(range(history // 2 + 1))  # two entries per iteration (step started, completed)
    with _http.engine_on(url, project) as engine:
        engine.deploy(str(project / "long.flow.yaml"))
        run_id = engine.start_flow("long-history", {"items": items})
        engine.work()
        assert engine.show(run_id)["status"] == "completed"
    entries = _http.count(url, f"SELECT count(*) FROM history WHERE run_id = '{run_id}'")
    assert entries >= history, f"the long run has {entries} history entries, not {history}"
    return str(run_id), entries


def timeline_pages(
    client: httpx.Client, base: str, run_id: str, pages: int, args: argparse.Namespace
) -> Measured:
    """The long run's page, then its "Older entries" links, ``pages`` pages in all (each fetched
    once and timed); every page bounded in entries and bytes, no two alike."""
    measured = Measured(f"GET /ui/runs/{{id}} timeline, {pages} pages")
    path = f"/ui/runs/{run_id}"
    seen: set[str] = set()
    for page in range(pages):
        started = time.perf_counter()
        answer = client.get(f"{base}{path}")
        body = answer.text
        measured.add(time.perf_counter() - started, answer)
        assert answer.status_code == 200, f"page {page}: {answer.status_code} {body[:300]}"
        entries = len(ENTRY_TYPES.findall(body))
        kib = len(answer.content) / 1024
        assert entries <= args.max_entries, f"page {page} shows {entries} timeline entries"
        assert kib <= args.max_kib, f"page {page} is {kib:.0f} KiB"
        older = OLDER.search(body)
        assert older is not None, f"page {page} of a {args.history:,}-entry timeline has no link"
        path = unescape(older.group(1))
        assert path not in seen, f"page {page} links back to {path}"
        seen.add(path)
        if page == 0:
            print(f"  long run: first page {kib:.0f} KiB, {entries} entry type names shown")
    return measured


def bench(root: Path, args: argparse.Namespace) -> bool:
    import httpx

    backend = _http.Backend("sqlite", root)
    project = _http.make_project(root)
    url = backend.new_store("ui")
    started = time.perf_counter()
    ids = _http.fill_runs(url, project, args.runs)
    print(f"  inserted {args.runs:,} runs by SQL in {time.perf_counter() - started:.1f} s")
    long_id, entries = make_long_run(url, project, args.history)
    print(f"  one run with {entries:,} history entries (a for_each of {entries // 2:,} items)")
    servers = _http.Servers(url, project, 1)
    base = servers.urls[0]
    rng = random.Random(11)
    met = True
    try:
        with httpx.Client(timeout=120) as client:
            first = client.get(f"{base}/ui/runs")  # the connection open, caches warm
            first.raise_for_status()
            completed = args.runs + 2  # the copies, the run they were copied from, the long run
            assert f"completed ({completed})" in first.text, "the page counts every run"
            label = f"({args.runs:,} runs)"
            pages: list[tuple[str, int, Callable[[int], str]]] = [
                (f"GET /ui/runs {label}", args.requests, lambda i: f"{base}/ui/runs"),
                (f"GET /ui/runs?status=completed&name=quick {label}", args.requests,
                 lambda i: f"{base}/ui/runs?status=completed&name=quick"),
                (f"GET /ui/runs/{{id}} {label}", args.requests,
                 lambda i: f"{base}/ui/runs/{ids[rng.randrange(len(ids))]}"),
                (f"GET /ui/runs/{{id}} ({entries:,} entries)", args.requests // 4,
                 lambda i: f"{base}/ui/runs/{long_id}"),
            ]  # fmt: skip
            for name, count, url_of in pages:
                met = report(measure(client, name, count, url_of)) and met
            met = report(timeline_pages(client, base, long_id, args.pages, args)) and met
    finally:
        servers.stop()
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000, help="runs in the store")
    parser.add_argument("--history", type=int, default=10_000, help="entries of the long run")
    parser.add_argument("--requests", type=int, default=400, help="requests per page")
    parser.add_argument("--pages", type=int, default=20, help="timeline pages followed")
    parser.add_argument("--max-entries", type=int, default=500, help="bound per timeline page")
    parser.add_argument("--max-kib", type=int, default=1024, help="bound per page, KiB")
    args = parser.parse_args()
    print(f"procflow web UI pages, one client thread; load average {os.getloadavg()[0]:.2f}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print("sqlite (one serve process):", flush=True)
    with tempfile.TemporaryDirectory(prefix="procflow-ui-bench-") as folder:
        met = bench(Path(folder), args)
    verdict = "every page met" if met else "a page MISSED"
    print(f"load average at the end {os.getloadavg()[0]:.2f}; {verdict} the p50 target")


if __name__ == "__main__":
    main()
