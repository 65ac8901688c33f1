"""Idempotency keys: the first response to a create request sent with an ``Idempotency-Key``,
per caller and key, so a repeat of the request gets that response again and does nothing."""

from __future__ import annotations

from dataclasses import dataclass

from procflow.store.queries.base import Queries


@dataclass(frozen=True, slots=True)
class IdempotentResponse:
    """What a key answered: the request it was first used for, and the response stored."""

    route: str
    body_hash: str
    status: int
    response: str  # JSON text (the face decides what it holds)


class IdempotencyQueries(Queries):
    def lock_idempotency_key(self, caller: str, key: str) -> None:
        """Serialise the requests of one caller with one key until commit (PostgreSQL; SQLite's
        write lock already does): a concurrent repeat waits, then finds the stored response."""
        self.b.advisory_lock(f"procflow:idempotency:{caller}\n{key}", wide=True)

    def prune_idempotency(self, older_than: int) -> int:
        """Forget the keys stored before ``older_than``; returns how many."""
        cur = self.c.execute("DELETE FROM idempotency WHERE created_at<?", (older_than,))
        return int(cur.rowcount or 0)

    def idempotent_response(self, caller: str, key: str) -> IdempotentResponse | None:
        row = self.c.execute(
            "SELECT route, body_hash, status, response FROM idempotency WHERE caller=? AND key=?",
            (caller, key),
        ).fetchone()
        return None if row is None else IdempotentResponse(row[0], row[1], int(row[2]), row[3])

    def store_idempotent_response(
        self, caller: str, key: str, answered: IdempotentResponse, now: int
    ) -> None:
        self.c.execute(
            "INSERT INTO idempotency(caller, key, route, body_hash, status, response, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (caller, key, answered.route, answered.body_hash, answered.status, answered.response,
             now),
        )  # fmt: skip
