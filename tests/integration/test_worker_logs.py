"""What a worker tells its operator: a heartbeat that cannot renew leases is logged with its
error, never swallowed; a commit conflict that hands runs back is logged."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import StoreConflict
from procflow.runtime.engine import Engine
from procflow.runtime.work import loop as work
from procflow.runtime.work.commit import Committer

FLOW = """\
flow: logged
steps:
  - one: { log.write: { message: "one" } }
"""


def test_a_failed_heartbeat_is_logged_with_its_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine.virtual(str(tmp_path / "p.db"), lease_seconds=0.03)

    class Unreachable:
        def __init__(self, url: str) -> None:
            raise OSError("the store is unreachable (simulated)")

    monkeypatch.setattr(work, "Store", Unreachable)
    engine.loop._held.add("some-run")  # a long attempt is in flight
    stop = threading.Event()
    try:
        with caplog.at_level(logging.WARNING, logger="procflow.worker"):
            beat = engine.heartbeat(stop)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and "heartbeat failed" not in caplog.text:
                time.sleep(0.01)
            stop.set()
            beat.join(timeout=2)
    finally:
        engine.close()
    assert "heartbeat failed to renew 1 leases: the store is unreachable (simulated)" in caplog.text


def test_a_commit_conflict_is_logged_when_runs_are_handed_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "l.flow.yaml").write_text(FLOW)
    engine = Engine.virtual(str(tmp_path / "p.db"))
    try:
        engine.deploy(str(tmp_path / "l.flow.yaml"))
        engine.start_flow("logged", {})

        def conflict(self: Committer, batch: Any, now: int) -> set[str]:
            raise StoreConflict("deadlock (simulated)")

        monkeypatch.setattr(Committer, "commit_batch", conflict)
        with caplog.at_level(logging.WARNING, logger="procflow.worker"):
            assert engine.work_batch() == 0
    finally:
        engine.close()
    assert "commit conflicted, 1 runs handed back: deadlock (simulated)" in caplog.text
