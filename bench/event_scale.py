"""Benchmark: delivering an event to one of N runs parked on ``wait_for``, for growing N.

The flow has two steps: ``wait_for: approvals.decided`` with ``match: { key: "{{ k }}" }`` and
``timeout: 30d``, then a ``set``. ``k`` is the run's input, distinct per run. The event type is
declared by an events-only project connector (``connectors/approvals/manifest.yaml`` in a
temporary project, ``correlate_on: [key]``). For each N (1,000, 10,000 and 100,000 by default;
1,000,000 with ``--million``) a fresh virtual-clock SQLite store (WAL, ``synchronous=NORMAL``)
gets the flow, and:

1. **start + park** (one child process): N ``Engine.start_flow`` calls in a loop, each its own
   transaction (no bulk insert; ``--group G`` puts G calls in one transaction, which
   ``--million`` uses for 1M at 1,000 unless ``--group`` is given), then ``engine.work()`` until
   every run waits on its event (N wait rows, N timeout timers 30 days out);
2. **idle worker**: a ``procflow worker --until-idle`` process over the N waiting runs: nothing
   is due, it must find nothing and exit; its peak RSS must not grow with N (an empty store is
   measured too);
3. **deliver** (a fresh child process): 10 warm-up deliveries (the first, cold, is shown apart),
   then 200 samples, each to a random waiting run (seeded, without repeats):
   ``engine.send_event("approvals.decided", {"key": k, ...})`` timed from call to return (the
   delivery commits inside the call: checked from a second connection, outside the timing,
   that the run's token is ``ready``), then ``engine.work()`` timed to its return (the run has
   completed: checked). Reported p50/p99/max of both and of their sum, and apart the calls in
   which SQLite ran its WAL auto-checkpoint (see :class:`Sampler`). The process's peak RSS
   (``VmHWM`` from ``/proc/self/status``) is read right before sampling and at the end. One
   further delivery + ``work()`` is traced (``set_trace_callback``) and every statement run is
   put through ``EXPLAIN QUERY PLAN``: any plan step that scans a table is printed;
4. the database size (main file + WAL) after parking, and the run states after delivering.

Child processes run with byte-code caching on (as ``bench/throughput.py``). Their peak RSS is
also taken from ``os.wait4`` (``ru_maxrss``) by a small wrapper process that starts each of them:
a child started straight from this process would count this process's RSS as its own (see
:data:`WRAPPER`).
Target: delivery p50 < 5 ms on SQLite, the same at every N; peak RSS flat in N. The figures are
wall-clock: other load on the machine shows in them (the load average is printed).

Run: ``.venv/bin/python bench/event_scale.py [--n 1000,10000,100000] [--million] [--samples 200]
[--budget 270] [--profile]``. Default sizes whose projected time (from the previous size's
measured rates) would take the run past ``--budget`` seconds are skipped and named; sizes given
by ``--n`` or ``--million`` always run, if the disk and memory allow it (checked for 1M).
``--profile`` repeats the samples at the largest N under cProfile (not in the figures) and prints
the top entries by own and cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import procflow_bin, worker_env

EVENT = "approvals.decided"
FLOW_NAME = "event-bench"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
MILLION = 1_000_000
WARMUP = 10

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

FLOW = f"""\
flow: {FLOW_NAME}
inputs:
  k: {{ type: string, required: true }}
steps:
  - approval:
      wait_for: {EVENT}
      match: {{ key: "{{{{ k }}}}" }}
      timeout: 30d
  - after:
      set: {{ done: true, status: "{{{{ approval.status }}}}" }}
