"""Benchmark: the HTTP API of ``procflow serve`` under 8 client threads.

One ``procflow serve`` process on SQLite (with its in-process worker, as deployed by default),
and on PostgreSQL two of them sharing the store, the client threads spread over both. Clients are
8 threads in this process, each with its own keep-alive ``httpx.Client``; every figure is the
requests answered per second over the phase's wall time (all threads start together), with p50
and p99 of the per-request latency, and the rate as a ratio to ``GET /health`` measured on the
same servers in turns with the phase (four slices of each, alternating: the machine's speed, and
the client's own cost, divide out, even as the speed drifts within seconds).

1. ``GET /health``: the baseline.
2. ``POST /events``, each event resuming one of N runs parked on ``wait_for`` with distinct
   correlation keys (N = 1,000, then 100,000: the runs are parked by ``Engine.start_flow`` in
   transactions of 1,000 before the phase, outside the timing; on PostgreSQL the store is then
   vacuumed and checkpointed, as a server with autovacuum on would keep it). Each answer's
   delivery report must name exactly one resumed run. Target: at least 40 % of ``/health``'s
   rate.
3. ``POST /flows/{name}/runs``: runs started per second (a one-step flow; the servers' workers
   run them meanwhile, as they would in production).
4. ``GET /runs?limit=50`` and ``GET /runs/{id}`` (ids drawn at random) on a store holding
   1,000,000 completed runs with 4 history entries each, made by SQL ``INSERT ... SELECT`` from
   one real run (the engine would take an hour to make them). Target: p50 under 10 ms of server
   time (the ``Server-Timing`` header every response carries: from the request reaching the
   application to its answer). The client's latency is printed too: with 8 client threads on a
   2-core machine it also counts waiting for a core (``/health`` itself shows it), so each
   request is also measured with one client (compared with ``/health`` from one client).

Before a phase's clock starts, each client thread sends 20 requests of the phase's kind (in an
event phase, events no run waits for): the servers' request threads open their engines and
prepare their statements then, not inside the measured seconds.

Under each figure, where the CPU of its measured seconds went (``bench/figures.py``, from
``/proc``): milliseconds a request for the clients, the servers and, on PostgreSQL, the database
(every ``postgres`` process of this machine), each also as a multiple of the clients', and the
share of the machine that stood idle. ``/health`` is bounded by the clients (a third of the
machine idle); an event phase by the CPU of all three.

Run: ``.venv/bin/python bench/http.py [--backends sqlite,postgresql] [--n 1000,100000]
[--runs 1000000] [--requests 2000] [--threads 8] [--no-worker] [--pg URL]``. PostgreSQL is the
server at ``--pg`` (default ``$PROCFLOW_BENCH_PG``, else
``postgresql://postgres@127.0.0.1:5432/postgres``); the benchmark creates its databases there
and drops them. The figures are wall-clock on a shared machine: other load shows in them (the
load average is printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx

# This file is bench/http.py, and Python puts its folder first on sys.path: `import http` (the
# standard library's, which httpx needs) would find this file. So the folder is taken off
# before httpx is imported (in main), and the sibling module shared with the other
# benchmarks is loaded by its path.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", _BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up while it is being made
    spec.loader.exec_module(module)
    return module


_throughput = _sibling("throughput")
_figures = _sibling("figures")
Figure, figure, merged, say = _figures.Figure, _figures.figure, _figures.merged, _figures.say
procflow_bin, worker_env = _throughput.procflow_bin, _throughput.worker_env

EVENT = "approvals.decided"
SECRET_KEY = "procflow-bench-secret-key-" + "k" * 24
PARK_GROUP = 1_000  # start_flow calls per transaction while parking
WARM_UP = 20  # requests per client thread before a phase's clock starts
SLICES = 4  # a phase and its /health floor, measured in turns (against_health)

MANIFEST = """\
connector: approvals
description: Approval decisions arriving from outside (events only, no actions).
events:
  decided:
    description: Someone decided on an approval request.
    payload:
      key: { type: string, required: true }
      approved: { type: boolean }
    correlate_on: [key]
