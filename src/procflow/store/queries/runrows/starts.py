"""New runs written together: the runs of a group of schedule slots, with their first rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from procflow.store.codec import dumps, none_or_dumps
from procflow.store.queries.base import with_chain
from procflow.store.queries.runrows.history import INTO_HISTORY, HistoryQueries
from procflow.store.queries.runrows.run_data import RunDataQueries
from procflow.store.queries.runrows.runs import RunQueries
from procflow.store.queries.runrows.tokens import TokenQueries
from procflow.store.rows import HistoryRow, RunRow, TokenRow

_NEW_RUNS = (
    "INSERT INTO runs(id, version_id, name, dialect, status, started_at, start_key, state, seq) "
    "SELECT * FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], "
    "?::bigint[], ?::text[], ?::text[], ?::bigint[]) ON CONFLICT (start_key) DO NOTHING "
    "RETURNING id"
)
_NEW_SCOPES = (
    "INSERT INTO scopes(run_id, path, n, data) "
    "SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[])"
)
_NEW_TOKENS = (
    "INSERT INTO tokens(run_id, step, path, state, attempt, since, wait, data) "
    "SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], "
    "?::bigint[], ?::text[], ?::text[])"
)
_NEW_HISTORY = (
    f"{INTO_HISTORY}SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::text[], "
    "?::text[], ?::text[], ?::bigint[], ?::text[])"
)
# The runs last: the statement returns the ids of those that went in. The other rows of a run
# whose start key was taken go in too, harmlessly (new ids), and the caller rolls back then.
_STARTED = with_chain((_NEW_SCOPES, _NEW_TOKENS, _NEW_HISTORY, _NEW_RUNS))


class StartQueries(RunQueries, TokenQueries, HistoryQueries, RunDataQueries):  # as in Tx
    def insert_started_runs(
        self,
        runs: Sequence[RunRow],
        scopes: Sequence[tuple[str, str, int, Any]],
        tokens: Sequence[TokenRow],
        history: Sequence[tuple[str, HistoryRow]],
    ) -> set[str]:
        """Insert new runs (of no record) with their ``(run_id, path, n, data)`` scopes, first
        tokens (ids unread) and history entries; the ids of the runs that went in (one whose
        start key was used before does not). Where writes go in ``WITH``, all of it is one
        statement over arrays, one round trip; else one statement a table."""
        if not self.b.writes_in_with:
            inserted = self.insert_new_runs(runs)
            self.put_scopes(scopes)
            self.insert_new_tokens(tokens)
            self.append_history_many(history)
            return inserted
        rows: list[list[tuple[Any, ...]]] = [
            [(run_id, path, n, dumps(data)) for run_id, path, n, data in scopes],
            [(t.run_id, t.step, t.path, t.state, t.attempt, t.since, none_or_dumps(t.wait),
              dumps(t.data)) for t in tokens],
            [(run_id, h.seq, h.at, h.type, h.step, h.path, h.attempt, none_or_dumps(h.data))
             for run_id, h in history],
            [(r.id, r.version_id, r.name, r.dialect, str(r.status), r.started_at, r.start_key,
              dumps(r.state), r.seq) for r in runs],
        ]  # fmt: skip
        columns = [
            column for table, width in zip(rows, (4, 8, 8, 9), strict=True)
            for column in _columns(table, width)
        ]  # fmt: skip
        # Binary parameters: an array of text needs no escaping (``PgConnection.execute_binary``).
        found = self.c.execute_binary(_STARTED, columns).fetchall()
        return {str(row[0]) for row in found}


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """``rows`` of ``width`` values as ``width`` arrays, one a column (``unnest`` takes them)."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width
