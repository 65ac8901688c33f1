"""JSON values nested past the one limit (64 levels: ``procflow.store.codec.MAX_JSON_DEPTH``)
through the Python API (``procflow.Engine``), on both store backends. The engine's own doors check
every value they are handed (``runtime.data.user_json``), whatever face it came from: flow inputs,
record writes, event data, task data. A value nested 64 levels deep passes that check (and meets
the others); 65, 491, 1,000 and 5,000 levels, and a value that contains itself, are refused with
one line naming where, and change nothing. Before the check, 491 levels of input ended the start in
a RecursionError (copying it), 490 were stored and failed their run as an incident, and ~982 of
event data ended in a RecursionError encoding it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from projects import PROVISIONING_APP, TOO_DEEP_LEVELS, nested_value, write
from store_dump import Dump, dump

from procflow import api
from procflow.errors import EventError, InputError, RecordError, TaskError, UsageError

TOO_DEEP = "is nested too deeply: more than 64 levels of objects and arrays"

NEST = """\
flow: nest
inputs:
  payload: { type: object, required: true }
steps:
  - done:
      set: { ok: true }
output:
  got: "{{ payload }}"
"""


class Project:
    """The provisioning app (a Tenant's review task: form fields amount and note) and the flow
    ``nest`` deployed on a virtual-clock store, with one Tenant and its open task."""

    def __init__(self, folder: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.url = db_url
        self.engine = api.Engine.virtual(db_url, environ=dict(db_env))
        for name, text in (("app.intent", PROVISIONING_APP), ("nest.flow.yaml", NEST)):
            self.engine.deploy(write(folder / name, text))
        self.tenant = self.engine.records.create("Tenant", {"title": "acme"})["id"]
        self.engine.work()
        self.task = self.engine.tasks.list()[0]["id"]

    def snapshot(self) -> Dump:
        return dump(self.url)

    def refused(self, call: Callable[[], Any], error: type[UsageError]) -> str:
        before = self.snapshot()
        with pytest.raises(error) as caught:
            call()
        assert self.snapshot() == before
        return str(caught.value)


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    made = Project(tmp_path, db_url, db_env)
    try:
        yield made
    finally:
        made.engine.close()


def itself() -> dict[str, Any]:
    """An object that contains itself: nested without end."""
    loop: dict[str, Any] = {}
    loop["again"] = [loop]
    return loop


# Each member below is level 2 of the value handed over (the inputs, the data: level 1).
PAST_THE_LIMIT = [nested_value(levels - 1) for levels in TOO_DEEP_LEVELS]


def test_flow_inputs_past_64_levels_are_refused(project: Project) -> None:
    runs = project.engine.runs
    for payload in [*PAST_THE_LIMIT, itself()]:
        message = project.refused(lambda p=payload: runs.start("nest", {"payload": p}), InputError)
        assert message == f"flow [nest]: input [payload] {TOO_DEEP}"


def test_flow_inputs_64_levels_deep_start_a_run_that_completes(project: Project) -> None:
    payload = nested_value(63)
    run_id = project.engine.runs.start("nest", {"payload": payload})
    project.engine.work()
    run = project.engine.runs.show(run_id)
    assert (run["status"], run["output"]) == ("completed", {"got": payload})


def test_record_writes_past_64_levels_are_refused(project: Project) -> None:
    records = project.engine.records
    for note in [*PAST_THE_LIMIT, itself()]:
        created = project.refused(
            lambda n=note: records.create("Tenant", {"title": "t", "note": n}), RecordError
        )
        assert created == f"cannot create [Tenant] record: [note]: {TOO_DEEP}"
        changed = project.refused(
            lambda n=note: records.update("Tenant", project.tenant, {"note": n}), RecordError
        )
        assert changed == f"cannot update [Tenant] record: [note]: {TOO_DEEP}"
    # 64 levels pass the depth check, and meet the field's own: a note is text.
    message = project.refused(
        lambda: records.create("Tenant", {"title": "t", "note": nested_value(63)}), RecordError
    )
    assert message == "cannot create [Tenant] record: [note]: must be text, got a mapping"


def test_event_data_past_64_levels_is_refused(project: Project) -> None:
    send = project.engine.events.send
    for extra in [*PAST_THE_LIMIT, itself()]:
        message = project.refused(
            lambda x=extra: send("slack.approval", {"message": "m", "extra": x}), EventError
        )
        assert message == f"event [slack.approval]: data field [extra] {TOO_DEEP}"
    before = len(project.snapshot()["events"])
    send("slack.approval", {"message": "m", "extra": nested_value(63)})  # undeclared: kept
    assert len(project.snapshot()["events"]) == before + 1


def test_task_data_past_64_levels_is_refused(project: Project) -> None:
    tasks = project.engine.tasks
    for note in [*PAST_THE_LIMIT, itself()]:
        message = project.refused(
            lambda n=note: tasks.complete(project.task, "approve", {"note": n}), TaskError
        )
        assert message == f"task [{project.task}]: data field [note] {TOO_DEEP}"
    message = project.refused(
        lambda: tasks.complete(project.task, "approve", {"note": nested_value(63)}), RecordError
    )
    assert "[note]: must be text, got a mapping" in message


def test_a_value_shared_deeper_down_is_measured_where_it_is_deepest(project: Project) -> None:
    """A container met twice is walked again where it lies deeper: 40 levels under ``a`` pass,
    the same 40 levels under 30 more in ``b`` do not."""
    shared = nested_value(40)
    deeper = nested_value(30, shared)
    send = project.engine.events.send
    message = project.refused(
        lambda: send("slack.approval", {"message": "m", "a": shared, "b": deeper}), EventError
    )
    assert message == f"event [slack.approval]: data field [b] {TOO_DEEP}"