"""
WAITING_FLOW = f"""\
flow: awaiting
inputs:
  k: {{ type: string, required: true }}
steps:
  - approval:
      wait_for: {EVENT}
      match: {{ key: "{{{{ k }}}}" }}
      timeout: 30d
  - after:
      set: {{ status: "{{{{ approval.status }}}}" }}
"""
QUICK_FLOW = """\
flow: quick
inputs:
  who: { type: string, required: true }
steps:
  - greet: { set: { text: "hello {{ who }}" } }
output:
  text: "{{ greet.text }}"
"""


def key_of(i: int) -> str:
    return f"approval-{i:07d}"


# --- stores -----------------------------------------------------------------------------------


@dataclass
class Backend:
    """Where the benchmark's stores live: SQLite files in a folder, or databases on a server."""

    name: str
    root: Path
    admin_url: str | None = None  # PostgreSQL: the server's maintenance database
    made: list[str] | None = None

    def new_store(self, label: str) -> str:
        from procflow.store.store import Store

        if self.name == "sqlite":
            url = f"sqlite:///{self.root / f'{label}.db'}"
        else:
            assert self.admin_url is not None
            database = f"procflow_bench_{label}_{uuid.uuid4().hex[:8]}"
            self._admin(f"CREATE DATABASE {database}")
            url = urlsplit(self.admin_url)._replace(path=f"/{database}").geturl()
            self.made = [*(self.made or []), database]
        store = Store(url)
        try:
            store.init()
        finally:
            store.close()
        return url

    def _admin(self, sql: str) -> None:
        import psycopg

        assert self.admin_url is not None
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.encode())

    def settle(self, url: str) -> None:
        """PostgreSQL: the store as a running server keeps it. This machine's server runs with
        autovacuum off, and parking 100,000 runs writes enough WAL to start a checkpoint: without
        this the event phase measured the dead rows of the parking and the checkpoint's
        full-page writes (the database's CPU per event was a third higher at N = 100,000)."""
        if self.name != "postgresql":
            return
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")

    def drop_all(self) -> None:
        for database in self.made or []:
            self._admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def environment(root: Path) -> dict[str, str]:
    env = {k: v for k, v in worker_env(root).items() if not k.startswith("PROCFLOW_")}
    env["PROCFLOW_SECRET_KEY"] = SECRET_KEY
    return env


def make_project(root: Path) -> Path:
    project = root / "project"
    connector = project / "connectors" / "approvals"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text(MANIFEST)
    (connector / "__init__.py").write_text('"""Events only: no actions to implement."""\n')
    (project / "awaiting.flow.yaml").write_text(WAITING_FLOW)
    (project / "quick.flow.yaml").write_text(QUICK_FLOW)
    return project


@contextmanager
def engine_on(url: str, project: Path) -> Iterator[Any]:
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=str(project), environ=environment(project.parent))
    try:
        yield engine
    finally:
        engine.close()


def park(url: str, project: Path, first: int, last: int) -> float:
    """Start runs ``first..last-1`` of the waiting flow and work until each waits; seconds."""
    started = time.perf_counter()
    with engine_on(url, project) as engine:
        for low in range(first, last, PARK_GROUP):
            with engine.store.tx():  # the start_flow calls join this transaction
                for i in range(low, min(last, low + PARK_GROUP)):
                    engine.start_flow("awaiting", {"k": key_of(i)})
        engine.work()
    return time.perf_counter() - started


def count(url: str, sql: str) -> int:
    from procflow.store.store import Store

    store = Store(url)
    try:
        return int(store.conn.execute(sql).fetchone()[0])
    finally:
        store.close()