"""


def key_of(i: int) -> str:
    return f"approval-{i:07d}"


def make_project(root: Path) -> Path:
    project = root / "project"
    connector = project / "connectors" / "approvals"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text(MANIFEST)
    (connector / "__init__.py").write_text('"""Events only: no actions to implement."""\n')
    (project / "approve.flow.yaml").write_text(FLOW)
    return project


def new_store(root: Path, name: str, project: Path) -> str:
    from procflow.runtime.engine import Engine

    url = f"sqlite:///{root / f'{name}.db'}"
    engine = Engine.virtual(url, project_dir=str(project))
    try:
        engine.deploy(str(project / "approve.flow.yaml"))
    finally:
        engine.close()
    return url


def db_bytes(url: str) -> int:
    path = url.removeprefix("sqlite:///")
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


def counts(url: str) -> dict[str, int]:
    """Runs by status, plus the wait rows, timers, events and deliveries stored."""
    from procflow.store.store import Store

    store = Store(url)
    try:
        conn = store.conn
        rows = conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        out = {str(status): int(n) for status, n in rows}
        for table in ("waits", "timers", "events", "deliveries"):
            out[table] = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        return out
    finally:
        store.close()


def vm_hwm_mb() -> float:
    """This process's peak resident set so far (``VmHWM``), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- child phases (each in a fresh interpreter, so their peak RSS is their own) -------------


def phase_park(url: str, project: str, n: int, group: int) -> dict[str, Any]:
    from procflow.runtime.engine import Engine

    engine = Engine(url, project_dir=project)
    try:
        engine.latest_flow(FLOW_NAME)  # compiled and cached: not in the timing
        started = time.perf_counter()
        for first in range(0, n, group):
            with engine.store.tx():  # group > 1: the start_flow calls join this transaction
                for i in range(first, min(n, first + group)):
                    engine.start_flow(FLOW_NAME, {"k": key_of(i)})
        start_s = time.perf_counter() - started
        started = time.perf_counter()
        transitions = engine.work()
        park_s = time.perf_counter() - started
    finally:
        engine.close()
    return {"start_s": start_s, "park_s": park_s, "transitions": transitions, "rss": vm_hwm_mb()}


@dataclass
class Sampler:
    """Deliveries to distinct random waiting runs, each followed by ``engine.work()``.

    A commit can run SQLite's WAL auto-checkpoint (every ~1,000 WAL pages: copies them into the
    database file and syncs it). The database file is written by nothing else in WAL mode, so a
    change of its mtime across a call (looked at outside the timing) marks a call that ran one.
    """

    engine: Any
    reader: Any  # a second connection: sees only what has been committed
    db_path: str
    picks: list[int]
    send_ms: list[float] = field(default_factory=list)
    work_ms: list[float] = field(default_factory=list)
    send_ckpt: list[bool] = field(default_factory=list)
    work_ckpt: list[bool] = field(default_factory=list)
    transitions: list[int] = field(default_factory=list)

    def one(self, record: bool = True) -> None:
        key = key_of(self.picks.pop())
        m0 = os.stat(self.db_path).st_mtime_ns
        t0 = time.perf_counter()
        report = self.engine.send_event(EVENT, {"key": key, "approved": True})
        t1 = time.perf_counter()
        m1 = os.stat(self.db_path).st_mtime_ns
        resumed = report["resumed"]
        if report["duplicate"] or len(resumed) != 1:
            sys.exit(f"FAILED: {key}: expected exactly one run resumed: {report}")
        run_id = resumed[0]
        states = [t.state for t in self.reader.read().tokens(run_id)]
        if states != ["ready"]:
            sys.exit(f"FAILED: {key}: token not committed ready after send_event: {states}")
        t2 = time.perf_counter()
        transitions = self.engine.work()
        t3 = time.perf_counter()
        m2 = os.stat(self.db_path).st_mtime_ns
        run = self.reader.read().run(run_id)
        if run is None or run.status != "completed":
            sys.exit(f"FAILED: {key}: run {run_id} not completed after work(): {run}")
        if record:
            self.send_ms.append((t1 - t0) * 1000)
            self.work_ms.append((t3 - t2) * 1000)
            self.send_ckpt.append(m1 != m0)
            self.work_ckpt.append(m2 != m1)
            self.transitions.append(transitions)


def explain(reader: Any, statements: list[str]) -> tuple[int, list[str]]:
    """(distinct statements, plan steps that scan a table) for the traced statements."""
    seen: dict[str, str] = {}
    for sql in statements:
        if not re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", sql, re.IGNORECASE):
            continue
        shape = re.sub(r"'[^']*'|\b\d+\b", "?", sql)
        seen.setdefault(shape, sql)
    scans = []
    for shape, sql in seen.items():
        for row in reader.conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall():
            detail = str(row[-1])
            if detail.startswith("SCAN ") and not detail.startswith("SCAN CONSTANT ROW"):
                table = detail.split()[1]
                rows = reader.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                scans.append(f"{detail} [{rows:,} rows]  <-  {shape[:150]}")
    return len(seen), scans


