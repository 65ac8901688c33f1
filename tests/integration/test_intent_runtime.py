"""Intent processes end to end through the real SQLite store, on a virtual clock.

Each test writes a small ``.intent`` file and its ``custom/`` delegates into a temp directory.
Delegates leave a side-effect log (one JSON line per attempt) in the project directory, so tests
can count attempts independently of the engine's own history.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import NotFoundError, UsageError
from procflow.runtime.engine import Engine

T0 = "2027-01-01T00:00:00Z"
PASSWORD = "s3cret-Pa55word-for-the-tenant"

ENTITIES = """\
name: app
entities:
  - name: Status
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, required: true, length: 50 }
  - name: Customer
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, length: 50 }
      - { name: creditLimit, type: integer }
  - name: Tenant
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
      - { name: state, type: string, length: 10 }
      - { name: amount, type: integer }
      - { name: x, type: string, length: 100 }
      - { name: junk, type: string, length: 100 }
      - { name: route, type: string, length: 20 }
      - { name: failureMessage, type: string, length: 60 }
    relations:
      - { name: Progress, kind: manyToOne, to: Status, function: EntityStatus, init: Requested }
      - { name: customer, kind: manyToOne, to: Customer }
seeds:
  - name: statuses
    entity: Status
    rows: [ { id: 1, name: Requested }, { id: 2, name: Done }, { id: 3, name: Failed } ]
processes:
"""

DELEGATES = f'''\
import json
from pathlib import Path

from procflow import NonRetryableError

PASSWORD = {PASSWORD!r}


def log(ctx, **extra):
    line = {{"step": ctx.step, "attempt": ctx.attempt, "key": ctx.idempotency_key, **extra}}
    with open(Path(ctx.project_dir) / "calls.jsonl", "a") as f:
        f.write(json.dumps(line) + "\\n")


def calls(ctx):
    path = Path(ctx.project_dir) / "calls.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


class Flaky:
    """Fails attempts 1..fail_until, writing junk each time; then writes x and succeeds."""

    fail_until = 0

    def execute(self, ctx):
        log(ctx)
        if ctx.attempt <= int(self.fail_until):
            ctx.record["junk"] = f"junk from attempt {{ctx.attempt}}"
            ctx.record["x"] = f"written by attempt {{ctx.attempt}}"
            raise ConnectionError(f"service unavailable (attempt {{ctx.attempt}})")
        ctx.record["x"] = f"written by attempt {{ctx.attempt}}"


class FailsFirstCalls:
    """Fails the first `failures` calls ever made (across runs retries), then succeeds."""

    failures = 0

    def execute(self, ctx):
        n = calls(ctx) + 1
        log(ctx)
        if n <= int(self.failures):
            raise RuntimeError(f"outage (call {{n}})")
        ctx.record["x"] = f"call {{n}}"


def Ok(ctx):
    log(ctx)


def Fatal(ctx):
    log(ctx)
    raise NonRetryableError("refused for good")


def Produce(ctx):
    log(ctx)
    ctx.vars["pw"] = PASSWORD


class Use:
    fail_until = 0

    def execute(self, ctx):
        log(ctx)
        assert ctx.vars["pw"] == PASSWORD
        if ctx.attempt <= int(self.fail_until):
            raise ConnectionError("app service unavailable")


def UseAndFail(ctx):
    log(ctx)
    raise RuntimeError(f"refused password {{ctx.vars['pw']}}")


def SetsUndeclared(ctx):
    log(ctx)
    ctx.vars["token"] = "abc"


def ReadsUnused(ctx):
    log(ctx)
    ctx.vars["token"]


def WritesBadType(ctx):
    log(ctx)
    ctx.record["amount"] = "a lot"
    ctx.record["x"] = "half-written"


def ReadsUnset(ctx):
    log(ctx)
    ctx.vars["pw"]
'''


class Project:
    """A temp project: an intent file, its delegates, and a virtual-clock engine."""

    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        (root / "custom").mkdir(parents=True, exist_ok=True)
        (root / "custom" / "__init__.py").write_text(DELEGATES)
        self.file = root / "app.intent"
        self.engine = Engine.virtual(db_url)

    def write(self, processes: str) -> str:
        self.file.write_text(ENTITIES + textwrap.indent(textwrap.dedent(processes), "  "))
        return str(self.file)

    def deploy(self, processes: str) -> list[Any]:
        return self.engine.deploy(self.write(processes))

    def create(self, **data: Any) -> dict[str, Any]:
        return self.engine.create_record("Tenant", {"title": "t", **data})

    def run_of(self, record: dict[str, Any], name: str | None = None) -> str:
        runs = [
            r for r in self.engine.runs_for_record("Tenant", record["id"])
            if name is None or r.name == name
        ]  # fmt: skip
        assert len(runs) == 1, runs
        return runs[0].id

    def start(self, **data: Any) -> tuple[dict[str, Any], str]:
        record = self.create(**data)
        self.engine.work()
        return record, self.run_of(record)

    def show(self, run_id: str) -> dict[str, Any]:
        return self.engine.show(run_id)

    def record(self, id_: int = 1) -> dict[str, Any]:
        return self.engine.get_record("Tenant", id_)

    def calls(self) -> list[dict[str, Any]]:
        path = self.root / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def history(self, run_id: str, type_: str | None = None) -> list[dict[str, Any]]:
        entries = self.show(run_id)["history"]
        return [h for h in entries if type_ is None or h["type"] == type_]

    def count(self, table: str) -> int:
        row = self.engine.store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0])

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a rejected request must leave untouched."""
        reader = self.engine.store.read()
        runs = [(r.id, r.status, r.seq) for r in self.engine.list_runs()]
        return (
            runs,
            self.engine.list_records("Tenant"),
            [(r.id, len(reader.history(r.id))) for r in self.engine.list_runs()],
            self.count("records"),
        )


