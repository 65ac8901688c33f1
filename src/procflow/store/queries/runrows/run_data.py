"""A run's own data beside its row: sealed vars, and the scopes of flow loops."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from procflow.store.codec import dumps
from procflow.store.queries.base import Queries

_DELETE_SCOPES = "DELETE FROM scopes WHERE run_id=?"
_DELETE_SCOPES_ARRAY = "DELETE FROM scopes WHERE run_id = ANY(?::text[])"


class RunDataQueries(Queries):
    # --- vars (values sealed by the runtime: the store only sees bytes) ----------------------

    def vars(self, run_id: str) -> dict[str, bytes]:
        rows = self.c.execute("SELECT name, value FROM vars WHERE run_id=?", (run_id,)).fetchall()
        return {r[0]: bytes(r[1]) for r in rows}

    def set_var(self, run_id: str, name: str, blob: bytes) -> None:
        self.c.execute(
            "INSERT INTO vars(run_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT(run_id, name) DO UPDATE SET value=excluded.value",
            (run_id, name, blob),
        )

    def clear_var(self, run_id: str, name: str) -> None:
        self.c.execute("DELETE FROM vars WHERE run_id=? AND name=?", (run_id, name))

    def clear_vars(self, run_id: str) -> list[str]:
        names = [r[0] for r in self.c.execute("SELECT name FROM vars WHERE run_id=?", (run_id,))]
        self.c.execute("DELETE FROM vars WHERE run_id=?", (run_id,))
        return names

    # --- flow loop scopes ----------------------------------------------------------------------

    def apply_scope_ops(self, run_id: str, ops: Sequence[tuple[str, str, int, Any]]) -> None:
        """In order: ``("put", path, n, data)`` upserts a row, ``("drop", path, 0, None)``
        deletes a loop's rows, ``("sweep", "", 0, None)`` deletes every row of the run."""
        for op, path, n, data in ops:
            if op == "put":
                self.c.execute(
                    "INSERT INTO scopes(run_id, path, n, data) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (run_id, path, n) DO UPDATE SET data=excluded.data",
                    (run_id, path, n, dumps(data)),
                )
            elif op == "drop":
                self.c.execute("DELETE FROM scopes WHERE run_id=? AND path=?", (run_id, path))
            else:
                self.delete_run_scopes(run_id)

    def put_scopes(self, rows: Sequence[tuple[str, str, int, Any]]) -> None:
        """``(run_id, path, n, data)`` rows of new runs, in one statement."""
        self.c.executemany(
            "INSERT INTO scopes(run_id, path, n, data) VALUES (?, ?, ?, ?)",
            [(run_id, path, n, dumps(data)) for run_id, path, n, data in rows],
        )

    def scopes(self, run_id: str, path: str) -> dict[int, Any]:
        rows = self.c.execute(
            "SELECT n, data FROM scopes WHERE run_id=? AND path=?", (run_id, path)
        ).fetchall()
        return {int(n): json.loads(data) for n, data in rows}

    def scope_row(self, run_id: str, path: str, n: int) -> Any:
        """One loop row (a for_each's items, say) without the others; None when there is none."""
        row = self.c.execute(
            "SELECT data FROM scopes WHERE run_id=? AND path=? AND n=?", (run_id, path, n)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def delete_run_scopes(self, run_id: str) -> None:
        self.c.execute(_DELETE_SCOPES, (run_id,))

    def delete_scopes_of_runs(self, run_ids: Sequence[str]) -> None:
        """Every loop row of these runs: one statement on PostgreSQL however many."""
        self.b.batch(_DELETE_SCOPES, _DELETE_SCOPES_ARRAY, [(i,) for i in run_ids])
