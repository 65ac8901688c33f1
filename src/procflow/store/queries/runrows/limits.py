"""Flow control: the places of a limited flow's key (``limits``) and the attempt starts of a
throttle's budget (``throttles``, ``throttle_budgets``), schema 9."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from procflow.store.codec import chunks
from procflow.store.queries.base import Queries
from procflow.store.queries.runrows.history import INSERT_HISTORY, history_values
from procflow.store.queries.runrows.runs import SAVE_RUN, run_values
from procflow.store.queries.runrows.timers import DELETE_TIMERS_OF_TOKEN
from procflow.store.queries.runrows.tokens import UPDATE_TOKEN, token_values
from procflow.store.rows import HistoryRow, RunRow, TokenRow

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
    def lock_places(self, flow: str, key: str, limit: int | None = None) -> tuple[int, int | None]:
        """The places of (``flow``, ``key``) taken and its limit, its row locked until commit:
        every start and end of the key's runs passes here, one transaction at a time. A new row
        takes ``limit``."""
        self.c.execute(
            "INSERT INTO limits(flow, key, active, lim) VALUES (?, ?, 0, ?) ON CONFLICT DO NOTHING",
            (flow, key, limit),
        )
        row = self.c.execute(
            "SELECT active, lim FROM limits WHERE flow=? AND key=?" + self.b.for_update,
            (flow, key),
        ).fetchone()
        return int(row[0]), None if row[1] is None else int(row[1])

    def set_limit(self, flow: str, limit: int | None) -> list[str]:
        """A new version's limit for every key of ``flow``; the keys with runs queued."""
        self.c.execute("UPDATE limits SET lim=? WHERE flow=?", (limit, flow))
        rows = self.c.execute(
            "SELECT DISTINCT keys FROM waits WHERE kind='queue' AND type=?", (f"queue:{flow}",)
        ).fetchall()
        return sorted(str(r[0]) for r in rows)

    def lock_held_places(self, keys: Sequence[Key]) -> dict[Key, tuple[int, int | None]]:
        """(places taken, limit) of ``keys`` (sorted; each has a row: a run held a place of
        it), their rows locked until commit in that order: transactions freeing places of
        several keys never deadlock (SQLite's write lock already serialises them)."""
        out: dict[Key, tuple[int, int | None]] = {}
        for chunk in chunks(list(keys), 200):
            rows = self.c.execute(
                "SELECT flow, key, active, lim FROM limits WHERE (flow, key) IN (VALUES "
                + ",".join("(?, ?)" for _ in chunk)
                + ") ORDER BY flow, key"
                + self.b.for_update,
                [value for pair in chunk for value in pair],
            ).fetchall()
            for flow, key, active, lim in rows:
                out[(str(flow), str(key))] = (int(active), None if lim is None else int(lim))
        return out

    def add_places_many(self, deltas: Sequence[tuple[int, str, str]]) -> None:
        """(delta, flow, key) each, one statement for all."""
        if deltas:
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
                found = out.setdefault((type_.removeprefix("queue:"), key), [])
                found.append((int(token_id), str(run_id)))
        return out

    def add_places(self, flow: str, key: str, delta: int) -> None:
        self.c.execute(
            "UPDATE limits SET active=active+? WHERE flow=? AND key=?", (delta, flow, key)
        )

    def queue_position(self, flow: str, key: str, token_id: int) -> int:
        """How many runs are queued on (``flow``, ``key``) ahead of ``token_id``."""
        row = self.c.execute(
            "SELECT count(*) FROM waits WHERE kind='queue' AND type=? AND keys=? AND token_id<?",
            (f"queue:{flow}", key, token_id),
        ).fetchone()
        return int(row[0])

    def places(self, flow: str, key: str) -> tuple[int, int | None]:
        """(places taken, limit) of (``flow``, ``key``), read without a lock (for views)."""
        row = self.c.execute(
            "SELECT active, lim FROM limits WHERE flow=? AND key=?", (flow, key)
        ).fetchone()
        if row is None:
            return 0, None
        return int(row[0]), None if row[1] is None else int(row[1])

    def place_holders(self, flow: str, key: str, most: int) -> list[tuple[str, str]]:
        """(id, status) of up to ``most`` runs of ``flow`` holding a place of ``key``, oldest
        first (for views: the runs of the flow that have not ended are read until found)."""
        rows = self.c.execute(
            "SELECT id, status, state FROM runs WHERE name=? AND status IN "
            "('running', 'waiting', 'failed') ORDER BY id",
            (flow,),
        )
        found: list[tuple[str, str]] = []
        for run_id, status, state in rows:
            place = json.loads(state).get("limit") or {}
            if place.get("holds") and place.get("key") == key:
                found.append((str(run_id), str(status)))
                if len(found) == most:
                    break
        return found

    def resume_token(self, run: RunRow, token: TokenRow, entry: HistoryRow) -> None:
        """A waiting token of ``run`` made ready (a queued run given its place, a call's child
        refused): the token's row, its timers deleted, ``entry`` appended, the run saved with
        its lease released."""
        assert token.id is not None
        self.write_together([
            (UPDATE_TOKEN, token_values(token)),
            (DELETE_TIMERS_OF_TOKEN, (token.id,)),
            (INSERT_HISTORY, history_values(run.id, entry)),
            (SAVE_RUN, run_values(run, None, None)),
        ])  # fmt: skip

    # --- throttles --------------------------------------------------------------------------

    def lock_budget(self, name: str, key: str) -> tuple[list[int], int]:
        """The attempt starts kept for (``name``, ``key``) and the instant promised to the next
        refused attempt, its row locked until commit."""
        self.c.execute(
            "INSERT INTO throttles(name, key, starts) VALUES (?, ?, '[]') ON CONFLICT DO NOTHING",
            (name, key),
        )
        row = self.c.execute(
            "SELECT starts, promised FROM throttles WHERE name=? AND key=?" + self.b.for_update,
            (name, key),
        ).fetchone()
        return [int(v) for v in json.loads(row[0])], int(row[1])

    def save_budget(self, name: str, key: str, starts: list[int], promised: int) -> None:
        self.c.execute(
            "UPDATE throttles SET starts=?, promised=? WHERE name=? AND key=?",
            (json.dumps(starts), promised, name, key),
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
