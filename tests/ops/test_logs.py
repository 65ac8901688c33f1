"""Logs: ``--log-format text|json`` (``PROCFLOW_LOG_FORMAT``) on ``worker`` and ``serve``; the
fields each line carries; and never a secret or a token, in either format."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opsite import SECRET, Site, make_site

from procflow.cli.logs import JsonFormatter, TextFormatter
from procflow.runtime.work import advancing
from procflow.runtime.work.commit import Committer

TOKEN = "ops-logs-token-0123456789abcdefgh"
TOKENS = f"{TOKEN}=ada:admin"


@pytest.fixture
def site(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Site]:
    made = make_site(tmp_path, db_url, db_env)
    try:
        yield made
    finally:
        made.engine.close()


def record(**extra: Any) -> logging.LogRecord:
    made = logging.LogRecord(
        "procflow.worker", logging.WARNING, __file__, 1, "lost %s", ("x",), None
    )
    for name, value in extra.items():
        setattr(made, name, value)
    return made


def test_a_json_line_has_ts_level_msg_and_the_fields_that_apply() -> None:
    line = json.loads(
        JsonFormatter().format(record(run_id="r1", definition="d", step="s", attempt=2, worker="w"))
    )
    assert line["level"] == "warning" and line["msg"] == "lost x"
    assert line["ts"].endswith("Z") and line["ts"][10] == "T"
    assert {k: line[k] for k in ("run_id", "definition", "step", "attempt", "worker")} == {
        "run_id": "r1", "definition": "d", "step": "s", "attempt": 2, "worker": "w",
    }  # fmt: skip
    bare = json.loads(JsonFormatter().format(record()))
    assert set(bare) == {"ts", "level", "msg", "logger"}


def test_a_text_line_appends_the_fields() -> None:
    line = TextFormatter().format(record(run_id="r1", worker="w"))
    assert line.endswith("WARNING procflow.worker: lost x run_id=r1 worker=w")


def env_of(db_env: dict[str, str], **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", **db_env, "PF_OPS_SECRET": SECRET, **extra}


def run_worker(db_url: str, env: dict[str, str], cwd: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle", "--verbose",
         "--db", db_url, *flags],
        env=env, cwd=cwd, text=True, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_json_worker_logs_json_lines_that_name_the_worker(
    site: Site, db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    site.start("done", 2)
    stderr = run_worker(db_url, env_of(db_env), tmp_path, "--log-format", "json")
    lines = stderr.strip().splitlines()
    assert lines[-1] == "worker stopped after 4 transitions"  # the command's own summary
    logged = [json.loads(line) for line in lines[:-1]]
    messages = [entry["msg"] for entry in logged]
    assert messages[0] == "worker started" and "claimed 2 runs" in messages
    assert messages[-1] == "worker stopped after 4 transitions"
    for entry in logged:
        assert {"ts", "level", "msg", "worker"} <= set(entry), entry


def test_the_environment_chooses_the_format(
    site: Site, db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    stderr = run_worker(db_url, env_of(db_env, PROCFLOW_LOG_FORMAT="json"), tmp_path)
    assert json.loads(stderr.splitlines()[0])["msg"] == "worker started"
    text = run_worker(db_url, env_of(db_env), tmp_path)
    assert " INFO procflow.worker: worker started worker=" in text.splitlines()[0]


def test_a_bad_log_format_is_refused(db_url: str, db_env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle", "--db", db_url,
         "--log-format", "yaml"],
        env=env_of(db_env), cwd=tmp_path, text=True, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "'yaml' is not one of 'text', 'json'" in done.stderr


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_secret_and_no_token_is_ever_logged(
    site: Site, db_url: str, db_env: dict[str, str], tmp_path: Path, log_format: str
) -> None:
    """Runs that read a secret (one completes, one fails, one retries), a worker with a token
    table, and a server answering good and bad tokens: neither value is in any log line."""
    env = env_of(db_env, PROCFLOW_API_TOKENS=TOKENS, PROCFLOW_LOG_FORMAT=log_format)
    site.start("done", 2)
    site.start("broken")
    site.start("flaky")
    logs = run_worker(db_url, env, tmp_path)
    serve = subprocess.Popen(
        [sys.executable, "-m", "procflow.cli", "serve", "--port", "0", "--db", db_url],
        env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        base = serve.stdout.readline().strip().removeprefix("serving on ")
        assert base.startswith("http://127.0.0.1:"), base
        site.start("done")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the server's worker runs it
            runs = httpx.get(f"{base}/runs", headers=auth).json()["items"]
            if sum(r["status"] == "completed" for r in runs) == 3:
                break
            time.sleep(0.05)
        assert (
            httpx.get(f"{base}/runs", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code
            == 401
        )
        assert httpx.get(f"{base}/metrics", headers=auth).status_code == 200
    finally:
        serve.send_signal(signal.SIGTERM)
        _, served = serve.communicate(timeout=60)
    logs += served
    assert "worker started" in logs
    assert SECRET not in logs and TOKEN not in logs
    if log_format == "json":
        for line in logs.strip().splitlines()[:-1]:
            if line.startswith("{"):
                json.loads(line)


def test_an_incident_is_logged_with_its_run_definition_and_step(
    site: Site, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = site.start("done")[0]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug under the step (simulated)")

    monkeypatch.setattr(advancing, "advance_flow", broken)
    with caplog.at_level(logging.ERROR, logger="procflow.worker"):
        site.engine.work()
    [found] = [
        r for r in caplog.records if r.getMessage().startswith("run failed with an incident")
    ]
    assert "a bug under the step (simulated)" in found.getMessage()
    assert (found.run_id, found.definition, found.step) == (run_id, "done", "one")  # type: ignore[attr-defined]
    assert found.worker == site.engine.lease_owner  # type: ignore[attr-defined]


def test_a_lost_lease_is_logged_with_its_run_and_worker(
    site: Site, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = site.start("done")[0]
    monkeypatch.setattr(Committer, "commit_batch", lambda self, batch, now: set())
    with caplog.at_level(logging.WARNING, logger="procflow.worker"):
        site.engine.work_batch()
    [found] = [r for r in caplog.records if r.getMessage().startswith("lease lost")]
    assert (found.run_id, found.definition) == (run_id, "done")  # type: ignore[attr-defined]
    assert found.worker == site.engine.lease_owner  # type: ignore[attr-defined]
