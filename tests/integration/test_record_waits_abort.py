"""Intent ``wait`` (a path parked until a record about the run's record is written) and
``abortOn`` (a status change that cancels the whole run and runs its cleanup), through the engine
API on both store backends, on a virtual clock (2027-01-01T00:00:00Z).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine
from procflow.runtime.operations.views import why_waiting
from procflow.store.store import Tx

APP = """\
name: tickets
entities:
  - name: TicketStatus
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, required: true, length: 50 }
  - name: Ticket
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: priority, type: integer }
      - { name: note, type: string, length: 60 }
    relations:
      - { name: Status, kind: manyToOne, to: TicketStatus, function: EntityStatus, init: New }
  - name: Comment
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: text, type: text, required: true }
      - { name: internal, type: boolean }
      - { name: score, type: integer }
    relations:
      - { name: ticket, kind: manyToOne, to: Ticket }
seeds:
  - name: statuses
    entity: TicketStatus
    rows:
      - { id: 1, name: New }
      - { id: 2, name: Active }
      - { id: 3, name: Closed }
      - { id: 4, name: Cancelled }
      - { id: 5, name: Void }
processes:
"""

DELEGATES = '''\
from procflow.runtime.engine import Engine

SECRET = "tok-9f8e7d6c5b4a"


def Produce(ctx):
    ctx.vars["token"] = SECRET


def FetchAndNote(ctx):
    ctx.vars["token"] = SECRET
    ctx.record["note"] = "fetched"


class CancelMeanwhile:
    """While this worker holds the run, someone cancels the ticket through another engine; this
    attempt then writes the record too (a write that must never land)."""

    url = ""

    def execute(self, ctx):
        other = Engine(self.url)
        try:
            other.update_record("Ticket", ctx.record["id"], {"Status": "Cancelled"})
        finally:
            other.close()
        ctx.record["note"] = "written by the refused attempt"
'''

REPLY = """\
- name: P
  trigger: { onCreate: Ticket }
  steps:
    - name: reply
      kind: wait
      args: { onCreate: Comment, via: ticket, when: "internal == false" }
    - { name: answered, kind: serviceTask, args: { setField: note, value: answered, next: end } }
"""

ESCALATE = """\
- name: P
  trigger: { onCreate: Ticket }
  steps:
    - { name: escalation, kind: wait, args: { onUpdate: Ticket, when: "priority > 3" } }
    - { name: escalate, kind: serviceTask, args: { setField: note, value: escalated, next: end } }
"""

ABORTABLE = """\
- name: P
  trigger: {{ onCreate: Ticket }}
  vars: [ {{ name: token }} ]
  abortOn: {{ status: [Cancelled, Closed], then: {then} }}
  steps:
    - {{ name: fetch, kind: serviceTask, args: {{ delegate: Produce, produces: [token] }} }}
    - name: triage
      kind: userTask
      args: {{ assignee: support, timeout: {{ after: PT1H, then: nudge }} }}
    - {{ name: reply, kind: wait, args: {{ onCreate: Comment, via: ticket }} }}
    - {{ name: done, kind: serviceTask, args: {{ setField: note, value: done, next: end }} }}
    - {{ name: nudge, kind: wait, args: {{ onUpdate: Ticket, when: "priority > 3", next: end }} }}
    - {{ name: markVoid, kind: serviceTask, args: {{ setRelationField: Status, value: Void }} }}
