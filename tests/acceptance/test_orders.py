"""``examples/orders/`` through the real ``procflow`` command, end to end, on both backends.

Every command is its own ``procflow`` process on a store made by ``procflow db init
--virtual-clock`` (2027-01-01T00:00:00Z). A person completes tasks with ``tasks complete``, the
customer replies with ``records create OrderMessage``, time passes with ``clock advance``/``set``,
and ``worker --until-idle`` moves whatever a write made ready.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import cli_runner
import pytest

from procflow.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
ORDERS = ROOT / "examples" / "orders"

# `procflow db init` must create the schema itself: on PostgreSQL, db_url names an empty database.
pytestmark = pytest.mark.empty_store

APPROVED, REJECTED, EXPIRED, CANCELLED = 2, 3, 4, 5
ORDER_ROLES = {"alice": "manager", "carol": "cfo"}


class Cli(cli_runner.Cli):
    """The shared runner, plus order helpers."""

    def error(self, *args: str) -> str:
        """A refused request: exit 2, one clear line on stderr, nothing on stdout."""
        return super().error(*args).strip()

    def tasks(self, *args: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.json("tasks", "list", *args)
        return found

    def order(self, data: dict[str, Any]) -> tuple[int, str]:
        """Create an order, let the worker open its review; (order id, run id)."""
        order = self.json("records", "create", "Order", "--data", json.dumps(data))
        self("worker", "--until-idle")
        [run] = [r for r in self.json("runs", "list") if r["business_key"] == str(order["id"])]
        return order["id"], run["id"]

    def record(self, entity: str, id_: int) -> dict[str, Any]:
        found: dict[str, Any] = self.json("records", "get", entity, str(id_))
        return found

    def state(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of the tables a task request could touch, read straight from the store (a
        refused request changes none of them)."""
        store = Store(self.url)
        try:
            return {
                table: [tuple(row) for row in store.conn.execute(f"SELECT * FROM {table}")]
                for table in ("tasks", "records", "runs", "tokens", "timers", "waits", "history")
            }
        finally:
            store.close()


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    project = tmp_path / "orders"
    shutil.copytree(ORDERS, project)
    cli = Cli(db_url, db_env, tmp_path)
    # Who may complete the reviews: `--as alice` is a manager, `--as carol` the CFO.
    cli.env["PROCFLOW_API_TOKENS"] = ";".join(
        f"{name}-token-{'x' * 24}={name}:{role}" for name, role in ORDER_ROLES.items()
    )
    assert "virtual clock at 2027-01-01T00:00:00Z" in cli("db", "init", "--virtual-clock").stdout
    assert cli("deploy", str(project / "orders.intent")).stdout.strip() == (
        "OrderApproval → version 1"
    )
    customer = {"name": "ACME", "email": "buyer@acme.test", "creditLimit": 1000}
    assert cli.json("records", "create", "Customer", "--data", json.dumps(customer))["id"] == 1
    return cli


def types(shown: dict[str, Any]) -> list[str]:
    return [h["type"] for h in shown["history"]]


def entries(shown: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [h for h in shown["history"] if h["type"] == type_]


REVIEW_TASK = {
    "step": "review", "assignee": "manager", "form": "ApproveOrder",
    "actions": ["approve", "reject", "askCustomer"],
}  # fmt: skip


def test_approve(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 500, "customer": 1, "validUntil": "2027-01-20"})
    [task] = cli.tasks()
    assert task == {
        "id": 1, "run_id": run_id, **REVIEW_TASK, "record": {"entity": "Order", "id": order_id},
        "created_at": "2027-01-01T00:00:00Z",
    }  # fmt: skip
    assert cli.tasks("--assignee", "manager") == [task]
    assert cli.tasks("--assignee", "cfo") == []
    listed = cli("tasks", "list").stdout
    assert "review" in listed and "manager" in listed and "approve|reject|askCustomer" in listed
    waiting = cli.show(run_id)["tokens"][0]["waiting_for"]
    assert waiting == {"kind": "task", "task_id": 1, "assignee": "manager"}
    done = cli.json(
        "tasks", "complete", "1", "--action", "approve", "--data", '{"note": "fine"}', "--as",
        "alice",
    )  # fmt: skip
    assert done == {
        **task, "status": "completed", "ended_at": "2027-01-01T00:00:00Z", "action": "approve",
        "by": "alice", "data": {"note": "fine"},
    }  # fmt: skip
    cli("worker", "--until-idle")
    shown = cli.show(run_id)
    assert shown["status"] == "completed"
    order = cli.record("Order", order_id)
    assert (order["Status"], order["note"]) == (APPROVED, "fine")
    [completed] = entries(shown, "task.completed")
    assert (completed["task_id"], completed["action"], completed["by"]) == (1, "approve", "alice")
    assert cli.tasks() == []


