"""Writes racing each other from two engines (two API clients, two workers) on one store.

SQLite has one writer at a time, so these hold there by construction; on PostgreSQL each write's
read-modify-write must lock what it read. The first engine writes inside an open transaction, the
second starts its own write meanwhile (in a thread) and must wait for the first to commit and
then build on it, never on what it read before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import UsageError
from procflow.runtime.engine import Engine
from procflow.store.store import SCHEMA_VERSION, Store

APP = """\
name: racing
entities:
  - name: Job
    fields:
      - { name: id, type: integer, primaryKey: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: size, type: integer }
      - { name: colour, type: string, length: 20 }
processes:
  - name: Paint
    trigger: { onCreate: Job, when: [ "title == 'paint me'" ] }
    steps:
      - { name: paint, kind: serviceTask, args: { delegate: Paint } }
"""

DELEGATES = """\
def Paint(ctx):
    ctx.record["colour"] = "green"
"""


@pytest.fixture
def engines(tmp_path: Path, db_url: str) -> Iterator[tuple[Engine, Engine]]:
    (tmp_path / "app.intent").write_text(APP)
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "__init__.py").write_text(DELEGATES)
    first = Engine.virtual(db_url)
    first.deploy(str(tmp_path / "app.intent"))
    second = Engine(db_url)
    try:
        yield first, second
    finally:
        second.close()
        first.close()


def meanwhile(first: Engine, write: Callable[[], Any], other: Callable[[], Any]) -> Any:
    """``write`` in ``first``'s open transaction; ``other`` starts in a thread before that
    transaction commits. Returns what ``other`` returned (or raised)."""
    outcome: list[Any] = []

    def run_other() -> None:
        try:
            outcome.append(other())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run_other)
    with first.store.tx():
        write()
        thread.start()
        time.sleep(0.3)  # the other write reads and then waits on ours (or on the writer lock)
    thread.join(timeout=30)
    assert not thread.is_alive(), "the other write never finished"
    return outcome[0]


def test_concurrent_updates_of_one_record_lose_neither(engines: tuple[Engine, Engine]) -> None:
    first, second = engines
    first.create_record("Job", {"id": 1, "title": "job", "size": 1, "colour": "red"})
    result = meanwhile(
        first,
        lambda: first.update_record("Job", 1, {"size": 2}),
        lambda: second.update_record("Job", 1, {"colour": "blue"}),
    )
    assert result == {"id": 1, "title": "job", "size": 2, "colour": "blue"}
    assert first.get_record("Job", 1) == result


def test_concurrent_creates_with_one_id_refuse_the_second_cleanly(
    engines: tuple[Engine, Engine],
) -> None:
    first, second = engines
    result = meanwhile(
        first,
        lambda: first.create_record("Job", {"id": 7, "title": "first"}),
        lambda: second.create_record("Job", {"id": 7, "title": "second"}),
    )
    assert isinstance(result, UsageError), result
    assert "already exists" in str(result)
    assert first.get_record("Job", 7)["title"] == "first"


def test_a_workers_record_write_and_a_concurrent_update_lose_neither(
    engines: tuple[Engine, Engine],
) -> None:
    first, worker = engines
    first.create_record("Job", {"id": 1, "title": "paint me", "size": 1})
    meanwhile(
        first,
        lambda: first.update_record("Job", 1, {"size": 2}),
        lambda: worker.work(until_idle=True),  # the delegate writes colour; its commit waits
    )
    assert first.get_record("Job", 1) == {
        "id": 1,
        "title": "paint me",
        "size": 2,
        "colour": "green",
    }
    (run,) = first.runs_for_record("Job", 1)
    assert run.status == "completed"


def test_concurrent_deploys_number_versions_once_each(
    engines: tuple[Engine, Engine], tmp_path: Path
) -> None:
    first, second = engines
    for n in (2, 3):
        (tmp_path / f"v{n}.intent").write_text(APP.replace("length: 20", f"length: {n}1"))
    result = meanwhile(
        first,
        lambda: first.deploy(str(tmp_path / "v2.intent")),
        lambda: second.deploy(str(tmp_path / "v3.intent")),
    )
    assert [(d.name, d.version, d.created) for d in result] == [("Paint", 3, True)]
    assert [v for v, _, _ in first.store.read().versions_of("Paint")] == [1, 2, 3]
    again = meanwhile(  # the same source twice at once: one version, the other unchanged
        first,
        lambda: first.deploy(str(tmp_path / "v2.intent")),
        lambda: second.deploy(str(tmp_path / "v2.intent")),
    )
    assert [(d.version, d.created) for d in again] == [(4, False)]


@pytest.mark.empty_store
def test_workers_starting_at_once_on_a_new_store(db_url: str) -> None:
    """PostgreSQL: a fleet of workers started at once on an empty database all come up (one
    creates the schema, the others wait and find it). SQLite: a store is a file made by
    `procflow db init` first; workers started at once on it all come up."""
    if db_url.startswith("sqlite"):
        store = Store(db_url)
        assert store.init()
        store.close()
    barrier = threading.Barrier(4)
    outcomes: list[str] = []

    def start() -> None:
        barrier.wait()
        try:
            Engine(db_url).close()
            outcomes.append("up")
        except Exception as exc:
            outcomes.append(f"crashed: {exc!r}")

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes == ["up"] * 4
    engine = Engine(db_url)
    try:
        assert engine.store.schema_version() == SCHEMA_VERSION
        assert not engine.is_virtual
        assert engine.list_runs() == []
    finally:
        engine.close()
