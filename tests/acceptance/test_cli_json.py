"""`--json` on the commands that change something: each prints what it did, in a stable shape.

`runs cancel|retry` and `start` print the run as `runs show` does; `definitions disable|enable`
print `{name, enabled}`; `clock show|advance|set` print `{now, virtual}`; `records delete` prints
`{entity, id, deleted}`; `deploy` prints `{deployed: [{name, dialect, version, unchanged}]}`;
`db init` prints `{created, schema_version, virtual, now}` and `db upgrade` `{schema_version, from,
to}`. A refused request prints nothing on stdout, `--json` or not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_runner import Cli

pytestmark = pytest.mark.empty_store  # `db init` makes each store, as a user would

RUN_KEYS = [
    "id", "name", "dialect", "version", "status", "started_at", "ended_at", "business_key",
    "record", "parent", "children", "tokens", "bindings", "vars", "output", "error", "history",
]  # fmt: skip

NAP = """\
flow: nap
steps:
  - rest: { wait: { for: 1h } }
"""
BOOM_MANIFEST = """\
connector: boom
description: Always fails.
actions:
  fire:
    args: {}
    result: {}
"""
BOOM_CODE = """\
def fire(ctx):
    raise RuntimeError("boom")
"""
FAILS = """\
flow: fails
steps:
  - go: { boom.fire: {} }
"""
ITEMS = """\
name: shop
entities:
  - name: Item
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
"""


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    cli = Cli(db_url, db_env, tmp_path)
    cli("db", "init", "--virtual-clock")
    (tmp_path / "nap.flow.yaml").write_text(NAP)
    (tmp_path / "connectors" / "boom").mkdir(parents=True)
    (tmp_path / "connectors" / "boom" / "manifest.yaml").write_text(BOOM_MANIFEST)
    (tmp_path / "connectors" / "boom" / "__init__.py").write_text(BOOM_CODE)
    (tmp_path / "fails.flow.yaml").write_text(FAILS)
    (tmp_path / "shop.intent").write_text(ITEMS)
    return cli


def refused_json(cli: Cli, *args: str) -> str:
    """A refused request with --json: exit 2, the message on stderr, nothing on stdout."""
    return cli.error(*args, "--json")


def test_runs_cancel_and_retry_print_the_run_after_the_change(cli: Cli) -> None:
    waiting = cli.json("run", "nap.flow.yaml")
    cancelled = cli.json("runs", "cancel", waiting["id"])
    assert list(cancelled) == RUN_KEYS
    assert (cancelled["status"], cancelled["tokens"]) == ("cancelled", [])
    assert cancelled["history"][-1]["type"] == "run.cancelled"
    assert cancelled == cli.show(waiting["id"])
    assert "already cancelled" in refused_json(cli, "runs", "cancel", waiting["id"])

    cli("run", "fails.flow.yaml", code=1)
    [failed] = cli.json("runs", "list", "--status", "failed")
    retried = cli.json("runs", "retry", failed["id"])
    assert list(retried) == RUN_KEYS
    assert (retried["status"], retried["error"]) == ("running", None)
    assert retried["tokens"] == [{"step": "go", "state": "ready"}]
    assert retried["history"][-1]["type"] == "run.retried"
    assert retried == cli.show(failed["id"])
    assert "only a failed run" in refused_json(cli, "runs", "retry", failed["id"])


def test_deploy_and_start_print_what_they_made(cli: Cli) -> None:
    first = cli.json("deploy", "nap.flow.yaml", "shop.intent")
    assert first == {
        "deployed": [{"name": "nap", "dialect": "flow", "version": 1, "unchanged": False}]
    }  # an intent file without processes deploys its entities only
    again = cli.json("deploy", "nap.flow.yaml")
    assert again == {
        "deployed": [{"name": "nap", "dialect": "flow", "version": 1, "unchanged": True}]
    }
    started = cli.json("start", "nap")
    assert list(started) == RUN_KEYS
    assert (started["name"], started["status"]) == ("nap", "running")
    assert started == cli.show(started["id"])
    assert "[nope]" in refused_json(cli, "start", "nope")


def test_definitions_disable_and_enable_print_name_and_state(cli: Cli) -> None:
    cli("deploy", "nap.flow.yaml")
    assert cli.json("definitions", "disable", "nap") == {"name": "nap", "enabled": False}
    [listed] = cli.json("definitions", "list")
    assert listed["enabled"] is False
    assert cli.json("definitions", "enable", "nap") == {"name": "nap", "enabled": True}
    [listed] = cli.json("definitions", "list")
    assert listed["enabled"] is True
    assert "[nope]" in refused_json(cli, "definitions", "disable", "nope")


def test_clock_commands_print_the_time_and_kind_of_clock(cli: Cli) -> None:
    assert cli.json("clock", "show") == {"now": "2027-01-01T00:00:00Z", "virtual": True}
    assert cli.json("clock", "advance", "1h") == {"now": "2027-01-01T01:00:00Z", "virtual": True}
    moved = cli.json("clock", "set", "2027-01-02T00:00:00Z")
    assert moved == {"now": "2027-01-02T00:00:00Z", "virtual": True}
    assert cli.json("clock", "show") == moved
    assert "forward" in refused_json(cli, "clock", "set", "2027-01-01T00:00:00Z")
    assert "soon" in refused_json(cli, "clock", "advance", "soon")


def test_records_delete_prints_what_it_deleted(cli: Cli) -> None:
    cli("deploy", "shop.intent")
    created = cli.json("records", "create", "Item", "--data", '{"title": "lamp"}')
    deleted = cli.json("records", "delete", "Item", str(created["id"]))
    assert deleted == {"entity": "Item", "id": created["id"], "deleted": True}
    assert cli.json("records", "list", "Item") == []
    assert str(created["id"]) in refused_json(cli, "records", "delete", "Item", str(created["id"]))
    assert "whole number" in refused_json(cli, "records", "delete", "Item", "one")


def test_db_init_and_upgrade_print_the_schema_version(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    cli = Cli(db_url, db_env, tmp_path)
    made = cli.json("db", "init", "--virtual-clock")
    assert list(made) == ["created", "schema_version", "virtual", "now"]
    assert (made["created"], made["virtual"], made["now"]) == (True, True, "2027-01-01T00:00:00Z")
    version = made["schema_version"]
    assert isinstance(version, int) and version >= 1
    assert cli.json("db", "upgrade") == {"schema_version": version, "from": version, "to": version}
    assert "already holds a procflow store" in refused_json(cli, "db", "init")


def test_db_init_json_of_a_system_clock_store_says_so(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    made = Cli(db_url, db_env, tmp_path).json("db", "init")
    assert (made["created"], made["virtual"]) == (True, False)
    now = datetime.fromisoformat(made["now"])
    assert abs(now - datetime.now(UTC)) < timedelta(minutes=5)
    shown = Cli(db_url, db_env, tmp_path).json("clock", "show")
    assert shown["virtual"] is False


def test_db_upgrade_of_an_empty_database_creates_the_schema(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    cli = Cli(db_url, db_env, tmp_path)
    upgraded = cli.json("db", "upgrade")
    version = upgraded["to"]
    assert upgraded == {"schema_version": version, "from": None, "to": version}
    assert cli("db", "upgrade").stdout.strip() == f"schema is current ({version})"


def test_db_upgrade_in_words_says_it_created_the_schema(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    done = Cli(db_url, db_env, tmp_path)("db", "upgrade")
    assert done.stdout.startswith("created the schema (version ")
