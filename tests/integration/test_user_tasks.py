"""Intent user tasks through the engine API, on both store backends; and ``notify`` over SMTP.

Each test writes a small ``.intent`` file (claims reviewed by people) into a temp project and
runs it on a virtual-clock store (2027-01-01T00:00:00Z), so "the start of the next day" and "two
hours later" are instants, not guesses.
"""

from __future__ import annotations

import json
import socket
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import Envelope, Session

from procflow.errors import ForbiddenError, NotFoundError, UsageError
from procflow.runtime.data.identity import Actor
from procflow.runtime.engine import Engine
from procflow.runtime.operations.views import why_waiting

APP = """\
name: claims
entities:
  - name: Stage
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, required: true, length: 50 }
  - name: Team
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: lead, type: string, length: 50 }
  - name: Dept
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, length: 50 }
    relations:
      - { name: team, kind: manyToOne, to: Team }
  - name: Claim
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: amount, type: decimal }
      - { name: note, type: string, length: 20 }
      - { name: due, type: date }
      - { name: deadline, type: timestamp }
      - { name: outcome, type: string, length: 20 }
    relations:
      - { name: dept, kind: manyToOne, to: Dept }
      - { name: Stage, kind: manyToOne, to: Stage, function: EntityStatus, init: Open }
forms:
  - { name: Review, forEntity: Claim, fields: [amount, note], actions: [approve, reject] }
seeds:
  - name: stages
    entity: Stage
    rows:
      - { id: 1, name: Open }
      - { id: 2, name: Approved }
      - { id: 3, name: Rejected }
      - { id: 4, name: Expired }
processes:
"""

DELEGATES = '''\
import json
from pathlib import Path

from procflow.errors import UsageError
from procflow.runtime.data.identity import Actor
from procflow.runtime.engine import Engine


class CompleteTheTask:
    """Completes task 1 through its own engine while this worker holds the run (a person
    clicking at that very moment); logs each call."""

    url = ""

    def execute(self, ctx):
        with open(Path(ctx.project_dir) / "calls.jsonl", "a") as f:
            f.write(json.dumps({"step": ctx.step, "attempt": ctx.attempt}) + "\\n")
        other = Engine(self.url)
        try:
            other.complete_task(1, "approve", {}, None)
        except UsageError:
            pass  # already completed: the first attempt's click was committed
        finally:
            other.close()
'''

REVIEW = """\
- name: P
  trigger: { onCreate: Claim }
  steps:
    - name: review
      kind: userTask
      args: { assignee: clerk, form: Review, setField: outcome, value: reviewed }
    - name: decide
      kind: decision
      args: { if: "action == 'approve'", then: approved, else: rejected }
    - name: approved
      kind: serviceTask
      args: { setRelationField: Stage, value: Approved, next: end }
    - name: rejected
      kind: serviceTask
      args: { setRelationField: Stage, value: Rejected, next: end }
"""

FREE = """\
- name: P
  trigger: { onCreate: Claim }
  steps:
    - { name: check, kind: userTask, args: { assignee: {assignee} } }
    - name: decide
      kind: decision
      args: { if: "action == 'complete'", then: plain, else: custom }
    - { name: plain, kind: serviceTask, args: { setField: outcome, value: plain, next: end } }
    - { name: custom, kind: serviceTask, args: { setField: outcome, value: custom, next: end } }
"""

TIMED = """\
- name: P
  trigger: {{ onCreate: Claim }}
  steps:
    - name: review
      kind: userTask
      args:
        assignee: clerk
        timeout: {{ after: {after}, then: nudge }}
        expire: {{ until: {until}, then: expired }}
    - name: done
      kind: serviceTask
      args: {{ setRelationField: Stage, value: Approved, next: end }}
    - {{ name: nudge, kind: serviceTask, args: {{ setField: note, value: nudged, next: end }} }}
    - name: expired
      kind: serviceTask
      args: {{ setRelationField: Stage, value: Expired, next: end }}
"""


