"""Logs an operator can follow a run by: with ``--verbose`` each attempt as it ends (``run_id``,
``definition``, ``step``, ``attempt``, ``outcome``, ``duration_ms``); at INFO each run that
fails (``run_id``, ``definition``, ``step``, the masked message), in both formats. Never a var
value, even when the failing step's error quotes it."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opsite import SECRET, Site, make_site

from procflow.runtime.transition import Transition
from procflow.runtime.work import advancing
from procflow.runtime.work.observe import NO_OBSERVER, Observer, Observers
from procflow.runtime.work.run_logs import RunLogObserver, with_run_logs

TOKEN = "tok-Zq9x-7h3K-a-var-value"  # what the delegate puts in a var and in its error

VAULT = """\
name: vault
entities:
  - name: Job
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
processes:
  - name: Leaky
    trigger: { onCreate: Job }
    vars:
      - { name: token }
    steps:
      - name: fetch
        kind: serviceTask
        args: { delegate: Fetcher, produces: [token] }
      - name: use
        kind: serviceTask
        args: { delegate: User, uses: [token] }
      - { name: done, kind: end }
"""

DELEGATES = """\
import os


class Fetcher:
    def execute(self, ctx):
        ctx.vars["token"] = os.environ["PF_LOG_TOKEN"]


class User:
    def execute(self, ctx):
        raise PermissionError(f"login refused for {ctx.vars['token']}")
