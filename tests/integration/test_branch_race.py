"""Two branches of one intent ``parallel`` step committing at the same moment, from two workers or
from two users, on one store: neither branch's record write is lost and the join goes on once.

The join's count has no lock of its own: a run's tokens are changed only by whoever holds the run,
a worker's lease checked in its commit or a user call that locks the run row and takes the lease
away (docs/reference/intent.md, "parallel"). These tests put that under real concurrency: on
PostgreSQL the threads run side by side; on SQLite (one writer at a time) the same tests run,
serialised by the store.

- Workers: each run's two branches fail their first attempt, so both branch tokens wait on retry
  timers due at one virtual instant. Two workers (an ``Engine`` each, taking one run at a time,
  so one run's two timers may fire in different workers' transactions) loop while the clock moves
  to that instant; each branch's second attempt naps a few ms and writes its own field.
- Users: each run's two branches are user tasks. Two user threads, released together by a barrier
  for each run, complete its two tasks through ``Engine.complete_task`` (the call the CLI and HTTP
  faces make) while two workers run the service step that follows one of the tasks and the step
  after the join. A completion that meets a deadlock (PostgreSQL: a worker's commit locks the run
  then the record, a completion the record then the run) is rolled back and repeated by the engine
  (docs/runtime.md, "Deadlocks"): no call may fail.
- A deadlock, steered (PostgreSQL): a completion held between its two locks while a worker's
  commit of the other branch waits, so that PostgreSQL rolls back the completion (the engine
  repeats it) or the worker's commit (the run is handed back and its step made again).

For every run: both branches' fields written, the step after the join made once (one
``step.completed``, a counter on the record at 1), the run completed without an incident, nothing
of it left behind.
"""

# ruff: noqa: E501 -- the processes are written one step a line, as files are

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from procflow.errors import StoreConflict
from procflow.runtime.engine import Engine
from procflow.runtime.waits import tasks as task_calls
from procflow.runtime.work.commit import Step

RUNS = 40
BATCH = 1  # runs (and due timers) a worker takes at once
FIRST_BATCH = 4  # runs the test's own engine takes at once, to set the races up
JOIN_S = 60  # the longest any phase may take before the test calls its runs stuck
MINUTE = 60_000_000  # µs
DEADLOCK_MS = 300  # PostgreSQL's deadlock_timeout in these tests (see quick_deadlocks)

APP = """\
name: race
entities:
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 50 }
      - { name: state, type: string, length: 20 }
      - { name: route, type: string, length: 20 }
      - { name: techNote, type: string, length: 50 }
      - { name: legalNote, type: string, length: 50 }
      - { name: joins, type: integer }
forms:
  - { name: TechForm, forEntity: Order, fields: [techNote], actions: [approve] }
  - { name: LegalForm, forEntity: Order, fields: [legalNote], actions: [approve] }
processes:
"""

# Both branches fail their first attempt: their retries are due at the same instant.
WORKER_RACE = """\
  - name: Race
    trigger: { onCreate: Order }
    steps:
      - { name: f, kind: parallel, args: { branches: [a, b], next: joined } }
      - { name: a, kind: serviceTask, args: { delegate: Nap, fields: { field: state, value: a, fails: 1 }, retry: { count: 1, every: PT1M } } }
      - { name: b, kind: serviceTask, args: { delegate: Nap, fields: { field: route, value: b, fails: 1 }, retry: { count: 1, every: PT1M } } }
      - { name: joined, kind: serviceTask, args: { delegate: CountJoin } }
"""

# The tech branch goes on to a worker's step once its task is done; the legal branch ends with its
# task, and the completion's transaction carries its token into the join.
USER_RACE = """\
  - name: Race
    trigger: { onCreate: Order }
    steps:
      - { name: f, kind: parallel, args: { branches: [tech, legal], next: joined } }
      - { name: tech, kind: userTask, args: { assignee: engineer, form: TechForm, next: techSignoff } }
      - { name: techSignoff, kind: serviceTask, args: { delegate: Nap, fields: { field: state, value: signed } } }
      - { name: legal, kind: userTask, args: { assignee: lawyer, form: LegalForm, setField: route, value: legal } }
      - { name: joined, kind: serviceTask, args: { delegate: CountJoin } }
"""

