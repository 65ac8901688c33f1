"""A worker survives any one run: a run that cannot be advanced fails alone (its incident), an
attempt that blocks is abandoned at its deadline and fails as a timeout, project code that raises
SystemExit or KeyboardInterrupt fails its step — and in every case the other runs of the batch
complete. On both store backends."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import StoreError
from procflow.runtime.engine import Engine
from procflow.runtime.work import loop as work
from procflow.runtime.work.commit import Committer
from procflow.store.store import Store
from procflow.testing import fake_action

MANIFEST = """\
connector: svc
description: A stand-in service whose action the tests fake.
actions:
  call:
    args: { n: { type: integer } }
    result: { n: { type: integer } }
"""

PACKAGE = '''\
"""The real action: it blocks when told to (the graceful-stop test runs it in a worker)."""
import os
import time
from pathlib import Path


def call(ctx, n=None):
    if n == 1 and os.environ.get("SVC_BLOCK"):
        Path(os.environ["SVC_BLOCK"]).write_text("started")
        time.sleep(3600)
    return {"n": n}
'''

FLOW = """\
flow: f
inputs:
  n: { type: integer }
steps:
  - call: { svc.call: { n: "{{ n }}" } }
output:
  n: "{{ call.n }}"
"""


def write_project(root: Path, flow: str = FLOW) -> Path:
    (root / "connectors" / "svc").mkdir(parents=True, exist_ok=True)
    (root / "connectors" / "svc" / "manifest.yaml").write_text(MANIFEST)
    (root / "connectors" / "svc" / "__init__.py").write_text(PACKAGE)
    path = root / "f.flow.yaml"
    path.write_text(textwrap.dedent(flow))
    return path


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test, so an abandoned call's thread ends too."""
    event = threading.Event()
    yield event
    event.set()


def start_runs(engine: Engine, count: int = 4) -> list[str]:
    return [engine.start_flow("f", {"n": n}) for n in range(1, count + 1)]


def show(engine: Engine, run_id: str) -> dict[str, Any]:
    return engine.show(run_id)


def assert_others_completed(engine: Engine, run_ids: list[str]) -> None:
    for run_id in run_ids:
        shown = show(engine, run_id)
        assert shown["status"] == "completed", shown
        assert shown["output"] == {"n": int(shown["bindings"]["call"]["n"])}


# --- hung steps ----------------------------------------------------------------------------------


def test_a_blocked_call_fails_as_a_timeout_and_the_other_runs_complete(
    db_url: str, tmp_path: Path, release: threading.Event
) -> None:
    def action(ctx: Any, n: int) -> dict[str, Any]:
        if n == 1:
            release.wait(60)  # blocks far past the step timeout
        return {"n": n}

    engine = Engine.virtual(db_url, step_timeout="1s")
    try:
        engine.deploy(str(write_project(tmp_path)))
        blocked, *others = start_runs(engine)
        with fake_action("svc.call", action):
            engine.work()
        run = show(engine, blocked)
        assert run["status"] == "failed"
        assert run["error"]["type"] == "timeout"
        assert run["error"]["message"] == "the attempt ran longer than 1s and was abandoned"
        failed = [h for h in run["history"] if h["type"] == "step.failed"]
        assert [(h["step"], h["error_type"]) for h in failed] == [("call", "timeout")]
        assert_others_completed(engine, others)
        assert engine.store.read().lease_of(blocked) == (None, None)  # no longer renewed
    finally:
        engine.close()


def test_a_timed_out_attempt_is_retried_like_any_failure(
    db_url: str, tmp_path: Path, release: threading.Event
) -> None:
    flow = FLOW.replace(
        '- call: { svc.call: { n: "{{ n }}" } }',
        '- call: { svc.call: { n: "{{ n }}" }, retry: { count: 2, every: 10s } }',
    )
    calls: list[int] = []

    def action(ctx: Any, n: int) -> dict[str, Any]:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            release.wait(60)
        return {"n": n}

    engine = Engine.virtual(db_url, step_timeout="1s")
    try:
        engine.deploy(str(write_project(tmp_path, flow)))
        run_id = engine.start_flow("f", {"n": 7})
        with fake_action("svc.call", action):
            engine.work()
            assert show(engine, run_id)["tokens"][0]["waiting_for"]["kind"] == "retry"
            engine.advance("10s")
        run = show(engine, run_id)
        assert run["status"] == "completed"
        assert calls == [1, 2]
    finally:
        engine.close()


