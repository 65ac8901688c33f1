"""Calls: the link between a run and the child runs its call steps started (schema 8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from procflow.store.queries.base import ENDED_SQL, Queries


class CallRow(NamedTuple):
    """One child run as its parent sees it (or one parent as its child sees it)."""

    child_id: str
    parent_id: str
    step: str  # the call step's path in the parent
    flow: str
    detached: bool
    depth: int
    status: str | None = None  # the child's status, where it was read with it


_COLS = "c.child_id, c.parent_id, c.step, c.flow, c.detached, c.depth, r.status"


def _row(row: Sequence[object]) -> CallRow:
    return CallRow(
        str(row[0]), str(row[1]), str(row[2]), str(row[3]), bool(row[4]), int(str(row[5])),
        None if row[6] is None else str(row[6]),
    )  # fmt: skip


class CallQueries(Queries):
    def insert_calls(self, rows: Sequence[CallRow]) -> None:
        if not rows:
            return
        self.c.executemany(
            "INSERT INTO calls(child_id, parent_id, step, flow, detached, depth) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(r.child_id, r.parent_id, r.step, r.flow, int(r.detached), r.depth) for r in rows],
        )

    def children_of(self, parent_id: str) -> list[CallRow]:
        """The runs ``parent_id`` started by ``call``, oldest first (a deleted child: no status)."""
        rows = self.c.execute(
            f"SELECT {_COLS} FROM calls c LEFT JOIN runs r ON r.id=c.child_id "
            "WHERE c.parent_id=? ORDER BY c.child_id",
            (parent_id,),
        ).fetchall()
        return [_row(row) for row in rows]

    def parent_of(self, child_id: str) -> CallRow | None:
        row = self.c.execute(
            f"SELECT {_COLS} FROM calls c LEFT JOIN runs r ON r.id=c.parent_id WHERE c.child_id=?",
            (child_id,),
        ).fetchone()
        return None if row is None else _row(row)

    def waiting_children(self, parent_id: str) -> list[str]:
        """The children of ``parent_id`` that are not detached and have not ended."""
        rows = self.c.execute(
            "SELECT c.child_id FROM calls c JOIN runs r ON r.id=c.child_id "
            f"WHERE c.parent_id=? AND c.detached=0 AND r.status NOT IN ({ENDED_SQL}) "
            "ORDER BY c.child_id",
            (parent_id,),
        ).fetchall()
        return [str(r[0]) for r in rows]
