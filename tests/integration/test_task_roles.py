"""Who may complete a task, through the engine and the Python API, on both store backends.

The rule every face applies: the assigned user, a member of the assigned role, or an
administrator. Role membership comes from the token table (``PROCFLOW_API_TOKENS``): a name given
to the engine has exactly the roles the table gives it. A refusal is a ``ForbiddenError`` (exit 2;
the HTTP face's 403) and changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import procflow
from procflow.errors import ConfigError, ForbiddenError, TaskError, UsageError
from procflow.runtime.data.identity import ADMINISTRATOR, Actor
from procflow.runtime.engine import Engine

APP = """\
name: claims
entities:
  - name: Claim
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: note, type: string, length: 50 }
forms:
  - { name: Review, forEntity: Claim, fields: [note], actions: [approve, reject] }
processes:
  - name: Review
    trigger: { onCreate: Claim }
    steps:
      - { name: review, kind: userTask, args: { assignee: manager, form: Review } }
      - { name: confirm, kind: userTask, args: { assignee: personal } }
  - name: Ask
    steps:
      - { name: ask, kind: userTask, args: { assignee: personal } }
"""

TOKENS = ";".join(
    f"{user}-token-{'t' * 24}={user}:{roles}"
    for user, roles in {
        "alice": "manager",
        "bob": "cfo,sales",
        "root": "admin",
        # who writes records and starts and cancels runs: the role table wants an operator
        **dict.fromkeys(("dana", "erin", "frank", "gina"), "operator"),
    }.items()
)
TABLES = ("tasks", "records", "runs", "tokens", "timers", "waits", "history")


class Claims:
    """A virtual-clock engine with the claims app deployed and the token table set."""

    def __init__(self, root: Path, db_url: str, tokens: str = TOKENS) -> None:
        (root / "claims.intent").write_text(APP)
        self.engine = Engine.virtual(db_url, environ={**os.environ, "PROCFLOW_API_TOKENS": tokens})
        self.engine.deploy(str(root / "claims.intent"))

    def claim(self, owner: str | None = None) -> tuple[int, str]:
        """A claim (owned by ``owner``) with its review task open: (task id, run id)."""
        record = self.engine.create_record("Claim", {"title": "t"}, user=owner)
        self.engine.work()
        [run] = self.engine.runs_for_record("Claim", record["id"])
        [task] = [t for t in self.engine.list_tasks() if t["run_id"] == run.id]
        return task["id"], run.id

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table a completion writes."""
        conn = self.engine.store.conn
        return {
            table: sorted((tuple(r) for r in conn.execute(f"SELECT * FROM {table}")), key=repr)
            for table in TABLES
        }

    def completed_by(self, run_id: str) -> list[str]:
        history = self.engine.show(run_id)["history"]
        return [h["by"] for h in history if h["type"] == "task.completed"]


@pytest.fixture
def claims(tmp_path: Path, db_url: str) -> Iterator[Claims]:
    made = Claims(tmp_path, db_url)
    yield made
    made.engine.close()


def test_a_member_of_the_role_completes_it(claims: Claims) -> None:
    task_id, run_id = claims.claim()
    done = claims.engine.complete_task(task_id, "approve", {"note": "fine"}, user="alice")
    assert (done["status"], done["by"], done["data"]) == ("completed", "alice", {"note": "fine"})
    assert claims.completed_by(run_id) == ["alice"]
    assert claims.engine.get_record("Claim", 1)["note"] == "fine"


@pytest.mark.parametrize(
    ("user", "roles"),
    [("bob", "cfo, sales"), ("mallory", "none"), ("administrator", "none"), ("manager", "none")],
)
def test_anyone_else_is_refused_and_nothing_changes(claims: Claims, user: str, roles: str) -> None:
    """bob has other roles, mallory is not in the table; a name like the administrator's or
    like the role gives no role either."""
    task_id, run_id = claims.claim()
    before = claims.dump()
    with pytest.raises(ForbiddenError) as refused:
        claims.engine.complete_task(task_id, "approve", {"note": "mine"}, user=user)
    assert str(refused.value) == (
        f"task [{task_id}] is assigned to role [manager]; [{user}] is not a member of it "
        f"(their roles: {roles}), so cannot complete it"
    )
    error = refused.value
    assert (error.user, error.task_id, error.run_id, error.step) == (
        user,
        task_id,
        run_id,
        "review",
    )
    assert error.exit_code == 2 and isinstance(error, UsageError)
    assert not isinstance(error, TaskError)  # the HTTP face's 403, not a 409/422
    assert claims.dump() == before


def test_the_assigned_user_completes_a_personal_task_and_no_one_else(claims: Claims) -> None:
    task_id, run_id = claims.claim(owner="dana")  # dana is in no token table: a user task
    claims.engine.complete_task(task_id, "approve", user="alice")
    claims.engine.work()
    [confirm] = claims.engine.list_tasks()
    assert (confirm["step"], confirm["assignee"]) == ("confirm", "dana")
    before = claims.dump()
    for other in ("alice", "bob", "mallory"):
        with pytest.raises(ForbiddenError) as refused:
            claims.engine.complete_task(confirm["id"], user=other)
        assert str(refused.value) == (
            f"task [{confirm['id']}] is assigned to user [dana]; [{other}] cannot complete it"
        )
    assert claims.dump() == before
    assert claims.engine.complete_task(confirm["id"], user="dana")["by"] == "dana"
    claims.engine.work()
    assert claims.engine.show(run_id)["status"] == "completed"
    assert claims.completed_by(run_id) == ["alice", "dana"]