@pytest.fixture
def project(tmp_path: Path, db_url: str) -> Iterator[Project]:
    p = Project(tmp_path, db_url)
    yield p
    p.engine.close()


def at(seconds: int) -> str:
    return f"2027-01-01T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z"


FLAKY = """\
- name: P
  trigger: {{ onCreate: Tenant }}
  steps:
    - name: call
      kind: serviceTask
      args:
        delegate: Flaky
        fields: {{ fail_until: {fail_until} }}
        retry: {{ count: 3, every: PT30S }}
        onError: recordFailure
    - {{ name: ok, kind: serviceTask, args: {{ setRelationField: Progress, value: Done }} }}
    - {{ name: done, kind: end }}
    - name: recordFailure
      kind: serviceTask
      args: {{ setField: failureMessage, value: "{{error}}", next: markFailed }}
    - name: markFailed
      kind: serviceTask
      args: {{ setRelationField: Progress, value: Failed, next: end }}
"""


# --- step resilience ------------------------------------------------------------------------


def test_flaky_delegate_recovers_on_exactly_its_last_declared_attempt(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=3))  # count 3 → 4 attempts; the 4th succeeds
    record, run_id = project.start()
    assert project.show(run_id)["status"] == "waiting"
    project.engine.advance("PT89S")  # attempts at 0s, 30s, 60s; the 4th is due at 90s
    shown = project.show(run_id)
    assert [c["attempt"] for c in project.calls()] == [1, 2, 3]
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["waiting_for"] == {
        "kind": "retry", "attempt": 4, "of": 4, "due": at(90),
        "last_error": "service unavailable (attempt 3)",
    }  # fmt: skip
    project.engine.advance("PT1S")
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert shown["ended_at"] == at(90)
    calls = project.calls()
    assert [c["attempt"] for c in calls] == [1, 2, 3, 4]  # count + 1, and not one more
    assert len({c["key"] for c in calls}) == 1  # the idempotency key is stable across retries
    started = [h for h in shown["history"] if h["type"] == "step.started" and h["step"] == "call"]
    assert [(h["attempt"], h["at"]) for h in started] == [
        (1, at(0)), (2, at(30)), (3, at(60)), (4, at(90)),
    ]  # fmt: skip
    scheduled = project.history(run_id, "retry.scheduled")
    assert [(h["attempt"], h["due"]) for h in scheduled] == [(2, at(30)), (3, at(60)), (4, at(90))]
    assert len(project.history(run_id, "attempt.failed")) == 3
    assert project.history(run_id, "step.failed") == []
    after = project.record(record["id"])
    assert after["x"] == "written by attempt 4"
    assert after["junk"] is None  # every intermediate attempt's writes were discarded
    assert after["Progress"] == 2 and after["failureMessage"] is None


