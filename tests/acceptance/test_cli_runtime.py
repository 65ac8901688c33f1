"""The runtime through the real `procflow` command, one process per command, on a virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cli_runner
import pytest

from procflow.runtime.engine import Engine

EPOCH = 1_798_761_600_000_000  # 2027-01-01T00:00:00Z, where a virtual clock starts

INTENT = """\
name: cli
entities:
  - name: Status
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, required: true, length: 50 }
  - name: Tenant
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
      - { name: size, type: integer }
      - { name: x, type: string, length: 100 }
    relations:
      - { name: Progress, kind: manyToOne, to: Status, function: EntityStatus, init: Requested }
seeds:
  - name: statuses
    entity: Status
    rows: [ { id: 1, name: Requested }, { id: 2, name: Done } ]
processes:
  - name: Provision
    trigger: { onCreate: Tenant }
    steps:
      - name: call
        kind: serviceTask
        args: { delegate: Steered, retry: { count: 2, every: PT1H } }
      - { name: finish, kind: serviceTask, args: { setRelationField: Progress, value: Done } }
"""

DELEGATES = """\
from pathlib import Path


class Steered:
    \"\"\"'flaky-N' fails its first N attempts; 'broken' fails while broken.flag exists.\"\"\"

    def execute(self, ctx):
        title = ctx.record["title"]
        if title.startswith("flaky-") and ctx.attempt <= int(title.split("-")[1]):
            raise ConnectionError(f"service unavailable (attempt {ctx.attempt})")
        if title == "broken" and (Path(ctx.project_dir) / "broken.flag").exists():
            raise RuntimeError(f"the service is broken (attempt {ctx.attempt})")
        ctx.record["x"] = f"done on attempt {ctx.attempt}"
