"""Intent user tasks as stored and as every face shows them: the ``tasks`` row and its JSON.

Apart from :mod:`~procflow.runtime.waits.tasks` (opening, completing, withdrawing, which need the
intent interpreter) so that listing tasks imports no interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from procflow.errors import NotFoundError
from procflow.runtime.clock import iso
from procflow.runtime.data.identity import Actor
from procflow.store.store import Tx

__all__ = ["Task", "completion_refusal", "list_tasks", "refusal", "task_json"]


@dataclass(slots=True)
class Task:
    """A ``tasks`` row."""

    id: int
    run_id: str
    token_id: int | None
    step: str
    assignee: str
    assignee_kind: str  # role | user
    form: str | None
    actions: list[str]  # the form's actions; empty: free text
    fields: list[str]  # the form fields completing may write
    record_entity: str | None
    record_id: int | None
    status: str  # open | completed | withdrawn
    created_at: int
    ended_at: int | None
    action: str | None
    done_by: str | None
    data: dict[str, Any] | None


def task_json(task: Task) -> dict[str, Any]:
    """``tasks list --json`` (docs/reference/cli.md); a closed task adds its outcome."""
    out: dict[str, Any] = {
        "id": task.id, "run_id": task.run_id, "step": task.step, "assignee": task.assignee,
        "form": task.form, "actions": task.actions,
        "record": (
            {"entity": task.record_entity, "id": task.record_id} if task.record_entity else None
        ),
        "created_at": iso(task.created_at),
    }  # fmt: skip
    if task.status != "open":
        out |= {
            "status": task.status, "ended_at": iso(task.ended_at), "action": task.action,
            "by": task.done_by, "data": task.data or {},
        }  # fmt: skip
    return out


def list_tasks(tx: Tx, assignee: str | None = None) -> list[dict[str, Any]]:
    return [task_json(Task(**row)) for row in tx.open_tasks(assignee=assignee)]


def refusal(task: Task, actor: Actor) -> str | None:
    """Why ``actor`` may not complete ``task`` (the rule every face applies: its assigned user,
    a member of its assigned role, or an administrator); None when it may."""
    if actor.may_complete(task.assignee, task.assignee_kind):
        return None
    if task.assignee_kind == "user":
        return (
            f"task [{task.id}] is assigned to user [{task.assignee}]; [{actor.user}] cannot "
            "complete it"
        )
    roles = ", ".join(sorted(actor.roles)) or "none"
    return (
        f"task [{task.id}] is assigned to role [{task.assignee}]; [{actor.user}] is not a "
        f"member of it (their roles: {roles}), so cannot complete it"
    )


def completion_refusal(tx: Tx, task_id: int, actor: Actor) -> str | None:
    """:func:`refusal` for the task ``task_id`` (what the UI says beside a disabled button)."""
    row = tx.task(task_id)
    if row is None:
        raise NotFoundError(f"no task with id [{task_id}]", kind="task", key=task_id)
    return refusal(Task(**row), actor)
