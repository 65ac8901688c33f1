"""Events: accepted events (deduplicated by id) and their deliveries to runs."""

from __future__ import annotations

import json
from typing import Any

from procflow.store.codec import dumps
from procflow.store.queries.base import Queries


class EventQueries(Queries):
    def lock_key(self, type_: str, keys: str) -> None:
        """Serialise, per correlation key, accepting an event with registering a wait (so an
        event and a wait with lookback never miss each other). SQLite has one writer anyway."""
        self.b.advisory_lock(f"{type_}\x1f{keys}", wide=True)

    def insert_event(self, id_: str, type_: str, keys: str, data: Any, at: int) -> bool:
        """False when an event with this id was accepted before (a duplicate does nothing)."""
        cur = self.c.execute(
            "INSERT INTO events(id, type, keys, data, accepted_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (id_, type_, keys, dumps(data), at),
        )
        return bool(cur.rowcount == 1)

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
        self.c.execute(
            "INSERT INTO deliveries(event_id, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (event_id, run_id),
        )

    def prune_events(self, before: int) -> None:
        self.c.execute(
            "DELETE FROM deliveries WHERE event_id IN (SELECT id FROM events WHERE accepted_at<?)",
            (before,),
        )
        self.c.execute("DELETE FROM events WHERE accepted_at<?", (before,))