class Project:
    """A temp project: the claims file with the given processes, and a virtual-clock engine."""

    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        self.url = db_url
        (root / "custom").mkdir(parents=True, exist_ok=True)
        (root / "custom" / "__init__.py").write_text(DELEGATES)
        self.file = root / "claims.intent"
        self.engine = Engine.virtual(db_url)

    def deploy(self, processes: str) -> None:
        self.file.write_text(APP + textwrap.indent(textwrap.dedent(processes), "  "))
        self.engine.deploy(str(self.file))

    def claim(self, user: str | None = None, **data: Any) -> tuple[dict[str, Any], str]:
        """Create a claim (owned by ``user``, an operator: who may write records), work until
        idle; the claim and its run's id."""
        owner = None if user is None else Actor(user, frozenset({"operator"}))
        record = self.engine.create_record("Claim", {"title": "t", **data}, user=owner)
        self.engine.work()
        runs = self.engine.runs_for_record("Claim", record["id"])
        return record, runs[0].id

    def show(self, run_id: str) -> dict[str, Any]:
        return self.engine.show(run_id)

    def types(self, run_id: str) -> list[str]:
        """The history's entry types; every step entry names its path and attempt."""
        history = self.show(run_id)["history"]
        for h in history:
            if h.get("step") is not None:
                assert h.get("path") and h.get("attempt") is not None, h
        return [h["type"] for h in history]

    def entries(self, run_id: str, type_: str) -> list[dict[str, Any]]:
        return [h for h in self.show(run_id)["history"] if h["type"] == type_]

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.engine.store.conn.execute(sql).fetchall()]

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a refused completion must leave untouched."""
        return (
            self.rows("SELECT * FROM tasks ORDER BY id"),
            self.rows("SELECT entity, id, data FROM records ORDER BY entity, id"),
            self.rows("SELECT id, status, seq, lease_owner FROM runs ORDER BY id"),
            self.rows("SELECT id, step, state, wait, data FROM tokens ORDER BY id"),
            self.rows("SELECT run_id, token_id, kind, due_at FROM timers ORDER BY id"),
            self.rows("SELECT count(*) FROM history"),
        )


@pytest.fixture
def project(tmp_path: Path, db_url: str) -> Iterator[Project]:
    p = Project(tmp_path, db_url)
    yield p
    p.engine.close()


def at(day: int = 1, hh: int = 0, mm: int = 0, ss: int = 0) -> str:
    return f"2027-01-{day:02d}T{hh:02d}:{mm:02d}:{ss:02d}Z"


# --- opening a task ----------------------------------------------------------------------------


def test_a_user_task_opens_a_task_and_parks_its_token(project: Project) -> None:
    project.deploy(REVIEW)
    record, run_id = project.claim()
    shown = project.show(run_id)
    assert shown["status"] == "waiting"
    [task] = project.engine.list_tasks()
    assert task == {
        "id": 1, "run_id": run_id, "step": "review", "assignee": "clerk", "form": "Review",
        "actions": ["approve", "reject"], "record": {"entity": "Claim", "id": record["id"]},
        "created_at": at(),
    }  # fmt: skip
    assert shown["tokens"] == [
        {
            "step": "review", "state": "waiting", "since": at(),
            "waiting_for": {"kind": "task", "task_id": 1, "assignee": "clerk"},
        }
    ]  # fmt: skip
    assert project.types(run_id) == ["run.started", "step.started", "task.created"]
    [created] = project.entries(run_id, "task.created")
    assert (created["task_id"], created["assignee"], created["step"]) == (1, "clerk", "review")
    token = project.engine.store.read().tokens(run_id)[0]
    assert why_waiting(token) == "review: user task 1 for clerk"
    token.wait = {"kind": "task", "task_id": None, "assignee": None}  # as parked on entry
    assert why_waiting(token) == "review: user task being opened"


@pytest.mark.parametrize(("action", "stage"), [("approve", 2), ("reject", 3)])
def test_completing_writes_the_form_applies_set_field_and_routes_on_the_action(
    project: Project, action: str, stage: int
) -> None:
    project.deploy(REVIEW)
    record, run_id = project.claim(amount=10)
    done = project.engine.complete_task(1, action, {"amount": 12.5, "note": "checked"})
    assert done["status"] == "completed"
    assert (done["action"], done["by"], done["data"]) == (
        action, "administrator", {"amount": 12.5, "note": "checked"},
    )  # fmt: skip
    assert done["ended_at"] == at()
    # One transaction: the record is written and the token has moved on to the decision.
    claim = project.engine.get_record("Claim", record["id"])
    assert (claim["amount"], claim["note"], claim["outcome"]) == (12.5, "checked", "reviewed")
    assert project.show(run_id)["tokens"] == [{"step": "decide", "state": "ready"}]
    assert project.engine.list_tasks() == []
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    assert project.engine.get_record("Claim", record["id"])["Stage"] == stage
    [completed] = project.entries(run_id, "task.completed")
    assert (completed["task_id"], completed["action"], completed["by"]) == (
        1, action, "administrator",
    )  # fmt: skip
    types = project.types(run_id)
    assert types[types.index("task.completed") + 1] == "step.completed"
    assert project.rows("SELECT count(*) FROM timers") == [(0,)]


def test_a_task_without_a_form_takes_free_text_defaulting_to_complete(project: Project) -> None:
    project.deploy(FREE.replace("{assignee}", "clerk"))
    first, run_a = project.claim()
    second, run_b = project.claim()
    assert project.engine.complete_task(1)["action"] == "complete"
    assert project.engine.complete_task(2, "looked at it twice")["action"] == "looked at it twice"
    project.engine.work()
    assert project.engine.get_record("Claim", first["id"])["outcome"] == "plain"
    assert project.engine.get_record("Claim", second["id"])["outcome"] == "custom"
    assert [project.show(r)["status"] for r in (run_a, run_b)] == ["completed", "completed"]


# --- assignees ---------------------------------------------------------------------------------

ASSIGNEES = [
    ("clerk", {}, None, ("clerk", "role")),
    ("personal", {}, "alice", ("alice", "user")),
    ("personal", {}, None, ("unassigned", "role")),
    ("{ path: dept.team.lead, fallback: office }", {"lead": "bob"}, None, ("bob", "user")),
    ("{ path: dept.team.lead, fallback: office }", {"lead": None}, None, ("office", "role")),
    ("{ path: dept.team.lead, fallback: office }", None, None, ("office", "role")),
]


@pytest.mark.parametrize(("assignee", "team", "owner", "expected"), ASSIGNEES)
def test_assignees_resolve_when_the_task_opens(
    project: Project,
    assignee: str,
    team: dict[str, Any] | None,
    owner: str | None,
    expected: tuple[str, str],
) -> None:
    project.deploy(FREE.replace("{assignee}", assignee))
    links: dict[str, Any] = {}
    if team is not None:
        team_id = project.engine.create_record("Team", team)["id"]
        links["dept"] = project.engine.create_record("Dept", {"team": team_id})["id"]
    project.claim(user=owner, **links)
    [task] = project.engine.list_tasks()
    assert task["assignee"] == expected[0]
    assert project.rows("SELECT assignee_kind FROM tasks") == [(expected[1],)]


def test_a_user_task_needs_its_user_and_a_role_task_a_member(project: Project) -> None:
    project.deploy(FREE.replace("{assignee}", "personal"))
    project.claim(user="alice")  # task 1: assigned to the user alice
    project.claim()  # task 2: no owner, so the role unassigned
    before = project.snapshot()
    with pytest.raises(ForbiddenError) as refused:
        project.engine.complete_task(1, user="mallory")
    assert str(refused.value) == (
        "task [1] is assigned to user [alice]; [mallory] cannot complete it"
    )
    assert project.snapshot() == before
    assert project.engine.complete_task(1, user="alice")["by"] == "alice"
    # Role membership comes from the token table (tests/integration/test_task_roles.py): with
    # none, a named user has no roles, and only an administrator completes a role's task.
    with pytest.raises(ForbiddenError):
        project.engine.complete_task(2, user="mallory")
    assert project.engine.complete_task(2)["by"] == "administrator"


def test_list_tasks_filters_by_assignee(project: Project) -> None:
    project.deploy(FREE.replace("{assignee}", "personal"))
    for user in ("alice", "bob", "alice"):
        project.claim(user=user)
    assert [t["id"] for t in project.engine.list_tasks("alice")] == [1, 3]
    assert [t["id"] for t in project.engine.list_tasks("bob")] == [2]
    assert project.engine.list_tasks("carol") == []
    assert [t["id"] for t in project.engine.list_tasks()] == [1, 2, 3]


# --- timeout and expire ------------------------------------------------------------------------


def test_the_timeout_starts_a_second_path_while_the_task_stays_open(project: Project) -> None:
    project.deploy(TIMED.format(after="PT2H", until="due"))
    record, run_id = project.claim()
    project.engine.advance("PT1H59M59S")
    assert "token.forked" not in project.types(run_id)  # never early
    project.engine.advance("PT1S")
    [forked] = project.entries(run_id, "token.forked")
    assert (forked["at"], forked["step"], forked["from"], forked["task_id"]) == (
        at(1, 2), "nudge", "review", 1,
    )  # fmt: skip
    assert project.engine.get_record("Claim", record["id"])["note"] == "nudged"
    assert [t["id"] for t in project.engine.list_tasks()] == [1]  # still open
    shown = project.show(run_id)
    assert shown["status"] == "waiting"
    assert [t["step"] for t in shown["tokens"]] == ["review"]
    assert "token.ended" in project.types(run_id)  # the nudge path ended; the run did not
    project.engine.advance("P1D")
    assert len(project.entries(run_id, "token.forked")) == 1  # a timeout fires once
    project.engine.complete_task(1)
    project.engine.work()
    assert project.show(run_id)["status"] == "completed"
    assert project.engine.get_record("Claim", record["id"])["Stage"] == 2


def test_a_date_expiry_withdraws_the_task_at_the_start_of_the_next_day(project: Project) -> None:
    project.deploy(TIMED.format(after="P30D", until="due"))
    record, run_id = project.claim(due="2027-01-05")
    project.engine.set_clock(_micros(at(5, 23, 59, 59)))
    assert [t["id"] for t in project.engine.list_tasks()] == [1]  # the 5th is still valid
    project.engine.advance("PT1S")
    assert project.engine.list_tasks() == []
    [withdrawn] = project.entries(run_id, "task.withdrawn")
    assert (withdrawn["at"], withdrawn["task_id"], withdrawn["reason"]) == (at(6), 1, "expired")
    assert project.rows("SELECT status, ended_at IS NOT NULL FROM tasks") == [("withdrawn", True)]
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert project.engine.get_record("Claim", record["id"])["Stage"] == 4
    assert project.rows("SELECT count(*) FROM timers") == [(0,)]  # the timeout went with it
    project.engine.advance("P40D")
    assert "token.forked" not in project.types(run_id)
    with pytest.raises(UsageError, match=r"task \[1\] is withdrawn, not open"):
        project.engine.complete_task(1)


def test_a_timestamp_expiry_fires_at_that_instant_and_null_never_expires(
    project: Project,
) -> None:
    project.deploy(TIMED.format(after="P30D", until="deadline"))
    _, timed = project.claim(deadline="2027-01-01T10:30:00+02:00")
    _, never = project.claim()
    assert project.rows("SELECT token_id, kind FROM timers ORDER BY due_at")[-1][1] == (
        "task_timeout"
    )
    project.engine.advance("PT8H30M")
    [withdrawn] = project.entries(timed, "task.withdrawn")
    assert withdrawn["at"] == at(1, 8, 30)
    assert project.show(timed)["status"] == "completed"
    assert [t["run_id"] for t in project.engine.list_tasks()] == [never]
    kinds = project.rows(f"SELECT kind FROM timers WHERE run_id='{never}'")
    assert kinds == [("task_timeout",)]  # a null deadline arms no expiry


def test_completing_disarms_the_task_timers(project: Project) -> None:
    project.deploy(TIMED.format(after="PT1H", until="due"))
    _, run_id = project.claim(due="2027-01-02")
    assert len(project.rows("SELECT * FROM timers")) == 2
    project.engine.complete_task(1)
    assert project.rows("SELECT * FROM timers") == []
    project.engine.advance("P5D")
    types = project.types(run_id)
    assert "token.forked" not in types and "task.withdrawn" not in types
    assert types[-1] == "run.completed"


# --- bad input ---------------------------------------------------------------------------------


def test_bad_completions_are_refused_naming_the_problem_and_change_nothing(
    project: Project,
) -> None:
    project.deploy(REVIEW)
    project.claim()  # task 1: form Review
    project.deploy(REVIEW + FREE.replace("{assignee}", "clerk").replace("name: P", "name: Q"))
    project.engine.create_record("Claim", {"title": "second"})
    project.engine.work()  # task 2 (P on the second claim) and task 3 (Q, no form)
    free = next(t["id"] for t in project.engine.list_tasks() if t["form"] is None)
    before = project.snapshot()
    refusals: list[tuple[Any, type[Exception], str]] = [
        ((99, "approve"), NotFoundError, "no task with id [99]"),
        ((1,), UsageError, "task [1] has form [Review]: give an action, one of approve, reject"),
        ((1, "aprove"), UsageError,
         "task [1]: action [aprove] is not allowed by form [Review]; did you mean [approve]?"),
        ((1, "escalate"), UsageError,
         "task [1]: action [escalate] is not allowed by form [Review] (allowed: approve, reject)"),
        ((1, "approve", {"notes": "x"}), UsageError,
         "task [1]: field [notes] is not in form [Review]; did you mean [note]?"),
        ((1, "approve", {"due": "2027-02-01"}), UsageError,
         "task [1]: field [due] is not in form [Review] (its fields: amount, note)"),
        ((1, "approve", {"amount": "lots"}), UsageError,
         "cannot update [Claim] record: [amount]: must be a number, got the text [lots]"),
        ((free, "ok", {"note": "x"}), UsageError,
         f"task [{free}] has no form, so completing it writes no fields; got [note]"),
        ((free, " "), UsageError, f"task [{free}]: the action must not be empty"),
    ]  # fmt: skip
    for args, error, message in refusals:
        with pytest.raises(error) as refused:
            project.engine.complete_task(*args)
        assert str(refused.value) == message
        assert project.snapshot() == before, message
    project.engine.complete_task(1, "approve")
    after = project.snapshot()
    with pytest.raises(UsageError) as refused:
        project.engine.complete_task(1, "approve")
    assert str(refused.value) == "task [1] is completed, not open; only an open task completes"
    assert project.snapshot() == after


def test_a_task_of_an_ended_run_is_refused(project: Project) -> None:
    """A guard: ending a run withdraws its tasks, so only a damaged store has one open."""
    project.deploy(REVIEW)
    _, run_id = project.claim()
    with project.engine.store.tx() as tx:
        tx.c.execute("UPDATE runs SET status='completed' WHERE id=?", (run_id,))
    before = project.snapshot()
    with pytest.raises(UsageError) as refused:
        project.engine.complete_task(1, "approve")
    assert str(refused.value) == "task [1] belongs to a run that has ended"
    assert project.snapshot() == before


# --- the completion's record write is a record write --------------------------------------------


def test_a_completion_write_fires_on_update_triggers(project: Project) -> None:
    watcher = """\