def test_a_big_order_goes_to_the_cfo(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 5000, "customer": 1})
    out = cli("tasks", "complete", "1", "--action", "approve").stdout
    assert out.strip() == "completed task 1 (review): approve, by administrator"
    cli("worker", "--until-idle")
    [cfo] = cli.tasks("--assignee", "cfo")
    assert (cfo["id"], cfo["step"]) == (2, "cfoReview")
    cli("tasks", "complete", "2", "--action", "approve", "--as", "carol")
    cli("worker", "--until-idle")
    assert cli.show(run_id)["status"] == "completed"
    assert cli.record("Order", order_id)["Status"] == APPROVED


def test_reject(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 500, "customer": 1})
    cli("tasks", "complete", "1", "--action", "reject", "--data", '{"note": "too pricey"}')
    cli("worker", "--until-idle")
    assert cli.show(run_id)["status"] == "completed"
    order = cli.record("Order", order_id)
    assert (order["Status"], order["note"]) == (REJECTED, "too pricey")


def test_ask_customer_then_the_reply_resumes_the_review(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 500, "customer": 1})
    cli("tasks", "complete", "1", "--action", "askCustomer", "--data", '{"note": "colour?"}')
    cli("worker", "--until-idle")
    [asked] = cli.json("outbox", "list")
    assert (asked["to"], asked["subject"]) == (
        "buyer@acme.test", f"Question about order {order_id}",
    )  # fmt: skip
    shown = cli.show(run_id)
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["waiting_for"] == {
        "kind": "record", "entity": "OrderMessage", "via": "order", "when": "internal == false",
    }  # fmt: skip
    internal = {"text": "note to self", "order": order_id, "internal": True}
    cli("records", "create", "OrderMessage", "--data", json.dumps(internal))
    cli("worker", "--until-idle")
    assert cli.show(run_id)["tokens"][0]["step"] == "awaitReply"  # an internal note: still parked
    assert cli.tasks() == []
    reply = {"text": "red, please", "order": order_id, "internal": False}
    message = cli.json("records", "create", "OrderMessage", "--data", json.dumps(reply))
    resumed = entries(cli.show(run_id), "step.completed")[-1]
    assert (resumed["step"], resumed["event"]) == ("awaitReply", "onCreate")
    assert resumed["record"] == {"entity": "OrderMessage", "id": message["id"]}
    cli("worker", "--until-idle")
    [again] = cli.tasks()
    assert (again["id"], again["step"], again["assignee"]) == (2, "review", "manager")
    cli("tasks", "complete", "2", "--action", "approve")
    cli("worker", "--until-idle")
    assert cli.show(run_id)["status"] == "completed"
    assert cli.record("Order", order_id)["Status"] == APPROVED


def test_the_two_day_reminder_leaves_the_task_open(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 500, "customer": 1})
    cli("clock", "advance", "P1DT23H59M59S")
    assert cli.json("outbox", "list") == []
    assert cli("clock", "advance", "1s").stdout.strip() == "clock at 2027-01-03T00:00:00Z"
    [reminder] = cli.json("outbox", "list")
    assert (reminder["to"], reminder["subject"], reminder["body"]) == (
        "manager@example.com", f"Order {order_id} waits for review", "Total 500.",
    )  # fmt: skip
    shown = cli.show(run_id)
    [outboxed] = entries(shown, "message.outboxed")
    assert (outboxed["to"], outboxed["step"], outboxed["at"]) == (
        "manager@example.com", "remind", "2027-01-03T00:00:00Z",
    )  # fmt: skip
    assert [t for t in types(shown) if t.startswith("token.")] == ["token.forked", "token.ended"]
    assert [t["id"] for t in cli.tasks()] == [1]  # still open
    assert shown["status"] == "waiting"
    assert [t["step"] for t in shown["tokens"]] == ["review"]


