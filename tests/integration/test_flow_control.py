"""Flow control (docs/reference/flow-control.md), on both store backends: a flow's concurrency
(places per key, FIFO queue, a failed run holding its place, cancel of a queued run, refuse)
and a step's throttle (budgets per key, shared by name, conflicting declarations).
Time is the virtual clock."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import (
    DefinitionError,
    DeployError,
    InputError,
    LimitReached,
    NotFoundError,
)
from procflow.runtime.engine import Engine
from procflow.runtime.runs.limits import free_places
from procflow.runtime.runs.starts import insert_flow_run
from procflow.states import RunStatus

SYNC = """
flow: sync
concurrency: { limit: 1, key: "{{ customer }}" }
inputs:
  customer: { type: string, required: true }
  fail: { type: boolean, default: false }
steps:
  - check: { fail: "asked to fail", if: "{{ fail }}" }
  - nap: { wait: { for: 1h } }
"""


class Project:
    def __init__(self, root: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.dir = root / "project"
        self.dir.mkdir()
        self.eng = Engine.virtual(db_url, project_dir=str(self.dir), environ=dict(db_env))

    def deploy(self, name: str, text: str) -> None:
        path = self.dir / f"{name}.flow.yaml"
        path.write_text(textwrap.dedent(text))
        self.eng.deploy(str(path))

    def start(self, name: str, **inputs: Any) -> str:
        return self.eng.start_flow(name, inputs)

    def statuses(self, ids: list[str]) -> list[str]:
        self.eng.work()
        return [self.eng.show(i)["status"] for i in ids]

    def places(self, flow: str, key: str) -> int:
        row = (
            self.eng.store.read()
            .c.execute("SELECT active FROM limits WHERE flow=? AND key=?", (flow, key))
            .fetchone()
        )
        return 0 if row is None else int(row[0])

    def later(self, duration: str) -> None:
        self.eng.advance(duration)
        self.eng.work()


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    proj = Project(tmp_path, db_url, db_env)
    try:
        yield proj
    finally:
        proj.eng.close()


# --- concurrency ------------------------------------------------------------------------------


def test_runs_over_the_limit_queue_per_key_and_start_in_order(project: Project) -> None:
    project.deploy("sync", SYNC)
    a1, a2, b1, a3 = (project.start("sync", customer=c) for c in "aaba")
    assert project.statuses([a1, a2, b1, a3]) == ["waiting"] * 4
    tokens = project.eng.show(a2)["tokens"]
    assert tokens[0]["waiting_for"] == {
        "kind": "queue", "key": "a", "places": 1, "taken": 1, "ahead": 0,
        "holders": [{"run_id": a1, "status": "waiting"}],
    }  # fmt: skip
    assert project.eng.show(a2)["history"][0]["queued"] is True
    assert (project.places("sync", "a"), project.places("sync", "b")) == (1, 1)
    project.later("1h")  # a1 and b1 end; a2 (older than a3) starts in a1's place
    assert project.statuses([a1, a2, b1, a3]) == ["completed", "waiting", "completed", "waiting"]
    assert [h["type"] for h in project.eng.show(a2)["history"]][:3] == [
        "run.started", "run.dequeued", "step.skipped",
    ]  # fmt: skip
    assert project.eng.show(a3)["tokens"][0]["waiting_for"]["kind"] == "queue"
    project.later("1h")
    assert project.statuses([a2, a3]) == ["completed", "waiting"]
    project.later("1h")
    assert project.statuses([a3]) == ["completed"]
    assert project.places("sync", "a") == 0


def test_a_failed_run_holds_its_place_until_cancelled(project: Project) -> None:
    project.deploy("sync", SYNC)
    failed = project.start("sync", customer="a", fail=True)
    queued = project.start("sync", customer="a")
    assert project.statuses([failed, queued]) == ["failed", "waiting"]
    project.later("2h")
    assert project.statuses([queued]) == ["waiting"]  # still queued behind the failed run
    project.eng.cancel(failed)
    assert project.statuses([failed, queued]) == ["cancelled", "waiting"]
    assert project.eng.show(queued)["tokens"][0]["waiting_for"]["kind"] == "timer"
    project.later("1h")
    assert project.statuses([queued]) == ["completed"]


def test_cancelling_a_queued_run_frees_no_place_and_skips_it(project: Project) -> None:
    project.deploy("sync", SYNC)
    first, second, third = (project.start("sync", customer="a") for _ in range(3))
    project.eng.cancel(second)
    assert project.places("sync", "a") == 1
    project.later("1h")
    assert project.statuses([first, second, third]) == ["completed", "cancelled", "waiting"]
    assert project.eng.show(third)["tokens"][0]["waiting_for"]["kind"] == "timer"


def start_late(project: Project, read_at: int, **inputs: Any) -> str:
    """A start whose caller read the clock at ``read_at`` and then waited (for the key's lock,
    say) while the clock moved on: what a start does under load on a system clock."""
    eng = project.eng
    with eng.store.tx() as tx:
        version = eng.catalog.startable(tx, "sync", "flow", "")
        _, flow = eng.catalog.flow(version.id, tx)
        run = insert_flow_run(tx, version.id, flow, {"fail": False, **inputs}, read_at)
    assert run is not None
    return run.id


def test_a_start_is_stamped_when_its_key_was_locked_not_when_it_was_asked_for(
    project: Project,
) -> None:
    # Its history then orders a key's runs as the lock did: runs queue in the order of their
    # run.started instants, and none is shown taking a place before the end that freed it.
    project.deploy("sync", SYNC)
    asked = project.eng.now()
    project.eng.advance("1m")
    holder, queued = (start_late(project, asked, customer="a") for _ in range(2))
    for run_id in (holder, queued):
        shown = project.eng.show(run_id)
        assert shown["history"][0]["at"] == "2027-01-01T00:01:00Z"
        assert shown["started_at"] == "2027-01-01T00:01:00Z"
    assert project.eng.show(queued)["history"][0]["queued"] is True


def test_a_queued_run_starts_no_earlier_than_the_end_that_freed_its_place(
    project: Project,
) -> None:
    # A worker's commit carries the instant its batch began; a run of the batch may have ended
    # later than that: the dequeue is stamped at the end, not before it.
    project.deploy("sync", SYNC)
    holder, queued = (project.start("sync", customer="a") for _ in range(2))
    project.eng.work()
    batch_began = project.eng.now()
    project.eng.advance("5s")
    with project.eng.store.tx() as tx:
        run = tx.run_for_update(holder)
        assert run is not None
        run.status, run.ended_at = RunStatus.COMPLETED, project.eng.now()
        tx.save_run(run, None, None)
        assert free_places(tx, [run], batch_began) == [queued]
    dequeued = project.eng.show(queued)["history"][1]
    assert (dequeued["type"], dequeued["at"]) == ("run.dequeued", "2027-01-01T00:00:05Z")


def test_without_a_key_one_limit_holds_for_the_whole_flow(project: Project) -> None:
    project.deploy(
        "pool",
        """
        flow: pool
        concurrency: { limit: 2 }
        steps:
          - nap: { wait: { for: 1h } }
        """,
    )
    ids = [project.start("pool") for _ in range(5)]
    project.eng.work()
    assert [project.eng.show(i)["tokens"][0]["waiting_for"]["kind"] for i in ids] == [
        "timer", "timer", "queue", "queue", "queue",
    ]  # fmt: skip
    project.later("1h")
    assert project.statuses(ids) == ["completed", "completed", "waiting", "waiting", "waiting"]
    assert project.places("pool", "") == 2


def test_refuse_stores_nothing_and_names_the_limit(project: Project) -> None:
    project.deploy(
        "once",
        """
        flow: once
        concurrency: { limit: 1, key: "{{ k }}", on_limit: refuse }
        inputs:
          k: { type: string, required: true }
        steps:
          - nap: { wait: { for: 1h } }
        """,
    )
    project.start("once", k="x")
    before = len(project.eng.list_runs())
    with pytest.raises(LimitReached) as refused:
        project.start("once", k="x")
    assert str(refused.value) == (
        "flow [once] has 1 of 1 places taken for key x; it refuses starts over its limit "
        "(concurrency.on_limit: refuse)"
    )
    assert refused.value.exit_code == 1
    assert len(project.eng.list_runs()) == before
    project.start("once", k="y")  # another key has its own place


def test_a_key_that_cannot_be_rendered_refuses_the_start(project: Project) -> None:
    project.deploy(
        "keyed",
        """
        flow: keyed
        concurrency: { limit: 1, key: "{{ customer.id }}" }
        inputs:
          customer: { type: object, required: true }
        steps:
          - s: { set: { x: 1 } }
        """,
    )
    with pytest.raises(InputError, match=r"concurrency\.key: "):
        project.start("keyed", customer={})
    assert project.eng.list_runs() == []


def test_bad_concurrency_and_throttle_declarations_are_errors_at_their_position(
    project: Project,
) -> None:
    with pytest.raises(DefinitionError) as bad:
        project.deploy(
            "bad",
            """
            flow: bad
            concurrency: { limit: 0, key: "{{ first.x }}" }
            steps:
              - first: { set: { x: 1 } }
              - post:
                  log.write: { message: hi }
                  throttle: { limit: 1, per: 0s }
            """,
        )
    shown = [d.format() for d in bad.value.diagnostics]
    assert any("concurrency.limit must be at least 1, got 0" in d for d in shown)
    assert any(
        "concurrency.key: [first] is not bound yet here; concurrency's key is rendered when a "
        "run starts, from its inputs only" in d
        for d in shown
    )
    assert any("throttle.per must be longer than zero, got 0s" in d for d in shown)


# --- throttle ---------------------------------------------------------------------------------

POST = """
flow: {name}
inputs:
  channel: {{ type: string, required: true }}