def test_exhausted_retries_route_to_on_error_recording_the_final_message(
    project: Project,
) -> None:
    project.deploy(FLAKY.format(fail_until=99))
    record, run_id = project.start()
    for _ in range(3):
        assert project.record(record["id"])["junk"] is None  # nothing leaks between attempts
        project.engine.advance("PT30S")
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert [c["attempt"] for c in project.calls()] == [1, 2, 3, 4]
    after = project.record(record["id"])
    assert after["failureMessage"] == "service unavailable (attempt 4)"  # the FINAL attempt's
    assert after["Progress"] == 3
    # The final attempt's writes commit with the onError route (the seed's rule).
    assert (after["x"], after["junk"]) == ("written by attempt 4", "junk from attempt 4")
    failed = project.history(run_id, "step.failed")
    assert [(h["step"], h["attempt"], h["message"]) for h in failed] == [
        ("call", 4, "service unavailable (attempt 4)")
    ]
    messages = [h["message"] for h in project.history(run_id, "attempt.failed")]
    assert messages == [f"service unavailable (attempt {n})" for n in (1, 2, 3, 4)]
    steps = [h["step"] for h in project.history(run_id, "step.completed")]
    assert steps == ["recordFailure", "markFailed"]


def test_error_longer_than_the_field_is_cut_with_an_ellipsis(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Fatal, onError: rec } }
            - { name: done, kind: end }
            - { name: rec, kind: serviceTask, args: { setField: state, value: "{error}" } }
        """)
    record, run_id = project.start()
    assert project.show(run_id)["status"] == "completed"
    assert project.record(record["id"])["state"] == "refused f…"


def test_failure_without_on_error_fails_the_run_and_runs_retry_completes_it(
    project: Project,
) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - name: call
              kind: serviceTask
              args: { delegate: FailsFirstCalls, fields: { failures: 3 }, retry: { count: 1, every: PT1M } }
            - { name: after, kind: serviceTask, args: { setField: route, value: after } }
        """)  # noqa: E501
    record, run_id = project.start()
    project.engine.advance("PT5M")
    shown = project.show(run_id)
    assert shown["status"] == "failed"
    assert shown["ended_at"] is None
    assert shown["error"] == {"step": "call", "message": "outage (call 2)", "type": "action"}
    assert shown["tokens"] == [{"step": "call", "state": "failed"}]
    assert [r.id for r in project.engine.list_runs(status="failed")] == [run_id]
    assert project.record(record["id"])["x"] is None
    project.engine.advance("PT1H")  # an incident waits for an operator, not for the clock
    assert len(project.calls()) == 2

    project.engine.retry(run_id)
    retried = project.history(run_id, "run.retried")
    assert len(retried) == 1 and retried[0]["step"] == "call"
    project.engine.work()
    shown = project.show(run_id)  # call 3 fails: attempt 1 of a fresh budget of 2
    assert shown["status"] == "waiting"
    assert shown["error"] is None
    wait = shown["tokens"][0]["waiting_for"]
    assert (wait["kind"], wait["attempt"], wait["of"]) == ("retry", 2, 2)
    project.engine.advance("PT1M")
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert [c["attempt"] for c in project.calls()] == [1, 2, 1, 2]
    assert project.record(record["id"])["x"] == "call 4"
    assert project.record(record["id"])["route"] == "after"


