"""Flow control: the places of a limited flow's key (``limits``) and the attempt starts of a
throttle's budget (``throttles``, ``throttle_budgets``), schema 9."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from procflow.store.codec import chunks
from procflow.store.queries.base import Queries

Key = tuple[str, str]
"""(flow, key value) of a limited flow's places."""

_ADD_ARRAYS = (
    "UPDATE limits AS l SET active=l.active+d.delta FROM unnest(?::bigint[], ?::text[], "
    "?::text[]) AS d(delta, flow, key) WHERE l.flow=d.flow AND l.key=d.key"
)
_OLDEST = (
    "SELECT * FROM (SELECT token_id, run_id, type, keys FROM waits WHERE kind='queue' AND "
    "type=? AND keys=? ORDER BY token_id LIMIT ?) AS q"
)


class LimitQueries(Queries):
    def lock_places(self, flow: str, key: str) -> int:
        """The places of (``flow``, ``key``) taken, its row locked until commit: every start and
        end of the key's runs passes here, one transaction at a time."""
        self.c.execute(
            "INSERT INTO limits(flow, key, active) VALUES (?, ?, 0) ON CONFLICT DO NOTHING",
            (flow, key),
        )
        row = self.c.execute(
            "SELECT active FROM limits WHERE flow=? AND key=?" + self.b.for_update, (flow, key)
        ).fetchone()
        return int(row[0])

    def lock_held_places(self, keys: Sequence[Key]) -> None:
        """Lock the rows of ``keys`` (sorted; each has a row: a run held a place of it) until
        commit, in that order: transactions freeing places of several keys never deadlock.
        SQLite's write lock already serialises them."""
        if not self.b.for_update:
            return
        for chunk in chunks(keys, 200):
            self.c.execute(
                "SELECT 1 FROM limits WHERE (flow, key) IN (VALUES "
                + ",".join("(?, ?)" for _ in chunk)
                + ") ORDER BY flow, key"
                + self.b.for_update,
                [value for pair in chunk for value in pair],
            )

    def add_places(self, flow: str, key: str, delta: int) -> None:
        self.c.execute(
            "UPDATE limits SET active=active+? WHERE flow=? AND key=?", (delta, flow, key)
        )

    def add_places_many(self, deltas: Sequence[tuple[int, str, str]]) -> None:
        """(delta, flow, key) each, one statement for all."""
        self.b.batch(
            "UPDATE limits SET active=active+? WHERE flow=? AND key=?", _ADD_ARRAYS, deltas
        )

    def queued_of(self, wanted: Mapping[Key, int]) -> dict[Key, list[tuple[int, str]]]:
        """(token_id, run_id) of the oldest runs queued on each key, as many as ``wanted`` of
        it: one statement for every key (an ordered index range each)."""
        out: dict[Key, list[tuple[int, str]]] = {}
        for chunk in chunks(list(wanted.items()), 200):
            rows = self.c.execute(
                " UNION ALL ".join(_OLDEST for _ in chunk),
                [v for (flow, key), n in chunk for v in (f"queue:{flow}", key, n)],
            ).fetchall()
            for token_id, run_id, type_, key in rows:
                out.setdefault((type_.removeprefix("queue:"), key), []).append(
                    (int(token_id), str(run_id))
                )
        return out

    def queued(self, flow: str, key: str, limit: int) -> list[tuple[int, str]]:
        """(token_id, run_id) of the oldest ``limit`` runs queued on (``flow``, ``key``)."""
        rows = self.c.execute(
            "SELECT token_id, run_id FROM waits WHERE kind='queue' AND type=? AND keys=? "
            "ORDER BY token_id LIMIT ?",
            (f"queue:{flow}", key, limit),
        ).fetchall()
        return [(int(t), str(r)) for t, r in rows]

    def queue_position(self, flow: str, key: str, token_id: int) -> int:
        """How many runs are queued on (``flow``, ``key``) ahead of ``token_id``."""
        row = self.c.execute(
            "SELECT count(*) FROM waits WHERE kind='queue' AND type=? AND keys=? AND token_id<?",
            (f"queue:{flow}", key, token_id),
        ).fetchone()
        return int(row[0])

    def holders(self, flow: str, key: str, limit: int) -> list[str]:
        """Runs of ``flow`` holding a place of ``key`` (for why-waiting), oldest first."""
        rows = self.c.execute(
            "SELECT id FROM runs WHERE name=? AND status NOT IN ('completed', 'cancelled', "
            "'aborted') AND id NOT IN (SELECT run_id FROM waits WHERE kind='queue' AND type=?) "
            "ORDER BY id LIMIT ?",
            (flow, f"queue:{flow}", limit * 4),
        ).fetchall()
        return [str(r[0]) for r in rows]

    # --- throttles --------------------------------------------------------------------------

    def lock_budget(self, name: str, key: str) -> list[int]:
        """The attempt starts kept for (``name``, ``key``), its row locked until commit."""
        self.c.execute(
            "INSERT INTO throttles(name, key, starts) VALUES (?, ?, '[]') ON CONFLICT DO NOTHING",
            (name, key),
        )
        row = self.c.execute(
            "SELECT starts FROM throttles WHERE name=? AND key=?" + self.b.for_update, (name, key)
        ).fetchone()
        return [int(v) for v in json.loads(row[0])]

    def save_budget(self, name: str, key: str, starts: list[int]) -> None:
        self.c.execute(
            "UPDATE throttles SET starts=? WHERE name=? AND key=?",
            (json.dumps(starts), name, key),
        )

    def budget_declared(self, name: str) -> tuple[int, int, str] | None:
        row = self.c.execute(
            "SELECT lim, per, declared FROM throttle_budgets WHERE name=?", (name,)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]), str(row[2]))

    def declare_budget(self, name: str, limit: int, per: int, declared: str) -> None:
        self.c.execute(
            "INSERT INTO throttle_budgets(name, lim, per, declared) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (name, limit, per, declared),
        )

    def redeclare_budget(self, name: str, limit: int, per: int, declared: str) -> None:
        self.c.execute(
            "UPDATE throttle_budgets SET lim=?, per=?, declared=? WHERE name=?",
            (limit, per, declared, name),
        )