def phase_deliver(
    url: str, project: str, n: int, samples: int, seed: int, profile: bool, top: int
) -> dict[str, Any]:
    from procflow.runtime.engine import Engine
    from procflow.store.store import Store

    need = 1 + WARMUP + samples + 1 + (samples if profile else 0)
    if need > n:
        sys.exit(f"FAILED: N={n} is too small for {need} deliveries")
    engine = Engine(url, project_dir=project)
    reader = Store(url)
    try:
        picks = random.Random(seed).sample(range(n), need)
        sampler = Sampler(engine, reader, url.removeprefix("sqlite:///"), picks)
        t0 = time.perf_counter()
        sampler.one(record=False)  # cold: connector lookup, flow compiled, statements prepared
        cold_ms = (time.perf_counter() - t0) * 1000
        for _ in range(WARMUP):
            sampler.one(record=False)
        rss_before = vm_hwm_mb()
        for _ in range(samples):
            sampler.one()
        rss_after = vm_hwm_mb()
        traced: list[str] = []
        engine.store.conn.set_trace_callback(traced.append)
        sampler.one(record=False)
        engine.store.conn.set_trace_callback(None)
        distinct, scans = explain(reader, traced)
        profile_text = ""
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(samples):
                sampler.one(record=False)
            profiler.disable()
            out = io.StringIO()
            for key in ("tottime", "cumulative"):
                out.write(f"--- N={n:,}: {samples} x (send_event + work), top {top} by {key} ---\n")
                pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
            profile_text = out.getvalue()
    finally:
        reader.close()
        engine.close()
    return {
        "cold_ms": cold_ms,
        "send_ms": sampler.send_ms,
        "work_ms": sampler.work_ms,
        "send_ckpt": sampler.send_ckpt,
        "work_ckpt": sampler.work_ckpt,
        "transitions": sorted(set(sampler.transitions)),
        "rss_before": rss_before,
        "rss_after": rss_after,
        "statements": len(traced),
        "distinct": distinct,
        "scans": scans,
        "delivered": need,
        "profile": profile_text,
    }


# --- the driver -----------------------------------------------------------------------------


@dataclass
class Child:
    wall: float  # the command's own, timed by the wrapper
    rss_mb: float  # ru_maxrss from wait4, taken by the wrapper
    out: dict[str, Any] | None


# A child's ru_maxrss includes the high-water mark of the process that spawned it (exec records
# the old address space's peak: with Python's vfork/posix_spawn that is the spawner's), so a
# child started straight from this process would report at least this process's RSS. Each child
# is started by this lean wrapper (about 10 MB) instead, which prints the child's wall time and
# ru_maxrss after its output.
WRAPPER = """\
import os, sys, time
t = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
t = time.perf_counter() - t
print(f"\\nCHILD {t} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}", flush=True)
"""


def run_child(cmd: list[str], env: dict[str, str], parse: bool) -> Child:
    """Run ``cmd`` to its end (through :data:`WRAPPER`); its wall time, its own peak RSS and, if
    ``parse``, the JSON object it printed last on stdout."""
    with tempfile.TemporaryFile() as err:
        wrapped = [sys.executable, "-c", WRAPPER, *cmd]
        proc = subprocess.run(wrapped, stdout=subprocess.PIPE, stderr=err, env=env, check=False)
        lines = [x for x in proc.stdout.decode(errors="replace").splitlines() if x.strip()]
        tail = lines[-1].split() if lines else []
        if proc.returncode != 0 or len(tail) != 4 or tail[0] != "CHILD" or tail[3] != "0":
            err.seek(0)
            text = (proc.stdout + err.read()).decode(errors="replace")[-3000:]
            sys.exit(f"FAILED: {' '.join(cmd)}:\n{text}")
    out = json.loads(lines[-2]) if parse else None
    return Child(float(tail[1]), int(tail[2]) / 1024, out)