steps:
  - post:
      log.write: {{ message: "hi {{{{ channel }}}}" }}
      throttle: {{ limit: {limit}, per: 10s, key: "{{{{ channel }}}}"{shared} }}
"""


def post_flow(name: str, limit: int = 2, shared: str = "") -> str:
    return POST.format(name=name, limit=limit, shared=f", name: {shared}" if shared else "")


def started_at(project: Project, run_id: str) -> list[str]:
    history = project.eng.show(run_id)["history"]
    return [h["at"][11:19] for h in history if h["type"] == "step.started"]


def test_a_throttle_starts_at_most_limit_attempts_per_window_and_key(project: Project) -> None:
    project.deploy("post", post_flow("post"))
    # Which runs of a round a worker attempts first is not fixed: the checks count, not name.
    ids = [project.start("post", channel=c) for c in ["a"] * 5 + ["b"]]
    statuses = project.statuses(ids)
    assert sorted(statuses[:5]) == ["completed"] * 2 + ["waiting"] * 3
    assert statuses[5] == "completed"  # another key: a window of its own
    waiting = [project.eng.show(i)["tokens"] for i in ids[:5]]
    dues = sorted(t[0]["waiting_for"]["due"][11:19] for t in waiting if t)
    assert dues == ["00:00:10", "00:00:15", "00:00:20"]  # per / limit apart, not all at once
    assert {t[0]["waiting_for"]["budget"] for t in waiting if t} == {"post/post"}
    project.later("10s")
    project.later("10s")
    assert project.statuses(ids) == ["completed"] * 6
    starts = sorted(started_at(project, i)[0] for i in ids[:5])
    assert starts == ["00:00:00", "00:00:00", "00:00:10", "00:00:15", "00:00:20"]
    assert started_at(project, ids[5]) == ["00:00:00"]
    last = next(i for i in ids[:5] if started_at(project, i) == ["00:00:20"])
    throttled = [h for h in project.eng.show(last)["history"] if h["type"] == "step.throttled"]
    assert [h["until"] for h in throttled] == ["2027-01-01T00:00:20Z"]
    assert all(h["attempt"] == 1 for h in throttled)  # waiting is not an attempt


def test_a_named_budget_is_shared_between_flows(project: Project) -> None:
    project.deploy("one", post_flow("one", shared="chat"))
    project.deploy("two", post_flow("two", shared="chat"))
    ids = [project.start(n, channel="a") for n in ("one", "two", "one")]
    assert sorted(project.statuses(ids)) == ["completed", "completed", "waiting"]
    [tokens] = [t for t in (project.eng.show(i)["tokens"] for i in ids) if t]
    assert tokens[0]["waiting_for"]["budget"] == "chat"


def test_a_shared_budget_declared_otherwise_is_refused_naming_both(project: Project) -> None:
    project.deploy("one", post_flow("one", shared="chat"))
    with pytest.raises(DeployError) as refused:
        project.deploy("two", post_flow("two", limit=5, shared="chat"))
    assert str(refused.value) == (
        "throttle [chat]: flow [two] step [post] declares limit 5 per 10s, but flow [one] step "
        "[post] declared limit 2 per 10s; steps sharing a throttle name must agree"
    )
    with pytest.raises(NotFoundError):
        project.eng.latest_flow("two")  # nothing of it was stored


def test_steps_of_one_file_sharing_a_budget_must_agree(project: Project) -> None:
    with pytest.raises(DefinitionError) as bad:
        project.deploy(
            "both",
            """
            flow: both
            steps:
              - a: { log.write: { message: a }, throttle: { limit: 1, per: 1s, name: chat } }
              - b: { log.write: { message: b }, throttle: { limit: 2, per: 1s, name: chat } }
            """,
        )
    [problem] = [d.format() for d in bad.value.diagnostics]
    assert problem.endswith(
        "error: step [b]: throttle [chat] is declared with limit 1 per 1s by step [a] (line 4); "
        "steps sharing a throttle name must agree (steps[1].b.throttle)"
    )


def test_a_throttled_call_waits_before_starting_its_child(project: Project) -> None:
    project.deploy("child", "flow: child\nsteps:\n  - s: { set: { x: 1 } }\n")
    project.deploy(
        "parent",
        """
        flow: parent
        steps:
          - c: { call: child, throttle: { limit: 1, per: 1m } }
        """,
    )
    ids = [project.start("parent") for _ in range(2)]
    assert sorted(project.statuses(ids)) == ["completed", "waiting"]
    assert len(project.eng.list_runs(name="child")) == 1
    project.later("1m")
    assert project.statuses(ids) == ["completed", "completed"]
    assert len(project.eng.list_runs(name="child")) == 2


def test_runs_list_filters_queued_and_throttled_runs(project: Project) -> None:
    project.deploy("sync", SYNC)
    project.deploy("post", post_flow("post", limit=1))
    queued = [project.start("sync", customer="a") for _ in range(2)][1]
    posts = {project.start("post", channel="a") for _ in range(2)}  # either may be attempted first
    project.eng.work()
    by_kind = {
        kind: [item["id"] for item in project.eng.runs_page(waiting=kind).items]
        for kind in ("queue", "throttle")
    }
    assert by_kind["queue"] == [queued]
    assert len(by_kind["throttle"]) == 1 and by_kind["throttle"][0] in posts


def test_a_new_version_raising_the_limit_starts_queued_runs_at_once(project: Project) -> None:
    project.deploy("sync", SYNC)
    ids = [project.start("sync", customer="a") for _ in range(4)]
    assert project.statuses(ids) == ["waiting"] * 4
    project.deploy("sync", SYNC.replace("limit: 1", "limit: 3"))
    project.eng.work()
    kinds = [project.eng.show(i)["tokens"][0]["waiting_for"]["kind"] for i in ids]
    assert kinds == ["timer", "timer", "timer", "queue"]  # the two oldest queued got places
    assert project.places("sync", "a") == 3


def test_a_new_version_lowering_the_limit_passes_no_place_on_until_under_it(
    project: Project,
) -> None:
    project.deploy("sync", SYNC.replace("limit: 1", "limit: 3"))
    ids = [project.start("sync", customer="a") for _ in range(5)]
    project.eng.work()
    project.deploy("sync", SYNC)  # limit 1 now: 3 active, 2 queued
    project.eng.cancel(ids[0])  # 2 active stay over the new limit: nobody starts
    project.eng.work()
    assert project.eng.show(ids[3])["tokens"][0]["waiting_for"]["kind"] == "queue"
    project.eng.cancel(ids[1])
    project.eng.cancel(ids[2])  # 0 active: the oldest queued run takes the one place
    project.eng.work()
    kinds = [project.eng.show(i)["tokens"][0]["waiting_for"]["kind"] for i in ids[3:]]
    assert kinds == ["timer", "queue"]
    assert project.places("sync", "a") == 1


def test_a_new_version_without_a_limit_starts_every_queued_run(project: Project) -> None:
    project.deploy("sync", SYNC)
    ids = [project.start("sync", customer="a") for _ in range(3)]
    project.eng.work()
    project.deploy("sync", SYNC.replace('concurrency: { limit: 1, key: "{{ customer }}" }\n', ""))
    project.eng.work()
    kinds = [project.eng.show(i)["tokens"][0]["waiting_for"]["kind"] for i in ids]
    assert kinds == ["timer"] * 3


def why(project: Project, run_id: str) -> str:
    from procflow.runtime.operations.views import why_line

    [token] = project.eng.show(run_id)["tokens"]
    return why_line(token["step"], token["waiting_for"])


def test_why_a_queued_run_waits_names_places_holders_and_runs_ahead(project: Project) -> None:
    project.deploy("sync", SYNC)
    failed = project.start("sync", customer="42", fail=True)
    first, second = (project.start("sync", customer="42") for _ in range(2))
    project.eng.work()
    assert why(project, first) == (
        f"check: queued: 1 of 1 places for key 42 taken by run {failed} (failed: it keeps its "
        "place until retried to an end or cancelled); 0 runs ahead"
    )
    assert why(project, second).endswith("; 1 run ahead")
    waiting = project.eng.show(second)["tokens"][0]["waiting_for"]
    assert waiting == {
        "kind": "queue", "key": "42", "places": 1, "taken": 1, "ahead": 1,
        "holders": [{"run_id": failed, "status": "failed"}],
    }  # fmt: skip


def test_why_a_throttled_step_waits_says_until_when(project: Project) -> None:
    project.deploy("post", post_flow("post", limit=1, shared="chat"))
    ids = [project.start("post", channel="c1") for _ in range(2)]
    project.eng.work()
    [waiting] = [i for i in ids if project.eng.show(i)["tokens"]]
    assert why(project, waiting) == (
        "post: throttled until 2027-01-01T00:00:10Z (budget chat, key c1)"
    )


def test_a_budget_stamps_starts_by_the_store_clock_and_spreads_refused_attempts(
    project: Project,
) -> None:
    # A worker whose round began earlier (its `now` is 9 s) reserves after the store's clock
    # reached 12 s: its start is stamped 12 s, never before the starts another worker made.
    reserve, per, sec = project.eng.loop.advancer.reserve, 10_000_000, 1_000_000
    t0 = project.eng.now()
    assert [reserve("b", "", 2, per, t0) for _ in range(2)] == [(True, t0), (True, t0)]
    project.eng.advance("12s")
    assert reserve("b", "", 2, per, t0 + 9 * sec) == (True, t0 + 12 * sec)
    assert reserve("b", "", 2, per, t0 + 12 * sec) == (True, t0 + 12 * sec)
    # Full: the refused come back one `per / limit` apart, not all when the first start frees.
    refused = [reserve("b", "", 2, per, t0 + 12 * sec) for _ in range(3)]
    assert refused == [(False, t0 + 22 * sec), (False, t0 + 27 * sec), (False, t0 + 32 * sec)]


def test_a_throttle_key_that_cannot_be_rendered_fails_the_step(project: Project) -> None:
    project.deploy(
        "keyed",
        """
        flow: keyed
        inputs:
          customer: { type: object, required: true }
        steps:
          - post:
              log.write: { message: hi }
              throttle: { limit: 1, per: 1s, key: "{{ customer.id }}" }
        """,
    )
    run_id = project.start("keyed", customer={})
    project.eng.work()
    error = project.eng.show(run_id)["error"]
    assert (error["step"], error["type"]) == ("post", "expression")
    assert error["message"].startswith("throttle.key: ")
