"""Benchmark: N parent runs that each call a child flow of 5 action steps, against N flat runs.

A temporary project holds a connector doing nothing (``connectors/bench/``: its action returns
its argument) and three flows:

- ``bench-child``: 5 action steps (``s1`` … ``s5``), its output the last one's result;
- ``bench-parent``: its own two action steps around a ``call`` of ``bench-child``
  (``prepare``, ``child``, ``finish``);
- ``bench-flat``: the same 7 action steps in one flow (``prepare``, ``s1`` … ``s5``, ``finish``).

A case starts N runs of one flow (not timed: 500 starts to a transaction), then one worker
works until idle on the real clock: ``procflow worker --until-idle`` as a subprocess (its
start-up, measured apart on an idle store, is taken out of the figure), or ``engine.work`` in
this process with ``--in-process``. Checked: every run completed (parents and children), each
parent with its child's output. The two cases alternate, on a fresh store each, ``--repeat``
times (3); medians and the ratio composed/flat of each round are reported.

Then the cost of a call, in this process on SQLite with a small N (200) of each: committed
transitions and SQL statements per run (every connection's statements traced), composed less
flat.

Target (issue 28): composed runs finish at >= 60 % of the flat runs' rate (runs/s), on SQLite
and PostgreSQL; a call costs about two transitions (the step that starts the child, the one
that resumes on its end).
Run: ``.venv/bin/python bench/calls.py [--n 1000] [--repeat 3] [--db sqlite]
[--db postgresql://postgres@127.0.0.1:5432/procflow_bench_calls] [--in-process]
[--profile composed|flat]``. ``--db`` may be given several times; a ``postgresql://`` URL names
a database that is emptied (or created) first. Without it: SQLite, then the database
``procflow_bench_calls`` on the PostgreSQL at ``PROCFLOW_BENCH_PG`` (default
127.0.0.1:5432). ``--profile`` works one case in-process under cProfile (on the first ``--db``)
and prints the top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import procflow_bin, worker_env

DB_NAME = "procflow_bench_calls"
BENCH_KEY = "procflow-bench-secret-key-" + "k" * 24  # PostgreSQL stores need a shared key
CHILD_STEPS = 5
PARENT_STEPS = 2  # the parent's own action steps, around its call
START_GROUP = 500

MANIFEST = """\
connector: bench
description: An action that does nothing, for benchmarks.
actions:
  echo:
    args:
      n: { type: integer, required: true }
    result:
      n: { type: integer }