"""


class Project:
    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        self.url = db_url
        (root / "custom").mkdir(parents=True, exist_ok=True)
        (root / "custom" / "__init__.py").write_text(DELEGATES)
        self.file = root / "tickets.intent"
        self.engine = Engine.virtual(db_url)

    def deploy(self, processes: str) -> None:
        self.file.write_text(APP + textwrap.indent(textwrap.dedent(processes), "  "))
        self.engine.deploy(str(self.file))

    def ticket(self, **data: Any) -> tuple[dict[str, Any], str]:
        record = self.engine.create_record("Ticket", {"title": "t", **data})
        self.engine.work()
        return record, self.engine.runs_for_record("Ticket", record["id"])[0].id

    def comment(self, ticket: int | None, **data: Any) -> dict[str, Any]:
        return self.engine.create_record("Comment", {"text": "hi", "ticket": ticket, **data})

    def show(self, run_id: str) -> dict[str, Any]:
        return self.engine.show(run_id)

    def types(self, run_id: str) -> list[str]:
        return [h["type"] for h in self.show(run_id)["history"]]

    def note(self, ticket_id: int) -> Any:
        return self.engine.get_record("Ticket", ticket_id)["note"]

    def count(self, table: str, run_id: str) -> int:
        row = self.engine.store.conn.execute(
            f"SELECT count(*) FROM {table} WHERE run_id=?",
            (run_id,),
        ).fetchone()
        return int(row[0])


@pytest.fixture
def project(tmp_path: Path, db_url: str) -> Iterator[Project]:
    p = Project(tmp_path, db_url)
    yield p
    p.engine.close()


T0 = "2027-01-01T00:00:00Z"


# --- wait ----------------------------------------------------------------------------------------


def test_a_wait_parks_until_a_record_of_its_record_is_created_satisfying_when(
    project: Project,
) -> None:
    project.deploy(REPLY)
    mine, run_id = project.ticket()
    other, _ = project.ticket()
    shown = project.show(run_id)
    assert shown["status"] == "waiting"
    wait = {"kind": "record", "entity": "Comment", "via": "ticket", "when": "internal == false"}
    assert shown["tokens"] == [
        {"step": "reply", "state": "waiting", "waiting_for": wait, "since": T0}
    ]
    token = project.engine.store.read().tokens(run_id)[0]
    expected = "reply: a [Comment] record of this run's record via [ticket] where internal == false"
    assert why_waiting(token) == expected
    project.comment(other["id"], internal=False)  # another ticket's comment
    project.comment(mine["id"], internal=True)  # when is false
    project.comment(mine["id"])  # internal null: null == false is false
    project.comment(None, internal=False)  # belongs to no ticket
    assert project.show(run_id)["tokens"][0]["state"] == "waiting"
    reply = project.comment(mine["id"], internal=False)
    # The same transaction consumed the wait and moved the token on to its next step.
    assert project.show(run_id)["tokens"] == [{"step": "answered", "state": "ready"}]
    assert project.show(run_id)["status"] == "running"
    completed = project.show(run_id)["history"][-1]
    assert completed["type"] == "step.completed" and completed["step"] == "reply"
    assert completed["event"] == "onCreate"
    assert completed["record"] == {"entity": "Comment", "id": reply["id"]}
    assert project.count("waits", run_id) == 0
    project.comment(mine["id"], internal=False)  # consumed once: a second reply is a no-op
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    assert project.note(mine["id"]) == "answered"
    assert project.types(run_id).count("step.completed") == 2


def test_a_wait_on_the_record_itself_resumes_on_its_update(project: Project) -> None:
    project.deploy(ESCALATE)
    ticket, run_id = project.ticket(priority=1)
    assert project.show(run_id)["tokens"][0]["waiting_for"]["via"] is None
    project.engine.create_record("Ticket", {"title": "a create is not an update", "priority": 9})
    project.engine.update_record("Ticket", ticket["id"], {"priority": 2})
    assert project.show(run_id)["status"] == "waiting"
    project.engine.update_record("Ticket", ticket["id"], {"priority": 5})
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    assert project.note(ticket["id"]) == "escalated"


def test_a_when_that_fails_to_evaluate_leaves_the_token_parked(project: Project) -> None:
    project.deploy(REPLY.replace("internal == false", "score > 1"))
    ticket, run_id = project.ticket()
    project.comment(ticket["id"])  # score is null: [>] cannot compare it — fail-soft
    assert project.show(run_id)["status"] == "waiting"
    assert "run.failed" not in project.types(run_id)
    project.comment(ticket["id"], score=2)
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"


def test_a_wait_ending_the_path_completes_the_run_in_the_write(project: Project) -> None:
    project.deploy(ESCALATE.replace('when: "priority > 3" }', 'when: "priority > 3", next: end }'))
    ticket, run_id = project.ticket()
    project.engine.update_record("Ticket", ticket["id"], {"priority": 4})
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert shown["history"][-1]["type"] == "run.completed"


def test_cancelling_a_waiting_run_removes_its_wait(project: Project) -> None:
    project.deploy(REPLY)
    ticket, run_id = project.ticket()
    assert project.count("waits", run_id) == 1
    project.engine.cancel(run_id)
    assert project.count("waits", run_id) == 0
    project.comment(ticket["id"], internal=False)
    assert project.show(run_id)["status"] == "cancelled"


SELF_RESUME = """\
- name: P
  trigger: { onCreate: Ticket }
  steps:
    - name: triage
      kind: userTask
      args: { assignee: support, timeout: { after: PT1H, then: ack } }
    - { name: waitPrio, kind: wait, args: { onUpdate: Ticket, when: "priority > 3", next: end } }
    - { name: ack, kind: userTask, args: { assignee: support } }
    - { name: bump, kind: serviceTask, args: { setField: priority, value: 5, next: end } }
