"""What resuming and ending a flow run reads and writes beside its row.

A run's inputs are kept as a loop row (written at start) and read only when an expression names
one; a run's loop rows all go when it completes, those of the runs that complete in one batch in
one statement, and a failed run keeps them (``runs retry`` resumes from them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from projects import DESK_MANIFEST, deploy_text, events_project

from procflow.runtime.engine import Engine
from procflow.runtime.interpret.flow_state import INPUTS
from procflow.store.queries.runrows.run_data import RunDataQueries

QUIET = """\
flow: quiet
inputs:
  k: { type: string, required: true }
steps:
  - decision:
      wait_for: desk.decided
      match: { key: "{{ k }}" }
      timeout: 1h
  - after: { set: { ok: "{{ decision.event.ok }}" } }
output: "{{ after.ok }}"
"""

NAMING = """\
flow: naming
inputs:
  k: { type: string, required: true }
  note: { type: string }
steps:
  - decision:
      wait_for: desk.decided
      match: { key: "{{ k }}" }
      timeout: 1h
  - after: { set: { said: "{{ k }} {{ decision.status }}" } }
output: "{{ after.said }}"
"""

LOOPING = """\
flow: looping
inputs:
  items: { type: array, required: true }
  fail: { type: boolean, default: false }
steps:
  - each:
      for_each: "{{ items }}"
      steps:
        - double: { set: { v: "{{ item * 2 }}" } }
  - check:
      if: "{{ fail }}"
      fail: asked to fail
output: "{{ each | length }}"
"""


@pytest.fixture
def engine(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    project = events_project(tmp_path, "desk", DESK_MANIFEST)
    eng = Engine.virtual(db_url, environ=dict(db_env), project_dir=str(project))
    for text in (QUIET, NAMING, LOOPING):
        deploy_text(eng, project, text)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def row_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, int]]:
    """How many times each loop row (path, n) was read alone."""
    reads: Counter[tuple[str, int]] = Counter()
    original = RunDataQueries.scope_row

    def counted(self: RunDataQueries, run_id: str, path: str, n: int) -> Any:
        reads[path, n] += 1
        return original(self, run_id, path, n)

    monkeypatch.setattr(RunDataQueries, "scope_row", counted)
    return reads


def scope_rows(engine: Engine, run_id: str) -> int:
    row = engine.store.read().c.execute("SELECT count(*) FROM scopes WHERE run_id=?", (run_id,))
    return int(row.fetchone()[0])


def test_a_run_resumed_by_an_event_reads_its_inputs_only_when_a_step_names_one(
    engine: Engine, row_reads: Counter[tuple[str, int]]
) -> None:
    quiet = engine.start_flow("quiet", {"k": "a"})
    naming = engine.start_flow("naming", {"k": "b"})
    engine.work()
    row_reads.clear()  # the match expressions named k when the runs began to wait

    engine.send_event("desk.decided", {"key": "a", "ok": True})
    engine.work()
    assert engine.show(quiet)["output"] is True
    assert row_reads[INPUTS] == 0  # nothing after the wait names an input

    engine.send_event("desk.decided", {"key": "b", "ok": False})
    engine.work()
    assert engine.show(naming)["output"] == "b received"
    assert row_reads[INPUTS] == 1  # read once, for the step that names k


def test_an_optional_input_left_out_reads_as_null_when_named_after_a_wait(engine: Engine) -> None:
    path = Path(engine.catalog.project_dir or "") / "unset.flow.yaml"
    path.write_text(
        NAMING.replace("flow: naming", "flow: unset").replace("{{ k }} {{", "{{ note }} {{")
    )
    engine.deploy(str(path))
    run_id = engine.start_flow("unset", {"k": "c"})
    engine.work()
    engine.send_event("desk.decided", {"key": "c"})
    engine.work()
    run = engine.show(run_id)
    assert run["status"] == "failed"
    assert run["error"]["message"].startswith("[note] is null and cannot be rendered into text")


def test_runs_completing_in_one_batch_leave_no_loop_rows_and_a_failed_run_keeps_its_own(
    engine: Engine,
) -> None:
    done = [engine.start_flow("looping", {"items": [1, 2, 3]}) for _ in range(5)]
    failed = engine.start_flow("looping", {"items": [4], "fail": True})
    assert all(scope_rows(engine, r) >= 1 for r in [*done, failed])  # the inputs, at least
    engine.work()
    assert [engine.show(r)["output"] for r in done] == [3] * 5
    assert [scope_rows(engine, r) for r in done] == [0] * 5
    assert engine.show(failed)["status"] == "failed"
    assert scope_rows(engine, failed) >= 1