"""


@pytest.fixture
def site(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Site]:
    made = make_site(tmp_path, db_url, db_env)
    try:
        (made.dir / "custom").mkdir()
        (made.dir / "custom" / "__init__.py").write_text(DELEGATES)
        (made.dir / "vault.intent").write_text(VAULT)
        made.engine.deploy(str(made.dir / "vault.intent"))
        yield made
    finally:
        made.engine.close()


def worker_logs(site: Site, db_url: str, db_env: dict[str, str], *flags: str) -> str:
    env = {"PATH": "/usr/bin:/bin", **db_env, "PF_OPS_SECRET": SECRET, "PF_LOG_TOKEN": TOKEN}
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle", "--db", db_url, *flags],
        env=env, cwd=site.dir, text=True, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stderr and TOKEN not in done.stderr  # never a var or secret value
    return done.stderr


def scene(site: Site) -> tuple[str, str, str]:
    """A run that completes, one whose step fails, one whose delegate fails quoting a var."""
    (done,) = site.start("done")
    (broken,) = site.start("broken")
    site.engine.create_record("Job", {"title": "leak"})
    (leaky,) = [r.id for r in site.engine.list_runs(name="Leaky")]
    return done, broken, leaky


def test_verbose_json_lines_name_each_attempt_and_each_failed_run(
    site: Site, db_url: str, db_env: dict[str, str]
) -> None:
    done, broken, leaky = scene(site)
    stderr = worker_logs(site, db_url, db_env, "--verbose", "--log-format", "json")
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    attempts = [e for e in logged if e["msg"].startswith("attempt ended: ")]
    for entry in attempts:
        assert entry["level"] == "debug"
        assert {
            "run_id",
            "definition",
            "step",
            "attempt",
            "outcome",
            "duration_ms",
            "worker",
        } <= set(entry)
        assert entry["msg"] == f"attempt ended: {entry['outcome']}"
        assert isinstance(entry["duration_ms"], int | float) and entry["duration_ms"] >= 0
    by_run = {
        (e["run_id"], e["step"]): (e["definition"], e["attempt"], e["outcome"]) for e in attempts
    }
    assert by_run[(done, "one")] == ("done", 1, "completed")
    assert by_run[(broken, "boom")] == ("broken", 1, "failed")
    assert by_run[(leaky, "fetch")] == ("Leaky", 1, "completed")
    assert by_run[(leaky, "use")] == ("Leaky", 1, "failed")
    failed = [e for e in logged if e["msg"].startswith("run failed")]
    assert [
        (e["level"], e["run_id"], e["definition"], e["step"], e["outcome"]) for e in failed
    ] in (
        [("info", broken, "broken", "boom", "failed"), ("info", leaky, "Leaky", "use", "failed")],
        [("info", leaky, "Leaky", "use", "failed"), ("info", broken, "broken", "boom", "failed")],
    )
    messages = {e["run_id"]: e["msg"] for e in failed}
    assert messages == {broken: "run failed: refused", leaky: "run failed: login refused for ***"}
    assert not [e for e in logged if e.get("run_id") == done and e["level"] != "debug"]


def test_verbose_text_lines_show_the_same_fields(
    site: Site, db_url: str, db_env: dict[str, str]
) -> None:
    _, broken, leaky = scene(site)
    stderr = worker_logs(site, db_url, db_env, "--verbose")
    assert re.search(
        rf" DEBUG procflow\.worker: attempt ended: failed run_id={broken} definition=broken "
        r"step=boom attempt=1 outcome=failed duration_ms=\d+(\.\d+)? worker=\S+$",
        stderr,
        re.MULTILINE,
    ), stderr
    assert re.search(
        rf" INFO procflow\.worker: run failed: login refused for \*\*\* run_id={leaky} "
        r"definition=Leaky step=use outcome=failed worker=\S+$",
        stderr,
        re.MULTILINE,
    ), stderr


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_at_info_only_failed_runs_are_logged(
    site: Site, db_url: str, db_env: dict[str, str], log_format: str
) -> None:
    _, broken, leaky = scene(site)
    stderr = worker_logs(site, db_url, db_env, "--log-format", log_format)
    assert "attempt ended" not in stderr
    failed = [line for line in stderr.splitlines() if "run failed: " in line]
    assert len(failed) == 2
    assert any(broken in line and "refused" in line for line in failed)
    assert any(leaky in line and "login refused for ***" in line for line in failed)


def test_an_incident_is_logged_once_and_its_attempt_at_debug(
    site: Site, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_id,) = site.start("done")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug under the step (simulated)")

    monkeypatch.setattr(advancing, "advance_flow", broken)
    with caplog.at_level(logging.DEBUG, logger="procflow.worker"):
        site.engine.loop.advancer.observer = with_run_logs(None)
        site.engine.work()
    about = [r for r in caplog.records if getattr(r, "run_id", None) == run_id]
    [attempt] = [r for r in about if r.getMessage().startswith("attempt ended")]
    assert (attempt.step, attempt.outcome, attempt.attempt) == ("one", "incident", 1)  # type: ignore[attr-defined]
    # The incident's own ERROR line says the run failed; the INFO line is not added to it.
    assert [r.getMessage()[:28] for r in about if "failed" in r.getMessage()[:12]] == [
        "run failed with an incident:"
    ]


class Counting(Observer):
    def __init__(self) -> None:
        self.attempts = 0
        self.batches = 0

    def attempted(self, ctx: Any, outcome: Any) -> None:
        self.attempts += 1

    def committed(self, steps: Any) -> None:
        self.batches += 1


def test_the_run_logs_join_a_metrics_observer_and_step_aside_when_info_is_off(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Counting()
    with caplog.at_level(logging.WARNING, logger="procflow.worker"):
        assert with_run_logs(None) is NO_OBSERVER  # the advancer keeps its fast path
        assert with_run_logs(metrics) is metrics
    with caplog.at_level(logging.INFO, logger="procflow.worker"):
        assert isinstance(with_run_logs(None), RunLogObserver)
        both = with_run_logs(metrics)
        assert isinstance(both, Observers)
        site.start("broken")
        site.engine.loop.advancer.observer = both
        site.engine.work()
    assert (metrics.attempts, metrics.batches) == (1, 1)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "run failed: refused"
    ]


def test_a_failed_run_message_is_masked_with_the_vars_its_transition_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from procflow.store.rows import RunRow

    run = RunRow("r1", 1, "p", "intent", "failed", 0)
    run.error = {"step": "use", "message": f"refused {TOKEN}", "type": "PermissionError"}
    tr = Transition(run, 0)
    tr.vars_set["token"] = TOKEN
    tr.add("run.failed", "use", None, 1, message="x")
    with caplog.at_level(logging.INFO, logger="procflow.worker"):
        RunLogObserver().committed([(None, tr)])  # type: ignore[list-item]
    assert [r.getMessage() for r in caplog.records] == ["run failed: refused ***"]