- name: Watch
  trigger: { onUpdate: Claim, when: "outcome == 'reviewed'" }
  steps:
    - { name: mark, kind: serviceTask, args: { setField: note, value: watched } }
"""
    project.deploy(REVIEW + watcher)
    record, _ = project.claim()
    assert len(project.engine.runs_for_record("Claim", record["id"])) == 1
    project.engine.complete_task(1, "approve")
    runs = project.engine.runs_for_record("Claim", record["id"])
    assert sorted(r.name for r in runs) == ["P", "Watch"]  # started in the completion's commit
    project.engine.work()
    assert project.engine.get_record("Claim", record["id"])["note"] == "watched"


# --- cancelling --------------------------------------------------------------------------------


def test_cancelling_a_run_or_deleting_its_record_withdraws_the_open_task(
    project: Project,
) -> None:
    project.deploy(TIMED.format(after="PT1H", until="due"))
    _, cancelled = project.claim(due="2027-01-09")
    doomed, deleted = project.claim()
    project.engine.cancel(cancelled)
    project.engine.delete_record("Claim", doomed["id"])
    for run_id in (cancelled, deleted):
        history = project.show(run_id)["history"]
        assert [h["type"] for h in history[-2:]] == ["task.withdrawn", "run.cancelled"]
        assert history[-2]["reason"] == "cancelled"
    assert project.engine.list_tasks() == []
    assert project.rows("SELECT status FROM tasks") == [("withdrawn",), ("withdrawn",)]
    assert project.rows("SELECT count(*) FROM timers") == [(0,)]


# --- a completion while a worker holds the run ----------------------------------------------------


def test_a_completion_while_a_worker_holds_the_run_is_never_overwritten(
    project: Project,
) -> None:
    """The timeout's path runs a delegate that completes the task through another engine while
    this worker holds the run: the completion commits (releasing the lease), the worker's commit
    is refused, the attempt runs again on a fresh claim, and the history stays one clean line."""
    project.deploy(
        TIMED.format(after="PT1H", until="due").replace(
            "{ setField: note, value: nudged, next: end }",
            f"{{ delegate: CompleteTheTask, fields: {{ url: '{project.url}' }}, next: end }}",
        )
    )
    _, run_id = project.claim()
    project.engine.advance("PT1H")
    calls = [json.loads(line) for line in (project.root / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 2  # the refused attempt ran again (at-least-once)
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    seqs = [h["seq"] for h in shown["history"]]
    assert seqs == list(range(1, len(seqs) + 1))
    types = [h["type"] for h in shown["history"]]
    assert types.count("task.completed") == 1
    assert [h["step"] for h in shown["history"] if h["type"] == "step.completed"] == [
        "review", "done", "nudge",
    ]  # fmt: skip


# --- notify over SMTP ----------------------------------------------------------------------------


@dataclass
class Mailbox:
    """What the SMTP server received; recipients under ``@refused.test`` get a 550."""

    messages: list[tuple[list[str], EmailMessage]] = field(default_factory=list)

    async def handle_RCPT(
        self, server: SMTPServer, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if address.endswith("@refused.test"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        assert isinstance(envelope.content, bytes)
        msg = message_from_bytes(envelope.content, policy=default_policy)
        assert isinstance(msg, EmailMessage)
        self.messages.append((list(envelope.rcpt_tos), msg))
        return "250 Message accepted for delivery"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mailbox() -> Iterator[tuple[str, Mailbox]]:
    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{port}", box
    finally:
        controller.stop()


NOTIFY = """\
- name: P
  trigger: {{ onCreate: Claim }}
  steps:
    - name: tell
      kind: serviceTask
      args:
        notify: {{ to: {to}, subject: "Claim {{id}}: {{title}}", body: "Amount {{amount}}." }}
        retry: {{ count: 1, every: PT1M }}
        onError: failed
    - {{ name: sent, kind: serviceTask, args: {{ setField: outcome, value: sent, next: end }} }}
    - {{ name: failed, kind: serviceTask, args: {{ setField: note, value: "{{error}}" }} }}