"""

CONNECTOR = '''\
"""Returns its argument."""


def echo(ctx, n):
    return {"n": n}
'''


def _echo(name: str, source: str) -> str:
    return f'  - {name}: {{ bench.echo: {{ n: "{{{{ {source} }}}}" }} }}\n'


def _chain(first_source: str) -> str:
    out, source = [], first_source
    for i in range(1, CHILD_STEPS + 1):
        out.append(_echo(f"s{i}", source))
        source = f"s{i}.n + 1"
    return "".join(out)


HEAD = "inputs:\n  n: { type: integer, required: true }\nsteps:\n"
LAST = f"s{CHILD_STEPS}.n + 1"
FLOWS = {
    "bench-child": f'flow: bench-child\n{HEAD}{_chain("n")}output: {{ n: "{{{{ {LAST} }}}}" }}\n',
    "bench-parent": (
        f"flow: bench-parent\n{HEAD}{_echo('prepare', 'n')}"
        '  - child:\n      call: bench-child\n      inputs: { n: "{{ prepare.n + 1 }}" }\n'
        f"{_echo('finish', 'child.output.n')}"
        'output: { n: "{{ finish.n }}" }\n'
    ),
    "bench-flat": (
        f"flow: bench-flat\n{HEAD}{_echo('prepare', 'n')}{_chain('prepare.n + 1')}"
        f"{_echo('finish', LAST)}"
        'output: { n: "{{ finish.n }}" }\n'
    ),
}
CASES = {"flat": "bench-flat", "composed": "bench-parent"}
EXPECTED_N = 1 + CHILD_STEPS  # what each run's output holds for input n = 0


def make_project(root: Path) -> Path:
    project = root / "project"
    connector = project / "connectors" / "bench"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text(MANIFEST)
    (connector / "__init__.py").write_text(CONNECTOR)
    for name, text in FLOWS.items():
        (project / f"{name}.flow.yaml").write_text(text)
    return project


# --- stores -------------------------------------------------------------------------------------


def fresh_store(db: str, root: Path, tag: str) -> str:
    """A new empty store: a SQLite file of ``root``, or the PostgreSQL database ``db`` emptied
    (created when missing)."""
    from procflow.store.store import Store

    if db == "sqlite":
        url = f"sqlite:///{root / f'{tag}.db'}"
    else:
        url = db
        _empty_database(url)
    store = Store(url)
    store.init()
    store.close()
    return url


def _empty_database(url: str) -> None:
    import psycopg

    base, _, name = url.rpartition("/")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
    except psycopg.OperationalError:  # no such database yet
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')


def close_pool(url: str) -> None:
    """procflow keeps a process-wide connection pool per PostgreSQL URL: closed before the
    database is emptied for the next case."""
    from procflow.store import pg

    found = pg._pools.pop(url, None)
    if found is not None:
        found.close()


def engine_on(url: str, project: Path) -> Any:
    from procflow.runtime.engine import Engine

    return Engine(url, project_dir=str(project))


def prepare(url: str, project: Path, flow: str, n: int) -> None:
    """Deploy the project and start ``n`` runs of ``flow`` (not worked)."""
    engine = engine_on(url, project)
    try:
        for name in FLOWS:  # the child first: a call names a deployed flow
            engine.deploy(str(project / f"{name}.flow.yaml"))
        for first in range(0, n, START_GROUP):
            with engine.store.tx():  # the starts join this transaction
                for _ in range(first, min(first + START_GROUP, n)):
                    engine.start_flow(flow, {"n": 0})
    finally:
        engine.close()
        close_pool(url)


def check(url: str, flow: str, n: int) -> None:
    """Every run completed, each with the whole chain's output; a parent has one child each."""
    from procflow.store.store import Store

    store = Store(url)
    try:
        rows = store.conn.execute("SELECT name, status, output FROM runs").fetchall()
        calls = store.conn.execute("SELECT count(DISTINCT parent_id), count(*) FROM calls")
        parents, links = calls.fetchone()
    finally:
        store.close()
        close_pool(url)
    wanted = {flow: n} | ({"bench-child": n} if flow == "bench-parent" else {})
    counts: dict[str, int] = {}
    for name, status, output in rows:
        if status != "completed":
            sys.exit(f"FAILED: a run of {name} is {status}")
        if name == flow and _loaded(output) != {"n": EXPECTED_N}:
            sys.exit(f"FAILED: a run of {name} ended with output {output!r}")
        counts[name] = counts.get(name, 0) + 1
    if counts != wanted or (flow == "bench-parent" and (parents, links) != (n, n)):
        sys.exit(f"FAILED: runs {counts} (expected {wanted}), calls {links} of {parents} parents")


def _loaded(output: Any) -> Any:
    return json.loads(output) if isinstance(output, str) else output


# --- working ------------------------------------------------------------------------------------


