"""Tokens: where each run stands (one row per step position that is ready, waiting or failed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from procflow.store.codec import chunks, dumps, loads, none_or_dumps
from procflow.store.queries.base import Queries, marks
from procflow.store.rows import TokenRow

TOKEN_COLS = "id, run_id, step, path, state, attempt, since, wait, data"
UPDATE_TOKEN = (
    "UPDATE tokens SET step=?, path=?, state=?, attempt=?, since=?, wait=?, data=? WHERE id=?"
)
_UPDATE_ARRAYS = (
    "UPDATE tokens AS t SET step=u.step, path=u.path, state=u.state, attempt=u.attempt, "
    "since=u.since, wait=u.wait, data=u.data FROM unnest(?::text[], ?::text[], ?::text[], "
    "?::bigint[], ?::bigint[], ?::text[], ?::text[], ?::bigint[]) AS u(step, path, state, "
    "attempt, since, wait, data, id) WHERE t.id=u.id"
)
_DELETE = "DELETE FROM tokens WHERE id=?"
_DELETE_ARRAY = "DELETE FROM tokens WHERE id = ANY(?::bigint[])"


def token_row(row: Sequence[Any]) -> TokenRow:
    """A row selected as :data:`TOKEN_COLS`."""
    return TokenRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], loads(row[7]),
        json.loads(row[8]),
    )  # fmt: skip


def token_values(t: TokenRow) -> tuple[Any, ...]:
    """The parameters of :data:`UPDATE_TOKEN` for ``t``."""
    return (
        t.step, t.path, t.state, t.attempt, t.since, none_or_dumps(t.wait), dumps(t.data), t.id,
    )  # fmt: skip


class TokenQueries(Queries):
    def tokens(self, run_id: str) -> list[TokenRow]:
        rows = self.c.execute(
            f"SELECT {TOKEN_COLS} FROM tokens WHERE run_id=? ORDER BY id", (run_id,)
        ).fetchall()
        return [token_row(r) for r in rows]

    def tokens_of_runs(self, run_ids: Sequence[str]) -> list[TokenRow]:
        out: list[TokenRow] = []
        for chunk in chunks(list(run_ids)):
            rows = self.c.execute(
                f"SELECT {TOKEN_COLS} FROM tokens WHERE run_id IN ({marks(len(chunk))}) "
                "ORDER BY id",
                chunk,
            ).fetchall()
            out.extend(token_row(r) for r in rows)
        return out

    def insert_token(self, t: TokenRow) -> int:
        row = self.c.execute(
            "INSERT INTO tokens(run_id, step, path, state, attempt, since, wait, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (t.run_id, t.step, t.path, t.state, t.attempt, t.since, none_or_dumps(t.wait),
             dumps(t.data)),
        ).fetchone()  # fmt: skip
        t.id = int(row[0])
        return t.id

    def insert_new_tokens(self, tokens: Sequence[TokenRow]) -> None:
        """Insert tokens whose ids nobody reads (the first tokens of new runs)."""
        self.c.executemany(
            "INSERT INTO tokens(run_id, step, path, state, attempt, since, wait, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(t.run_id, t.step, t.path, t.state, t.attempt, t.since, none_or_dumps(t.wait),
              dumps(t.data)) for t in tokens],
        )  # fmt: skip

    def update_tokens(self, tokens: Sequence[TokenRow]) -> None:
        # A token listed twice keeps its last image. Row by row that happens anyway; as one
        # statement over arrays it must be made so: an UPDATE ... FROM joins each target row
        # to one source row only.
        rows = {  # token_values(t), inlined: one call less per transition of the worker
            t.id: (t.step, t.path, t.state, t.attempt, t.since, none_or_dumps(t.wait),
                   dumps(t.data), t.id)
            for t in tokens
        }  # fmt: skip
        self.b.batch(UPDATE_TOKEN, _UPDATE_ARRAYS, list(rows.values()))

    def delete_tokens(self, token_ids: Sequence[int]) -> None:
        self.b.batch(_DELETE, _DELETE_ARRAY, [(i,) for i in token_ids])

    def delete_run_tokens(self, run_id: str) -> None:
        self.c.execute("DELETE FROM tokens WHERE run_id=?", (run_id,))
