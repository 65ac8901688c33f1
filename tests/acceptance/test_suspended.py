"""No process while suspended: a run waiting on a 1-hour retry costs rows, never a process.

Every command below is its own `procflow` process that has exited before the next starts. The
run sits in a retry wait due an hour later with nothing of procflow alive, and a *new* process
picks it up from the store once the (virtual) clock has moved past the due time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import Cli
from cli_runner import live_processes as procflow_processes  # of our database URL

APP = """\
name: suspended
entities:
  - name: Ping
    fields:
      - { name: id,    type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
processes:
  - name: PingOnce
    trigger: { onCreate: Ping }
    steps:
      - name: ping
        kind: serviceTask
        args:
          delegate: Pinger
          retry: { count: 1, every: PT1H }
      - { name: done, kind: end }
"""

DELEGATE = """\
import os


class Pinger:
    def execute(self, ctx):
        with open(os.path.join(ctx.project_dir, "attempts.log"), "a") as log:
            log.write(f"{ctx.attempt} {os.getpid()}\\n")
        if ctx.attempt == 1:
            raise ConnectionError("the far side is down for an hour")
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
@pytest.mark.empty_store
def test_a_run_waiting_an_hour_is_resumed_by_a_new_worker_process(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    (project / "custom").mkdir(parents=True)
    (project / "app.intent").write_text(APP)
    (project / "custom" / "__init__.py").write_text(DELEGATE)
    cli = Cli(db_url, db_env, tmp_path)

    cli("db", "init", "--virtual-clock")
    cli("deploy", str(project / "app.intent"))
    cli("records", "create", "Ping", "--data", '{"title": "an hour away"}')
    cli("worker", "--until-idle")
    (run,) = json.loads(cli("runs", "list", "--json").stdout)

    # Suspended: the run waits on its retry timer, and no procflow process is alive.
    assert procflow_processes(db_url) == []
    shown = cli.show(run["id"])
    assert shown["status"] == "waiting"
    (token,) = shown["tokens"]
    assert token["step"] == "ping"
    assert token["waiting_for"] == {
        "kind": "retry",
        "attempt": 2,
        "of": 2,
        "due": "2027-01-01T01:00:00Z",
        "last_error": "the far side is down for an hour",
    }
    assert procflow_processes(db_url) == []

    cli("clock", "advance", "PT1H")
    assert procflow_processes(db_url) == []
    cli("worker", "--until-idle")
    assert procflow_processes(db_url) == []

    shown = cli.show(run["id"])
    assert shown["status"] == "completed", shown
    assert shown["ended_at"] == "2027-01-01T01:00:00Z"
    types = [(h["type"], h.get("step"), h.get("attempt")) for h in shown["history"]]
    assert types == [
        ("run.started", None, None),
        ("step.started", "ping", 1),
        ("attempt.failed", "ping", 1),
        ("retry.scheduled", "ping", 2),
        ("timer.fired", "ping", 2),
        ("step.started", "ping", 2),
        ("step.completed", "ping", 2),
        ("step.started", "done", 1),
        ("step.completed", "done", 1),
        ("run.completed", None, None),
    ]
    fired = next(h for h in shown["history"] if h["type"] == "timer.fired")
    assert fired["at"] == "2027-01-01T01:00:00Z"

    # Attempt 1 ran in the first worker, attempt 2 in a process started after the hour passed.
    # (`clock advance` runs what falls due as it steps through time — docs/reference/cli.md,
    # `procflow clock` — so on a virtual clock it is usually that process; on the system clock it
    # is the next worker.)
    attempts = [line.split() for line in (project / "attempts.log").read_text().splitlines()]
    assert [a for a, _ in attempts] == ["1", "2"]
    first_worker, second_worker = cli.pids["worker --until-idle"]
    assert int(attempts[0][1]) == first_worker
    resumed_by = int(attempts[1][1])
    assert resumed_by in (cli.pids["clock advance"][0], second_worker)