def test_retry_refuses_a_run_that_is_not_failed(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=0))
    _, run_id = project.start()
    before = project.snapshot()
    with pytest.raises(UsageError, match="only a failed run"):
        project.engine.retry(run_id)
    with pytest.raises(NotFoundError):
        project.engine.retry("no-such-run")
    assert project.snapshot() == before


def test_non_retryable_error_skips_the_remaining_attempts(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Fatal, retry: { count: 5, every: PT1M } } }
        """)  # noqa: E501
    _, run_id = project.start()
    shown = project.show(run_id)
    assert shown["status"] == "failed"
    assert shown["error"]["message"] == "refused for good"
    assert len(project.calls()) == 1
    assert project.history(run_id, "retry.scheduled") == []


def test_discarded_attempts_fire_no_lifecycle_events(project: Project) -> None:
    project.deploy(
        FLAKY.format(fail_until=2)
        + """\
- name: OnJunk
  trigger: { onUpdate: Tenant, when: "junk != null" }
  steps:
    - { name: call, kind: serviceTask, args: { delegate: Ok } }
- name: OnX
  trigger: { onUpdate: Tenant, when: "x == 'written by attempt 3'" }
  steps:
    - { name: call, kind: serviceTask, args: { delegate: Ok } }
"""
    )
    record = project.create()
    project.engine.work()
    project.engine.advance("PT5M")
    runs = project.engine.runs_for_record("Tenant", record["id"])
    assert sorted((r.name, r.status) for r in runs) == [("OnX", "completed"), ("P", "completed")]


def test_a_delegate_writing_an_invalid_record_fails_the_step(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: WritesBadType } }
        """)
    record, run_id = project.start()
    shown = project.show(run_id)
    assert shown["status"] == "failed"
    assert "[amount]" in shown["error"]["message"]
    assert project.record(record["id"]) == {**record, "Progress": 1}  # nothing half-written


# --- vars -----------------------------------------------------------------------------------

VARS = """\
- name: P
  trigger: { onCreate: Tenant }
  vars: [ { name: pw, clearAfter: use }, { name: token } ]
  steps:
    - { name: make, kind: serviceTask, args: { delegate: Produce, produces: [pw] } }
    - name: use
      kind: serviceTask
      args:
        delegate: Use
        fields: { fail_until: 1 }
        uses: [pw]
        retry: { count: 1, every: PT1M }
    - { name: after, kind: serviceTask, args: { setField: route, value: after } }
"""


def stored_vars(project: Project, run_id: str) -> dict[str, bytes]:
    return project.engine.store.read().vars(run_id)


def test_clear_after_removes_the_value_when_its_step_completes(project: Project) -> None:
    project.deploy(VARS)
    _, run_id = project.start()
    shown = project.show(run_id)
    assert shown["status"] == "waiting"  # `use` waits for its retry, pw in between
    assert shown["vars"] == {
        "pw": {"set": True, "value": "***"},
        "token": {"set": False, "value": None},
    }
    blobs = stored_vars(project, run_id)
    assert set(blobs) == {"pw"} and PASSWORD.encode() not in blobs["pw"]  # encrypted at rest
    project.engine.advance("PT1M")
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert stored_vars(project, run_id) == {}
    assert project.count("vars") == 0
    assert shown["vars"]["pw"] == {"set": False, "value": None}
    cleared = project.history(run_id, "var.cleared")
    assert [(h["var"], h.get("step")) for h in cleared] == [("pw", "use")]
    produced = project.history(run_id, "var.produced")
    assert [(h["var"], h["step"]) for h in produced] == [("pw", "make")]
    assert PASSWORD not in json.dumps(shown)


