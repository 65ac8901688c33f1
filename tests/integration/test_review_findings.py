"""Review findings: each test demonstrates a bug found in review (they fail until it is fixed)."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine
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

DELEGATES = """\
SECRET = "tok-9f8e7d6c5b4a"


def FetchAndNote(ctx):
    ctx.vars["token"] = SECRET
    ctx.record["note"] = "fetched"
"""


class Intent:
    def __init__(self, root: Path, db_url: str) -> None:
        self.url = db_url
        (root / "custom").mkdir(parents=True, exist_ok=True)
        (root / "custom" / "__init__.py").write_text(DELEGATES)
        self.file = root / "tickets.intent"
        self.engine = Engine.virtual(db_url)

    def deploy(self, processes: str) -> None:
        self.file.write_text(APP + textwrap.indent(textwrap.dedent(processes), "  "))
        self.engine.deploy(str(self.file))

    def count(self, table: str, run_id: str) -> int:
        row = self.engine.store.conn.execute(
            f"SELECT count(*) FROM {table} WHERE run_id=?", (run_id,)
        ).fetchone()
        return int(row[0])


@pytest.fixture
def intent(tmp_path: Path, db_url: str) -> Iterator[Intent]:
    p = Intent(tmp_path, db_url)
    yield p
    p.engine.close()


# --- 1. an abort fired inside a group commit by another run of the same batch ------------------

TWO_PROCESSES = """\
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


def test_abort_by_another_run_in_the_same_group_commit_lets_the_aborted_runs_step_land(
    intent: Intent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim's order is unspecified (SQLite happens to give insertion order, PostgreSQL heap
    # order); fix the order in which the one group commit applies the two runs: the canceller
    # first, which is a legal outcome on either backend.
    claim = Tx.claim_runs

    def ordered_claim(self: Tx, *args: Any) -> list[Any]:
        return sorted(claim(self, *args), key=lambda r: r.name)

    monkeypatch.setattr(Tx, "claim_runs", ordered_claim)
    intent.deploy(TWO_PROCESSES)
    ticket = intent.engine.create_record("Ticket", {"title": "t"})
    runs = {r.name: r.id for r in intent.engine.runs_for_record("Ticket", ticket["id"])}
    intent.engine.work()  # one worker claims both runs and commits both steps in one transaction
    aborted = runs["BWorker"]
    shown = intent.engine.show(aborted)
    assert shown["status"] == "aborted"
    record = intent.engine.get_record("Ticket", ticket["id"])
    # Either order of the two commits ends with markVoid's write and no var left behind: B's
    # step committed before the abort (then the cleanup overwrote its note and the sweep erased
    # its var) or after it (then it was refused).
    found = {"vars": intent.count("vars", aborted), "note": record["note"]}
    assert found == {"vars": 0, "note": "voided"}
    assert intent.count("tokens", aborted) == 0
    assert intent.count("timers", aborted) == 0


# --- 2. a secret inside an args expression error is stored unmasked ----------------------------


def flow_engine(tmp_path: Path, db_url: str, body: str, **environ: str) -> Engine:
    project = tmp_path / "flowproject"
    project.mkdir(exist_ok=True)
    flow = project / "f.flow.yaml"
    flow.write_text(textwrap.dedent(body).lstrip("\n"))
    engine = Engine.virtual(db_url, environ={**os.environ, **environ})
    engine.deploy(str(flow))
    return engine


def stored_text(engine: Engine, run_id: str) -> str:
    """Every column of every row procflow keeps about the run, as text."""
    conn = engine.store.conn
    out = []
    for table in ("runs", "history", "tokens", "timers", "scopes"):
        column = "id" if table == "runs" else "run_id"
        rows = conn.execute(f"SELECT * FROM {table} WHERE {column}=?", (run_id,)).fetchall()
        out.append(repr(rows))
    return "\n".join(out)


def test_secret_in_an_args_expression_error_is_stored_unmasked(tmp_path: Path, db_url: str) -> None:
    secret = "s3cr3t-Zq9-value"
    engine = flow_engine(
        tmp_path,
        db_url,
        """
        flow: f
        steps:
          - ping: { log.write: { message: "port {{ secret('PF_REVIEW_PORT') | int }}" } }
        """,
        PF_REVIEW_PORT=secret,
    )
    try:
        run_id = engine.start_flow("f", {})
        engine.work()
        shown = engine.show(run_id)
        assert shown["status"] == "failed"
        assert secret not in json.dumps(shown), shown["error"]
        assert secret not in stored_text(engine, run_id)
    finally:
        engine.close()


# --- 3. a step's record write resumes a wait of its own run before the step's token rows land --

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


def test_a_step_whose_write_resumes_its_own_runs_other_path_loses_the_completion(
    intent: Intent,
) -> None:
    intent.deploy(SELF_RESUME)
    ticket = intent.engine.create_record("Ticket", {"title": "t"})
    intent.engine.work()
    (run,) = intent.engine.runs_for_record("Ticket", ticket["id"])
    intent.engine.advance("PT1H")  # the timeout forks a second path: the task [ack]
    tasks = {t["step"]: t["id"] for t in intent.engine.list_tasks()}
    intent.engine.complete_task(tasks["triage"])
    intent.engine.work()  # path 1 parks on waitPrio
    intent.engine.complete_task(tasks["ack"])
    intent.engine.work()  # path 2: bump writes priority 5, which satisfies path 1's wait
    shown = intent.engine.show(run.id)
    assert intent.engine.get_record("Ticket", ticket["id"])["priority"] == 5
    # Both paths ended: the run must be completed (it is left `running` with no token at all).
    assert (shown["status"], shown["tokens"]) == ("completed", [])
    assert shown["history"][-1]["type"] == "run.completed"


# --- 4. event retention only counts the latest version of each flow ---------------------------

LATE_WAIT = """
flow: late
steps:
  - pause: {{ wait: {{ for: 30h }} }}
  - approval:
      wait_for: slack.approval
      match: {{ message: "m1" }}
      timeout: 1h
      lookback: {lookback}
output: "{{{{ approval.status }}}}"
"""


def test_redeploying_a_shorter_lookback_prunes_events_a_running_version_still_needs(
    tmp_path: Path, db_url: str
) -> None:
    engine = flow_engine(tmp_path, db_url, LATE_WAIT.format(lookback="48h"))
    try:
        run_id = engine.start_flow("late", {})
        engine.work()
        engine.advance("1h")
        engine.send_event("slack.approval", {"message": "m1", "approved": True}, "early")
        # A new version with a shorter window; the running run stays pinned to version 1,
        # whose wait_for will look back 48 hours.
        (tmp_path / "flowproject" / "f.flow.yaml").write_text(LATE_WAIT.format(lookback="1h"))
        engine.deploy(str(tmp_path / "flowproject" / "f.flow.yaml"))
        engine.advance("25h")  # T0+26h
        engine.send_event("slack.approval", {"message": "unrelated"}, "later")  # prunes
        engine.advance("5h")  # T0+31h: the wait_for began at T0+30h and timed out at T0+31h
        shown = engine.show(run_id)
        assert shown["status"] == "completed"
        # The event accepted at T0+1h lies inside the 48h window of the version the run runs.
        assert shown["output"] == "received"
    finally:
        engine.close()