def mem_available_mb() -> float:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Row:
    n: int
    group: int
    start_s: float
    park_s: float
    park_rss: float
    idle: Child
    db_mb: float
    deliver: dict[str, Any]
    deliver_rss_wait4: float
    final: dict[str, int]
    total_s: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", help="run counts, e.g. 1000,10000 (default 1k,10k,100k)")
    parser.add_argument("--million", action="store_true", help="also N = 1,000,000")
    parser.add_argument("--samples", type=int, default=200, help="timed deliveries per N (200)")
    parser.add_argument("--group", type=int, help="start_flow calls per transaction (1)")
    parser.add_argument("--budget", type=float, default=270.0, help="seconds for default sizes")
    parser.add_argument("--seed", type=int, default=5, help="seed of the random picks")
    parser.add_argument("--profile", action="store_true", help="cProfile at the largest N")
    parser.add_argument("--top", type=int, default=25, help="profile entries to print")
    parser.add_argument("--phase", choices=("park", "deliver"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--project", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "park":
        out = phase_park(args.url, args.project, int(args.n), args.group or 1)
        print(json.dumps(out))
        return
    if args.phase == "deliver":
        out = phase_deliver(
            args.url, args.project, int(args.n), args.samples, args.seed, args.profile, args.top
        )
        print(json.dumps(out))
        return

    explicit = {int(x) for x in args.n.split(",")} if args.n else set()
    sizes = sorted(explicit or set(DEFAULT_SIZES))
    if args.million:
        explicit.add(MILLION)
        sizes = sorted({*sizes, MILLION})
    bench_started = time.perf_counter()
    ran: list[Row] = []
    skipped = [] if args.million else [f"N={MILLION:,}: not run (pass --million)"]
    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory(prefix="procflow-events-") as tmp:
        root = Path(tmp)
        project = make_project(root)
        env = worker_env(root)

        def idle_worker(url: str) -> Child:
            cmd = [*procflow_bin(), "worker", "--until-idle", "--db", url]
            return run_child([*cmd, "--project", str(project)], env, parse=False)

        true = shutil.which("true")
        floor = run_child([true], env, parse=False).rss_mb if true else float("nan")
        empty = new_store(root, "empty", project)
        idle_worker(empty)  # warms the byte-code cache
        idle_empty = idle_worker(empty)
        print(
            f"idle worker on an empty store: {idle_empty.wall:.2f} s, "
            f"peak RSS {idle_empty.rss_mb:.1f} MB (RSS floor of the spawning wrapper: "
            f"{floor:.1f} MB)",
            flush=True,
        )
        for n in sizes:
            group = args.group or (1000 if n == MILLION and args.million else 1)
            projected, per_run_bytes = 0.0, 1200.0  # bytes per run: an estimate until measured
            if ran:  # project this size from the last one: fixed cost + per-run cost x N
                last = ran[-1]
                fixed = last.total_s - last.start_s - last.park_s
                start = last.start_s / last.n * n * (0.35 if group > last.group else 1.0)
                projected = fixed + 1.3 * (start + last.park_s / last.n * n)
                per_run_bytes = last.db_mb * 1024 * 1024 / last.n
            need_disk = per_run_bytes * n * 1.5 / 1024 / 1024
            elapsed = time.perf_counter() - bench_started
            if n not in explicit and elapsed + projected > args.budget:
                skipped.append(
                    f"N={n:,}: skipped, projected {projected:.0f} s would pass the "
                    f"{args.budget:.0f} s budget ({elapsed:.0f} s used)"
                )
                print(skipped[-1], flush=True)
                continue
            free_mb = shutil.disk_usage(root).free / 1024 / 1024
            if n == MILLION and (free_mb < need_disk + 1024 or mem_available_mb() < 1024):
                skipped.append(
                    f"N={n:,}: skipped, the machine does not allow it (needs ~{need_disk:,.0f} "
                    f"MB of disk, {free_mb:,.0f} MB free; {mem_available_mb():,.0f} MB memory "
                    "available, 1,024 MB wanted)"
                )
                print(skipped[-1], flush=True)
                continue
            if projected:
                print(
                    f"N={n:,}: projected ~{projected:.0f} s, ~{need_disk / 1.5:,.0f} MB "
                    f"({per_run_bytes:,.0f} B/run); {free_mb:,.0f} MB disk free",
                    flush=True,
                )
            size_started = time.perf_counter()
            url = new_store(root, f"events-{n}", project)
            child = [*me, "--url", url, "--project", str(project), "--n", str(n)]
            park = run_child([*child, "--phase", "park", "--group", str(group)], env, parse=True)
            assert park.out is not None
            parked = counts(url)
            if parked.get("waiting", 0) != n or parked["waits"] != n or parked["timers"] != n:
                sys.exit(f"FAILED: expected {n} waiting runs, waits and timers, got {parked}")
            size_mb = db_bytes(url) / 1024 / 1024
            idle = idle_worker(url)
            if counts(url) != parked:
                sys.exit(f"FAILED: the idle worker changed something: {parked} -> {counts(url)}")
            phase = [*child, "--phase", "deliver", "--samples", str(args.samples)]
            phase += ["--seed", str(args.seed)]
            if args.profile and n == sizes[-1]:
                phase += ["--profile", "--top", str(args.top)]
            dlv = run_child(phase, env, parse=True)
            assert dlv.out is not None
            final = counts(url)
            done = dlv.out["delivered"]
            if final.get("completed") != done or final.get("waiting") != n - done:
                sys.exit(f"FAILED: expected {done} completed, {n - done} waiting: {final}")
            row = Row(
                n, group, park.out["start_s"], park.out["park_s"], park.out["rss"], idle,
                size_mb, dlv.out, dlv.rss_mb, final, time.perf_counter() - size_started,
            )  # fmt: skip
            ran.append(row)
            send, work = dlv.out["send_ms"], dlv.out["work_ms"]
            print(
                f"N={n:,}: started {n / row.start_s:,.0f}/s ({row.start_s:.1f} s), parked in "
                f"{row.park_s:.1f} s, idle worker {idle.wall:.2f} s, send_event p50 "
                f"{statistics.median(send):.2f} ms, work p50 {statistics.median(work):.2f} ms "
                f"({row.total_s:.0f} s for this N)",
                flush=True,
            )
            if dlv.out["profile"]:
                print(dlv.out["profile"])
    report(ran, skipped, idle_empty, args.samples, time.perf_counter() - bench_started)


def report(
    ran: list[Row], skipped: list[str], idle_empty: Child, samples: int, total: float
) -> None:
    print()
    print(
        f"flow [wait_for {EVENT} match key, timeout 30d; set] x N, virtual-clock SQLite "
        f"(WAL, synchronous=NORMAL); {samples} deliveries per N to distinct random waiting runs"
    )
    print(
        "runs started by Engine.start_flow in a loop ("
        + ", ".join(
            f"N={r.n:,}: " + ("own transaction each" if r.group == 1 else f"{r.group}/transaction")
            for r in ran
        )
        + "; no bulk insert), then parked by engine.work()"
    )
    head = (
        f"{'N':>9}{'start/s':>9}{'park s':>8}{'park/s':>8}{'DB MB':>8}{'B/run':>7}"
        f"{'send p50':>9}{'p99':>7}{'max':>7}{'work p50':>9}{'p99':>7}"
        f"{'sum p50':>8}{'p99':>7}{'cold':>7}{'dlvRSS':>8}{'idleRSS':>8}{'parkRSS':>8}"
    )
    print("latencies in ms (send = send_event call to return, delivery committed; work = the")
    print("engine.work() that completes the run; sum = both); peak RSS in MB")
    print(head)
    print("-" * len(head))
    for r in ran:
        send, work = r.deliver["send_ms"], r.deliver["work_ms"]
        both = [a + b for a, b in zip(send, work, strict=True)]
        print(
            f"{r.n:>9,}{r.n / r.start_s:>9,.0f}{r.park_s:>8.1f}{r.n / r.park_s:>8,.0f}"
            f"{r.db_mb:>8.1f}{r.db_mb * 1048576 / r.n:>7,.0f}"
            f"{statistics.median(send):>9.2f}{pct(send, 0.99):>7.2f}{max(send):>7.2f}"
            f"{statistics.median(work):>9.2f}{pct(work, 0.99):>7.2f}"
            f"{statistics.median(both):>8.2f}{pct(both, 0.99):>7.2f}{r.deliver['cold_ms']:>7.1f}"
            f"{r.deliver['rss_after']:>8.1f}{r.idle.rss_mb:>8.1f}{r.park_rss:>8.1f}"
        )
    print(
        "WAL auto-checkpoints inside the timed calls (the call wrote the database file), and the "
        "latencies of the calls without one (ms):"
    )
    head2 = (
        f"{'N':>9}{'send ckpt':>10}{'p50 w/o':>8}{'p99 w/o':>8}{'max w/o':>8}"
        f"{'work ckpt':>10}{'p50 w/o':>8}{'p99 w/o':>8}{'max w/o':>8}{'ckpt call p50':>14}"
    )
    print(head2)
    print("-" * len(head2))
    for r in ran:
        d = r.deliver
        send = [v for v, c in zip(d["send_ms"], d["send_ckpt"], strict=True) if not c]
        work = [v for v, c in zip(d["work_ms"], d["work_ckpt"], strict=True) if not c]
        ckpt = [v for v, c in zip(d["send_ms"], d["send_ckpt"], strict=True) if c] + [
            v for v, c in zip(d["work_ms"], d["work_ckpt"], strict=True) if c
        ]
        print(
            f"{r.n:>9,}{sum(d['send_ckpt']):>10}{statistics.median(send):>8.2f}"
            f"{pct(send, 0.99):>8.2f}{max(send):>8.2f}{sum(d['work_ckpt']):>10}"
            f"{statistics.median(work):>8.2f}{pct(work, 0.99):>8.2f}{max(work):>8.2f}"
            f"{statistics.median(ckpt) if ckpt else float('nan'):>14.2f}"
        )
    print(
        "sizes run: "
        + (", ".join(f"{r.n:,}" for r in ran) or "none")
        + ("; " + "; ".join(skipped) if skipped else "")
    )
    if not ran:
        return
    print(
        "delivering process peak RSS (VmHWM) before sampling -> after: "
        + ", ".join(
            f"N={r.n:,} {r.deliver['rss_before']:.1f} -> {r.deliver['rss_after']:.1f}"
            f" (wrapper's wait4 {r.deliver_rss_wait4:.1f})"
            for r in ran
        )
    )
    print(
        f"idle worker peak RSS: empty store {idle_empty.rss_mb:.1f} MB, "
        + ", ".join(f"N={r.n:,} {r.idle.rss_mb:.1f} MB ({r.idle.wall:.2f} s)" for r in ran)
    )
    print(
        "work() transitions per delivery: "
        + ", ".join(f"N={r.n:,} {r.deliver['transitions']}" for r in ran)
        + "; statements per traced delivery+work: "
        + ", ".join(f"N={r.n:,} {r.deliver['statements']}" for r in ran)
    )
    scans = {s for r in ran for s in r.deliver["scans"]}
    if scans:
        print("plan steps that scan (EXPLAIN QUERY PLAN of the traced statements):")
        for s in sorted(scans):
            print(f"  {s}")
    else:
        print(
            f"EXPLAIN QUERY PLAN: none of the {ran[-1].deliver['distinct']} distinct statements "
            "of a delivery + work() scans a table (all SEARCH by index or primary key)"
        )
    p50s = [statistics.median(r.deliver["send_ms"]) for r in ran]
    dlv_rss = [r.deliver["rss_after"] for r in ran]
    idle_rss = [r.idle.rss_mb for r in ran]
    print(
        f"target send_event p50 < 5 ms at every N: {'met' if max(p50s) < 5 else 'NOT met'} "
        f"(p50 {min(p50s):.2f}-{max(p50s):.2f} ms); RSS spread over N: delivering process "
        f"{max(dlv_rss) - min(dlv_rss):.1f} MB, idle worker {max(idle_rss) - min(idle_rss):.1f} MB"
    )
    print("final states: " + "; ".join(f"N={r.n:,} {r.final}" for r in ran))
    print(f"total {total:.0f} s (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