def test_expiry_withdraws_the_task_at_the_start_of_the_day_after_valid_until(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 500, "customer": 1, "validUntil": "2027-01-05"})
    cli("clock", "set", "2027-01-05T23:59:59Z")
    assert [t["id"] for t in cli.tasks()] == [1]  # the 5th is the last valid day
    cli("clock", "advance", "1s")
    assert cli.tasks() == []
    shown = cli.show(run_id)
    [withdrawn] = entries(shown, "task.withdrawn")
    assert (withdrawn["task_id"], withdrawn["reason"], withdrawn["at"]) == (
        1, "expired", "2027-01-06T00:00:00Z",
    )  # fmt: skip
    assert shown["status"] == "completed"
    assert cli.record("Order", order_id)["Status"] == EXPIRED
    assert "markExpired" in [h.get("step") for h in entries(shown, "step.completed")]
    assert "1 expired" not in cli("tasks", "list").stdout
    assert cli("tasks", "list").stdout.strip() == "no open tasks"


def test_cancellation_through_abort_on(cli: Cli) -> None:
    order_id, run_id = cli.order({"total": 500, "customer": 1, "validUntil": "2027-01-05"})
    cli("records", "update", "Order", str(order_id), "--data", '{"Status": "Cancelled"}')
    assert cli.tasks() == []
    shown = cli.show(run_id)
    assert shown["status"] == "aborted"
    assert shown["tokens"] == []
    tail = [(h["type"], h.get("step")) for h in shown["history"][-4:]]
    assert tail == [
        ("task.withdrawn", "review"), ("step.started", "markVoid"),
        ("step.completed", "markVoid"), ("run.aborted", None),
    ]  # fmt: skip
    assert shown["history"][-4]["reason"] == "aborted"
    order = cli.record("Order", order_id)
    assert (order["Status"], order["note"]) == (CANCELLED, "voided while in review")
    cli("clock", "advance", "P10D")  # its reminder and expiry were disarmed
    assert cli.show(run_id)["history"] == shown["history"]
    assert cli.json("outbox", "list") == []


def test_runs_cancel_and_deleting_the_order_withdraw_the_open_task(cli: Cli) -> None:
    _, cancelled = cli.order({"total": 500, "customer": 1})
    deleted_order, deleted = cli.order({"total": 600, "customer": 1})
    cli("runs", "cancel", cancelled)
    cli("records", "delete", "Order", str(deleted_order))
    for run_id in (cancelled, deleted):
        shown = cli.show(run_id)
        assert shown["status"] == "cancelled"
        assert types(shown)[-2:] == ["task.withdrawn", "run.cancelled"]
        assert entries(shown, "task.withdrawn")[0]["reason"] == "cancelled"
    assert cli.tasks() == []


def test_bad_input_on_tasks_is_refused_clearly_and_changes_nothing(cli: Cli) -> None:
    order_id, _ = cli.order({"total": 500, "customer": 1})
    before = cli.state()
    refusals = [
        (("tasks", "complete", "99", "--action", "approve"), "error: no task with id [99]"),
        (("tasks", "complete", "one", "--action", "approve"),
         "error: a task id must be a whole number, got [one]"),
        (("tasks", "complete", "1"),
         "error: task [1] has form [ApproveOrder]: give an action, one of approve, reject, "
         "askCustomer"),
        (("tasks", "complete", "1", "--action", "aprove"),
         "error: task [1]: action [aprove] is not allowed by form [ApproveOrder]; "
         "did you mean [approve]?"),
        (("tasks", "complete", "1", "--action", "approve", "--data", '{"validUntil": "x"}'),
         "error: task [1]: field [validUntil] is not in form [ApproveOrder] "
         "(its fields: total, note)"),
        (("tasks", "complete", "1", "--action", "approve", "--data", '{"total": "lots"}'),
         "error: cannot update [Order] record: [total]: must be a number, got the text [lots]"),
        (("tasks", "complete", "1", "--action", "approve", "--data", "{"),
         "error: --data is not valid JSON: Expecting property name enclosed in double quotes "
         "at column 2"),
    ]  # fmt: skip
    for args, message in refusals:
        assert cli.error(*args) == message
    assert cli.state() == before
    cli("tasks", "complete", "1", "--action", "reject")
    closed = cli.state()
    assert cli.error("tasks", "complete", "1", "--action", "approve") == (
        "error: task [1] is completed, not open; only an open task completes"
    )
    assert cli.state() == closed
    cli("worker", "--until-idle")
    second, _ = cli.order({"total": 700, "customer": 1})
    cli("records", "update", "Order", str(second), "--data", '{"Status": "Cancelled"}')
    aborted = cli.state()
    assert cli.error("tasks", "complete", "2", "--action", "approve") == (
        "error: task [2] is withdrawn, not open; only an open task completes"
    )
    assert cli.state() == aborted
    assert cli.record("Order", order_id)["Status"] == REJECTED