def test_the_end_of_run_sweep_erases_a_var_an_error_route_left(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          vars: [ { name: pw, clearAfter: use } ]
          steps:
            - { name: make, kind: serviceTask, args: { delegate: Produce, produces: [pw] } }
            - name: use
              kind: serviceTask
              args: { delegate: UseAndFail, uses: [pw], onError: recordFailure }
            - { name: done, kind: end }
            - name: recordFailure
              kind: serviceTask
              args: { setField: failureMessage, value: "{error}", next: end }
        """)
    record, run_id = project.start()
    shown = project.show(run_id)
    assert shown["status"] == "completed"
    assert stored_vars(project, run_id) == {}
    assert shown["vars"]["pw"] == {"set": False, "value": None}
    assert [h["var"] for h in project.history(run_id, "var.cleared")] == ["pw"]
    assert shown["history"][-1]["type"] == "run.completed"
    assert project.record(record["id"])["failureMessage"] == "refused password ***"
    assert PASSWORD not in json.dumps(shown)


def test_cancelling_a_run_erases_its_vars(project: Project) -> None:
    project.deploy(VARS)
    _, run_id = project.start()
    assert set(stored_vars(project, run_id)) == {"pw"}
    project.engine.cancel(run_id)
    shown = project.show(run_id)
    assert shown["status"] == "cancelled"
    assert stored_vars(project, run_id) == {}
    assert [h["var"] for h in project.history(run_id, "var.cleared")] == ["pw"]
    assert shown["history"][-1]["type"] == "run.cancelled"
    assert shown["tokens"] == []
    project.engine.advance("PT1H")  # its retry timer went with it
    assert len(project.calls()) == 2


@pytest.mark.parametrize(
    ("delegate", "declare", "expected"),
    [
        ("SetsUndeclared", "produces: [pw]", r"set var \[token\], which it does not produce"),
        ("ReadsUnused", "uses: [pw]", r"read var \[token\], which it neither uses nor produces"),
        ("ReadsUnset", "uses: [pw]", r"read var \[pw\], which is not set"),
    ],
)
def test_var_contract_breaches_fail_the_step_naming_the_var(
    project: Project, delegate: str, declare: str, expected: str
) -> None:
    project.deploy(f"""\
        - name: P
          trigger: {{ onCreate: Tenant }}
          vars: [ {{ name: pw }}, {{ name: token }} ]
          steps:
            - {{ name: call, kind: serviceTask, args: {{ delegate: {delegate}, {declare} }} }}
        """)
    _, run_id = project.start()
    shown = project.show(run_id)
    assert shown["status"] == "failed"
    assert shown["error"]["step"] == "call"
    assert re.search(expected, shown["error"]["message"]), shown["error"]
    assert stored_vars(project, run_id) == {}


# --- triggers ---------------------------------------------------------------------------------


def test_when_guards_and_at_most_once_per_record_ever(project: Project) -> None:
    project.deploy("""\
        - name: OnReady
          trigger: { onUpdate: Tenant, when: "state == 'ready'" }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Ok } }
        - name: OnBig
          trigger: { onCreate: Tenant, when: ["amount != null", "state == 'new'"] }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Ok } }
        """)
    engine = project.engine
    small = project.create(state="old", amount=1)
    big = project.create(state="new", amount=5)
    assert [r.name for r in engine.runs_for_record("Tenant", small["id"])] == []
    assert [r.name for r in engine.runs_for_record("Tenant", big["id"])] == ["OnBig"]
    engine.update_record("Tenant", small["id"], {"state": "draft"})
    assert engine.runs_for_record("Tenant", small["id"]) == []
    engine.update_record("Tenant", small["id"], {"state": "ready"})
    engine.work()
    runs = engine.runs_for_record("Tenant", small["id"])
    assert [(r.name, r.status) for r in runs] == [("OnReady", "completed")]
    engine.update_record("Tenant", small["id"], {"state": "draft"})
    engine.update_record("Tenant", small["id"], {"state": "ready"})  # satisfies the guard again
    engine.update_record("Tenant", small["id"], {"title": "still ready"})
    engine.work()
    assert [r.id for r in engine.runs_for_record("Tenant", small["id"])] == [runs[0].id]


def test_an_on_delete_run_reads_the_deleted_record(project: Project) -> None:
    project.deploy("""\
        - name: Gone
          trigger: { onDelete: Tenant, when: "state == 'x'" }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Ok } }
        """)
    record = project.create(state="x")
    project.engine.delete_record("Tenant", record["id"])
    project.engine.work()
    runs = project.engine.runs_for_record("Tenant", record["id"])
    assert [(r.name, r.status) for r in runs] == [("Gone", "completed")]


def test_a_deleted_records_id_is_never_given_again(project: Project) -> None:
    """Its runs and its trigger's once-per-record key still name it: a new record with the same
    id would share the old one's runs and never start its own."""
    project.deploy("""\
        - name: Made
          trigger: { onCreate: Tenant }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Ok } }
        """)
    first = project.create(state="a")
    project.engine.work()
    project.engine.delete_record("Tenant", first["id"])
    second = project.create(state="b")
    assert second["id"] == first["id"] + 1
    project.engine.work()
    runs = project.engine.runs_for_record("Tenant", second["id"])
    assert [(r.name, r.status) for r in runs] == [("Made", "completed")]