"""


def test_a_step_whose_write_satisfies_a_wait_of_its_own_run_completes_the_run(
    project: Project,
) -> None:
    project.deploy(SELF_RESUME)
    ticket, run_id = project.ticket()
    project.engine.advance("PT1H")  # the timeout forks a second path: the task [ack]
    tasks = {t["step"]: t["id"] for t in project.engine.list_tasks()}
    project.engine.complete_task(tasks["triage"])
    project.engine.work()  # path 1 parks on waitPrio
    project.engine.complete_task(tasks["ack"])
    project.engine.work()  # path 2: bump writes priority 5, which satisfies path 1's wait
    shown = project.show(run_id)
    assert project.engine.get_record("Ticket", ticket["id"])["priority"] == 5
    # Both paths ended in the one commit: the run completes, with no token left behind.
    assert (shown["status"], shown["tokens"]) == ("completed", [])
    assert shown["history"][-1]["type"] == "run.completed"


# --- abortOn --------------------------------------------------------------------------------------


def test_abort_on_cancels_everything_runs_the_cleanup_alone_and_ends_aborted(
    project: Project,
) -> None:
    project.deploy(ABORTABLE.format(then="markVoid"))
    ticket, run_id = project.ticket()
    project.engine.advance("PT1H")  # the timeout forked a second path, parked on a wait
    shown = project.show(run_id)
    assert sorted(t["waiting_for"]["kind"] for t in shown["tokens"]) == ["record", "task"]
    assert project.count("vars", run_id) == 1
    project.engine.update_record("Ticket", ticket["id"], {"Status": "Cancelled", "note": "bye"})
    shown = project.show(run_id)
    assert shown["status"] == "aborted"
    assert shown["ended_at"] == "2027-01-01T01:00:00Z"
    assert shown["tokens"] == []
    for table in ("tokens", "timers", "waits", "vars"):
        assert project.count(table, run_id) == 0, table
    assert project.engine.list_tasks() == []
    tail = [(h["type"], h.get("step")) for h in shown["history"][-5:]]
    assert tail == [
        ("task.withdrawn", "triage"), ("step.started", "markVoid"),
        ("step.completed", "markVoid"), ("var.cleared", None), ("run.aborted", None),
    ]  # fmt: skip
    types = project.types(run_id)
    withdrawn = shown["history"][-5]
    assert (withdrawn["task_id"], withdrawn["reason"]) == (1, "aborted")
    assert shown["history"][-1]["reason"] == (
        f"[Ticket] {ticket['id']} entered status [Cancelled] (Status)"
    )
    record = project.engine.get_record("Ticket", ticket["id"])
    assert (record["Status"], record["note"]) == (5, "bye")  # markVoid ran, once; alone
    project.engine.update_record("Ticket", ticket["id"], {"priority": 9})
    project.comment(ticket["id"])
    project.engine.advance("P1D")
    assert project.types(run_id) == types  # nothing happens to an aborted run


def test_abort_on_with_then_end_aborts_at_once_without_cleanup(project: Project) -> None:
    project.deploy(ABORTABLE.format(then="end"))
    ticket, run_id = project.ticket()
    project.engine.update_record("Ticket", ticket["id"], {"Status": "Closed"})
    shown = project.show(run_id)
    assert shown["status"] == "aborted"
    assert "markVoid" not in [h.get("step") for h in shown["history"]]
    assert project.engine.get_record("Ticket", ticket["id"])["Status"] == 3


def test_only_a_change_into_a_listed_status_aborts(project: Project) -> None:
    project.deploy(ABORTABLE.format(then="markVoid"))
    ticket, run_id = project.ticket()
    project.engine.update_record("Ticket", ticket["id"], {"Status": "Active", "priority": 2})
    assert project.show(run_id)["status"] == "waiting"
    other, other_run = project.ticket(Status="Cancelled")  # created in it: no change into it
    assert project.show(other_run)["status"] == "waiting"
    project.engine.update_record("Ticket", other["id"], {"note": "still cancelled"})
    assert project.show(other_run)["status"] == "waiting"


def test_a_step_of_the_run_itself_can_abort_it(project: Project) -> None:
    project.deploy(
        """\
