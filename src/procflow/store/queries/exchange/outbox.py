"""The outbox: messages (mail, notifications) a run sent, kept for the sender and for tests."""

from __future__ import annotations

from procflow.store.queries.base import Queries
from procflow.store.rows import OutboxRow

_COLS = "id, channel, recipient, subject, body, run_id, step, created_at"


class OutboxQueries(Queries):
    def add_outbox(
        self,
        channel: str,
        recipient: str,
        subject: str | None,
        body: str | None,
        run_id: str | None,
        step: str | None,
        now: int,
    ) -> int:
        row = self.c.execute(
            "INSERT INTO outbox(channel, recipient, subject, body, run_id, step, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (channel, recipient, subject, body, run_id, step, now),
        ).fetchone()
        return int(row[0])

    def outbox(self) -> list[OutboxRow]:
        rows = self.c.execute(f"SELECT {_COLS} FROM outbox ORDER BY id").fetchall()
        return [OutboxRow(*r) for r in rows]

    def outbox_before(self, before: int | None, limit: int) -> list[OutboxRow]:
        """A page of kept messages, newest first: those with an id below ``before`` (None: from
        the newest)."""
        below = "" if before is None else " WHERE id<?"
        args = (limit,) if before is None else (before, limit)
        rows = self.c.execute(
            f"SELECT {_COLS} FROM outbox{below} ORDER BY id DESC LIMIT ?", args
        ).fetchall()
        return [OutboxRow(*r) for r in rows]