def test_decision_over_a_one_hop_relation(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - name: check
              kind: decision
              args: { if: "customer.creditLimit > 1000", then: vip }
            - { name: normal, kind: serviceTask, args: { setField: route, value: normal, next: end } }
            - { name: vip, kind: serviceTask, args: { setField: route, value: vip, next: end } }
        """)  # noqa: E501
    engine = project.engine
    rich = engine.create_record("Customer", {"name": "rich", "creditLimit": 5000})
    poor = engine.create_record("Customer", {"name": "poor", "creditLimit": 10})
    a = project.create(customer=rich["id"])
    b = project.create(customer=poor["id"])
    engine.work()
    assert project.record(a["id"])["route"] == "vip"
    assert project.record(b["id"])["route"] == "normal"


# --- records ----------------------------------------------------------------------------------


def test_bad_record_writes_are_rejected_and_change_nothing(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=0))
    engine = project.engine
    project.start()
    before = project.snapshot()
    with pytest.raises(UsageError, match=r"\[amount\]"):
        project.create(amount="many")
    with pytest.raises(UsageError, match=r"\[title\]"):
        engine.create_record("Tenant", {"amount": 1})
    with pytest.raises(UsageError, match=r"\[colour\]"):
        project.create(colour="red")
    with pytest.raises(UsageError, match=r"\[title\]"):
        project.create(title="x" * 201)
    with pytest.raises(UsageError, match=r"\[customer\]"):
        project.create(customer=999)
    with pytest.raises(UsageError, match=r"\[amount\]"):
        engine.update_record("Tenant", 1, {"amount": "many", "state": "ok"})
    with pytest.raises(NotFoundError):
        engine.update_record("Tenant", 99, {"state": "ok"})
    with pytest.raises(NotFoundError):
        engine.delete_record("Tenant", 99)
    with pytest.raises(NotFoundError, match=r"Tenant"):
        engine.create_record("Tenantt", {"title": "x"})
    assert project.snapshot() == before


def test_deleting_a_record_cancels_its_active_runs(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=99))
    record, run_id = project.start()
    assert project.show(run_id)["status"] == "waiting"
    project.engine.delete_record("Tenant", record["id"])
    shown = project.show(run_id)
    assert shown["status"] == "cancelled"
    assert shown["ended_at"] == at(0)
    last = shown["history"][-1]
    assert last["type"] == "run.cancelled"
    assert "deleted" in last["reason"]
    project.engine.advance("PT10M")
    assert len(project.calls()) == 1  # its retry timer was disarmed


# --- definitions ------------------------------------------------------------------------------


def test_deploys_are_versioned_and_runs_stay_pinned(project: Project) -> None:
    first = project.deploy(FLAKY.format(fail_until=1))
    assert [(d.name, d.version, d.created) for d in first] == [("P", 1, True)]
    again = project.deploy(FLAKY.format(fail_until=1))
    assert [(d.name, d.version, d.created) for d in again] == [("P", 1, False)]
    _, old = project.start()  # v1: waits for its retry
    second = project.deploy(FLAKY.format(fail_until=0))
    assert [(d.name, d.version, d.created) for d in second] == [("P", 2, True)]
    record = project.create()
    project.engine.work()
    new = project.run_of(record)
    assert project.show(new)["version"] == 2
    assert project.show(new)["status"] == "completed"
    assert project.show(old)["status"] == "waiting"
    project.engine.advance("PT30S")
    shown = project.show(old)
    assert (shown["version"], shown["status"]) == (1, "completed")
    started = [h["attempt"] for h in shown["history"] if h["type"] == "step.started"]
    assert started[:2] == [1, 2]  # it kept v1's behaviour (fail once, then retry)


def test_a_disabled_definition_starts_nothing(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=0))
    project.engine.set_enabled("P", False)
    record = project.create()
    assert project.engine.runs_for_record("Tenant", record["id"]) == []
    with pytest.raises(NotFoundError):
        project.engine.set_enabled("Nope", False)
    project.engine.set_enabled("P", True)
    record = project.create()
    project.engine.work()
    assert project.show(project.run_of(record))["status"] == "completed"


def test_disabling_a_definition_lets_running_runs_finish(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=1))
    _, run_id = project.start()
    project.engine.set_enabled("P", False)
    project.engine.advance("PT30S")
    assert project.show(run_id)["status"] == "completed"


def test_cancel_of_a_terminal_run_is_refused(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=0))
    _, run_id = project.start()
    assert project.show(run_id)["status"] == "completed"
    before = project.snapshot()
    with pytest.raises(UsageError, match="already completed"):
        project.engine.cancel(run_id)
    with pytest.raises(NotFoundError):
        project.engine.cancel("no-such-run")
    with pytest.raises(NotFoundError):
        project.engine.show("no-such-run")
    assert project.snapshot() == before


def test_a_failed_run_can_be_cancelled(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          steps:
            - { name: call, kind: serviceTask, args: { delegate: Fatal } }
        """)
    _, run_id = project.start()
    assert project.show(run_id)["status"] == "failed"
    project.engine.cancel(run_id)
    shown = project.show(run_id)
    assert shown["status"] == "cancelled" and shown["tokens"] == []