"""


def smtp_project(tmp_path: Path, db_url: str, smtp_url: str, mp: pytest.MonkeyPatch) -> Project:
    mp.setenv("PROCFLOW_SMTP_URL", smtp_url)
    mp.setenv("PROCFLOW_SMTP_FROM", "claims@acme.test")
    return Project(tmp_path, db_url)


def test_notify_sends_over_smtp_when_configured(
    tmp_path: Path, db_url: str, mailbox: tuple[str, Mailbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, box = mailbox
    project = smtp_project(tmp_path, db_url, url, monkeypatch)
    try:
        project.deploy(NOTIFY.format(to="boss@acme.test"))
        record, run_id = project.claim(title="lamp", amount=12)
        assert project.show(run_id)["status"] == "completed"
        [(recipients, msg)] = box.messages
        assert recipients == ["boss@acme.test"]
        assert (msg["From"], msg["Subject"]) == ("claims@acme.test", "Claim 1: lamp")
        assert msg.get_content().strip() == "Amount 12."
        [sent] = project.entries(run_id, "message.sent")
        assert (sent["to"], sent["step"]) == ("boss@acme.test", "tell")
        assert "message.outboxed" not in project.types(run_id)
        assert project.engine.store.read().outbox() == []
        assert project.engine.get_record("Claim", record["id"])["outcome"] == "sent"
    finally:
        project.engine.close()


def test_a_notify_delivery_failure_is_a_step_failure_that_retries_then_routes(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = smtp_project(tmp_path, db_url, f"smtp://127.0.0.1:{free_port()}", monkeypatch)
    try:
        project.deploy(NOTIFY.format(to="boss@acme.test"))
        record, run_id = project.claim()
        shown = project.show(run_id)
        assert shown["status"] == "waiting"
        assert shown["tokens"][0]["waiting_for"]["kind"] == "retry"
        assert "cannot connect" in shown["tokens"][0]["waiting_for"]["last_error"]
        project.engine.advance("PT1M")
        assert len(project.entries(run_id, "attempt.failed")) == 2
        assert project.show(run_id)["status"] == "completed"
        assert project.engine.get_record("Claim", record["id"])["note"].startswith("email.send")
        assert project.engine.store.read().outbox() == []  # a failure never falls back silently
    finally:
        project.engine.close()


def test_a_refused_recipient_fails_the_notify_at_once(
    tmp_path: Path, db_url: str, mailbox: tuple[str, Mailbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, box = mailbox
    project = smtp_project(tmp_path, db_url, url, monkeypatch)
    try:
        project.deploy(NOTIFY.format(to="ghost@refused.test"))
        _, run_id = project.claim()
        [failed] = project.entries(run_id, "attempt.failed")
        assert "550" in failed["message"] and "not retried" in failed["message"]
        assert "retry.scheduled" not in project.types(run_id)  # a 5xx answer is final
        assert project.show(run_id)["status"] == "completed"  # by the onError route
        assert box.messages == []
    finally:
        project.engine.close()


def _micros(text: str) -> int:
    from procflow.runtime.engine import from_iso

    return from_iso(text)
