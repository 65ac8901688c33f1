"""Flow control through the real `procflow` command, on both store backends: `start` and `run`
of a flow whose concurrency refuses starts over its limit exit 1 with one line on stderr and
store no run; `runs list --waiting-for queue|throttle` lists the queued and throttled runs."""

from __future__ import annotations

from pathlib import Path

import cli_runner
import pytest
from projects import QUEUED
from projects import THROTTLED as POST
from store_dump import dump

# `procflow db init` must create the schema itself: on PostgreSQL, db_url names an empty database.
pytestmark = pytest.mark.empty_store

ONCE = """\
flow: once
concurrency: { limit: 1, key: "{{ customer }}", on_limit: refuse }
inputs:
  customer: { type: string, required: true }
steps:
  - nap: { wait: { for: 1h } }
"""

REFUSED = (
    "error: flow [once] has 1 of 1 places taken for key a; it refuses starts over its limit "
    "(concurrency.on_limit: refuse)\n"
)


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> cli_runner.Cli:
    for name, text in (("once", ONCE), ("queued", QUEUED), ("post", POST)):
        (tmp_path / f"{name}.flow.yaml").write_text(text)
    cli = cli_runner.Cli(db_url, db_env, tmp_path)
    cli("db", "init", "--virtual-clock")
    cli("deploy", "once.flow.yaml", "queued.flow.yaml", "post.flow.yaml")
    return cli


def test_start_and_run_over_a_refusing_limit_exit_1_and_store_nothing(cli: cli_runner.Cli) -> None:
    cli("start", "once", "--input", "customer=a")
    before = dump(cli.url)
    for command in (
        ("start", "once", "--input", "customer=a"),
        ("run", "once.flow.yaml", "--input", "customer=a"),
    ):
        done = cli(*command, code=1)
        assert (done.stdout, done.stderr) == ("", REFUSED), command
        assert dump(cli.url) == before, command
    assert cli("start", "once", "--input", "customer=b").stdout.strip()  # its own place


def test_runs_list_waiting_for_queue_and_throttle(cli: cli_runner.Cli) -> None:
    queued = [cli("start", "queued").stdout.strip() for _ in range(2)][1]
    throttled = [cli("start", "post").stdout.strip() for _ in range(2)][1]
    cli.work()
    for kind, run_id in (("queue", queued), ("throttle", throttled)):
        listed = cli.json("runs", "list", "--waiting-for", kind)
        assert [r["id"] for r in listed] == [run_id]
        assert cli("runs", "list", "--waiting-for", kind).stdout.startswith(f"{run_id}  ")
    message = cli.error("runs", "list", "--waiting-for", "lunch")
    assert "Invalid value for '--waiting-for': 'lunch' is not one of" in message
    assert "'queue', 'throttle'" in message