# --- the clock --------------------------------------------------------------------------------


def test_timers_never_fire_early_and_set_clock_only_moves_forward(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=1))
    _, run_id = project.start()
    project.engine.set_clock(project.engine.now() + 29_999_999)
    assert len(project.calls()) == 1
    with pytest.raises(UsageError, match="forward"):
        project.engine.set_clock(0)
    project.engine.advance("PT1S")
    assert project.show(run_id)["status"] == "completed"


# --- runs show JSON ---------------------------------------------------------------------------

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
TOP_KEYS = [
    "id", "name", "dialect", "version", "status", "started_at", "ended_at", "business_key",
    "record", "parent", "children", "tokens", "bindings", "vars", "output", "error", "history",
]  # fmt: skip
HISTORY_TYPES = {
    "run.started", "step.started", "step.completed", "step.failed", "step.skipped",
    "step.recovered", "attempt.failed", "retry.scheduled", "timer.armed", "timer.fired",
    "event.received", "task.created", "task.completed", "task.withdrawn", "var.produced",
    "var.cleared", "message.sent", "message.outboxed", "token.forked", "token.ended",
    "run.completed", "run.failed", "run.cancelled", "run.aborted", "run.retried", "log",
}  # fmt: skip


def check_history(history: list[dict[str, Any]]) -> None:
    assert [h["seq"] for h in history] == list(range(history[0]["seq"], history[-1]["seq"] + 1))
    for h in history:
        assert h["type"] in HISTORY_TYPES, h
        assert ISO.match(h["at"]), h
        if "step" in h:
            assert isinstance(h["path"], str), h
            assert isinstance(h.get("attempt"), int), h


