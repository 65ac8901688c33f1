"""Records: the rows of the entities applications declare (data as JSON, per entity and id)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from procflow.store.codec import chunks, dumps
from procflow.store.queries.base import Queries, marks
from procflow.store.rows import RecordRow

_COLS = "entity, id, data, owner, created_at, updated_at"


def record_row(row: Sequence[Any]) -> RecordRow:
    return RecordRow(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5])


class RecordQueries(Queries):
    def record(self, entity: str, id_: int, *, lock: bool = False) -> RecordRow | None:
        """The record; ``lock``: locked until commit, for a read-modify-write (PostgreSQL;
        SQLite's write lock already serialises writers)."""
        row = self.c.execute(
            f"SELECT {_COLS} FROM records WHERE entity=? AND id=?"
            + (self.b.for_update if lock else ""),
            (entity, id_),
        ).fetchone()
        return None if row is None else record_row(row)

    def records_by_id(self, entity: str, ids: Iterable[int]) -> dict[int, RecordRow]:
        """The records of ``entity`` among ``ids`` that exist, by id."""
        out: dict[int, RecordRow] = {}
        for chunk in chunks(list(ids)):
            rows = self.c.execute(
                f"SELECT {_COLS} FROM records WHERE entity=? AND id IN ({marks(len(chunk))})",
                (entity, *chunk),
            ).fetchall()
            out.update((r[1], record_row(r)) for r in rows)
        return out

    def records(self, entity: str) -> list[RecordRow]:
        """Every record of ``entity``, oldest first; the faces list them a page at a time
        (:meth:`records_before`)."""
        rows = self.c.execute(
            f"SELECT {_COLS} FROM records WHERE entity=? ORDER BY id", (entity,)
        ).fetchall()
        return [record_row(r) for r in rows]

    def records_before(self, entity: str, before: int | None, limit: int) -> list[RecordRow]:
        """A page of ``entity``'s records, newest (highest id) first, those with an id below
        ``before`` (None: from the newest): a range of the primary key."""
        below = "" if before is None else " AND id<?"
        args = (entity, limit) if before is None else (entity, before, limit)
        rows = self.c.execute(
            f"SELECT {_COLS} FROM records WHERE entity=?{below} ORDER BY id DESC LIMIT ?", args
        ).fetchall()
        return [record_row(r) for r in rows]

    def records_between(self, entity: str, after: int, upto: int, limit: int) -> list[RecordRow]:
        """Up to ``limit`` records of ``entity`` with an id in (``after``, ``upto``], by id: a
        range of the primary key (a sweep reads its entity a page at a time)."""
        rows = self.c.execute(
            f"SELECT {_COLS} FROM records WHERE entity=? AND id>? AND id<=? ORDER BY id LIMIT ?",
            (entity, after, upto, limit),
        ).fetchall()
        return [record_row(r) for r in rows]

    def highest_record_id(self, entity: str) -> int:
        """The highest id of ``entity``'s records (0: none), one probe of the key."""
        row = self.c.execute("SELECT max(id) FROM records WHERE entity=?", (entity,)).fetchone()
        return int(row[0] or 0)

    def record_exists(self, entity: str, id_: int) -> bool:
        row = self.c.execute(
            "SELECT 1 FROM records WHERE entity=? AND id=?", (entity, id_)
        ).fetchone()
        return row is not None

    def lock_record_ids(self, entity: str) -> None:
        """Serialise id assignment and duplicate-id checks per entity until commit (PostgreSQL;
        SQLite's write lock already does)."""
        self.b.advisory_lock(f"records:{entity}")

    def next_record_id(self, entity: str) -> int:
        """Past every id the entity ever had: a deleted record's id is never handed out again
        (its runs, history and the trigger's once-per-record key still name it)."""
        self.lock_record_ids(entity)
        row = self.c.execute("SELECT max(id) FROM records WHERE entity=?", (entity,)).fetchone()
        return max(int(row[0] or 0), self._deleted_high(entity)) + 1

    def _deleted_high(self, entity: str) -> int:
        row = self.c.execute("SELECT value FROM meta WHERE key=?", (_deleted_key(entity),))
        found = row.fetchone()
        return int(found[0]) if found is not None else 0

    def insert_record(
        self, entity: str, id_: int, data: dict[str, Any], owner: str | None, now: int
    ) -> None:
        self.c.execute(
            f"INSERT INTO records({_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
            (entity, id_, dumps(data), owner, now, now),
        )

    def upsert_seed(self, entity: str, id_: int, data: dict[str, Any], now: int) -> None:
        self.c.execute(
            f"INSERT INTO records({_COLS}) VALUES (?, ?, ?, NULL, ?, ?) "
            "ON CONFLICT(entity, id) DO NOTHING",
            (entity, id_, dumps(data), now, now),
        )

    def update_record(self, entity: str, id_: int, data: dict[str, Any], now: int) -> None:
        self.c.execute(
            "UPDATE records SET data=?, updated_at=? WHERE entity=? AND id=?",
            (dumps(data), now, entity, id_),
        )

    def delete_record(self, entity: str, id_: int) -> None:
        self.c.execute("DELETE FROM records WHERE entity=? AND id=?", (entity, id_))
        if id_ > self._deleted_high(entity):
            self.c.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (_deleted_key(entity), str(id_)),
            )


def _deleted_key(entity: str) -> str:
    return f"records.deleted_high.{entity}"
