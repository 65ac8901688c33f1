"""Events: accepted events (deduplicated by id) and their deliveries to runs."""

from __future__ import annotations

import json
from typing import Any

from procflow.store.codec import dumps
from procflow.store.queries.base import Queries
from procflow.store.queries.definitions import LATEST_ENABLED_FLOWS, flow_version_ids
from procflow.store.queries.runrows.history import INSERT_HISTORY, INTO_HISTORY, history_values
from procflow.store.queries.runrows.runs import SAVE_RUN, run_values
from procflow.store.queries.runrows.timers import DELETE_TIMERS_OF_TOKEN
from procflow.store.queries.runrows.tokens import UPDATE_TOKEN, token_values
from procflow.store.rows import HistoryRow, RunRow, TokenRow

_INSERT_EVENT = "INSERT INTO events(id, type, keys, data, accepted_at) "
_INTO_DELIVERIES = "INSERT INTO deliveries(event_id, run_id) "
_INSERT_DELIVERY = f"{_INTO_DELIVERIES}VALUES (?, ?) ON CONFLICT DO NOTHING"
# deliver_to_token's writes, each made only if the wait is taken in the same statement: the
# wait and its token still the row versions (xmin) that waiting_runs_for_update read.
_DELIVER_IF_SEEN = (
    "WITH taken AS (DELETE FROM waits WHERE token_id=? AND xmin::text=? AND EXISTS "
    "(SELECT 1 FROM tokens WHERE id=? AND xmin::text=?) RETURNING token_id), "
    f"w0 AS ({UPDATE_TOKEN} AND EXISTS (SELECT 1 FROM taken)), "
    f"w1 AS ({DELETE_TIMERS_OF_TOKEN} AND EXISTS (SELECT 1 FROM taken)), "
    f"w2 AS ({_INTO_DELIVERIES}SELECT ?::text, ?::text FROM taken "
    "ON CONFLICT DO NOTHING), "
    f"w3 AS ({INTO_HISTORY}SELECT ?::text, ?::bigint, ?::bigint, ?::text, ?::text, ?::text, "
    "?::bigint, ?::text FROM taken), "
    f"w4 AS ({SAVE_RUN} AND EXISTS (SELECT 1 FROM taken)) "
    "SELECT token_id FROM taken"
)


def _key(type_: str, keys: str) -> str:
    return f"{type_}\x1f{keys}"


class EventQueries(Queries):
    def lock_key(self, type_: str, keys: str) -> None:
        """Serialise, per correlation key, accepting an event with registering a wait (so an
        event and a wait with lookback never miss each other). SQLite has one writer anyway."""
        self.b.advisory_lock(_key(type_, keys), wide=True)

    def insert_event(self, id_: str, type_: str, keys: str, data: Any, at: int) -> list[int] | None:
        """Take the lock of (type, keys) (:meth:`lock_key`), then store the event; None when an
        event with this id was accepted before (a duplicate does nothing), else the version ids
        of the latest enabled flows as this transaction sees them (those the event may
        trigger; ``latest_enabled_flow_versions``), in the same statement where it can."""
        values = (id_, type_, keys, dumps(data), at)
        if not self.b.key_lock:
            cur = self.c.execute(
                f"{_INSERT_EVENT}VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING", values
            )
            return flow_version_ids(self.c) if cur.rowcount == 1 else None
        # The lock in the same statement, taken before the row is made, and the flows read in
        # it too: one round trip.
        row = self.c.execute(
            f"{_INSERT_EVENT}SELECT ?, ?, ?, ?, ? FROM (SELECT {self.b.key_lock}) AS locked "
            f"ON CONFLICT (id) DO NOTHING RETURNING (SELECT array_agg(v.id ORDER BY d.name) "
            f"{LATEST_ENABLED_FLOWS})",
            (*values, _key(type_, keys)),
        ).fetchone()
        return None if row is None else [int(i) for i in row[0] or []]

    def lookback_event(
        self, type_: str, keys: str, since: int, run_id: str
    ) -> tuple[str, Any] | None:
        """The earliest event on (type, keys) accepted at or after ``since`` that has not
        reached ``run_id`` yet: (id, data)."""
        row = self.c.execute(
            "SELECT e.id, e.data FROM events e WHERE e.type=? AND e.keys=? AND e.accepted_at>=? "
            "AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id=e.id AND d.run_id=?) "
            "ORDER BY e.accepted_at, e.id LIMIT 1",
            (type_, keys, since, run_id),
        ).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def insert_delivery(self, event_id: str, run_id: str) -> None:
        self.c.execute(_INSERT_DELIVERY, (event_id, run_id))

    def deliver_to_token(
        self, event_id: str, run: RunRow, token: TokenRow, entry: HistoryRow
    ) -> None:
        """An event handed to a waiting token of ``run``: the token's row as it now is, its
        timers deleted, the delivery recorded, ``entry`` appended to the run's history and the
        run's row saved with its lease released. Five independent writes, one statement where
        the backend allows (:meth:`write_together`)."""
        assert token.id is not None
        self.write_together([
            (UPDATE_TOKEN, token_values(token)),
            (DELETE_TIMERS_OF_TOKEN, (token.id,)),
            (_INSERT_DELIVERY, (event_id, run.id)),
            (INSERT_HISTORY, history_values(run.id, entry)),
            (SAVE_RUN, run_values(run, None, None)),
        ])  # fmt: skip

    def deliver_to_seen_token(
        self,
        event_id: str,
        run: RunRow,
        token: TokenRow,
        entry: HistoryRow,
        stamp: tuple[str, str],
    ) -> bool:
        """:meth:`deliver_to_token` and the wait's taking in one statement, for a token read
        with its wait before its run was locked (``WaitQueries.waiting_runs_for_update``):
        done only if neither the wait nor the token changed since (``stamp``, their row
        versions then); False, and nothing written, if either did. PostgreSQL only."""
        assert token.id is not None
        params = (
            token.id, stamp[0], token.id, stamp[1], *token_values(token), token.id,
            event_id, run.id, *history_values(run.id, entry), *run_values(run, None, None),
        )  # fmt: skip
        return self.c.execute(_DELIVER_IF_SEEN, params).fetchone() is not None

    def prune_events(self, before: int) -> None:
        self.c.execute(
            "DELETE FROM deliveries WHERE event_id IN (SELECT id FROM events WHERE accepted_at<?)",
            (before,),
        )
        self.c.execute("DELETE FROM events WHERE accepted_at<?", (before,))