# What the two tasks' forms, the legal task's setField and techSignoff write.
USER_FIELDS = {"techNote": "checked", "legalNote": "cleared", "route": "legal", "state": "signed"}

DELEGATES = """\
import random
import time


def Nap(ctx):
    if ctx.attempt <= int(ctx.fields.get("fails", 0)):
        raise ConnectionError("not yet")
    # A nap of uneven length: the other branch's timer comes due, and the other worker looks
    # for it, while this one still holds the run; either worker may be the first back.
    time.sleep(random.uniform(0.001, 0.006))
    ctx.record[ctx.fields["field"]] = ctx.fields["value"]


def CountJoin(ctx):
    ctx.record["joins"] = (ctx.record.get("joins") or 0) + 1
"""


@dataclass
class Figures:
    """What the workers' commits met, counted by wrapping each one's committer."""

    arrivals: list[tuple[str, str, str]] = field(default_factory=list)  # (run, branch, worker)
    leases_lost: int = 0  # runs whose step a worker made but could not commit: taken from it
    conflicts: int = 0  # commits rolled back to break a deadlock (their runs handed back)

    def parted(self) -> int:
        """Runs whose two branches were carried into the join by different workers."""
        by_run: dict[str, set[str]] = {}
        for run_id, _, worker in self.arrivals:
            by_run.setdefault(run_id, set()).add(worker)
        return sum(1 for workers in by_run.values() if len(workers) > 1)


class Workers:
    """Two workers, an ``Engine`` each, looking for work until stopped (the first exception of
    any is kept for the test to report)."""

    def __init__(self, db_url: str, env: dict[str, str]) -> None:
        self.db_url, self.env = db_url, env
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.figures = Figures()
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._loop, args=(f"w{i}",), name=f"worker-{i}", daemon=True)
            for i in range(2)
        ]

    def __enter__(self) -> Workers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=JOIN_S)
            assert not thread.is_alive(), f"{thread.name} never stopped"
        assert self.errors == [], self.errors

    def _loop(self, name: str) -> None:
        try:
            eng = Engine(self.db_url, environ=dict(self.env), worker_id=name, batch=BATCH)
        except BaseException as exc:
            self.errors.append(exc)
            return
        self._count_commits(eng, name)
        try:
            while not self.stop.is_set():
                if not eng.work(until_idle=True):
                    time.sleep(0.002)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.errors.append(exc)
        finally:
            eng.close()

    def _count_commits(self, eng: Engine, name: str) -> None:
        committer = eng.loop.committer
        plain = committer.commit_batch

        def commit_batch(batch: list[Step], now: int) -> set[str]:
            try:
                accepted = plain(batch, now)
            except StoreConflict:
                with self.lock:
                    self.figures.conflicts += 1
                raise
            with self.lock:
                self.figures.leases_lost += len(batch) - len(accepted)
                self.figures.arrivals.extend(
                    (ctx.run.id, (h.data or {})["branch"], name)
                    for ctx, tr in batch
                    if ctx.run.id in accepted
                    for h in tr.history
                    if h.type == "token.joined"
                )
            return accepted

        committer.commit_batch = commit_batch  # type: ignore[method-assign]


@contextmanager
def quick_deadlocks(url: str) -> Iterator[str]:
    """``url``, whose PostgreSQL sessions opened meanwhile look for a deadlock after DEADLOCK_MS
    of waiting for a lock rather than the default second: the same transactions are rolled back,
    sooner. (Set on the database, before procflow connects to it; reset for the next test.)"""
    if not url.startswith("postgresql"):
        yield url
        return
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} SET deadlock_timeout = '{DEADLOCK_MS}ms'")
    try:
        yield url
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {name} RESET deadlock_timeout")


@pytest.fixture
def store_url(db_url: str) -> Iterator[str]:
    with quick_deadlocks(db_url) as url:
        yield url


