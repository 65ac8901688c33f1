"""An event handed to the token that the statement locking its run read (PostgreSQL).

The statement that locks the waiting runs reads their tokens too, from the snapshot it began
with: a token that moved on and parked again while the run was locked by someone else would be
read as it was. So the write that hands the event over takes the wait only if neither the wait
nor the token is a newer row version than the one read (``xmin``); otherwise it writes nothing
and the delivery reads the token again under the run's lock, as on SQLite (one writer: what it
reads is never stale, and it always reads the token with the wait taken).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine
from procflow.store.queries.waits import SeenWait
from procflow.store.rows import HistoryRow
from procflow.store.store import Tx

MANIFEST = """\
connector: desk
description: Decisions arriving from outside.
events:
  decided:
    payload:
      key: { type: string, required: true }
    correlate_on: [key]
"""
FLOW = """\
flow: awaiting
inputs:
  k: { type: string, required: true }
steps:
  - decision:
      wait_for: desk.decided
      match: { key: "{{ k }}" }
      timeout: 1h
  - after: { set: { seen: "{{ decision.status }} {{ decision.event.key }}" } }
output: "{{ after.seen }}"
"""


@pytest.fixture
def engine(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    project = tmp_path / "project"
    (project / "connectors" / "desk").mkdir(parents=True)
    (project / "connectors" / "desk" / "manifest.yaml").write_text(MANIFEST)
    (project / "connectors" / "desk" / "__init__.py").write_text("")
    (project / "awaiting.flow.yaml").write_text(FLOW)
    eng = Engine.virtual(db_url, environ=dict(db_env))
    try:
        eng.deploy(str(project / "awaiting.flow.yaml"))
        yield eng
    finally:
        eng.close()


def seqs(engine: Engine, run_id: str) -> list[int]:
    return [entry.seq for entry in engine.store.read().history(run_id)]


def test_a_wait_read_before_it_changed_is_read_again_and_delivered_once(
    engine: Engine, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stamp made stale, as if another transaction had changed the rows between the
    read and the lock: the event still reaches the run once, its history numbered without a
    gap (the run's row is as it was before the refused write)."""
    run = engine.start_flow("awaiting", {"k": "a"})
    engine.work()
    read = Tx.waiting_runs_for_update
    stamps: list[Any] = []

    def stale(tx: Tx, type_: str, keys: str) -> list[SeenWait]:
        waits = read(tx, type_, keys)
        stamps.extend(wait.stamp for wait in waits)
        return [w._replace(stamp=("0", "0")) if w.stamp else w for w in waits]

    monkeypatch.setattr(Tx, "waiting_runs_for_update", stale)
    got = engine.send_event("desk.decided", {"key": "a"}, "e-1")

    assert got["resumed"] == [run]
    assert len(stamps) == 1 and (stamps[0] is not None) is (backend == "postgresql")
    engine.work()
    shown = engine.show(run)
    assert (shown["status"], shown["output"]) == ("completed", "received a")
    numbers = seqs(engine, run)
    assert numbers == list(range(1, len(numbers) + 1))
    assert engine.send_event("desk.decided", {"key": "a"}, "e-2")["resumed"] == []


def test_the_write_refuses_a_wait_or_token_that_changed_since_it_was_read(
    engine: Engine, backend: str
) -> None:
    """The one-statement delivery itself: a stale wait or a stale token writes nothing (the
    wait stays, the token waits, no history, no delivery); the stamps as read write it all."""
    run = engine.start_flow("awaiting", {"k": "a"})
    engine.work()
    store = engine.store
    with store.tx() as tx:
        (seen,) = tx.waiting_runs_for_update("desk.decided", '["a"]')
    if backend == "sqlite":  # one writer: nothing to compare, the token is read with its wait
        assert (seen.token, seen.stamp) == (None, None)
        return
    assert seen.token is not None and seen.stamp is not None
    wait_xmin, token_xmin = seen.stamp
    before = seqs(engine, run)
    entry = HistoryRow(seen.run.seq + 1, 0, "event.received", "decision", "", 0, {})
    for stamp in ((str(int(wait_xmin) + 1), token_xmin), (wait_xmin, str(int(token_xmin) + 1))):
        with store.tx() as tx:
            assert not tx.deliver_to_seen_token("e-x", seen.run, seen.token, entry, stamp)
        assert seqs(engine, run) == before
        assert store.read().tokens(run)[0].state == "waiting"
        with store.tx() as tx:
            assert [w.token_id for w in tx.waiting_runs_for_update("desk.decided", '["a"]')] == [
                seen.token_id
            ]
    with store.tx() as tx:
        assert tx.deliver_to_seen_token("e-x", seen.run, seen.token, entry, seen.stamp)
    assert seqs(engine, run) == [*before, entry.seq]
    with store.tx() as tx:
        assert tx.waiting_runs_for_update("desk.decided", '["a"]') == []
