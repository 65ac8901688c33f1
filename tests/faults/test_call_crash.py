"""The crash test for calls: a worker killed with SIGKILL while parents start, end and resume
their children loses no parent's wake-up, starts no second child for one call, and doubles
nothing.

``PROCFLOW_CALL_CRASH_PARENTS`` runs (3 in ``make test``, more in ``make chaos``) of
``call_crash_project/parent.flow.yaml`` (an action ``before``, a call of ``child`` — one action
``work`` — and an action ``after`` that uses the child's output) are started, then a real
``procflow worker --until-idle`` runs with ``PROCFLOW_FAULTS`` set so it kills itself (nothing
flushed, no cleanup) at a fault point on its n-th hit. With one slot the worker's rounds are
known: its first commit holds every parent's ``before`` and the start of its child; its second,
every child's ``work`` and end, which wakes the parents; its third, every parent's ``after`` and
end. A fresh worker takes over once the dead worker's one-second leases have expired.

Afterwards, as without a crash: every parent completed with its own child's output; exactly
one child per parent (runs by flow, and the ``calls`` links); no run waiting, nothing left
behind (waits, tokens, timers, scopes, leases); every history is gap-free and has the
reference's shape (one ``call.started`` and one ``call.ended`` per parent); and the side-effect
log shows every action executed, again only where the dead worker had not committed it, under
one idempotency key.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crash_stores import (
    CaseStores,
    Db,
    Effect,
    effects,
    kill_worker_at,
    procflow,
    wait_for_leases_to_expire,
)

from procflow.runtime.engine import Engine

PROJECT = Path(__file__).parent / "call_crash_project"
PARENTS = int(os.environ.get("PROCFLOW_CALL_CRASH_PARENTS", "3"))

# (point, n-th hit, what the dead worker had committed: its commits, each a round of every run).
CASES = [
    ("child_started", 1, 0),  # children written, parents parked on them: nothing committed
    ("after_commit", 1, 1),  # parents parked and children started, committed; none has run
    ("child_ended", 1, 1),  # children's work done and their ends written, no parent woken yet
    ("parent_woken", 1, 1),  # the first parent handed its child's outcome, uncommitted
    ("parent_woken", PARENTS, 1),  # every parent handed its child's outcome, uncommitted
    ("after_commit", 2, 2),  # children ended and parents woken, committed; no parent resumed
]
ACTIONS = {"parent": ("before", "after"), "child": ("work",)}


def prepare(tmp_path: Path, db: Db) -> Path:
    """A store with the two flows deployed and PARENTS parent runs started (not worked)."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    engine = Engine.virtual(db.url, environ=db.env)
    try:
        engine.deploy(str(project / "child.flow.yaml"))
        engine.deploy(str(project / "parent.flow.yaml"))
        for n in range(PARENTS):
            engine.start_flow("parent", {"n": n})
    finally:
        engine.close()
    return project


@dataclass
class Outcome:
    """A store after a crash (or none) and the recovery."""

    project: Path
    during: list[Effect]  # effects of the worker that was killed
    crashed_pid: int | None
    leased: int  # runs whose lease the dead worker still held
    runs: list[dict[str, Any]]  # engine.show() of every run, with its id
    links: list[tuple[str, str]]  # (child_id, parent_id) of the calls table
    left: dict[str, int]  # rows left behind: waits, tokens, timers, scopes, leases
    leftover_work: int  # transitions an in-process engine still found to do


def crash_and_recover(tmp_path: Path, db: Db, point: str | None, hit: int) -> Outcome:
    """Start PARENTS parents, run a worker killed at ``point=hit`` (none: a crash-free worker),
    wait out its leases, then a fresh worker finishes every run."""
    project = prepare(tmp_path, db)
    crashed_pid, leased = None, 0
    if point is not None:
        crashed_pid, leased = kill_worker_at(db, point, hit)
        wait_for_leases_to_expire(db)
    during = effects(project)
    recovery = procflow(db, "worker", "--until-idle")
    assert recovery.returncode == 0, recovery.stderr
    engine = Engine(db.url, environ=db.env)
    try:
        leftover = engine.work(until_idle=True)
        runs = [engine.show(run.id) | {"id": run.id} for run in engine.list_runs()]
        conn = engine.store.conn
        links = [(str(c), str(p)) for c, p in conn.execute("SELECT child_id, parent_id FROM calls")]
        left = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("waits", "tokens", "timers", "scopes")
        }
        query = "SELECT count(*) FROM runs WHERE lease_owner IS NOT NULL"
        left["leases"] = conn.execute(query).fetchone()[0]
    finally:
        engine.close()
    return Outcome(project, during, crashed_pid, leased, runs, links, left, leftover)


Case = tuple[str, str | None, int]  # backend, point (None: the reference), hit
TEST_NAMES = ("test_a_killed_worker_loses_no_call_and_doubles_none", "test_the_reference_calls")