def test_runs_show_json_has_exactly_the_documented_shape(project: Project) -> None:
    project.deploy(VARS)
    record, run_id = project.start()
    shown = project.show(run_id)
    assert list(shown) == TOP_KEYS
    assert json.loads(json.dumps(shown)) == shown
    assert shown["id"] == run_id
    assert (shown["name"], shown["dialect"], shown["version"]) == ("P", "intent", 1)
    assert (shown["status"], shown["started_at"], shown["ended_at"]) == ("waiting", T0, None)
    assert shown["business_key"] == str(record["id"])
    assert shown["record"] == {"entity": "Tenant", "id": record["id"]}
    assert (shown["bindings"], shown["output"], shown["error"]) == ({}, None, None)
    [token] = shown["tokens"]
    assert (token["step"], token["state"]) == ("use", "waiting")
    assert set(token) <= {"step", "state", "path", "waiting_for", "since"}
    assert token["waiting_for"] == {
        "kind": "retry", "attempt": 2, "of": 2, "due": "2027-01-01T00:01:00Z",
        "last_error": "app service unavailable",
    }  # fmt: skip
    assert shown["vars"] == {
        "pw": {"set": True, "value": "***"},
        "token": {"set": False, "value": None},
    }
    history = shown["history"]
    assert history[0] == {"seq": 1, "at": T0, "type": "run.started"}
    assert history[1] == {
        "seq": 2, "at": T0, "type": "step.started", "step": "make", "path": "make", "attempt": 1,
    }  # fmt: skip
    check_history(history)
    assert [h["type"] for h in history[-3:]] == [
        "step.started",
        "attempt.failed",
        "retry.scheduled",
    ]
    assert project.engine.show(run_id, history=2)["history"] == history[-2:]
    assert project.engine.show(run_id, history=0)["history"] == []
    project.engine.advance("PT1M")
    shown = project.show(run_id)
    assert ISO.match(shown["ended_at"]) and shown["tokens"] == []
    check_history(shown["history"])


def test_runs_show_json_of_a_failed_run(project: Project) -> None:
    project.deploy("""\
        - name: P
          trigger: { onCreate: Tenant }
          vars: [ { name: pw } ]
          steps:
            - { name: make, kind: serviceTask, args: { delegate: Produce, produces: [pw] } }
            - { name: call, kind: serviceTask, args: { delegate: UseAndFail, uses: [pw] } }
        """)
    _, run_id = project.start()
    shown = project.show(run_id)
    assert list(shown) == TOP_KEYS
    assert shown["status"] == "failed"
    assert shown["error"] == {"step": "call", "message": "refused password ***", "type": "action"}
    assert shown["vars"] == {"pw": {"set": True, "value": "***"}}
    check_history(shown["history"])
    assert [h["type"] for h in shown["history"][-2:]] == ["step.failed", "run.failed"]
    assert PASSWORD not in json.dumps(shown)


def test_list_runs_filters_by_status_and_name(project: Project) -> None:
    project.deploy(FLAKY.format(fail_until=1))
    _, waiting = project.start()
    assert [r.id for r in project.engine.list_runs(status="waiting")] == [waiting]
    assert [r.id for r in project.engine.list_runs(name="P")] == [waiting]
    assert project.engine.list_runs(status="completed") == []
    assert project.engine.list_runs(name="Q") == []