def worker(url: str, project: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``procflow worker --until-idle`` process."""
    cmd = [*procflow_bin(), "worker", "--until-idle", "--db", url, "--project", str(project)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def work_in_process(
    url: str, project: Path, profiler: cProfile.Profile | None = None
) -> tuple[float, int, float]:
    """(wall seconds, transitions, CPU seconds) of ``engine.work`` until idle, in this process;
    the CPU is this process's and, on PostgreSQL, its database sessions' (Linux)."""
    engine = engine_on(url, project)
    try:
        engine.catalog.latest_flow("bench-child")  # compiled before the clock starts
        sessions = DatabaseCpu(url)
        cpu, began = time.process_time(), time.perf_counter()
        if profiler is None:
            transitions = engine.work(until_idle=True)
        else:
            # cProfile sees one thread: the loop is driven on this one (engine.work drives it
            # on a thread of its own, watched from here); attempts then run on the slots.
            before = engine.loop.transitions
            profiler.enable()
            engine.loop.drive_loop(True, None)
            profiler.disable()
            transitions = engine.loop.transitions - before
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        return wall, transitions, cpu + sessions.spent()  # before the sessions close
    finally:
        engine.close()
        close_pool(url)


class DatabaseCpu:
    """The CPU seconds the PostgreSQL sessions of ``url``'s database spent since this was made
    (their processes' /proc figures; none on SQLite or without /proc). Sessions opened meanwhile
    count whole; one that closed meanwhile is missed (the engine keeps its connections)."""

    def __init__(self, url: str) -> None:
        self.url = url if url.startswith("postgresql") and Path("/proc/self/stat").exists() else ""
        self.start = self._now() if self.url else {}

    def _now(self) -> dict[int, float]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname=current_database() "
                "AND pid<>pg_backend_pid()"
            ).fetchall()
        return {int(pid): _process_cpu(int(pid)) for (pid,) in rows}

    def spent(self) -> float:
        if not self.url:
            return 0.0
        return sum(cpu - self.start.get(pid, 0.0) for pid, cpu in self._now().items())


def _process_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # ended meanwhile
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Round:
    flat: float  # seconds
    composed: float
    cpu: dict[str, float]  # CPU seconds of each case: the worker's (in-process: + database's)

    @property
    def ratio(self) -> float:
        return self.flat / self.composed  # rate(composed) / rate(flat)


def one_case(
    db: str, root: Path, project: Path, case: str, n: int,
    how: Callable[[str], tuple[float, float]], tag: str,
) -> tuple[float, float]:  # fmt: skip
    url = fresh_store(db, root, tag)
    prepare(url, project, CASES[case], n)
    took = how(url)
    check(url, CASES[case], n)
    return took


def rounds(db: str, root: Path, project: Path, args: argparse.Namespace) -> list[Round]:
    env = {**worker_env(root), "PROCFLOW_SECRET_KEY": BENCH_KEY}
    startup = 0.0
    if not args.in_process:
        idle = fresh_store(db, root, "idle")
        prepare(idle, project, "bench-flat", 0)
        worker(idle, project, env)  # warms the byte-code cache
        startup = statistics.median(worker(idle, project, env)[0] for _ in range(3))
        print(f"  worker start-up on an idle store: {startup:.2f} s (taken out below)")

    def how(url: str) -> tuple[float, float]:
        if args.in_process:
            wall, _, cpu = work_in_process(url, project)
            return wall, cpu
        wall, cpu = worker(url, project, env)
        return wall - startup, cpu

    found = []
    for rep in range(args.repeat):
        order = ["flat", "composed"] if rep % 2 == 0 else ["composed", "flat"]
        took = {
            case: one_case(db, root, project, case, args.n, how, f"{case}-{rep}") for case in order
        }
        found.append(Round(took["flat"][0], took["composed"][0],
                           {case: cpu for case, (_, cpu) in took.items()}))  # fmt: skip
        cpu = f" (CPU {took['flat'][1]:.2f} s, {took['composed'][1]:.2f} s)"
        print(
            f"  round {rep + 1}: flat {args.n / took['flat'][0]:,.0f} runs/s, composed "
            f"{args.n / took['composed'][0]:,.0f} runs/s: {found[-1].ratio:.0%}{cpu}",
            flush=True,
        )
    return found


# --- the cost of a call -------------------------------------------------------------------------


@contextmanager
def traced_statements() -> Iterator[list[str]]:
    """Every SQL statement of every SQLite connection opened meanwhile."""
    seen: list[str] = []
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield seen
    finally:
        sqlite3.connect = real  # type: ignore[assignment]


def cost(root: Path, project: Path, n: int) -> dict[str, tuple[float, float]]:
    """Per run of each case: (transitions, statements), working in-process on SQLite."""
    out = {}
    for case, flow in CASES.items():
        url = fresh_store("sqlite", root, f"cost-{case}")
        prepare(url, project, flow, n)
        with traced_statements() as seen:
            _, transitions, _ = work_in_process(url, project)
        check(url, flow, n)
        statements = [s for s in seen if s.strip().upper() not in ("BEGIN", "COMMIT")]
        out[case] = (transitions / n, len(statements) / n)
    return out


def default_pg() -> str:
    """The benchmark's database on the PostgreSQL at ``PROCFLOW_BENCH_PG`` (as scaleout.py)."""
    admin = os.environ.get("PROCFLOW_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    return f"{admin.rpartition('/')[0]}/{DB_NAME}"


# --- main ---------------------------------------------------------------------------------------


def report(db: str, found: list[Round], n: int, in_process: bool) -> None:
    flat = statistics.median(r.flat for r in found)
    composed = statistics.median(r.composed for r in found)
    ratio = statistics.median(r.ratio for r in found)
    spread = ", ".join(f"{r.ratio:.0%}" for r in found)
    verdict = "met" if ratio >= 0.6 else "MISSED"
    print(
        f"RESULT {db.split('@')[-1]}: flat {n / flat:,.0f} runs/s "
        f"({n * (PARENT_STEPS + CHILD_STEPS) / flat:,.0f} steps/s), composed {n / composed:,.0f} "
        f"runs/s: {ratio:.0%} of flat (rounds {spread}; target >= 60 %: {verdict})"
    )
    # CPU a run: what the machine's load changes least (the wall figures drift with it).
    cpu = {case: statistics.median(r.cpu[case] for r in found) * 1000 / n for case in CASES}
    whose = "worker + database" if in_process and db != "sqlite" else "worker"
    print(
        f"  CPU ms a run ({whose}): flat {cpu['flat']:.2f}, composed {cpu['composed']:.2f}: "
        f"composed at {cpu['flat'] / cpu['composed']:.0%} of flat by CPU"
    )


def profile(db: str, root: Path, project: Path, case: str, n: int, top: int) -> None:
    url = fresh_store(db, root, "profile")
    prepare(url, project, CASES[case], n)
    profiler = cProfile.Profile()
    wall, transitions, _ = work_in_process(url, project, profiler)
    check(url, CASES[case], n)
    print(f"{case}, in-process under cProfile: {wall:.2f} s, {transitions} transitions")
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
        print(f"--- top {top} by {key} ---")
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="runs of each case (1,000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of both cases (3)")
    parser.add_argument(
        "--db", action="append", help="sqlite (a fresh file) or a postgresql:// URL; repeatable"
    )
    parser.add_argument("--in-process", action="store_true", help="engine.work, no subprocess")
    parser.add_argument("--cost-n", type=int, default=200, help="runs for the call's cost")
    parser.add_argument(
        "--profile", choices=list(CASES), help="work one case in-process under cProfile"
    )
    parser.add_argument("--top", type=int, default=30, help="profile entries to print")
    args = parser.parse_args()
    os.environ.setdefault("PROCFLOW_SECRET_KEY", BENCH_KEY)
    with tempfile.TemporaryDirectory(prefix="procflow-calls-") as tmp:
        root = Path(tmp)
        project = make_project(root)
        if args.profile:
            profile((args.db or ["sqlite"])[0], root, project, args.profile, args.n, args.top)
            return
        how = "in-process engine.work" if args.in_process else "procflow worker --until-idle"
        print(
            f"{args.n} runs a case: flat ({PARENT_STEPS + CHILD_STEPS} action steps) against "
            f"composed ({PARENT_STEPS} + a call of {CHILD_STEPS}); one worker ({how}), real clock"
        )
        for db in args.db or ["sqlite", default_pg()]:
            print(f"store: {db.split('@')[-1]}")
            report(db, rounds(db, root, project, args), args.n, args.in_process)
        per = cost(root, project, args.cost_n)
        (ft, fs), (ct, cs) = per["flat"], per["composed"]
        print(
            f"a call's cost (SQLite, in-process, per run): transitions {ct:.2f} composed, {ft:.2f} "
            f"flat (+{ct - ft:.2f}); statements {cs:.1f} against {fs:.1f} (+{cs - fs:.1f})"
        )
    print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
