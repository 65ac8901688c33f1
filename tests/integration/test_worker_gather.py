"""A worker woken while work streams in gathers for a moment before it claims.

Its last claim (within ``BUSY_SECONDS``) found several runs: it waits after a wake-up, 10 ms for
each of them up to 150 ms, so its next claim and commit take what became ready meanwhile. Woken
when its last claim found one run, or not woken at all (the wait ran out), it claims at once: a
quiet system's resumptions are not delayed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from procflow.runtime.engine import Engine
from procflow.runtime.work import loop as work

FLOW = """\
flow: tick
steps:
  - one: { set: { n: 1 } }
"""


@pytest.fixture
def engine(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    eng = Engine.virtual(db_url, environ=dict(db_env))
    path = tmp_path / "tick.flow.yaml"
    path.write_text(FLOW)
    eng.deploy(str(path))
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(work, "_sleep", lambda stop, seconds: slept.append(seconds))
    return slept


def woken_idle(engine: Engine, monkeypatch: pytest.MonkeyPatch, woken: bool) -> None:
    monkeypatch.setattr(engine.store, "wait_for_wakeup", lambda seconds, stop=None: woken)
    engine.loop.idle(threading.Event())


@pytest.mark.parametrize(("runs", "gather"), [(1, None), (3, 0.03), (14, 0.14), (40, 0.15)])
def test_a_woken_worker_gathers_only_after_a_claim_of_several_runs_the_longer_the_more(
    engine: Engine,
    sleeps: list[float],
    monkeypatch: pytest.MonkeyPatch,
    runs: int,
    gather: float | None,
) -> None:
    """10 ms for each run the last claim found, at most 150 ms."""
    for _ in range(runs):
        engine.start_flow("tick", {})
    assert engine.loop.work_batch() > 0
    woken_idle(engine, monkeypatch, woken=True)
    assert sleeps == ([] if gather is None else [pytest.approx(gather)])


def test_a_wait_that_ran_out_claims_at_once(
    engine: Engine, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        engine.start_flow("tick", {})
    engine.loop.work_batch()
    woken_idle(engine, monkeypatch, woken=False)
    assert sleeps == []


def test_a_worker_whose_busy_claim_is_old_claims_at_once(
    engine: Engine, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        engine.start_flow("tick", {})
    engine.loop.work_batch()
    engine.loop.streaming_at -= work.BUSY_SECONDS  # as if the claim had been that long ago
    woken_idle(engine, monkeypatch, woken=True)
    assert sleeps == []
