"""Every `procflow ... list` pages like the HTTP list: newest first, `--limit N` (default 50, at
most 500), `--cursor C`, and a last line `-- more LIST: --cursor C` when more items exist (on
stderr with `--json`, whose stdout stays one JSON array). Following the cursors visits every item
once; a bad limit or a cursor of another list is a usage error (exit 2) naming the option. The
Python API pages the same way with the same cursors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_inprocess import INTENT, invoke

import procflow
from procflow.errors import UsageError
from procflow.runtime.engine import Engine

RUNS, ORDERS, FLOWS = 7, 5, 3
MORE = "-- more "

MAIL = """\
flow: mail{n}
steps:
  - tell: {{ email.send: {{ to: "ops@example.com", subject: "s{n}", body: "b" }} }}
  - later: {{ wait: {{ for: 1d }} }}
"""


@dataclass
class Store:
    url: str
    deployed: list[str]  # definition names, in the order they were first deployed


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Iterator[Store]:
    """Runs (waiting on a timer, or at a user task), open tasks, records, kept messages and
    several definitions."""
    engine = Engine.virtual(db_url)
    deployed: list[str] = []
    try:
        (tmp_path / "shop.intent").write_text(INTENT)
        deployed += [d.name for d in engine.deploy(str(tmp_path / "shop.intent"))]
        for n in range(FLOWS):
            (tmp_path / f"mail{n}.flow.yaml").write_text(MAIL.format(n=n))
            deployed += [d.name for d in engine.deploy(str(tmp_path / f"mail{n}.flow.yaml"))]
        for n in range(RUNS):
            engine.start_flow(f"mail{n % FLOWS}", {})
        for n in range(ORDERS):
            engine.create_record("Order", {"title": f"order {n}"})
        engine.work()
    finally:
        engine.close()
    yield Store(db_url, deployed)


# name: (the command, the item's key, how many items the store holds)
LISTS: dict[str, tuple[tuple[str, ...], str, int]] = {
    "runs": (("runs", "list"), "id", RUNS + ORDERS),
    "tasks": (("tasks", "list"), "id", ORDERS),
    "records": (("records", "list", "Order"), "id", ORDERS),
    "outbox": (("outbox", "list"), "id", RUNS),
    "definitions": (("definitions", "list"), "name", 2 + FLOWS),  # Approve, Manual, mail0..
}


def pages(store: Store, command: tuple[str, ...], limit: int) -> list[tuple[list[Any], str]]:
    """Every page of ``command --json --limit N``, following the cursors: (items, stderr)."""
    seen: list[tuple[list[Any], str]] = []
    cursor: list[str] = []
    while True:
        done = invoke(*command, "--db", store.url, "--json", "--limit", str(limit), *cursor)
        assert done.code == 0, done.stderr
        seen.append((json.loads(done.stdout), done.stderr))
        if not done.stderr:
            return seen
        list_name = command[0]
        prefix = f"{MORE}{list_name}: --cursor "
        assert done.stderr.startswith(prefix) and done.stderr.count("\n") == 1, done.stderr
        cursor = ["--cursor", done.stderr.removeprefix(prefix).strip()]
        assert len(seen) <= 20, "the cursors never end"


@pytest.mark.parametrize("name", list(LISTS))
def test_following_the_cursor_visits_every_item_once_newest_first(store: Store, name: str) -> None:
    command, key, count = LISTS[name]
    found = pages(store, command, 2)
    assert [len(items) for items, _ in found] == [2] * (count // 2) + (
        [count % 2] if count % 2 else []
    )
    keys = [item[key] for items, _ in found for item in items]
    assert len(keys) == len(set(keys)) == count  # each item once
    whole = invoke(*command, "--db", store.url, "--json", "--limit", "500")
    assert (whole.code, whole.stderr) == (0, "")  # all on one page: no more-line
    assert [item[key] for item in json.loads(whole.stdout)] == keys
    if key == "id":  # newest first: the highest key first
        assert keys == sorted(keys, reverse=True)
    else:  # definitions: the most recently first deployed first
        assert keys == list(reversed(store.deployed))


def test_the_default_page_holds_fifty(store: Store) -> None:
    from procflow.cli import options

    assert options.DEFAULT_PAGE == 50 and options.MAX_PAGE == 500  # as ?limit= of the HTTP API
    engine = Engine(store.url, create=False)
    try:
        for n in range(50 - RUNS - ORDERS):
            engine.start_flow(f"mail{n % FLOWS}", {})
        runs = invoke("runs", "list", "--db", store.url, "--json")
        assert (len(json.loads(runs.stdout)), runs.stderr) == (50, "")  # exactly 50: no more
        engine.start_flow("mail0", {})
    finally:
        engine.close()
    runs = invoke("runs", "list", "--db", store.url, "--json")
    assert len(json.loads(runs.stdout)) == 50 and runs.stderr.startswith("-- more runs: --cursor ")


def test_the_text_output_ends_with_the_option_that_gives_the_next_page(store: Store) -> None:
    first = invoke("runs", "list", "--db", store.url, "--limit", "5")
    assert first.code == 0 and first.stderr == ""
    lines = first.stdout.splitlines()
    assert len(lines) == 6 and lines[-1].startswith("-- more runs: --cursor ")
    cursor = lines[-1].split("--cursor ")[1]
    ids = [line.split()[0] for line in lines[:-1]]
    rest = invoke("runs", "list", "--db", store.url, "--limit", "500", "--cursor", cursor)
    assert rest.code == 0
    rest_ids = [line.split()[0] for line in rest.stdout.splitlines()]
    assert not any(line.startswith(MORE) for line in rest.stdout.splitlines())  # the last page
    assert ids + rest_ids == sorted(ids + rest_ids, reverse=True)
    assert len(ids + rest_ids) == RUNS + ORDERS


def test_the_filters_apply_to_every_page(store: Store) -> None:
    first = invoke("runs", "list", "--db", store.url, "--name", "mail0", "--limit", "2")
    *shown, more = first.stdout.splitlines()
    cursor = more.split("--cursor ")[1]
    rest = invoke("runs", "list", "--db", store.url, "--name", "mail0", "--cursor", cursor)
    shown += rest.stdout.splitlines()
    assert [line.split()[1] for line in shown] == ["mail0"] * 3  # runs 0, 3 and 6 of seven


def test_an_empty_list_says_so_and_has_no_more_line(store: Store) -> None:
    done = invoke("tasks", "list", "--db", store.url, "--assignee", "nobody-else")
    assert (done.code, done.stdout, done.stderr) == (0, "no open tasks\n", "")
    done = invoke("tasks", "list", "--db", store.url, "--assignee", "nobody-else", "--json")
    assert (done.code, json.loads(done.stdout), done.stderr) == (0, [], "")


@pytest.mark.parametrize("bad", ["0", "501", "-1", "ten", "2.5", "", "１"])
@pytest.mark.parametrize("name", list(LISTS))
def test_a_bad_limit_is_a_usage_error(store: Store, name: str, bad: str) -> None:
    command = LISTS[name][0]
    done = invoke(*command, "--db", store.url, "--limit", bad)
    shown = " ".join(command[:2])  # the command path, without its ENTITY
    assert (done.code, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: Invalid value for '--limit': must be a whole number from 1 to 500, not [{bad}] "
        f"(see `procflow {shown} --help`)\n"
    )


def _cursor_of(store: Store, command: tuple[str, ...]) -> str:
    done = invoke(*command, "--db", store.url, "--json", "--limit", "1")
    return done.stderr.split("--cursor ")[1].strip()


@pytest.mark.parametrize("name", list(LISTS))
def test_a_cursor_of_another_list_or_garbage_is_a_usage_error(store: Store, name: str) -> None:
    command = LISTS[name][0]
    other = "tasks" if name != "tasks" else "runs"
    foreign = _cursor_of(store, LISTS[other][0])
    for bad in (foreign, "garbage", "WyJydW5zIiwxXQ", "x" * 600):
        done = invoke(*command, "--db", store.url, "--cursor", bad)
        assert (done.code, done.stdout) == (2, ""), bad
        assert done.stderr == (
            f"error: Invalid value for '--cursor': is not a cursor of this list (take it from "
            f"the `-- more {command[0]}: --cursor C` line of a page of the same list, or leave "
            f"it out to start from the newest) (see `procflow {' '.join(command[:2])} --help`)\n"
        )


def test_the_cli_and_the_http_api_share_their_cursors(store: Store) -> None:
    from procflow.server.paging import int_page, page_json

    engine = Engine(store.url, create=False)
    try:
        asked = int_page({"limit": "2"}, "records")
        http = page_json(asked, engine.records_page("Order", limit=2))
    finally:
        engine.close()
    done = invoke("records", "list", "Order", "--db", store.url, "--limit", "2", "--json")
    assert json.loads(done.stdout) == http["items"]
    assert done.stderr == f"-- more records: --cursor {http['next_cursor']}\n"


def test_the_python_api_pages_with_the_same_cursors(store: Store) -> None:
    with procflow.Engine(store.url, create=False) as engine:
        first = engine.runs.page(limit=3)
        cli = invoke("runs", "list", "--db", store.url, "--json", "--limit", "3")
        assert first.items == json.loads(cli.stdout)
        assert cli.stderr == f"-- more runs: --cursor {first.next_cursor}\n"
        ids = [r["id"] for r in first.items]
        cursor = first.next_cursor
        while cursor is not None:
            page = engine.runs.page(limit=3, cursor=cursor)
            ids += [r["id"] for r in page.items]
            cursor = page.next_cursor
        assert ids == [r["id"] for r in engine.runs.list()] == sorted(ids, reverse=True)
        assert len(set(ids)) == RUNS + ORDERS
        tasks = [t["id"] for t in engine.tasks.list()]
        assert tasks == sorted(tasks, reverse=True) and len(tasks) == ORDERS
        records = [r["id"] for r in engine.records.list("Order")]
        assert records == sorted(records, reverse=True) and len(records) == ORDERS
        with pytest.raises(UsageError) as refused:
            engine.runs.page(cursor=engine.tasks.page(limit=1).next_cursor)
        assert str(refused.value) == (
            "cursor is not one the runs list gave out (take next_cursor from a page of the same "
            "list, or leave it out to start from the newest)"
        )
        with pytest.raises(UsageError, match="a page holds from 1 to 500 items, not 0"):
            engine.tasks.page(limit=0)