def test_a_flow_steps_own_timeout_overrides_the_workers(db_url: str, tmp_path: Path) -> None:
    flow = FLOW.replace(
        '- call: { svc.call: { n: "{{ n }}" } }',
        '- call: { svc.call: { n: "{{ n }}" }, timeout: 10s }',
    )

    def slow(ctx: Any, n: int) -> dict[str, Any]:
        time.sleep(1.5)  # longer than the worker's step timeout, within the step's own
        return {"n": n}

    engine = Engine.virtual(db_url, step_timeout="1s")
    try:
        engine.deploy(str(write_project(tmp_path, flow)))
        run_id = engine.start_flow("f", {"n": 3})
        with fake_action("svc.call", slow):
            engine.work()
        assert show(engine, run_id)["status"] == "completed"
    finally:
        engine.close()


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()])
def test_project_code_raising_systemexit_or_keyboardinterrupt_fails_its_step(
    db_url: str, tmp_path: Path, raised: BaseException
) -> None:
    def action(ctx: Any, n: int) -> dict[str, Any]:
        if n == 1:
            raise raised
        return {"n": n}

    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(write_project(tmp_path)))
        failing, *others = start_runs(engine)
        with fake_action("svc.call", action):
            engine.work()  # returns: the worker did not exit
        run = show(engine, failing)
        assert run["status"] == "failed"
        detail = "(3)" if isinstance(raised, SystemExit) else ""
        assert run["error"]["message"] == (
            f"the step's code raised {type(raised).__name__}{detail}; a step cannot stop its worker"
        )
        assert_others_completed(engine, others)
    finally:
        engine.close()


# --- poisoned runs -------------------------------------------------------------------------------


def test_a_transition_the_store_refuses_fails_its_run_alone(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the store refuses (not the store failing) fails the group commit; the batch is
    committed again one run at a time, and only that run fails, with the refusal as its
    incident."""
    from procflow.runtime.work.commit import Committer

    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(write_project(tmp_path)))
        refused, *others = start_runs(engine)
        real = Committer._apply

        def refuse(self: Committer, tx: Any, rc: Any, tr: Any, now: int, rows: Any) -> None:
            if rc.run.id == refused and rc.run.status == "completed":
                raise ValueError("value out of range for the column (simulated)")
            real(self, tx, rc, tr, now, rows)

        monkeypatch.setattr(Committer, "_apply", refuse)
        with fake_action("svc.call", lambda ctx, n: {"n": n}):
            engine.work()
        run = show(engine, refused)
        assert run["status"] == "failed", run
        assert run["error"] == {
            "step": "call",
            "type": "incident",
            "message": "the worker could not advance this run: "
            "ValueError: value out of range for the column (simulated)",
        }
        assert_others_completed(engine, others)
    finally:
        engine.close()


def test_a_run_whose_project_folder_is_gone_fails_alone_and_retries_once_it_is_back(
    db_url: str, tmp_path: Path
) -> None:
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    kept_flow = FLOW.replace("flow: f", "flow: g")
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(write_project(gone)))
        engine.deploy(str(write_project(kept, kept_flow)))
        poisoned = start_runs(engine, 2)
        fine = [engine.start_flow("g", {"n": n}) for n in (5, 6)]
    finally:
        engine.close()
    shutil.move(gone, tmp_path / "moved")
    engine = Engine(db_url)  # a worker that never compiled the version before
    try:
        engine.work()
        for run_id in poisoned:
            run = show(engine, run_id)
            assert run["status"] == "failed"
            assert run["error"]["type"] == "incident"
            assert run["error"]["message"].startswith(
                "the worker could not advance this run: DefinitionError: "
            )
        assert_others_completed(engine, fine)
    finally:
        engine.close()
    shutil.move(tmp_path / "moved", gone)
    engine = Engine(db_url)
    try:
        for run_id in poisoned:
            engine.retry(run_id)
        engine.work()
        assert_others_completed(engine, poisoned)
    finally:
        engine.close()


def test_a_due_time_past_year_9999_fails_its_run_alone(db_url: str, tmp_path: Path) -> None:
    flow = FLOW.replace("steps:\n", "steps:\n  - pause: { wait: { for: 2d } }\n")
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(write_project(tmp_path, flow)))
        engine.deploy(str(write_project(tmp_path / "g", FLOW.replace("flow: f", "flow: g"))))
        engine.set_clock(from_iso("9999-12-30T00:00:00Z"))
        poisoned = engine.start_flow("f", {"n": 1})
        fine = [engine.start_flow("g", {"n": n}) for n in (2, 3)]
        with fake_action("svc.call", lambda ctx, n: {"n": n}):
            engine.work()
        run = show(engine, poisoned)
        assert run["status"] == "failed"
        assert run["error"]["type"] == "incident"
        assert "OverflowError" in run["error"]["message"]
        assert_others_completed(engine, fine)
    finally:
        engine.close()


def test_the_clock_refuses_to_move_past_year_9999(db_url: str) -> None:
    from procflow.errors import ProcflowError, UsageError

    engine = Engine.virtual(db_url)
    try:
        with pytest.raises(ProcflowError, match="100 years"):
            engine.advance("3000000d")  # a written duration that long is refused outright
        with pytest.raises(UsageError, match="cannot move past 9999-12-31T23:59:59Z"):
            engine.set_clock(from_iso("9999-12-31T23:59:59Z") + 1_000_000)
        assert engine.now() == from_iso("2027-01-01T00:00:00Z")  # nothing moved
    finally:
        engine.close()


def from_iso(text: str) -> int:
    from procflow.runtime.clock import from_iso as parse

    return parse(text)


def test_a_run_whose_vars_no_longer_decrypt_fails_alone(tmp_path: Path) -> None:
    """SQLite only: the key is a file beside the database, replaced here by another one."""
    project = tmp_path / "p"
    (project / "custom").mkdir(parents=True)
    (project / "custom" / "__init__.py").write_text(DELEGATES)
    (project / "app.intent").write_text(VARS_APP)
    db = tmp_path / "v.db"
    engine = Engine.virtual(str(db))
    try:
        engine.deploy(str(project / "app.intent"))
        jobs = [engine.create_record("Job", {"title": t})["id"] for t in ("a", "b")]
        plain = engine.create_record("Plain", {"title": "c"})["id"]
        engine.work()  # each run produced its var; its next step waits for a retry
        Path(f"{db}.key").write_text("another-key-" + "x" * 40)  # the key was replaced
    finally:
        engine.close()
    engine = Engine(f"sqlite:///{db}")
    try:
        engine.advance("1h")
        for id_ in jobs:
            (run,) = engine.runs_for_record("Job", id_)
            error = show(engine, run.id)["error"]
            assert run.status == "failed", error
            assert error["type"] == "incident" and "SecretKeyError" in error["message"]
        assert [r.status for r in engine.runs_for_record("Plain", plain)] == ["completed"]
    finally:
        engine.close()


DELEGATES = """\
class Make:
    def execute(self, ctx):
        ctx.vars["token"] = "s3cret-token-value"


class Use:
    def execute(self, ctx):
        if ctx.attempt == 1:
            raise ConnectionError("not yet")
        assert ctx.vars["token"] == "s3cret-token-value"


class Flaky:
    def execute(self, ctx):
        if ctx.attempt == 1:
            raise ConnectionError("not yet")
"""

VARS_APP = """\
name: vars
entities:
  - name: Job
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string }
  - name: Plain
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string }
processes:
  - name: UsesVar
    trigger: { onCreate: Job }
    vars:
      - { name: token }
    steps:
      - { name: make, kind: serviceTask, args: { delegate: Make, produces: [token] } }
      - name: use
        kind: serviceTask
        args: { delegate: Use, uses: [token], retry: { count: 1, every: PT1H }, next: end }
  - name: PlainRun
    trigger: { onCreate: Plain }
    steps:
      - name: flaky
        kind: serviceTask
        args: { delegate: Flaky, retry: { count: 1, every: PT1H }, next: end }
