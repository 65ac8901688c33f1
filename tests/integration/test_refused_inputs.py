"""Every refused input changes nothing, through the engine API, on both store backends.

Each test takes a snapshot of every table of the store, makes requests the engine must refuse (a
:class:`~procflow.errors.UsageError`, exit 2 on the command line), and checks the store is exactly
as it was. The refusals: a record of the wrong entity for ``start``, a second start of a triggered
process for one record, text that is not valid Unicode and numbers JSON cannot hold in any JSON a
user hands the engine (records, flow inputs, events, task data), a CloudEvent of an unknown spec
version, and deleting a record that is still referenced (or a seeded row).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from projects import PAID_WAIT, PROVISIONING_APP, paid_connector
from store_dump import Dump, dump_store

from procflow import api
from procflow.errors import EventError, InputError, RecordError, TaskError, UsageError
from procflow.runtime.data.events import envelope
from procflow.runtime.engine import Engine
from procflow.states import RunStatus

ELSEWHERE = """\
name: elsewhere
entities:
  - name: Elsewhere
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
"""

GREET = """\
flow: greet
inputs:
  who: { type: string, required: true }
  extra: { type: object }
steps:
  - say: { log.write: { message: "hello {{ who }}" } }
"""

BAD_TEXT = "a\ud800b"  # a lone surrogate: no UTF-8 encoding exists for it


class Project:
    """The application, a second one, the ``crm`` connector and two flows, deployed on a
    virtual-clock engine."""

    def __init__(self, tmp_path: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.dir = paid_connector(tmp_path / "project")
        self.env = dict(db_env)
        self.eng = Engine.virtual(db_url, environ=dict(db_env))
        for name, text in [
            ("app.intent", PROVISIONING_APP),
            ("elsewhere.intent", ELSEWHERE),
            ("greet.flow.yaml", GREET),
            ("paid-wait.flow.yaml", PAID_WAIT),
        ]:
            (self.dir / name).write_text(textwrap.dedent(text))
            self.eng.deploy(str(self.dir / name))

    def snapshot(self) -> Dump:
        """Every row of every table: what a refused request must not change."""
        return dump_store(self.eng.store)

    def close(self) -> None:
        self.eng.close()


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    proj = Project(tmp_path, db_url, db_env)
    try:
        yield proj
    finally:
        proj.close()


def refused(project: Project, call: Any, error: type[UsageError] = UsageError) -> str:
    """Run ``call``; it must raise ``error`` with a printable message and change nothing."""
    before = project.snapshot()
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    message.encode("utf-8")  # a message with a lone surrogate could not be printed
    assert project.snapshot() == before
    return message


# --- start: the record's entity --------------------------------------------------------------


def test_start_refuses_a_record_of_another_entity_than_the_trigger(project: Project) -> None:
    eng = project.eng
    eng.create_record("Order", {"title": "an order"})
    tenant = eng.create_record("Tenant", {"title": "acme"})
    assert tenant["id"] == 1  # the same id as the order: a wrong-entity run would write to it
    message = refused(project, lambda: eng.start("Provision", record=("Order", 1)))
    assert message == (
        "process [Provision] runs for a [Tenant] record (the entity of its trigger), "
        "not a [Order] record"
    )
    with api.Engine(eng.url, environ=project.env) as python:
        start_for_record = python.runs.start_for_record
        assert refused(project, lambda: start_for_record("Provision", "Order", 1)) == message
    # Refused before the record is looked up: a missing record of the wrong entity says the same.
    assert refused(project, lambda: eng.start("Provision", record=("Order", 99))) == message


def test_a_process_without_a_trigger_runs_for_its_applications_entities(
    project: Project,
) -> None:
    eng = project.eng
    eng.create_record("Order", {"title": "an order"})
    eng.create_record("Elsewhere", {})
    message = refused(project, lambda: eng.start("Archive", record=("Elsewhere", 1)))
    assert message == (
        "process [Archive] runs for a record of an entity of [provisioning] "
        "(Customer, Order, Status, Tenant), not a [Elsewhere] record"
    )
    assert "did you mean [Order]" in refused(
        project, lambda: eng.start("Archive", record=("Ordr", 1))
    )
    run_id = eng.start("Archive", record=("Order", 1))
    assert eng.show(run_id)["record"] == {"entity": "Order", "id": 1}


# --- start: at most once per record ----------------------------------------------------------


def test_a_triggered_process_starts_again_for_a_record_only_when_asked(project: Project) -> None:
    eng = project.eng
    eng.create_record("Tenant", {"title": "acme"})
    (first,) = eng.runs_for_record("Tenant", 1)
    message = refused(project, lambda: eng.start("Provision", record=("Tenant", 1)))
    assert message == (
        f"process [Provision] already ran for [Tenant] record 1 (run {first.id}, running); "
        "a triggered process runs at most once per record: start it again on purpose with "
        "--again (again=True)"
    )
    second = eng.start("Provision", record=("Tenant", 1), again=True)
    assert second != first.id
    assert eng.show(second)["status"] == RunStatus.RUNNING
    # Whatever the earlier runs' status: a cancelled run still ran for the record.
    eng.cancel(first.id)
    eng.cancel(second)
    assert "already ran for [Tenant] record 1" in refused(
        project, lambda: eng.start("Provision", record=("Tenant", 1))
    )
    assert len(eng.runs_for_record("Tenant", 1)) == 2


def test_a_manual_first_start_counts_as_the_records_one_run(project: Project) -> None:
    eng = project.eng
    eng.set_enabled("Provision", False)
    eng.create_record("Tenant", {"title": "made while disabled"})  # the trigger starts nothing
    eng.set_enabled("Provision", True)
    assert eng.runs_for_record("Tenant", 1) == []
    run_id = eng.start("Provision", record=("Tenant", 1))
    assert f"(run {run_id}, running)" in refused(
        project, lambda: eng.start("Provision", record=("Tenant", 1))
    )


def test_a_process_without_a_trigger_may_run_for_a_record_many_times(project: Project) -> None:
    eng = project.eng
    eng.create_record("Order", {"title": "an order"})
    runs = {eng.start("Archive", record=("Order", 1)) for _ in range(2)}
    runs.add(eng.start("Archive", record=("Order", 1), again=True))
    assert len(runs) == 3


# --- text that is not valid Unicode, numbers JSON cannot hold --------------------------------


def test_records_refuse_text_that_is_not_valid_unicode(project: Project) -> None:
    eng = project.eng
    eng.create_record("Tenant", {"title": "acme"})
    message = refused(
        project, lambda: eng.create_record("Tenant", {"title": BAD_TEXT}), RecordError
    )
    assert message == (
        "cannot create [Tenant] record: [title]: is text that is not valid Unicode "
        "(a lone surrogate \\ud800 at character 2)"
    )
    assert "[x\\udc80]: is a key that is not valid Unicode" in refused(
        project, lambda: eng.create_record("Tenant", {"title": "t", "x\udc80": 1})
    )
    assert "cannot update [Tenant] record" in refused(
        project, lambda: eng.update_record("Tenant", 1, {"note": BAD_TEXT})
    )
    assert "the user name is text that is not valid Unicode" in refused(
        project, lambda: eng.create_record("Tenant", {"title": "t"}, user=BAD_TEXT)
    )
    assert "entity name is text that is not valid Unicode" in refused(
        project, lambda: eng.create_record("Ten\udc80ant", {"title": "t"})
    )
    assert eng.list_records("Tenant")[0]["title"] == "acme"


def test_records_refuse_numbers_json_cannot_hold(project: Project) -> None:
    eng = project.eng
    for bad in (float("nan"), float("inf"), float("-inf")):
        refused(project, lambda bad=bad: eng.create_record("Tenant", {"title": "t", "amount": bad}))
    assert "[note]: is NaN, which is not a JSON number" in refused(
        project, lambda: eng.create_record("Tenant", {"title": "t", "note": float("nan")})
    )


def test_flow_inputs_refuse_bad_text_and_numbers(project: Project) -> None:
    eng = project.eng
    message = refused(project, lambda: eng.start_flow("greet", {"who": BAD_TEXT}), InputError)
    assert message == (
        "flow [greet]: input [who] is text that is not valid Unicode "
        "(a lone surrogate \\ud800 at character 2)"
    )
    assert "input [extra.k\\ud800] is a key that is not valid Unicode" in refused(
        project, lambda: eng.start_flow("greet", {"who": "w", "extra": {"k\ud800": 1}})
    )
    assert "input [w\\ud800] is a key that is not valid Unicode" in refused(
        project, lambda: eng.start_flow("greet", {"who": "w", "w\ud800": 1.5})
    )
    assert "input [invoice] must be a finite number, got nan" in refused(
        project, lambda: eng.start_flow("paid-wait", {"invoice": float("nan")})
    )
    assert "input [extra.n[1]] is Infinity, which is not a JSON number" in refused(
        project, lambda: eng.start_flow("greet", {"who": "w", "extra": {"n": [1, float("inf")]}})
    )
    assert "input [extra.at] is a value of type datetime, which is not JSON" in refused(
        project, lambda: eng.start_flow("greet", {"who": "w", "extra": {"at": datetime.now()}})
    )


def test_events_refuse_bad_text_numbers_and_values(project: Project) -> None:
    eng = project.eng
    waiting = eng.start_flow("paid-wait", {"invoice": 1})
    eng.work()
    message = refused(
        project, lambda: eng.send_event("crm.paid", {"invoice": 1, "note": BAD_TEXT}), EventError
    )
    assert message == (
        "event [crm.paid]: data field [note] is text that is not valid Unicode "
        "(a lone surrogate \\ud800 at character 2)"
    )
    assert "data field [extra] is NaN, which is not a JSON number" in refused(
        project, lambda: eng.send_event("crm.paid", {"invoice": 1, "extra": float("nan")})
    )
    assert "data field [deep[0]] is -Infinity" in refused(
        project, lambda: eng.send_event("crm.paid", {"invoice": 1, "deep": [float("-inf")]})
    )
    assert "data field [k\\udc80] is a key that is not valid Unicode" in refused(
        project, lambda: eng.send_event("crm.paid", {"invoice": 1, "k\udc80": 1})
    )
    assert "data field [at] is a value of type datetime, which is not JSON" in refused(
        project, lambda: eng.send_event("crm.paid", {"invoice": 1, "at": datetime.now()})
    )
    assert "event id is text that is not valid Unicode" in refused(
        project, lambda: eng.send_event("crm.paid", {"invoice": 1}, BAD_TEXT)
    )
    assert "event type is text that is not valid Unicode" in refused(
        project, lambda: eng.send_event("crm.pa\udc80id", {"invoice": 1})
    )
    assert eng.show(waiting)["status"] == RunStatus.WAITING


def test_cloud_events_of_another_spec_version_are_refused(project: Project) -> None:
    cloud = {"specversion": "9", "type": "crm.paid", "id": "e1", "source": "/crm"}
    with pytest.raises(EventError) as caught:
        envelope({**cloud, "data": {"invoice": 1}})
    assert str(caught.value) == "CloudEvent specversion [9] is not supported: only 1.0 is"
    assert caught.value.field == "specversion"
    with pytest.raises(EventError) as caught:
        envelope({**cloud, "specversion": 1.0})
    assert str(caught.value) == (
        'CloudEvent specversion must be the text "1.0", got the number [1.0]'
    )
    assert envelope({**cloud, "specversion": "1.0"}).id == "e1"


def test_task_data_refuses_bad_text_and_numbers(project: Project) -> None:
    eng = project.eng
    eng.create_record("Tenant", {"title": "acme"})
    eng.work()
    (task,) = eng.list_tasks()
    message = refused(
        project, lambda: eng.complete_task(task["id"], "approve", {"note": BAD_TEXT}), TaskError
    )
    assert message == (
        f"task [{task['id']}]: data field [note] is text that is not valid Unicode "
        "(a lone surrogate \\ud800 at character 2)"
    )
    assert "data field [no\\udc80te] is a key that is not valid Unicode" in refused(
        project, lambda: eng.complete_task(task["id"], "approve", {"no\udc80te": "x"})
    )
    assert "data field [amount] is Infinity" in refused(
        project, lambda: eng.complete_task(task["id"], "approve", {"amount": float("inf")})
    )
    assert "the action is text that is not valid Unicode" in refused(
        project, lambda: eng.complete_task(task["id"], BAD_TEXT)
    )
    assert "the user name is text that is not valid Unicode" in refused(
        project, lambda: eng.complete_task(task["id"], "approve", user=BAD_TEXT)
    )
    # The task keeps its form's values as the record stores them (a Decimal is no JSON value).
    done = eng.complete_task(task["id"], "approve", {"note": "fine", "amount": Decimal("2.50")})
    assert done["data"] == {"note": "fine", "amount": 2.5}


# --- deleting what is referenced -------------------------------------------------------------


def test_a_referenced_record_cannot_be_deleted(project: Project) -> None:
    eng = project.eng
    eng.create_record("Customer", {"name": "acme"})
    eng.create_record("Tenant", {"title": "t", "customer": 1})
    message = refused(project, lambda: eng.delete_record("Customer", 1))
    assert message == (
        "[Customer] record 1 cannot be deleted: [Tenant] record 1 refers to it "
        "(relation [customer]); change or delete that record first"
    )
    eng.update_record("Tenant", 1, {"customer": None})
    eng.delete_record("Customer", 1)
    assert eng.list_records("Customer") == []


def test_a_seeded_row_cannot_be_deleted(project: Project) -> None:
    eng = project.eng
    eng.create_record("Tenant", {"title": "t"})  # its Progress is the seeded Requested (1)
    assert "[Tenant] record 1 refers to it (relation [Progress])" in refused(
        project, lambda: eng.delete_record("Status", 1)
    )
    # Referenced by no record, a seeded row is still named by the application (Failed).
    message = refused(project, lambda: eng.delete_record("Status", 3))
    assert message == (
        "[Status] record 3 cannot be deleted: it is a row of seed [statuses] of "
        "[provisioning], part of the deployed definition"
    )
    eng.create_record("Status", {"name": "Extra"})
    eng.delete_record("Status", 4)  # a row a user made is a row a user may remove
