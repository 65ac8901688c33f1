"""User tasks: a waiting token's form, offered to an assignee until completed or withdrawn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from procflow.store.codec import dumps, loads, none_or_dumps
from procflow.store.queries.base import Queries

_COLS = (
    "id", "run_id", "token_id", "step", "assignee", "assignee_kind", "form", "actions",
    "fields", "record_entity", "record_id", "status", "created_at", "ended_at", "action",
    "done_by", "data",
)  # fmt: skip
_SELECT = f"SELECT {', '.join(_COLS)} FROM tasks"


def task_dict(row: Sequence[Any]) -> dict[str, Any]:
    """A task row as a dict keyed by column, its JSON columns decoded."""
    task = dict(zip(_COLS, row, strict=True))
    task["actions"] = json.loads(task["actions"])
    task["fields"] = json.loads(task["fields"])
    task["data"] = loads(task["data"])
    return task


class TaskQueries(Queries):
    def insert_task(
        self,
        *,
        run_id: str,
        token_id: int,
        step: str,
        assignee: str,
        assignee_kind: str,
        form: str | None,
        actions: Sequence[str],
        fields: Sequence[str],
        record: tuple[str, int] | None,
        now: int,
    ) -> int:
        entity, record_id = record if record is not None else (None, None)
        row = self.c.execute(
            "INSERT INTO tasks(run_id, token_id, step, assignee, assignee_kind, form, actions, "
            "fields, record_entity, record_id, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?) RETURNING id",
            (run_id, token_id, step, assignee, assignee_kind, form, dumps(list(actions)),
             dumps(list(fields)), entity, record_id, now),
        ).fetchone()  # fmt: skip
        return int(row[0])

    def task(self, task_id: int, *, lock: bool = False) -> dict[str, Any] | None:
        """The task; ``lock``: locked until commit, so two completions of one task queue up and
        the second finds it closed (PostgreSQL; SQLite's write lock already serialises)."""
        row = self.c.execute(
            f"{_SELECT} WHERE id=?" + (self.b.for_update if lock else ""), (task_id,)
        ).fetchone()
        return None if row is None else task_dict(row)

    def open_tasks(
        self,
        *,
        assignee: str | None = None,
        run_id: str | None = None,
        token_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Open tasks, oldest first, optionally of one assignee, run or token."""
        sql = f"{_SELECT} WHERE status='open'"
        args: list[Any] = []
        for column, value in (("assignee", assignee), ("run_id", run_id), ("token_id", token_id)):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(value)
        rows = self.c.execute(sql + " ORDER BY id", args).fetchall()
        return [task_dict(r) for r in rows]

    def open_tasks_before(
        self, assignee: str | None, before: int | None, limit: int
    ) -> list[dict[str, Any]]:
        """A page of open tasks, newest first: those with an id below ``before`` (None: from
        the newest), optionally of one assignee."""
        sql = f"{_SELECT} WHERE status='open'"
        args: list[Any] = []
        if assignee is not None:
            sql += " AND assignee=?"
            args.append(assignee)
        if before is not None:
            sql += " AND id<?"
            args.append(before)
        rows = self.c.execute(sql + " ORDER BY id DESC LIMIT ?", [*args, limit]).fetchall()
        return [task_dict(r) for r in rows]

    def end_task(
        self,
        task_id: int,
        status: str,
        now: int,
        *,
        action: str | None = None,
        done_by: str | None = None,
        data: Any = None,
    ) -> None:
        """Close an open task: ``completed`` (with action, who, the form data) or ``withdrawn``."""
        self.c.execute(
            "UPDATE tasks SET status=?, ended_at=?, action=?, done_by=?, data=? "
            "WHERE id=? AND status='open'",
            (status, now, action, done_by, none_or_dumps(data), task_id),
        )
