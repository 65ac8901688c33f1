"""Waits: tokens parked on an event or a record write, found by (type, correlation keys)."""

from __future__ import annotations

from collections.abc import Sequence

from procflow.store.queries.base import Queries


class WaitQueries(Queries):
    def insert_waits(self, rows: Sequence[tuple[int, str, str, str, str, int]]) -> None:
        """(token_id, run_id, kind, type, keys, since) each; a token has at most one wait."""
        self.c.executemany(
            "INSERT INTO waits(token_id, run_id, kind, type, keys, since) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )

    def find_waits(self, type_: str, keys: str) -> list[tuple[int, str]]:
        """(token_id, run_id) of the waits on (type, keys): an indexed lookup, whatever the
        number of waiting runs."""
        rows = self.c.execute(
            "SELECT token_id, run_id FROM waits WHERE type=? AND keys=? ORDER BY token_id",
            (type_, keys),
        ).fetchall()
        return [(int(t), r) for t, r in rows]

    def find_record_waits(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, str]]:
        """(token_id, run_id) of the record waits on any of the (type, keys) ``pairs``: one
        indexed query for all the ways a written record can belong to a waiting run."""
        if not pairs:
            return []
        where = " OR ".join("(type=? AND keys=?)" for _ in pairs)
        rows = self.c.execute(
            f"SELECT token_id, run_id FROM waits WHERE kind='record' AND ({where}) "
            "ORDER BY token_id",
            [value for pair in pairs for value in pair],
        ).fetchall()
        return [(int(t), r) for t, r in rows]

    def take_waits(self, token_ids: Sequence[int]) -> set[int]:
        """Consume these waits; returns the token ids whose wait was still there (each wait is
        consumed once: a timeout or another event that got there first leaves nothing)."""
        taken: set[int] = set()
        for token_id in token_ids:
            row = self.c.execute(
                "DELETE FROM waits WHERE token_id=? RETURNING token_id", (token_id,)
            ).fetchone()
            if row is not None:
                taken.add(int(row[0]))
        return taken

    def delete_waits_of_tokens(self, token_ids: Sequence[int]) -> None:
        self.c.executemany("DELETE FROM waits WHERE token_id=?", [(i,) for i in token_ids])

    def delete_run_waits(self, run_id: str) -> None:
        self.c.execute("DELETE FROM waits WHERE run_id=?", (run_id,))