@pytest.fixture(scope="module")
def outcomes(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    backend_envs: dict[str, dict[str, str]],
) -> dict[Case, Future[Outcome]]:
    """Every selected case and a crash-free reference on every selected backend, side by side
    (as tests/faults/test_flow_crash.py)."""
    selected: set[Case] = set()
    for item in request.session.items:
        name = getattr(item, "originalname", "")
        if name not in TEST_NAMES:
            continue
        params = item.callspec.params
        selected.add((params["backend"], None, 0))  # every test needs the reference
        if name == TEST_NAMES[0]:
            selected.add((params["backend"], params["point"], params["hit"]))
    stores = CaseStores(request, backend_envs, any(c[0] == "postgresql" for c in selected))
    out: dict[Case, Future[Outcome]] = {}
    for backend in ("postgresql", "sqlite"):  # PostgreSQL's first: its cases take longer
        for point, hit in [(None, 0), *((p, h) for p, h, _ in CASES)]:
            if (backend, point, hit) in selected:
                tmp_path = tmp_path_factory.mktemp("call_crash")
                db = stores.store(backend, tmp_path)
                out[(backend, point, hit)] = stores.submit(
                    crash_and_recover, tmp_path, db, point, hit
                )
    return out


def shape(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry["type"], entry.get("step"), entry.get("path"), entry.get("attempt"))


def by_flow(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"parent": [], "child": []}
    for run in runs:
        out[run["name"]].append(run)
    return out


def check_calls(outcome: Outcome, reference: Outcome | None) -> None:
    """Every parent completed with its own child's output, one child each, nothing left over;
    histories gap-free and (given a reference) of the reference's shape."""
    assert outcome.leftover_work == 0, "work was left over"
    assert outcome.left == {"waits": 0, "tokens": 0, "timers": 0, "scopes": 0, "leases": 0}
    runs = by_flow(outcome.runs)
    assert (len(runs["parent"]), len(runs["child"])) == (PARENTS, PARENTS)
    children = {run["id"]: run for run in runs["child"]}
    # Exactly one child per parent: one link each, to a child run that exists.
    assert Counter(parent for _, parent in outcome.links) == {r["id"]: 1 for r in runs["parent"]}
    assert {child for child, _ in outcome.links} == set(children)
    parent_of = dict(outcome.links)
    for parent in runs["parent"]:
        assert parent["status"] == "completed", parent
        child_id = parent["output"]["child"]
        assert parent_of[child_id] == parent["id"]
        child = children[child_id]
        assert child["status"] == "completed", child
        assert parent["output"]["got"] == child["output"]
        assert parent["output"]["after"] == f"after-{child['output']['tag']}"
        types = Counter(h["type"] for h in parent["history"])
        assert (types["call.started"], types["call.ended"]) == (1, 1)
    for run in outcome.runs:
        history = run["history"]
        assert [h["seq"] for h in history] == list(range(1, len(history) + 1)), "seq gaps"
        if reference is not None:
            same = by_flow(reference.runs)[run["name"]][0]["history"]
            assert [shape(h) for h in history] == [shape(h) for h in same], run["id"]


def executed(outcome: Outcome) -> Counter[tuple[str, str]]:
    """How often each (run, action path) was executed; each under its one idempotency key."""
    found: Counter[tuple[str, str]] = Counter()
    for e in effects(outcome.project):
        assert e["idempotency_key"] == f"{e['run_id']}/{e['path']}", e
        assert e["attempt"] == 1, e
        found[(e["run_id"], e["path"])] += 1
    return found


def test_the_reference_calls(outcomes: dict[Case, Future[Outcome]], backend: str) -> None:
    """What the runs are without a crash (the yardstick of the crash cases, checked itself)."""
    ref = outcomes[(backend, None, 0)].result()
    check_calls(ref, None)
    for parent in by_flow(ref.runs)["parent"]:
        trail = [shape(h) for h in parent["history"] if h["type"].startswith(("call.", "run."))]
        assert trail == [
            ("run.started", None, None, None),
            ("call.started", "sub", "sub", 1),
            ("call.ended", "sub", "sub", 1),
            ("run.completed", None, None, None),
        ]
    wanted = {(r["id"], path) for r in ref.runs for path in ACTIONS[r["name"]]}
    assert executed(ref) == dict.fromkeys(wanted, 1)


@pytest.mark.parametrize(
    ("point", "hit", "committed"), CASES, ids=[f"{p}={n}" for p, n, _ in CASES]
)
def test_a_killed_worker_loses_no_call_and_doubles_none(
    outcomes: dict[Case, Future[Outcome]], backend: str, point: str, hit: int, committed: int
) -> None:
    crash = outcomes[(backend, point, hit)].result()
    check_calls(crash, outcomes[(backend, None, 0)].result())

    # The kill landed where the case says: the rounds before it ran, each a round of every run.
    assert all(e["pid"] == crash.crashed_pid for e in crash.during)
    rounds = 1 if point == "child_started" or (point, hit) == ("after_commit", 1) else 2
    paths = Counter(e["path"] for e in crash.during)
    assert paths == ({"before": PARENTS} | ({"work": PARENTS} if rounds == 2 else {}))
    # Killed inside a commit, it held the runs of that round; after one, none (they wait/ended).
    assert crash.leased == (0 if point == "after_commit" else PARENTS)

    # Every action executed; again only where the dead worker's round was not committed.
    counts = executed(crash)
    wanted = {(r["id"], path) for r in crash.runs for path in ACTIONS[r["name"]]}
    assert set(counts) == wanted, "an action ran for a run that is not there, or never ran"
    replays = sum(counts.values()) - len(wanted)
    assert replays == (PARENTS if committed < rounds else 0)
    if point == "child_started":  # the children it wrote were rolled back: it ran none
        assert {e["path"] for e in crash.during} == {"before"}