"""


# --- the loop itself -------------------------------------------------------------------------


def test_a_batch_is_advanced_and_committed_on_one_thread(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quick attempts run on the thread that claims and commits (a watchdog thread looks on),
    so a batch's contexts are not handed between threads and cores with every round."""
    attempts: set[int] = set()
    commits: set[int] = set()
    original = Committer.commit_batch

    def commit_batch(self: Committer, batch: Any, now: int) -> set[str]:
        commits.add(threading.get_ident())
        return original(self, batch, now)

    def action(ctx: Any, n: int) -> dict[str, Any]:
        attempts.add(threading.get_ident())
        return {"n": n}

    monkeypatch.setattr(Committer, "commit_batch", commit_batch)
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(write_project(tmp_path)))
        runs = start_runs(engine, 6)
        with fake_action("svc.call", action):
            engine.work()
        assert_others_completed(engine, runs)
    finally:
        engine.close()
    assert len(attempts) == 1
    assert attempts == commits
    assert threading.get_ident() not in attempts


def test_a_store_error_backs_off_and_the_loop_goes_on(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engine = Engine.virtual(db_url)
    stop = threading.Event()
    calls = {"n": 0}

    def flaky(
        self: work.WorkLoop, stop_: threading.Event | None = None, watchdog: object = None
    ) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise StoreError("disk I/O error (simulated)")
        stop.set()
        return 0

    monkeypatch.setattr(work.WorkLoop, "work_batch", flaky)
    monkeypatch.setattr(work, "BACKOFF_FIRST", 0.01)
    try:
        with caplog.at_level(logging.ERROR, logger="procflow.worker"):
            assert engine.work(until_idle=False, stop=stop) == 0
    finally:
        engine.close()
    assert calls["n"] == 2
    assert "store error, retrying in 0.0s: disk I/O error (simulated)" in caplog.text


def test_a_graceful_stop_waits_at_most_the_stop_timeout_then_hands_back(
    db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    engine = Engine.virtual(db_url)
    try:
        engine.deploy(str(write_project(tmp_path)))
        blocked = engine.start_flow("f", {"n": 1})
    finally:
        engine.close()
    marker = tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    env.update(db_env, SVC_BLOCK=str(marker))
    worker = subprocess.Popen(
        [sys.executable, "-m", "procflow.cli", "worker", "--db", db_url,
         "--step-timeout", "1h", "--stop-timeout", "1s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the attempt never started"
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    store = Store(db_url)
    try:
        assert store.read().lease_of(blocked) == (None, None)  # handed back, not left to expire
        assert store.read().run(blocked).status == "running"  # its attempt committed nothing
    finally:
        store.close()
