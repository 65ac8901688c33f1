"""The role table and record permissions on the command line (``--as NAME``), on both store
backends: each command that needs a role is refused to the user just below it (exit 1, the role
named on stderr, nothing changed) and done for the user holding it. The whole table, every user
for every action, is walked through the Python API (tests/integration/test_authorization.py):
both faces make the same engine call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from authz_site import BACKFILL_WINDOW, TOKENS, USERS, write_project
from cli_runner import Cli
from store_dump import dump

from procflow.cli import cli as procflow_cli

pytestmark = pytest.mark.empty_store  # `db init --virtual-clock` makes it

BELOW = {"operator": "cleo", "deployer": "otto"}  # a user just below each role


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    project = write_project(tmp_path)
    cli = Cli(db_url, db_env, project)
    cli.env["PROCFLOW_API_TOKENS"] = TOKENS
    cli("db", "init", "--virtual-clock")
    cli("deploy", "orders.intent", "hold.flow.yaml", "boom.flow.yaml", "tick.flow.yaml")
    return cli


def _run(cli: Cli, flow: str, code: int = 0) -> str:
    run_id: str = cli.json("run", f"{flow}.flow.yaml", code=code)["id"]
    return run_id


def test_each_command_needs_its_role(cli: Cli) -> None:
    waiting, failed = _run(cli, "hold"), _run(cli, "boom", code=1)
    note = cli.json("records", "create", "Note", "--data", '{"text": "n"}')["id"]
    # (the role, the command): every one of them refused below the role, at once.
    commands: list[tuple[str, tuple[str, ...]]] = [
        ("deployer", ("deploy", "boom.flow.yaml")),
        ("deployer", ("definitions", "disable", "boom")),
        ("deployer", ("definitions", "enable", "boom")),
        ("deployer", ("runs", "purge", "--ended-before", "0s")),
        ("deployer", ("run", "hold.flow.yaml")),
        ("operator", ("start", "hold")),
        ("operator", ("start", "Remind", "--record", f"Note:{note}")),
        ("operator", ("events", "send", "crm.paid", "--data", '{"invoice": 7}')),
        ("operator", ("runs", "cancel", waiting)),
        ("operator", ("runs", "retry", failed)),
        ("deployer", ("schedules", "pause", "tick", "--note", "maintenance")),
        ("deployer", ("schedules", "resume", "tick")),
        ("deployer", ("schedules", "backfill", "tick", "--from", BACKFILL_WINDOW[0],
                      "--to", BACKFILL_WINDOW[1])),
        ("operator", ("schedules", "trigger", "tick", "--overlap", "allow")),
    ]  # fmt: skip
    before = dump(cli.url)
    refused = [cli(*args, "--as", BELOW[role], code=1) for role, args in commands]
    for (role, args), done in zip(commands, refused, strict=True):
        user = BELOW[role]
        assert done.stdout == ""
        assert done.stderr.startswith(f"error: user [{user}] may not "), (args, done.stderr)
        assert f"that needs the role [{role}] (or one above it)" in done.stderr
        assert done.stderr.count("\n") == 1  # one line
    assert dump(cli.url) == before
    for role, args in commands:
        holder = next(u for u, r in USERS.items() if r == role)
        cli(*args, "--as", holder)


def test_records_follow_the_permissions_on_the_command_line(cli: Cli) -> None:
    before = dump(cli.url)
    done = cli("records", "create", "Order", "--data", '{"title": "a"}', "--as", "otto", code=1)
    assert done.stderr == (
        "error: user [otto] may not create [Order] records: that needs one of the roles "
        "[Clerk, admin]; [otto] has [operator]\n"
    )
    cli("records", "list", "Order", "--as", "vic", code=1)
    assert dump(cli.url) == before
    order = cli.json("records", "create", "Order", "--data", '{"title": "a"}', "--as", "cleo")
    listed = cli.json("records", "list", "Order", "--as", "cleo")
    assert [o["title"] for o in listed] == ["a"]
    cli("records", "get", "Order", str(order["id"]), "--as", "cleo")
    cli("records", "update", "Order", str(order["id"]), "--data", '{"title": "b"}', "--as", "cleo",
        code=1)  # fmt: skip
    cli("records", "delete", "Order", str(order["id"]), "--as", "cleo", code=1)
    cli("records", "delete", "Order", str(order["id"]), "--as", "ada")


def test_without_as_the_command_line_is_an_administrator(cli: Cli) -> None:
    cli("deploy", "boom.flow.yaml")
    cli("records", "create", "Order", "--data", '{"title": "a"}')


def _leaves(
    group: click.Group, ctx: click.Context, prefix: str = ""
) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from _leaves(command, ctx, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_the_walk_names_every_command_that_acts_as_someone() -> None:
    """Every command taking --as is one the tests above refuse and allow (or the task rule's
    and the records', tested with them): a new one must say here what it needs."""
    ctx = click.Context(procflow_cli)
    taking_as = {
        name for name, command in _leaves(procflow_cli, ctx)
        if any("--as" in p.opts for p in command.params if isinstance(p, click.Option))
    }  # fmt: skip
    walked = {
        "deploy", "definitions disable", "definitions enable", "runs purge", "run", "start",
        "events send", "runs cancel", "runs retry", "schedules pause", "schedules resume",
        "schedules backfill", "schedules trigger",
    }  # fmt: skip
    own_rules = {
        "tasks complete", "records create", "records update", "records delete", "records get",
        "records list",
    }  # fmt: skip
    assert taking_as == walked | own_rules