"""


def write_project(root: Path) -> Path:
    (root / "custom").mkdir()
    (root / "custom" / "__init__.py").write_text(DELEGATES)
    (root / "app.intent").write_text(INTENT)
    return root / "app.intent"


class Cli(cli_runner.Cli):
    """The shared runner, plus the store read in-process."""

    def state(self) -> tuple[Any, ...]:
        """Everything a rejected request must leave as it was, read in-process."""
        engine = Engine(self.url)
        try:
            reader = engine.store.read()
            runs = engine.list_runs()
            return (
                engine.list_records("Tenant"),
                [(r.id, r.status, r.seq, r.error, len(reader.history(r.id))) for r in runs],
                [[(t.step, t.state, t.attempt) for t in reader.tokens(r.id)] for r in runs],
                engine.now(),
                engine.store.read().definitions(),
            )
        finally:
            engine.close()


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    """A virtual-clock store with the project deployed (set up in-process: it is not the test)."""
    path = write_project(tmp_path)
    engine = Engine.virtual(db_url)
    engine.deploy(str(path))
    engine.close()
    return Cli(db_url, db_env, tmp_path)


@pytest.mark.empty_store
def test_db_init_deploy_and_run_wait_exit_codes(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    write_project(tmp_path)
    cli = Cli(db_url, db_env, tmp_path)
    assert "virtual clock" in cli("db", "init", "--virtual-clock").stdout
    assert "already holds a procflow store" in cli.error("db", "init", "--virtual-clock")
    assert cli("deploy", "app.intent").stdout.strip() == "Provision → version 1"
    assert "(unchanged)" in cli("deploy", "app.intent").stdout

    shown = cli.json("run", "app.intent", "--record", '{"title": "flaky-2"}', "--wait")
    assert shown["status"] == "completed"
    assert shown["started_at"] == "2027-01-01T00:00:00Z"
    assert shown["ended_at"] == "2027-01-01T02:00:00Z"  # two retries, an hour apart
    started = [h["at"] for h in shown["history"] if h["type"] == "step.started"]
    assert started[:3] == [f"2027-01-01T0{h}:00:00Z" for h in (0, 1, 2)]

    (tmp_path / "broken.flag").touch()
    failed = cli("run", "app.intent", "--record", '{"title": "broken"}', "--wait", code=1)
    assert "failed" in failed.stdout
    assert "the service is broken (attempt 3)" in failed.stdout
    state = cli.state()
    assert [status for _, status, *_ in state[1]] == ["completed", "failed"]
    assert state[3] == 4 * 3600 * 1_000_000 + EPOCH  # run --wait moved the clock itself


def test_run_without_wait_stops_at_the_first_wait_then_cancel(cli: Cli) -> None:
    shown = cli.json("run", "app.intent", "--record", '{"title": "flaky-1"}')
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["waiting_for"] == {
        "kind": "retry", "attempt": 2, "of": 3, "due": "2027-01-01T01:00:00Z",
        "last_error": "service unavailable (attempt 1)",
    }  # fmt: skip
    assert "cancelled" in cli("runs", "cancel", shown["id"]).stdout
    before = cli.state()
    assert "already cancelled" in cli.error("runs", "cancel", shown["id"])
    assert cli.state() == before
    [(_, status, *_)] = before[1]
    assert status == "cancelled"
    assert before[2] == [[]]  # no token left to wake


def test_records_runs_worker_and_clock(cli: Cli) -> None:
    created = cli.json("records", "create", "Tenant", "--data", '{"title": "flaky-1", "size": 3}')
    assert created == {"id": 1, "title": "flaky-1", "size": 3, "x": None, "Progress": 1}
    updated = cli.json("records", "update", "Tenant", "1", "--data", '{"size": 4}')
    assert updated == {**created, "size": 4}
    [run] = cli.json("runs", "list")
    assert list(run) == ["id", "name", "dialect", "status", "started_at", "ended_at",
                         "business_key"]  # fmt: skip
    assert (run["name"], run["status"], run["business_key"]) == ("Provision", "running", "1")

    worked = cli("worker", "--until-idle")  # the attempt fails; the retry waits on the clock
    assert "transitions" in worked.stderr
    shown = cli.json("runs", "show", run["id"])
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["waiting_for"]["due"] == "2027-01-01T01:00:00Z"
    assert cli.json("runs", "list", "--status", "waiting") == [{**run, "status": "waiting"}]

    assert cli("clock", "advance", "PT1H").stdout.strip() == "clock at 2027-01-01T01:00:00Z"
    shown = cli.json("runs", "show", run["id"], "--history", "3")
    assert shown["status"] == "completed"
    assert [h["type"] for h in shown["history"]] == ["step.started", "step.completed",
                                                     "run.completed"]  # fmt: skip
    record = {**updated, "x": "done on attempt 2", "Progress": 2}
    assert cli.json("records", "list", "Tenant") == [record]

    assert "2027-01-02T00:00:00Z" in cli("clock", "set", "2027-01-02T00:00:00Z").stdout
    assert "forward" in cli.error("clock", "set", "2027-01-01T00:00:00Z")
    assert cli("clock", "show").stdout.startswith("2027-01-02T00:00:00Z")


def test_runs_retry_completes_a_failed_run(cli: Cli) -> None:
    (cli.cwd / "broken.flag").touch()
    cli("records", "create", "Tenant", "--data", '{"title": "broken"}')
    cli("clock", "advance", "PT3H")
    [run] = cli.json("runs", "list", "--status", "failed")
    shown = cli.json("runs", "show", run["id"])
    assert shown["error"]["step"] == "call"
    assert shown["error"]["message"] == "the service is broken (attempt 3)"
    assert shown["tokens"] == [{"step": "call", "state": "failed"}]

    (cli.cwd / "broken.flag").unlink()  # the operator fixes the outside world, then retries
    assert "retrying" in cli("runs", "retry", run["id"]).stdout
    cli("worker", "--until-idle")
    shown = cli.json("runs", "show", run["id"])
    assert (shown["status"], shown["error"]) == ("completed", None)
    assert [h["type"] for h in shown["history"]].count("run.retried") == 1
    before = cli.state()
    assert before[0][0]["x"] == "done on attempt 1"  # a fresh budget: attempt 1 again
    assert "only a failed run" in cli.error("runs", "retry", run["id"])
    assert cli.state() == before


def test_bad_input_is_refused_clearly_and_changes_nothing(cli: Cli) -> None:
    cli("records", "create", "Tenant", "--data", '{"title": "flaky-1"}')
    before = cli.state()
    messages = cli.errors(
        ("records", "create", "Tenant", "--data", '{"title": '),
        ("records", "create", "Tenant", "--data", "[1]"),
        ("records", "create", "Tenantt", "--data", '{"title": "x"}'),
        ("records", "create", "Tenant", "--data", '{"title": "x", "size": "big"}'),
        ("records", "update", "Tenant", "1", "--data", '{"colour": 1}'),
        ("records", "get", "Tenant", "99"),
        ("runs", "show", "nope"),
        ("runs", "cancel", "nope"),
        ("runs", "list", "--frobnicate"),
        ("deploy", "missing.intent"),
    )
    bad_json, not_object, entity, wrong_type, unknown_field, no_record = messages[:6]
    no_run_show, no_run_cancel, unknown_flag, missing_file = messages[6:]
    assert "not valid JSON" in bad_json
    assert "JSON object" in not_object
    assert "[Tenantt]" in entity and "did you mean [Tenant]" in entity
    assert "[size]" in wrong_type
    assert "[colour]" in unknown_field
    assert "99" in no_record
    assert "[nope]" in no_run_show and "[nope]" in no_run_cancel
    assert "--frobnicate" in unknown_flag
    assert "no such file" in missing_file
    assert cli.state() == before


@pytest.mark.empty_store
def test_clock_commands_need_a_virtual_clock(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    write_project(tmp_path)
    cli = Cli(db_url, db_env, tmp_path)
    cli("db", "init")
    assert "(system clock)" in cli("clock", "show").stdout
    assert "--virtual-clock" in cli.error("clock", "advance", "PT1H")