def project_engine(tmp_path: Path, url: str, env: dict[str, str], process: str) -> Engine:
    """A virtual-clock engine on ``url`` with ``process`` deployed (and the delegates)."""
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "__init__.py").write_text(DELEGATES)
    (tmp_path / "app.intent").write_text(APP + process)
    eng = Engine.virtual(url, environ=dict(env), batch=FIRST_BATCH)
    try:
        eng.deploy(str(tmp_path / "app.intent"))
    except BaseException:
        eng.close()
        raise
    return eng


@pytest.fixture
def engines(
    tmp_path: Path, store_url: str, db_env: dict[str, str]
) -> Iterator[Callable[[str], Engine]]:
    """The test's own engine, with the given process deployed."""
    made: list[Engine] = []

    def make(process: str) -> Engine:
        made.append(project_engine(tmp_path, store_url, db_env, process))
        return made[-1]

    yield make
    for eng in made:
        eng.close()


def count(engine: Engine, table: str) -> int:
    return int(engine.store.read().c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def wait_until(ready: Callable[[], bool], what: str, state: Callable[[], object] = str) -> None:
    """Poll ``ready`` until it holds; a run that never gets there is stuck (a hang guard), and
    ``state()`` says where things stand."""
    deadline = time.monotonic() + JOIN_S
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {JOIN_S}s: {what}; {state()}")
        time.sleep(0.01)


def start_runs(engine: Engine) -> dict[str, int]:
    """RUNS runs, one per new record; run id → record id."""
    out: dict[str, int] = {}
    for i in range(RUNS):
        record = engine.create_record("Order", {"title": f"order {i}"})
        (run,) = engine.runs_for_record("Order", record["id"])
        out[run.id] = record["id"]
    return out


def all_ended(engine: Engine) -> bool:
    return all(run.status in ("completed", "failed") for run in engine.list_runs())


def unended(engine: Engine) -> dict[str, object]:
    """Each run not ended: where its tokens stand (a join lists the branches it waits for)."""
    return {
        run.id: [
            (t["step"], t["state"], t.get("waiting_for")) for t in engine.show(run.id)["tokens"]
        ]
        for run in engine.list_runs()
        if run.status not in ("completed", "failed")
    }


def of(history: list[dict[str, Any]], type_: str, step: str | None = None) -> list[dict[str, Any]]:
    return [h for h in history if h["type"] == type_ and (step is None or h["step"] == step)]


def check_run(
    engine: Engine, run_id: str, record_id: int, branches: tuple[str, str], fields: dict[str, str]
) -> None:
    """Completed without an incident, each branch's fields on the record, the join gone on once
    and the step after it made once, no token left."""
    shown = engine.show(run_id)
    history = shown["history"]
    record = engine.get_record("Order", record_id)
    context = (run_id, record, history)
    assert (shown["status"], shown["error"], shown["tokens"]) == ("completed", None, []), context
    assert of(history, "run.failed") == of(history, "step.failed") == [], context
    assert {name: record[name] for name in fields} == fields, context  # no write lost
    assert record["joins"] == 1, context
    assert len(of(history, "step.completed", "joined")) == 1, context
    assert len(of(history, "step.completed", "f")) == 1, context  # the join went on once
    first, second = branches  # whichever arrived first, the join waited for the other alone
    waits = [h["waiting"] for h in of(history, "token.joined")]
    assert waits in ([[first], []], [[second], []]), context


def test_two_workers_advancing_both_branches_at_once_lose_no_write_and_join_once(
    engines: Callable[[str], Engine], store_url: str, db_env: dict[str, str]
) -> None:
    engine = engines(WORKER_RACE)
    due = engine.now() + MINUTE
    runs = start_runs(engine)
    # This engine takes the runs a few at a time (FIRST_BATCH): their a branches fail and arm
    # their timers, then their b branches do. A run's two timers are thus a few apart in the
    # order due timers fire in: a worker that fired one has committed it and gone on to another
    # when the other comes up, and either worker may fire it.
    engine.work()
    assert [r.status for r in engine.list_runs()] == ["waiting"] * RUNS
    assert count(engine, "timers") == 2 * RUNS
    assert {t.due_at for r in runs for t in engine.store.read().timers_of_run(r)} == {due}
    with Workers(store_url, db_env) as workers:
        # The clock moves without this engine working (set_clock would make it a third worker).
        with engine.store.tx() as tx:
            tx.meta_set("clock_now", str(due))
        wait_until(lambda: all_ended(engine), "every run ended", lambda: unended(engine))
    for run_id, record_id in runs.items():
        check_run(engine, run_id, record_id, ("a", "b"), {"state": "a", "route": "b"})
        history = engine.show(run_id)["history"]
        assert len(of(history, "attempt.failed")) == 2, history  # the first attempts, no other
    assert count(engine, "timers") == count(engine, "tokens") == 0
    figures = workers.figures
    print(
        f"\nbranch race, workers: {figures.parted()} of {RUNS} runs had their branches joined by "
        f"different workers; {figures.leases_lost} commits refused for a lost lease, "
        f"{figures.conflicts} conflicted"
    )
    # The race was run: both workers carried branches into joins.
    assert {worker for _, _, worker in figures.arrivals} == {"w0", "w1"}, figures.arrivals


def conflicted_completions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The tasks whose completion's transaction met a conflict (``Engine.complete_task`` then
    repeats the call: ``retry_on_conflict``), one entry a conflict."""
    plain = task_calls.complete_task
    retried: list[int] = []

    def complete_task(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return plain(*args, **kwargs)
        except StoreConflict:
            retried.append(args[1])
            raise

    monkeypatch.setattr(task_calls, "complete_task", complete_task)
    return retried


class Users:
    """Two users, an ``Engine`` each: for each run, released together by a barrier, one completes
    its tech task and the other its legal task."""

    def __init__(self, db_url: str, env: dict[str, str], tasks: dict[str, dict[str, int]]) -> None:
        self.db_url, self.env, self.tasks = db_url, env, tasks
        self.together = threading.Barrier(2)
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._complete, args=args, name=f"user-{args[0]}")
            for args in (
                ("engineer", {"techNote": "checked"}),
                ("lawyer", {"legalNote": "cleared"}),
            )
        ]

    def play(self) -> None:
        for thread in self.threads:
            thread.start()
        for thread in self.threads:
            thread.join(timeout=JOIN_S)
            assert not thread.is_alive(), f"{thread.name} never finished"
        assert self.errors == [], self.errors

    def _complete(self, assignee: str, data: dict[str, str]) -> None:
        eng = Engine(self.db_url, environ=dict(self.env))
        try:
            for tasks in self.tasks.values():
                self.together.wait(timeout=JOIN_S)
                eng.complete_task(tasks[assignee], action="approve", data=data)
        except BaseException as exc:  # reported by the test; the other user is let go
            self.errors.append(exc)
            self.together.abort()
        finally:
            eng.close()


def test_two_users_completing_both_branches_at_once_lose_no_write_and_join_once(
    engines: Callable[[str], Engine],
    store_url: str,
    db_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = engines(USER_RACE)
    retried = conflicted_completions(monkeypatch)
    with Workers(store_url, db_env) as workers:
        runs = start_runs(engine)
        wait_until(lambda: len(engine.list_tasks()) == 2 * RUNS, "every task opened")
        tasks: dict[str, dict[str, int]] = {run_id: {} for run_id in runs}
        for task in engine.list_tasks():
            tasks[task["run_id"]][task["assignee"]] = task["id"]
        Users(store_url, db_env, tasks).play()
        wait_until(lambda: all_ended(engine), "every run ended", lambda: unended(engine))
    for run_id, record_id in runs.items():
        check_run(engine, run_id, record_id, ("tech", "legal"), USER_FIELDS)
        history = engine.show(run_id)["history"]
        done = of(history, "task.completed")
        assert sorted(h["step"] for h in done) == ["legal", "tech"], history
        assert len(of(history, "step.completed", "techSignoff")) == 1, history
    assert engine.list_tasks() == []
    assert count(engine, "timers") == count(engine, "tokens") == 0
    figures = workers.figures
    print(
        f"\nbranch race, users: {len(retried)} completions conflicted and were repeated; "
        f"{figures.leases_lost} worker commits refused for a lease a completion took, "
        f"{figures.conflicts} conflicted"
    )


# --- a deadlock between a completion and a worker's commit, steered (PostgreSQL) -----------------


@pytest.fixture
def pg_url(pg_databases: Any) -> Iterator[str]:
    """SQLite has one writer at a time: nothing there can deadlock."""
    url = pg_databases.create()
    try:
        with quick_deadlocks(url):
            yield url
    finally:
        pg_databases.drop(url)


def lock_waits(url: str) -> int:
    """Sessions of ``url``'s database waiting for a lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("victim", ["completion", "worker"])