- name: P
  trigger: { onCreate: Ticket }
  abortOn: { status: Cancelled, then: markVoid }
  steps:
    - { name: giveUp, kind: serviceTask, args: { setRelationField: Status, value: Cancelled } }
    - { name: never, kind: serviceTask, args: { setField: note, value: never, next: end } }
    - { name: markVoid, kind: serviceTask, args: { setField: note, value: voided } }
"""
    )
    ticket, run_id = project.ticket()
    shown = project.show(run_id)
    assert shown["status"] == "aborted"
    assert project.note(ticket["id"]) == "voided"
    steps = [h["step"] for h in shown["history"] if h["type"] == "step.completed"]
    assert steps == ["giveUp", "markVoid"]
    seqs = [h["seq"] for h in shown["history"]]
    assert seqs == list(range(1, len(seqs) + 1))


def test_an_abort_while_a_worker_holds_the_run_refuses_the_workers_commit(
    project: Project,
) -> None:
    project.deploy(
        f"""\
- name: P
  trigger: {{ onCreate: Ticket }}
  abortOn: {{ status: Cancelled, then: markVoid }}
  steps:
    - name: work
      kind: serviceTask
      args: {{ delegate: CancelMeanwhile, fields: {{ url: '{project.url}' }} }}
    - {{ name: after, kind: serviceTask, args: {{ setField: note, value: after, next: end }} }}
    - {{ name: markVoid, kind: serviceTask, args: {{ setField: note, value: voided }} }}
"""
    )
    ticket, run_id = project.ticket()
    shown = project.show(run_id)
    assert shown["status"] == "aborted"
    assert project.note(ticket["id"]) == "voided"  # the refused attempt's write never landed
    types = [h["type"] for h in shown["history"]]
    assert types == ["run.started", "step.started", "step.completed", "run.aborted"]
    assert [h["step"] for h in shown["history"] if h["type"] == "step.completed"] == ["markVoid"]
    assert project.count("tokens", run_id) == 0
    project.engine.work()
    assert [h["type"] for h in project.show(run_id)["history"]] == types


CANCELLER_AND_WORKER = """\
- name: ACanceller
  trigger: { onCreate: Ticket }
  steps:
    - { name: giveUp, kind: serviceTask, args: { setRelationField: Status, value: Cancelled } }
- name: BWorker
  trigger: { onCreate: Ticket }
  vars: [ { name: token } ]
  abortOn: { status: Cancelled, then: markVoid }
  steps:
    - { name: fetch, kind: serviceTask, args: { delegate: FetchAndNote, produces: [token] } }
    - { name: review, kind: userTask, args: { assignee: support, next: end } }
    - { name: markVoid, kind: serviceTask, args: { setField: note, value: voided } }
"""


def test_a_run_aborted_by_another_runs_record_write_in_the_same_commit_keeps_no_step_writes(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim's order is unspecified (SQLite happens to give insertion order, PostgreSQL heap
    # order); fix the order in which the one group commit applies the two runs: the canceller
    # first, which is a legal outcome on either backend.
    claim = Tx.claim_runs

    def ordered_claim(self: Tx, *args: Any) -> list[Any]:
        return sorted(claim(self, *args), key=lambda r: r.name)

    monkeypatch.setattr(Tx, "claim_runs", ordered_claim)
    project.deploy(CANCELLER_AND_WORKER)
    ticket = project.engine.create_record("Ticket", {"title": "t"})
    runs = {r.name: r.id for r in project.engine.runs_for_record("Ticket", ticket["id"])}
    project.engine.work()  # one worker claims both runs and commits both steps in one transaction
    aborted = runs["BWorker"]
    assert project.show(aborted)["status"] == "aborted"
    # Either order of the two commits ends with markVoid's write and no var left behind: B's
    # step committed before the abort (then the cleanup overwrote its note and the sweep erased
    # its var) or after it (then it was refused).
    found = {"vars": project.count("vars", aborted), "note": project.note(ticket["id"])}
    assert found == {"vars": 0, "note": "voided"}
    assert project.count("tokens", aborted) == 0
    assert project.count("timers", aborted) == 0
