"""`--as NAME` through the real `procflow` command, on both store backends.

The command acts as an administrator unless given `--as NAME`, and then has exactly the roles the
token table (`PROCFLOW_API_TOKENS`, set in the command's environment here) gives NAME: none when
NAME is not listed. Completing a task needs its assigned user, a member of its assigned role, or
an administrator; a refusal is exit 2 with one line on stderr, and nothing changes. The other
writing commands take `--as` too and record NAME (a record's owner, a history entry's `by`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cli_runner
import pytest

from procflow.store.store import Store

# `procflow db init` must create the schema itself: on PostgreSQL, db_url names an empty database.
pytestmark = pytest.mark.empty_store

APP = """\
name: claims
entities:
  - name: Claim
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: note, type: string, length: 50 }
  - name: Job
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
forms:
  - { name: Review, forEntity: Claim, fields: [note], actions: [approve, reject] }
processes:
  - name: Review
    trigger: { onCreate: Claim }
    steps:
      - { name: review, kind: userTask, args: { assignee: manager, form: Review } }
      - { name: confirm, kind: userTask, args: { assignee: personal } }
  - name: Ask
    steps:
      - { name: ask, kind: userTask, args: { assignee: personal } }
  - name: Fragile
    trigger: { onCreate: Job }
    steps:
      - { name: call, kind: serviceTask, args: { delegate: Fragile } }
"""

DELEGATES = """\
from pathlib import Path


class Fragile:
    def execute(self, ctx):
        if (Path(ctx.project_dir) / "broken.flag").exists():
            raise RuntimeError("the service is broken")
"""

APPROVAL = """\
flow: approval
inputs:
  what: { type: string, required: true }
steps:
  - ask:
      slack.post: { channel: "#ops", text: "Approve {{ what }}?" }
  - answer:
      wait_for: slack.approval
      match: { message: "{{ ask.ts }}" }
      timeout: 24h
"""

TOKENS = ";".join(
    f"{user}-token-{'t' * 24}={user}:{roles}"
    for user, roles in {
        "alice": "manager",
        "bob": "cfo,sales",
        "root": "admin",
        # who writes and starts (the role table: records and runs need an operator, `run` a
        # deployer); none of them holds a task's role
        **dict.fromkeys(("dana", "erin", "frank", "gina", "hank", "ivy", "kim"), "operator"),
        **dict.fromkeys(("lou", "judy"), "deployer"),
    }.items()
)
TABLES = ("tasks", "records", "runs", "tokens", "timers", "waits", "history")


class Cli(cli_runner.Cli):
    def state(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table a command here could write, read straight from the store."""
        store = Store(self.url)
        try:
            return {
                table: sorted(
                    (tuple(r) for r in store.conn.execute(f"SELECT * FROM {table}")), key=repr
                )
                for table in TABLES
            }
        finally:
            store.close()

    def refused(self, *args: str) -> str:
        """Exit 2, exactly one line on stderr (returned), nothing on stdout, nothing changed."""
        before = self.state()
        line = self.error(*args)
        assert line.count("\n") == 1, line
        assert self.state() == before
        return line.strip()

    def claim(self, *args: str) -> tuple[int, str]:
        """Create a claim (``args``: e.g. ``--as NAME``), open its review: (record id, run id)."""
        record = self.json("records", "create", "Claim", "--data", '{"title": "t"}', *args)
        self("worker", "--until-idle")
        [run] = [r for r in self.json("runs", "list") if r["business_key"] == str(record["id"])]
        return record["id"], run["id"]

    def open_task(self, run_id: str) -> dict[str, Any]:
        [task] = [t for t in self.json("tasks", "list") if t["run_id"] == run_id]
        return task

    def entries(self, run_id: str, type_: str) -> list[dict[str, Any]]:
        shown = self.json("runs", "show", run_id)
        return [h for h in shown["history"] if h["type"] == type_]


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    project = tmp_path / "claims"
    (project / "custom").mkdir(parents=True)
    (project / "custom" / "__init__.py").write_text(DELEGATES)
    (project / "claims.intent").write_text(APP)
    (project / "approval.flow.yaml").write_text(APPROVAL)
    cli = Cli(db_url, db_env, project)
    cli.env["PROCFLOW_API_TOKENS"] = TOKENS
    cli("db", "init", "--virtual-clock")
    cli("deploy", "claims.intent", "approval.flow.yaml")
    return cli


def test_a_role_task_completes_as_a_member_and_refuses_anyone_else(cli: Cli) -> None:
    _, run_id = cli.claim()
    task = cli.open_task(run_id)["id"]
    for user, roles in (("bob", "cfo, sales"), ("mallory", "none")):  # other roles; unlisted
        assert cli.refused("tasks", "complete", str(task), "--action", "approve", "--as", user) == (
            f"error: task [{task}] is assigned to role [manager]; [{user}] is not a member of it "
            f"(their roles: {roles}), so cannot complete it"
        )
    done = cli("tasks", "complete", str(task), "--action", "approve", "--as", "alice")
    assert done.stdout.strip() == f"completed task {task} (review): approve, by alice"
    assert [h["by"] for h in cli.entries(run_id, "task.completed")] == ["alice"]


