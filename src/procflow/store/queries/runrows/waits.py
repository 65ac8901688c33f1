"""Waits: tokens parked on an event or a record write, found by (type, correlation keys)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from procflow.store.codec import chunks
from procflow.store.queries.base import Queries, marks
from procflow.store.queries.runrows.runs import RUN_COLS, run_row
from procflow.store.queries.runrows.tokens import TOKEN_COLS, token_row
from procflow.store.rows import RunRow, TokenRow

_RUN_COLS_R = ", ".join(f"r.{column.strip()}" for column in RUN_COLS.split(","))
_TOKEN_COLS_T = ", ".join(f"t.{column.strip()}" for column in TOKEN_COLS.split(","))
_TOKEN = f"SELECT {TOKEN_COLS} FROM tokens WHERE id="
_TAKE_TOKEN = (
    "WITH taken AS (DELETE FROM waits WHERE token_id=? RETURNING token_id) "
    f"{_TOKEN}(SELECT token_id FROM taken)"
)

_TAKE_TOKENS = (  # token ids as an array: one statement, whatever their number
    "WITH taken AS (DELETE FROM waits WHERE token_id = ANY(?::bigint[]) RETURNING token_id) "
    f"SELECT {TOKEN_COLS} FROM tokens WHERE id IN (SELECT token_id FROM taken) ORDER BY id"
)

_DELETE_OF_TOKEN = "DELETE FROM waits WHERE token_id=?"
_DELETE_OF_TOKENS = "DELETE FROM waits WHERE token_id = ANY(?::bigint[])"


class SeenWait(NamedTuple):
    """A wait on an event's (type, keys) as :meth:`WaitQueries.waiting_runs_for_update` found
    it: its token's id, its run (locked, as it is now), and where the backend can tell later
    whether they changed (PostgreSQL), the token as the statement read it and the version of
    the two rows read (``stamp``: the wait's and the token's ``xmin``)."""

    token_id: int
    run: RunRow
    token: TokenRow | None = None
    stamp: tuple[str, str] | None = None


class WaitQueries(Queries):
    def insert_waits(self, rows: Sequence[tuple[int, str, str, str, str, int]]) -> None:
        """(token_id, run_id, kind, type, keys, since) each; a token has at most one wait."""
        self.c.executemany(
            "INSERT INTO waits(token_id, run_id, kind, type, keys, since) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )

    def waiting_runs_for_update(self, type_: str, keys: str) -> list[SeenWait]:
        """The waits on (type, keys), in token order: an indexed lookup, whatever the number of
        waiting runs. Each run is locked until commit as :meth:`run_for_update` locks it (in
        run id order, so two of these never deadlock), in the same statement. The waits and
        tokens are as they were before the locks were had: :meth:`take_waiting_token`
        confirms a wait, or on PostgreSQL the delivery's own write checks the ``stamp``
        (``EventQueries.deliver_to_seen_token``), which saves reading the token again."""
        if not self.b.writes_in_with:
            rows = self.c.execute(
                f"SELECT w.token_id, {_RUN_COLS_R} FROM waits w JOIN runs r ON r.id=w.run_id "
                "WHERE w.type=? AND w.keys=? ORDER BY r.id, w.token_id",
                (type_, keys),
            ).fetchall()
            seen = [SeenWait(int(row[0]), run_row(row[1:])) for row in rows]
            return sorted(seen, key=lambda wait: wait.token_id)
        # Only the runs are locked (OF r): a wait is taken afterwards, under its run's lock.
        rows = self.c.execute(
            f"SELECT w.token_id, w.xmin::text, t.xmin::text, {_TOKEN_COLS_T}, {_RUN_COLS_R} "
            "FROM waits w JOIN runs r ON r.id=w.run_id JOIN tokens t ON t.id=w.token_id "
            f"WHERE w.type=? AND w.keys=? ORDER BY r.id, w.token_id{self.b.for_update} OF r",
            (type_, keys),
        ).fetchall()
        width = len(TOKEN_COLS.split(","))
        seen = [
            SeenWait(int(row[0]), run_row(row[3 + width :]), token_row(row[3 : 3 + width]),
                     (row[1], row[2]))
            for row in rows
        ]  # fmt: skip
        return sorted(seen, key=lambda wait: wait.token_id)

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

    def take_waiting_token(self, token_id: int) -> TokenRow | None:
        """Consume the token's wait (as :meth:`take_waits`); the token as it is now if its wait
        was still there, else None. One statement where writes go in ``WITH``."""
        if self.b.writes_in_with:
            row = self.c.execute(_TAKE_TOKEN, (token_id,)).fetchone()
        elif self.take_waits([token_id]):
            row = self.c.execute(f"{_TOKEN}?", (token_id,)).fetchone()
        else:
            row = None
        return None if row is None else token_row(row)

    def take_call_waits(self, child_ids: Sequence[str]) -> list[tuple[str, RunRow, TokenRow]]:
        """The parents waiting on these children (ended), each as (child id, parent run locked
        as it is now, the token whose wait was taken), in token order. One statement locks the
        parents, in run id order as :meth:`waiting_runs_for_update` does (so two of these never
        deadlock); one more takes their waits and reads the tokens, under those locks: a wait
        that a call's timeout took first is gone, and its token is not returned. A parent
        waiting on two of the children is one row, returned twice."""
        if not child_ids:
            return []
        lock = f"{self.b.for_update} OF r" if self.b.for_update else ""
        rows = self.c.execute(
            f"SELECT w.token_id, w.keys, {_RUN_COLS_R} FROM waits w JOIN runs r ON r.id=w.run_id "
            f"WHERE w.type='call' AND w.keys IN ({marks(len(child_ids))}) "
            f"ORDER BY r.id, w.token_id{lock}",
            list(child_ids),
        ).fetchall()
        runs: dict[str, RunRow] = {}
        waiting: dict[int, tuple[str, RunRow]] = {}
        for row in rows:
            run = runs.setdefault(str(row[2]), run_row(row[2:]))
            waiting[int(row[0])] = (str(row[1]), run)
        if not waiting:
            return []
        if self.b.writes_in_with:
            found = self.c.execute(_TAKE_TOKENS, (list(waiting),)).fetchall()
        else:
            ids = list(waiting)
            taken = self.c.execute(
                f"DELETE FROM waits WHERE token_id IN ({marks(len(ids))}) RETURNING token_id", ids
            ).fetchall()
            found = self.c.execute(
                f"SELECT {TOKEN_COLS} FROM tokens WHERE id IN ({marks(len(taken))}) ORDER BY id",
                [row[0] for row in taken],
            ).fetchall()
        tokens = [token_row(row) for row in found]
        return [(*waiting[int(t.id or 0)], t) for t in tokens]

    def take_waiting_tokens(self, token_ids: Sequence[int]) -> dict[int, TokenRow]:
        """:meth:`take_waiting_token` of many: the tokens whose wait was still there, by id."""
        taken: list[int] = []
        for chunk in chunks(list(token_ids)):
            rows = self.c.execute(
                f"DELETE FROM waits WHERE token_id IN ({marks(len(chunk))}) RETURNING token_id",
                chunk,
            ).fetchall()
            taken.extend(int(r[0]) for r in rows)
        out: dict[int, TokenRow] = {}
        for chunk in chunks(taken):
            rows = self.c.execute(
                f"SELECT {TOKEN_COLS} FROM tokens WHERE id IN ({marks(len(chunk))})", chunk
            ).fetchall()
            out.update((t.id, t) for t in map(token_row, rows) if t.id is not None)
        return out

    def delete_waits_of_tokens(self, token_ids: Sequence[int]) -> None:
        self.b.batch(_DELETE_OF_TOKEN, _DELETE_OF_TOKENS, [(i,) for i in token_ids])

    def delete_run_waits(self, run_id: str) -> None:
        self.c.execute("DELETE FROM waits WHERE run_id=?", (run_id,))
