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
    assert tokens[0]["waiting_for"] == {"kind": "queue", "key": "a"}
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
    ids = [project.start("post", channel=c) for c in ["a"] * 5 + ["b"]]
    assert project.statuses(ids) == ["completed"] * 2 + ["waiting"] * 3 + ["completed"]
    waiting = project.eng.show(ids[2])["tokens"][0]["waiting_for"]
    assert waiting == {
        "kind": "throttle", "budget": "post/post", "key": "a", "due": "2027-01-01T00:00:10Z",
    }  # fmt: skip
    project.later("10s")
    project.later("10s")
    assert project.statuses(ids) == ["completed"] * 6
    assert [started_at(project, i) for i in ids] == [
        ["00:00:00"], ["00:00:00"], ["00:00:10"], ["00:00:10"], ["00:00:20"], ["00:00:00"],
    ]  # fmt: skip
    throttled = [h for h in project.eng.show(ids[4])["history"] if h["type"] == "step.throttled"]
    assert [h["until"] for h in throttled] == ["2027-01-01T00:00:10Z", "2027-01-01T00:00:20Z"]
    assert all(h["attempt"] == 1 for h in throttled)  # waiting is not an attempt


def test_a_named_budget_is_shared_between_flows(project: Project) -> None:
    project.deploy("one", post_flow("one", shared="chat"))
    project.deploy("two", post_flow("two", shared="chat"))
    ids = [project.start(n, channel="a") for n in ("one", "two", "one")]
    assert project.statuses(ids) == ["completed", "completed", "waiting"]
    assert project.eng.show(ids[2])["tokens"][0]["waiting_for"]["budget"] == "chat"


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
    assert project.statuses(ids) == ["completed", "waiting"]
    assert len(project.eng.list_runs(name="child")) == 1
    project.later("1m")
    assert project.statuses(ids) == ["completed", "completed"]
    assert len(project.eng.list_runs(name="child")) == 2


def test_runs_list_filters_queued_and_throttled_runs(project: Project) -> None:
    project.deploy("sync", SYNC)
    project.deploy("post", post_flow("post", limit=1))
    queued = [project.start("sync", customer="a") for _ in range(2)][1]
    throttled = [project.start("post", channel="a") for _ in range(2)][1]
    project.eng.work()
    by_kind = {
        kind: [item["id"] for item in project.eng.runs_page(waiting=kind).items]
        for kind in ("queue", "throttle")
    }
    assert by_kind == {"queue": [queued], "throttle": [throttled]}


def test_a_budget_counts_the_starts_a_worker_with_an_older_now_must_see(project: Project) -> None:
    # Two workers: one reserves at its round's now (12 s), the other at an older one (9 s, its
    # round began earlier). The starts at 0 s are in the older caller's window [0 s, 10 s) and
    # must still be counted, though the newer caller's window no longer holds them.
    reserve, per = project.eng.loop.advancer.reserve, 10_000_000
    assert [reserve("b", "", 2, per, 0) for _ in range(2)] == [None, None]
    assert reserve("b", "", 2, per, 12_000_000) is None
    assert reserve("b", "", 2, per, 9_000_000) == 10_000_000
    assert reserve("b", "", 2, per, 10_000_000) is None  # the window [0 s, 10 s) is over
