"""Long loops on both store backends: what ``until`` and later steps see after hundreds of
iterations, and that an iteration does not read the rows of the iterations before it.

A ``repeat`` keeps each finished iteration's scope as a row of its own; reading all of them at
every iteration made the cost of an iteration grow with the number before it (3.4 ms at first,
128 ms at 10,800). Here an iteration only writes its row, and only the finished loop reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine
from procflow.store.queries.runrows.run_data import RunDataQueries

ITERATIONS = 300

REPEAT_FLOW = """\
flow: repeat-scale
inputs:
  iterations: { type: integer, required: true }
steps:
  - poll:
      repeat: { every: 1s, max: 1000, until: "{{ tick.n >= iterations }}" }
      steps:
        - tick: { set: { n: "{{ ((now() - timestamp(run.started_at)) / 1s) | int + 1 }}" } }
        - seen: { set: { twice: "{{ tick.n * 2 }}" } }
  - after:
      set:
        count: "{{ poll | length }}"
        first: "{{ poll[0].tick.n }}"
        last: "{{ poll[-1].seen.twice }}"
output:
  count: "{{ after.count }}"
"""

FOR_EACH_FLOW = """\
flow: for-each-waits
inputs:
  items: { type: array, required: true }
steps:
  - each:
      for_each: "{{ items }}"
      as: item
      steps:
        - pause: { wait: { for: 1s } }
        - got: { set: { value: "{{ item * 10 }}" } }
  - total: { set: { n: "{{ each | length }}", last: "{{ each[-1].got.value }}" } }
"""


@pytest.fixture
def engine_at(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    engine = Engine.virtual(db_url, environ=db_env)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def scope_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times the rows of each loop path were read in full."""
    reads: Counter[str] = Counter()
    original = RunDataQueries.scopes

    def counted(self: RunDataQueries, run_id: str, path: str) -> dict[int, Any]:
        reads[path] += 1
        return original(self, run_id, path)

    monkeypatch.setattr(RunDataQueries, "scopes", counted)
    return reads


def deploy(engine: Engine, tmp_path: Path, text: str, name: str) -> None:
    path = tmp_path / f"{name}.flow.yaml"
    path.write_text(text)
    engine.deploy(str(path))


def test_a_long_repeat_shows_until_and_later_steps_every_iteration(
    engine_at: Engine, tmp_path: Path, scope_reads: Counter[str]
) -> None:
    engine = engine_at
    deploy(engine, tmp_path, REPEAT_FLOW, "repeat-scale")
    run_id = engine.start_flow("repeat-scale", {"iterations": ITERATIONS})
    engine.work()
    for _ in range(ITERATIONS - 1):
        assert engine.show(run_id, history=0)["status"] == "waiting"
        engine.advance("1s")
    shown = engine.show(run_id, history=0)
    assert shown["status"] == "completed"
    poll = shown["bindings"]["poll"]
    assert poll == [{"tick": {"n": k}, "seen": {"twice": 2 * k}} for k in range(1, ITERATIONS + 1)]
    assert shown["bindings"]["after"] == {"count": ITERATIONS, "first": 1, "last": 2 * ITERATIONS}
    assert shown["output"] == {"count": ITERATIONS}
    # the iterations only wrote their rows; the finished loop read them once
    assert scope_reads["poll"] <= 1


def test_a_repeat_survives_a_new_engine_half_way(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    first = Engine.virtual(db_url, environ=db_env)
    try:
        deploy(first, tmp_path, REPEAT_FLOW, "repeat-scale")
        run_id = first.start_flow("repeat-scale", {"iterations": 40})
        first.work()
        for _ in range(19):
            first.advance("1s")
    finally:
        first.close()
    second = Engine(db_url, environ=db_env)  # nothing of the loop in memory
    try:
        for _ in range(20):
            second.advance("1s")
        shown = second.show(run_id, history=0)
    finally:
        second.close()
    assert shown["status"] == "completed"
    assert [it["tick"]["n"] for it in shown["bindings"]["poll"]] == list(range(1, 41))


def test_a_for_each_whose_iterations_wait_binds_every_iteration(
    engine_at: Engine, tmp_path: Path, scope_reads: Counter[str]
) -> None:
    engine = engine_at
    deploy(engine, tmp_path, FOR_EACH_FLOW, "for-each-waits")
    items = list(range(1, 61))
    run_id = engine.start_flow("for-each-waits", {"items": items})
    engine.work()
    for _ in items:
        engine.advance("1s")
    shown = engine.show(run_id, history=0)
    assert shown["status"] == "completed"
    assert [it["got"]["value"] for it in shown["bindings"]["each"]] == [10 * i for i in items]
    assert shown["bindings"]["total"] == {"n": 60, "last": 600}
    assert scope_reads["each"] <= 1  # finished iterations are read once, by the finished loop
