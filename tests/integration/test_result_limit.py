"""An action result over the size limit a run keeps (PROCFLOW_MAX_RESULT_SIZE, 1 MiB of JSON by
default) fails the attempt, on both store backends: retry and recover apply as to any failure,
and nothing of the result is kept."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from procflow.runtime.engine import Engine

MANIFEST = """\
connector: big
description: Returns as much text as asked for.
actions:
  make:
    args:
      size: { type: integer, required: true }
    result:
      blob: { type: string }
"""

CONNECTOR = """\
def make(ctx, size):
    return {"blob": "x" * size}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    connector = tmp_path / "connectors" / "big"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text(MANIFEST)
    (connector / "__init__.py").write_text(CONNECTOR)
    return tmp_path


@pytest.fixture
def engine(project: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    eng = Engine.virtual(db_url, project_dir=str(project), environ=db_env)
    try:
        yield eng
    finally:
        eng.close()


def run_flow(engine: Engine, project: Path, body: str, size: int) -> dict[str, object]:
    path = project / "big.flow.yaml"
    path.write_text(textwrap.dedent(body))
    engine.deploy(str(path))
    run_id = engine.start_flow("big", {"size": size})
    engine.work()
    engine.advance("1m")
    return engine.show(run_id)


PLAIN = """\
flow: big
inputs:
  size: { type: integer, required: true }
steps:
  - fetch:
      big.make: { size: "{{ size }}" }
      retry: { count: 1, every: 10s }
"""

RECOVERED = """\
flow: big
inputs:
  size: { type: integer, required: true }
steps:
  - guarded:
      steps:
        - fetch: { big.make: { size: "{{ size }}" } }
      recover:
        - note: { set: { why: "{{ error.message }}" } }
"""


def test_a_result_over_the_limit_fails_after_its_retries(
    engine: Engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCFLOW_MAX_RESULT_SIZE", "1KiB")
    shown = run_flow(engine, project, PLAIN, 2000)
    assert shown["status"] == "failed"
    message = shown["error"]["message"]  # type: ignore[index]
    assert message == (
        "step [fetch]: the action's result is over the limit of 1 KiB of JSON a run keeps "
        "(PROCFLOW_MAX_RESULT_SIZE); return less, e.g. a reference to where the data is stored"
    )
    failed = [h for h in shown["history"] if h["type"] == "attempt.failed"]  # type: ignore[union-attr]
    assert len(failed) == 2  # the first attempt and its one retry
    assert "x" * 100 not in str(shown)


def test_a_result_within_the_limit_is_bound(
    engine: Engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCFLOW_MAX_RESULT_SIZE", "1KiB")
    shown = run_flow(engine, project, PLAIN, 1000)  # {"blob":"x…"}: 1,011 bytes
    assert shown["status"] == "completed"
    assert shown["bindings"]["fetch"] == {"blob": "x" * 1000}  # type: ignore[index]


def test_the_default_limit_is_one_mebibyte(engine: Engine, project: Path) -> None:
    shown = run_flow(engine, project, PLAIN, 1024 * 1024)
    assert shown["status"] == "failed"
    assert "over the limit of 1 MiB of JSON" in shown["error"]["message"]  # type: ignore[index]


def test_recover_handles_a_result_over_the_limit(
    engine: Engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCFLOW_MAX_RESULT_SIZE", "100")
    shown = run_flow(engine, project, RECOVERED, 200)
    assert shown["status"] == "completed"
    why = shown["bindings"]["guarded"]["note"]["why"]  # type: ignore[index]
    assert why.startswith("step [fetch]: the action's result is over the limit of 100 bytes")