def settled(url: str, expected: int) -> int:
    """The number of runs waiting, once it is ``expected`` (the servers' workers may still hold
    some of the runs just started)."""
    deadline = time.monotonic() + 600
    while (waiting := count(url, "SELECT count(*) FROM waits")) != expected:
        assert time.monotonic() < deadline, f"{waiting} runs wait, not {expected}"
        time.sleep(0.2)
    return waiting


def fill_runs(url: str, project: Path, n: int) -> list[str]:
    """``n`` completed runs (each with the template run's 4 history entries) inserted by SQL;
    returns their ids."""
    from procflow.store.store import Store

    with engine_on(url, project) as engine:
        engine.deploy(str(project / "quick.flow.yaml"))
        template = engine.start_flow("quick", {"who": "template"})
        engine.work()
    store = Store(url)
    try:
        conn = store.conn
        sqlite = store.dialect == "sqlite"
        series = (
            f"(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n}) "
            "SELECT i FROM c) AS s"
            if sqlite
            else f"generate_series(1, {n}) AS s(i)"
        )
        prefix = "printf('%012x', s.i)" if sqlite else "lpad(to_hex(s.i), 12, '0')"
        new_id = f"{prefix} || substr(t.{{id}}, 13)"
        with store.tx():
            for table, id_column, time_column in (
                ("runs", "id", "started_at"),
                ("history", "run_id", "at"),
            ):
                columns = _columns(conn, table, sqlite)
                chosen = [
                    new_id.format(id=id_column) if c == id_column
                    else f"t.{c} + s.i" if c == time_column
                    else f"t.{c}"
                    for c in columns
                ]  # fmt: skip
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(chosen)} "
                    f"FROM {series}, {table} t WHERE t.{id_column} = '{template}'"
                )
        conn.execute("ANALYZE")
    finally:
        store.close()
    rng = random.Random(7)
    return [f"{i:012x}{template[12:]}" for i in rng.sample(range(1, n + 1), min(n, 5_000))]


def _columns(conn: Any, table: str, sqlite: bool) -> list[str]:
    if sqlite:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()]
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "AND table_schema = current_schema() ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [row[0] for row in rows]


# --- servers ----------------------------------------------------------------------------------


class Servers:
    """``count`` ``procflow serve`` processes on one store."""

    def __init__(self, url: str, project: Path, count: int, flags: tuple[str, ...] = ()) -> None:
        env = environment(project.parent)
        command = [*procflow_bin(), "serve", "--port", "0", "--db", url, "--project", str(project)]
        self.database = url.startswith("postgresql")  # its CPU is counted (figures.py)
        self.processes = [
            subprocess.Popen(
                [*command, *flags],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for _ in range(count)
        ]
        self.urls = []
        for process in self.processes:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("serving on "), f"procflow serve said {line!r}"
            self.urls.append(line.removeprefix("serving on "))

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=120)
            if process.stdout is not None:
                process.stdout.close()


# --- the load ---------------------------------------------------------------------------------

Request = Callable[["httpx.Client", str, int], "httpx.Response"]  # (client, base URL, item)