def test_an_administrator_completes_any_task(claims: Claims) -> None:
    first, _ = claims.claim(owner="dana")
    second, _ = claims.claim()
    third, _ = claims.claim()
    # No user: the administrator (the CLI without --as, the Python API without user=).
    assert claims.engine.complete_task(first, "approve")["by"] == "administrator"
    assert claims.engine.complete_task(second, "reject", user=None)["by"] == "administrator"
    # A user the table gives the admin role.
    assert claims.engine.complete_task(third, "approve", user="root")["by"] == "root"
    claims.engine.work()
    personal = [t["id"] for t in claims.engine.list_tasks() if t["assignee"] == "dana"]
    assert claims.engine.complete_task(personal[0], user=ADMINISTRATOR)["by"] == "administrator"


def test_an_actor_carries_its_own_roles(claims: Claims) -> None:
    """The HTTP face passes the caller found by token: its roles are used as given."""
    task_id, _ = claims.claim()
    before = claims.dump()
    with pytest.raises(ForbiddenError):
        claims.engine.complete_task(task_id, "approve", user=Actor("alice"))
    assert claims.dump() == before
    done = claims.engine.complete_task(
        task_id, "approve", user=Actor("web", frozenset({"manager"}))
    )
    assert done["by"] == "web"


def test_an_empty_user_name_is_refused_not_taken_for_the_administrator(claims: Claims) -> None:
    task_id, _ = claims.claim()
    before = claims.dump()
    for empty in ("", " "):
        with pytest.raises(TaskError) as refused:
            claims.engine.complete_task(task_id, "approve", user=empty)
        assert str(refused.value) == f"task [{task_id}]: the user name is empty"
    assert claims.dump() == before


def test_the_python_api(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "claims.intent").write_text(APP)
    environ = {**os.environ, "PROCFLOW_API_TOKENS": TOKENS}
    with procflow.Engine.virtual(db_url, environ=environ) as engine:
        engine.deploy(str(tmp_path / "claims.intent"))
        for _ in range(2):
            engine.records.create("Claim", {"title": "t"})
        engine.work()
        first, second = (t["id"] for t in engine.tasks.list(assignee="manager"))
        with pytest.raises(ForbiddenError):
            engine.tasks.complete(first, "approve", user="bob")
        assert engine.tasks.complete(first, "approve", user="alice")["by"] == "alice"
        assert engine.tasks.complete(second, "approve")["by"] == "administrator"


def test_without_a_token_table_a_named_user_has_no_role(tmp_path: Path, db_url: str) -> None:
    claims = Claims(tmp_path, db_url, tokens="")  # an empty variable counts as unset
    try:
        assert claims.engine.token_table is None
        task_id, _ = claims.claim()
        with pytest.raises(ForbiddenError, match=r"\(their roles: none\)"):
            claims.engine.complete_task(task_id, "approve", user="alice")
        assert claims.engine.complete_task(task_id, "approve")["by"] == "administrator"
    finally:
        claims.engine.close()


def test_a_bad_token_table_refuses_only_what_names_a_user(tmp_path: Path, db_url: str) -> None:
    claims = Claims(tmp_path, db_url, tokens="short=alice:manager")
    try:
        task_id, _ = claims.claim()
        before = claims.dump()
        with pytest.raises(ConfigError) as refused:
            claims.engine.complete_task(task_id, "approve", user="alice")
        assert str(refused.value).startswith(
            "PROCFLOW_API_TOKENS, entry 1: the token is shorter than 24 characters"
        )
        assert claims.dump() == before
        assert claims.engine.complete_task(task_id, "approve")["by"] == "administrator"
    finally:
        claims.engine.close()


# --- who did it: the other calls record the user they are given ------------------------------


def history(engine: Engine, run_id: str, type_: str) -> list[dict[str, Any]]:
    return [h for h in engine.show(run_id)["history"] if h["type"] == type_]


def test_start_cancel_and_delete_record_who_asked(claims: Claims) -> None:
    engine = claims.engine
    record = engine.create_record("Claim", {"title": "t"}, user="dana")
    engine.work()
    [triggered] = engine.runs_for_record("Claim", record["id"])
    assert "by" not in history(engine, triggered.id, "run.started")[0]  # its trigger started it
    asked = engine.start("Ask", record=("Claim", record["id"]), user="erin")
    assert history(engine, asked, "run.started")[0]["by"] == "erin"
    engine.cancel(asked, user="frank")
    assert history(engine, asked, "run.cancelled")[0] == {
        "seq": 2, "at": "2027-01-01T00:00:00Z", "type": "run.cancelled",
        "reason": "cancelled by an operator", "by": "frank",
    }  # fmt: skip
    unnamed = engine.start("Ask", record=("Claim", record["id"]))
    engine.cancel(unnamed)
    assert "by" not in history(engine, unnamed, "run.cancelled")[0]
    engine.delete_record("Claim", record["id"], user="gina")
    [cancelled] = history(engine, triggered.id, "run.cancelled")
    assert (cancelled["reason"], cancelled["by"]) == (
        f"its [Claim] record {record['id']} was deleted",
        "gina",
    )
    for call in (
        lambda: engine.cancel(triggered.id, user=""),
        lambda: engine.start("Ask", record=("Claim", record["id"]), user=" "),
        lambda: engine.retry(triggered.id, user=""),
    ):
        with pytest.raises(UsageError, match=r"^the user name is empty$"):
            call()
