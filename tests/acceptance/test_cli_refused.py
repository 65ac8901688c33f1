"""Refused requests through the real `procflow` command, on both store backends: each exits 2 with
one line on stderr, nothing on stdout, no traceback, and leaves every table of the store as it
was (read in-process before and after).

The cases: `start` for a record of another entity than the process's, a second `start` of a
triggered process for one record (unless `--again`), JSON with a lone surrogate or NaN/Infinity
in `--data`/`--inputs`, `events send` with flags it would ignore or a CloudEvent of another spec
version, `runs show --history` with a count that is not a whole number, and `records delete` of a
row that is still referenced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cli_runner
import pytest
from projects import PAID_WAIT, PROVISIONING_APP, paid_connector, write, write_flow
from store_dump import dump

# `procflow db init` must create the schema itself: on PostgreSQL, db_url names an empty database.
pytestmark = pytest.mark.empty_store

BAD_JSON_TEXT = '"a\\ud800b"'  # JSON text for a lone surrogate: valid JSON, not valid Unicode


class Cli(cli_runner.Cli):
    def refused(self, *args: str) -> str:
        """A refused request: exit 2, one line on stderr, and the store exactly as it was."""
        before = dump(self.url)
        message = self.error(*args).strip()
        assert len(message.splitlines()) == 1, message
        assert dump(self.url) == before, args
        return message


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    paid_connector(tmp_path)
    write(tmp_path / "app.intent", PROVISIONING_APP)
    write_flow(tmp_path, PAID_WAIT)
    cli = Cli(db_url, db_env, tmp_path)
    cli("db", "init", "--virtual-clock")
    cli("deploy", "app.intent")
    cli("deploy", "paid-wait.flow.yaml")
    return cli


def test_start_refuses_another_entity_and_a_second_run_without_again(cli: Cli) -> None:
    cli("records", "create", "Order", "--data", '{"title": "an order"}')
    cli("records", "create", "Tenant", "--data", '{"title": "acme"}')
    assert cli.refused("start", "Provision", "--record", "Order:1") == (
        "error: process [Provision] runs for a [Tenant] record (the entity of its trigger), "
        "not a [Order] record"
    )
    message = cli.refused("start", "Provision", "--record", "Tenant:1")
    assert "process [Provision] already ran for [Tenant] record 1 (run " in message
    assert message.endswith("start it again on purpose with --again (again=True)")
    again: dict[str, Any] = cli.json("start", "Provision", "--record", "Tenant:1", "--again")
    assert again["record"] == {"entity": "Tenant", "id": 1}
    assert len(cli.json("runs", "list", "--name", "Provision")) == 2
    assert cli.refused("start", "paid-wait", "--input", "invoice=1", "--again") == (
        "error: [paid-wait] is a flow; --again is for intent processes (a flow starts any "
        "number of runs)"
    )


def test_json_that_is_not_valid_unicode_is_refused_everywhere(cli: Cli) -> None:
    cli("records", "create", "Tenant", "--data", '{"title": "acme"}')
    cli("worker", "--until-idle")
    assert cli.refused(
        "records", "create", "Tenant", "--data", f'{{"title": {BAD_JSON_TEXT}}}'
    ) == (
        "error: cannot create [Tenant] record: [title]: is text that is not valid Unicode "
        "(a lone surrogate \\ud800 at character 2)"
    )
    assert "[a\\ud800b]: is a key that is not valid Unicode" in cli.refused(
        "records", "update", "Tenant", "1", "--data", f"{{{BAD_JSON_TEXT}: 1}}"
    )
    assert "input [extra.k] is text that is not valid Unicode" in cli.refused(
        "start", "paid-wait", "--inputs", f'{{"invoice": 1, "extra": {{"k": {BAD_JSON_TEXT}}}}}'
    )
    assert "data field [who] is text that is not valid Unicode" in cli.refused(
        "events", "send", "crm.paid", "--data", f'{{"invoice": 1, "who": {BAD_JSON_TEXT}}}'
    )
    assert "data field [note] is text that is not valid Unicode" in cli.refused(
        "tasks", "complete", "1", "--action", "approve", "--data", f'{{"note": {BAD_JSON_TEXT}}}'
    )
    assert cli("records", "list", "Tenant").stdout.count("\n") == 1  # still lists


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_numbers_json_cannot_hold_are_refused(cli: Cli, constant: str) -> None:
    cli("records", "create", "Tenant", "--data", '{"title": "acme"}')
    cli("worker", "--until-idle")
    expected = f"is not valid JSON: {constant} is not a JSON value"
    data = f'{{"invoice": 1, "x": {constant}}}'
    assert cli.refused("events", "send", "crm.paid", "--data", data) == f"error: --data {expected}"
    envelope = f'{{"type": "crm.paid", "data": {data}}}'
    assert cli.refused("events", "send", "--envelope", envelope) == f"error: --envelope {expected}"
    assert expected in cli.refused(
        "records", "create", "Tenant", "--data", f'{{"note": {constant}}}'
    )
    assert expected in cli.refused("start", "paid-wait", "--inputs", data)
    assert expected in cli.refused(
        "tasks", "complete", "1", "--action", "approve", "--data", f'{{"note": {constant}}}'
    )


def test_events_send_refuses_flags_it_would_ignore_and_unknown_cloud_events(cli: Cli) -> None:
    data = '{"invoice": 1}'
    envelope = '{"type": "crm.paid", "data": {"invoice": 1}, "id": "e-1"}'
    assert cli.refused("events", "send", "--envelope", envelope, "--data", data) == (
        "error: --data is for an event given by TYPE; an --envelope carries its own data"
    )
    assert cli.refused("events", "send", "--envelope", envelope, "--id", "e-2") == (
        "error: --id is for an event given by TYPE or --slack-payload; an --envelope carries "
        "its own id"
    )
    slack = '{"type": "block_actions", "actions": [{"value": "approve"}], "message": {"ts": "1"}}'
    assert cli.refused("events", "send", "--slack-payload", slack, "--data", data) == (
        "error: --data is for an event given by TYPE; a --slack-payload makes its own data"
    )
    cloud = '{"specversion": "9", "type": "crm.paid", "id": "e-3", "source": "/crm", "data": {}}'
    assert cli.refused("events", "send", "--envelope", cloud) == (
        "error: CloudEvent specversion [9] is not supported: only 1.0 is"
    )


def test_runs_show_refuses_a_history_count_that_is_not_a_whole_number(cli: Cli) -> None:
    run_id = cli("start", "paid-wait", "--input", "invoice=1").stdout.strip()
    for count in ("-1", "-5", "x", "1.5", ""):
        assert cli.refused("runs", "show", run_id, "--history", count) == (
            "error: --history N keeps the last N history entries: N must be a whole number "
            f"(0 or more), got [{count}]"
        )
    assert cli.json("runs", "show", run_id, "--history", "0")["history"] == []


def test_a_referenced_seeded_status_row_cannot_be_deleted(cli: Cli) -> None:
    cli("records", "create", "Tenant", "--data", '{"title": "acme"}')
    assert cli.refused("records", "delete", "Status", "1") == (
        "error: [Status] record 1 cannot be deleted: [Tenant] record 1 refers to it "
        "(relation [Progress]); change or delete that record first"
    )
    assert "a row of seed [statuses]" in cli.refused("records", "delete", "Status", "2")


def test_run_refuses_a_bad_record_or_input_before_it_deploys_anything(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "v2.intent").write_text(PROVISIONING_APP.replace("length: 200", "length: 5"))
    message = cli.refused("run", "v2.intent", "--record", '{"title": "far too long"}')
    assert "title" in message  # the record was refused: the new version was not deployed either
    (tmp_path / "v2.flow.yaml").write_text(PAID_WAIT.replace("flow: paid-wait", "flow: v2"))
    assert "invoice" in cli.refused("run", "v2.flow.yaml", "--input", "invoice=abc")
    (tmp_path / "none.intent").write_text("name: none\nprocesses: []\n")
    assert cli.refused("run", "none.intent", "--record", "{}") == (
        "error: the file defines no process to run"
    )
