"""The ``meta`` table (schema version, clock), savepoints and the wake-up notification."""

from __future__ import annotations

from procflow.store.queries.base import Queries


class MetaQueries(Queries):
    def notify(self) -> None:
        """Wake idle workers when this transaction commits (PostgreSQL ``NOTIFY``; on SQLite
        idle workers poll at most a second apart)."""
        self.b.notify()

    def meta_get(self, key: str) -> str | None:
        row = self.c.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def meta_set(self, key: str, value: str) -> None:
        self.c.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def savepoint(self, name: str) -> None:
        self.c.execute(f"SAVEPOINT {name}")

    def rollback_to(self, name: str) -> None:
        self.c.execute(f"ROLLBACK TO {name}")