def test_a_personal_task_completes_as_its_user(cli: Cli) -> None:
    _, run_id = cli.claim("--as", "dana")  # dana owns the claim; an operator, not a manager
    cli("tasks", "complete", str(cli.open_task(run_id)["id"]), "--action", "approve")
    cli("worker", "--until-idle")
    confirm = cli.open_task(run_id)
    assert (confirm["step"], confirm["assignee"]) == ("confirm", "dana")
    assert cli.refused("tasks", "complete", str(confirm["id"]), "--as", "alice") == (
        f"error: task [{confirm['id']}] is assigned to user [dana]; [alice] cannot complete it"
    )
    done = cli.json("tasks", "complete", str(confirm["id"]), "--as", "dana")
    assert (done["status"], done["by"]) == ("completed", "dana")


def test_an_administrator_completes_any_task(cli: Cli) -> None:
    _, first = cli.claim()
    _, second = cli.claim()
    done = cli.json("tasks", "complete", str(cli.open_task(first)["id"]), "--action", "reject")
    assert done["by"] == "administrator"  # no --as
    task = cli.open_task(second)["id"]
    done = cli.json("tasks", "complete", str(task), "--action", "reject", "--as", "root")
    assert done["by"] == "root"  # the table gives root the admin role


def test_without_a_token_table_a_named_user_has_no_role(cli: Cli) -> None:
    del cli.env["PROCFLOW_API_TOKENS"]
    _, run_id = cli.claim()
    task = str(cli.open_task(run_id)["id"])
    line = cli.refused("tasks", "complete", task, "--action", "approve", "--as", "alice")
    assert line.endswith("[alice] is not a member of it (their roles: none), so cannot complete it")


def test_a_bad_token_table_is_one_line_naming_the_entry_never_the_token(cli: Cli) -> None:
    _, run_id = cli.claim()
    task = str(cli.open_task(run_id)["id"])
    cli.env["PROCFLOW_API_TOKENS"] = f"{TOKENS};tiny-secret=eve:manager"
    line = cli.refused("tasks", "complete", task, "--action", "approve", "--as", "alice")
    assert line.startswith(
        f"error: PROCFLOW_API_TOKENS, entry {TOKENS.count(';') + 2}: the token is shorter than "
        "24 characters"
    )
    assert "tiny-secret" not in line and "t" * 24 not in line
    cli("tasks", "complete", task, "--action", "approve")  # no --as: the table is not needed


def test_an_empty_name_is_refused(cli: Cli) -> None:
    _, run_id = cli.claim()
    task = str(cli.open_task(run_id)["id"])
    for command in (
        ("tasks", "complete", task, "--action", "approve"),
        ("runs", "cancel", run_id),
        ("records", "update", "Claim", "1", "--data", "{}"),
    ):
        assert cli.refused(*command, "--as", " ") == (
            "error: Invalid value for '--as': give a user name (without --as: an "
            f"administrator) (see `procflow {' '.join(command[:2])} --help`)"
        )


def test_every_writing_command_takes_as_and_records_the_name(cli: Cli) -> None:
    # records create: the record's owner (a personal task goes to them).
    claim_id, review_run = cli.claim("--as", "dana")
    # run: an intent run's trigger record is owned by NAME.
    shown = cli.json("run", "claims.intent", "--record", '{"title": "r"}', "--process", "Review",
                     "--as", "lou")  # fmt: skip
    task = cli.open_task(shown["id"])
    cli("tasks", "complete", str(task["id"]), "--action", "approve", "--as", "alice")
    cli("worker", "--until-idle")
    assert cli.open_task(shown["id"])["assignee"] == "lou"
    # records update: accepted; a record keeps who created it, not who changed it.
    updated = cli.json(
        "records", "update", "Claim", str(claim_id), "--data", '{"note": "n"}', "--as", "erin"
    )
    assert updated["note"] == "n"
    # start: the run's `by`.
    asked = cli("start", "Ask", "--record", f"Claim:{claim_id}", "--as", "frank").stdout.strip()
    [started] = cli.entries(asked, "run.started")
    assert started["by"] == "frank"
    cli("worker", "--until-idle")
    assert cli.open_task(asked)["assignee"] == "dana"
    # runs cancel: the `by` of run.cancelled.
    cli("runs", "cancel", asked, "--as", "gina")
    [cancelled] = cli.entries(asked, "run.cancelled")
    assert (cancelled["reason"], cancelled["by"]) == ("cancelled by an operator", "gina")
    # records delete: the `by` of the runs it cancels.
    cli("records", "delete", "Claim", str(claim_id), "--as", "hank")
    [cancelled] = cli.entries(review_run, "run.cancelled")
    assert cancelled["by"] == "hank"
    # runs retry: the `by` of run.retried.
    (cli.cwd / "broken.flag").touch()
    cli("records", "create", "Job", "--data", '{"title": "j"}')
    cli("worker", "--until-idle")
    [failed] = cli.json("runs", "list", "--status", "failed")
    (cli.cwd / "broken.flag").unlink()
    cli("runs", "retry", failed["id"], "--as", "ivy")
    [retried] = cli.entries(failed["id"], "run.retried")
    assert retried["by"] == "ivy"
    # run: a flow run's `by`; events send: the `by` of the event.received it delivers.
    flow = cli.json("run", "approval.flow.yaml", "--input", "what=x", "--as", "judy")
    assert flow["status"] == "waiting"
    assert flow["history"][0] == {"seq": 1, "at": "2027-01-01T00:00:00Z", "type": "run.started",
                                  "by": "judy"}  # fmt: skip
    data = json.dumps({"message": flow["bindings"]["ask"]["ts"], "approved": True})
    report = cli.json("events", "send", "slack.approval", "--data", data, "--as", "kim")
    assert report["resumed"] == [flow["id"]]
    [received] = cli.entries(flow["id"], "event.received")
    assert received["by"] == "kim"