def test_a_completion_deadlocked_with_a_workers_branch_commit_loses_nothing(
    pg_url: str,
    tmp_path: Path,
    backend_envs: dict[str, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    victim: str,
) -> None:
    """The legal task's completion locks the record, then the run; a worker committing the tech
    branch's service step has locked the run and waits for the record. PostgreSQL rolls back
    the session whose deadlock check runs first, DEADLOCK_MS after it began to wait: the test
    holds the completion between its two locks to choose which. As docs/runtime.md says
    ("Deadlocks"), a completion rolled back is repeated by the engine and returns as if nothing
    happened; a worker's commit rolled back hands the run back, and the step is made again."""
    env = backend_envs["postgresql"]
    engine = project_engine(tmp_path, pg_url, env, USER_RACE)
    user = Engine(pg_url, environ=dict(env))
    between, go_on = threading.Event(), threading.Event()
    try:
        record = engine.create_record("Order", {"title": "order"})
        (run,) = engine.runs_for_record("Order", record["id"])
        engine.work()
        tasks = {t["assignee"]: t["id"] for t in engine.list_tasks()}
        engine.complete_task(tasks["engineer"], action="approve", data={"techNote": "checked"})
        assert engine.show(run.id)["status"] == "running"  # techSignoff waits for a worker

        queries = user.store.read()  # the object its transactions query through
        lock_run = queries.run_for_update

        def held_run_for_update(run_id: str) -> Any:
            between.set()  # the record is locked, the run not yet
            assert go_on.wait(JOIN_S)
            return lock_run(run_id)

        monkeypatch.setattr(queries, "run_for_update", held_run_for_update)
        retried = conflicted_completions(monkeypatch)
        outcome: list[Any] = []

        def complete() -> None:
            try:
                data = {"legalNote": "cleared"}
                outcome.append(user.complete_task(tasks["lawyer"], action="approve", data=data))
            except BaseException as exc:
                outcome.append(exc)

        completion = threading.Thread(target=complete, name="user-lawyer", daemon=True)
        completion.start()
        assert between.wait(JOIN_S)
        with Workers(pg_url, env) as workers:
            wait_until(lambda: lock_waits(pg_url) == 1, "the worker's commit waits for the record")
            # The worker's check comes DEADLOCK_MS after its wait began, and is made once: let
            # the completion wait for the run well before it (the worker is the victim) or well
            # after it found no deadlock yet (the completion is: its own check comes later).
            time.sleep((DEADLOCK_MS / 4 if victim == "worker" else DEADLOCK_MS * 2) / 1000)
            go_on.set()
            completion.join(timeout=JOIN_S)
            assert not completion.is_alive(), "the completion never returned"
            assert [type(o) for o in outcome] == [dict], outcome  # the call itself succeeded
            assert outcome[0]["status"] == "completed"
            wait_until(lambda: all_ended(engine), "the run ended", lambda: unended(engine))
        check_run(engine, run.id, record["id"], ("tech", "legal"), USER_FIELDS)
        history = engine.show(run.id)["history"]
        assert len(of(history, "step.completed", "techSignoff")) == 1, history
        if victim == "completion":
            assert (retried, workers.figures.conflicts) == ([tasks["lawyer"]], 0)
        else:
            assert (retried, workers.figures.conflicts) == ([], 1)
    finally:
        go_on.set()  # a test that failed early does not leave the completion held
        user.close()
        engine.close()