def load(
    label: str,
    servers: Servers,
    threads: int,
    items: int,
    send: Request,
    warm: Request | None = None,
) -> Figure:
    """``items`` requests (item numbers 0..items-1) split over ``threads`` threads, thread t
    talking to server t mod len(servers); every answer must be a success. Before the clock
    starts, each thread sends :data:`WARM_UP` requests by ``warm`` (default: ``send``'s kind,
    items numbered past ``items``), so that the servers' request threads have opened their
    engines (a connection and the compiled definitions each) and prepared their statements:
    the phase measures a server that has been answering, as ``/health`` is measured."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    server_ms: list[list[float]] = [[] for _ in range(threads)]
    failures: list[str] = []
    warmed = threading.Barrier(threads + 1)  # every thread warmed up: the counters are read
    go = threading.Event()  # then the threads are let go

    import httpx

    def run(t: int) -> None:
        base = servers.urls[t % len(servers.urls)]
        with httpx.Client(timeout=120) as client:
            client.get(f"{base}/health")  # the connection is open before the clock starts
            try:
                for n in range(WARM_UP):
                    answer = (warm or send)(client, base, items + t * WARM_UP + n)
                    if not answer.is_success:
                        failures.append(f"warm-up: {answer.status_code} {answer.text[:200]}")
            except Exception as exc:  # reported below; the other threads must not wait for it
                failures.append(f"warm-up: {exc!r}")
            warmed.wait()
            go.wait()
            for item in range(t, items, threads):
                started = time.perf_counter()
                answer = send(client, base, item)
                latencies[t].append(time.perf_counter() - started)
                timing = answer.headers.get("server-timing", "app;dur=nan")
                server_ms[t].append(float(timing.partition("dur=")[2]))
                if not answer.is_success:
                    failures.append(f"{answer.status_code} {answer.text[:200]}")

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    warmed.wait()
    # Read before the threads are let go: once they run, this thread waits for the GIL at every
    # file it reads in /proc, and the clock would start late.
    meter = _figures.Meter([p.pid for p in servers.processes], servers.database)
    started = time.perf_counter()
    go.set()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - started
    split = meter.stop()
    assert not failures, f"{label}: {len(failures)} failed, e.g. {failures[0]}"
    return figure(label, seconds, [x for per in latencies for x in per],
                  [x for per in server_ms for x in per], split)  # fmt: skip


def against_health(
    label: str,
    servers: Servers,
    args: argparse.Namespace,
    items: int,
    sender: Callable[[int], Request],
    warm: Request | None = None,
) -> tuple[Figure, Figure]:
    """(the phase, ``GET /health`` on the same servers), measured in :data:`SLICES` alternating
    slices of each (``sender(first)`` sends items ``first``.. of a slice): the machine's speed
    drifts by a fifth within seconds here, and the ratio of the two is only worth something if
    both saw the same machine."""
    phase: list[Figure] = []
    floor: list[Figure] = []
    bounds = [items * k // SLICES for k in range(SLICES + 1)]
    for low, high in itertools.pairwise(bounds):
        floor.append(load("GET /health", servers, args.threads, args.requests // SLICES, health))
        phase.append(load(label, servers, args.threads, high - low, sender(low), warm))
    return merged(label, phase), merged("GET /health", floor)


def health(client: httpx.Client, base: str, item: int) -> httpx.Response:
    return client.get(f"{base}/health")


def unmatched_event(client: httpx.Client, base: str, item: int) -> httpx.Response:
    """An event no run waits for (stored, resuming nothing): the warm-up of an event phase."""
    data = {"key": f"warm-up-{item}", "approved": True}
    return client.post(f"{base}/events", json={"type": EVENT, "data": data})


def event_sender(first: int) -> Request:
    def send(client: httpx.Client, base: str, item: int) -> httpx.Response:
        data = {"key": key_of(first + item), "approved": True}
        answer = client.post(f"{base}/events", json={"type": EVENT, "data": data})
        if answer.is_success and len(answer.json()["resumed"]) != 1:
            raise AssertionError(f"event {first + item} resumed {answer.json()['resumed']}")
        return answer

    return send


def start_quick(client: httpx.Client, base: str, item: int) -> httpx.Response:
    return client.post(f"{base}/flows/quick/runs", json={"inputs": {"who": f"w{item}"}})


def run_getter(ids: list[str]) -> Request:
    def send(client: httpx.Client, base: str, item: int) -> httpx.Response:
        return client.get(f"{base}/runs/{ids[item % len(ids)]}")

    return send


def runs_page(client: httpx.Client, base: str, item: int) -> httpx.Response:
    return client.get(f"{base}/runs", params={"limit": "50"})


# --- the phases -------------------------------------------------------------------------------


def bench_backend(backend: Backend, args: argparse.Namespace) -> list[tuple[Figure, Figure]]:
    """(figure, the /health figure it is compared with) of every phase on one backend."""
    project = make_project(backend.root)
    servers_count = 1 if backend.name == "sqlite" else 2
    out: list[tuple[Figure, Figure]] = []
    url = backend.new_store("events")
    with engine_on(url, project) as engine:
        engine.deploy(str(project / "awaiting.flow.yaml"))
        engine.deploy(str(project / "quick.flow.yaml"))
    flags = ("--no-worker",) if args.no_worker else ()
    servers = Servers(url, project, servers_count, flags)
    try:
        parked = resumed = 0
        for n in args.n:
            top = n + resumed  # the runs resumed before are no longer waiting
            seconds = park(url, project, parked, top)
            waiting = settled(url, n)
            backend.settle(url)
            print(f"  parked {top - parked:,} runs in {seconds:.1f} s; {waiting:,} waiting")
            sent = min(args.requests, waiting)
            first = random.Random(n).randrange(parked, top - sent + 1)  # only runs still waiting
            events, base = against_health(
                f"POST /events (N = {waiting:,})", servers, args, sent,
                lambda low, first=first: event_sender(first + low), warm=unmatched_event,
            )  # fmt: skip
            out.append((events, base))
            say(base, base)
            say(events, base, target=0.4)
            parked, resumed = top, resumed + sent
        starts, base = against_health("POST /flows/{name}/runs", servers, args, args.requests,
                                      lambda low: start_quick)  # fmt: skip
        out.append((starts, base))
        say(base, base)
        say(starts, base)
    finally:
        servers.stop()
    many = backend.new_store("runs")
    started = time.perf_counter()
    ids = fill_runs(many, project, args.runs)
    print(f"  inserted {args.runs:,} runs by SQL in {time.perf_counter() - started:.1f} s")
    servers = Servers(many, project, servers_count, flags)
    try:
        base = floor(servers, args)
        label = f"({args.runs:,} runs)"
        alone = load("GET /health, 1 client", servers, 1, args.requests // 4, health)
        for name, request in ((f"GET /runs?limit=50 {label}", runs_page),
                              (f"GET /runs/{{id}} {label}", run_getter(ids))):  # fmt: skip
            figure = load(name, servers, args.threads, args.requests, request)
            out.append((figure, base))
            say(figure, base, p50_under_ms=10)
            # One client at a time: the latency of the request itself, without queueing.
            single = load(f"{name}, 1 client", servers, 1, args.requests // 4, request)
            say(single, alone, p50_under_ms=10)
    finally:
        servers.stop()
    return out


def floor(servers: Servers, args: argparse.Namespace) -> Figure:
    """``GET /health`` on ``servers`` now, printed: the figure the next phase is compared with.
    Measured again before each phase, next to it in time, so that a drift of the shared
    machine's speed over the run (it was up to 30 %) moves both alike."""
    base = load("GET /health", servers, args.threads, args.requests, health)
    say(base, base)
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--n", default="1000,100000", help="waiting runs for POST /events")
    parser.add_argument("--runs", type=int, default=1_000_000, help="runs for the GET phases")
    parser.add_argument("--requests", type=int, default=2_000, help="requests per phase")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--no-worker", action="store_true", help="serve --no-worker (events: the "
                        "resumed runs are left for no one)")  # fmt: skip
    parser.add_argument("--pg", default=os.environ.get("PROCFLOW_BENCH_PG")
                        or "postgresql://postgres@127.0.0.1:5432/postgres")  # fmt: skip
    args = parser.parse_args()
    args.n = sorted(int(x) for x in args.n.split(","))
    print(f"procflow serve under {args.threads} client threads; load average "
          f"{os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")  # fmt: skip
    for name in args.backends.split(","):
        servers = "one serve process" if name == "sqlite" else "two serve processes"
        print(f"{name} ({servers}):", flush=True)
        with tempfile.TemporaryDirectory(prefix="procflow-http-bench-") as folder:
            backend = Backend(name, Path(folder), args.pg if name == "postgresql" else None)
            try:
                bench_backend(backend, args)
            finally:
                backend.drop_all()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
