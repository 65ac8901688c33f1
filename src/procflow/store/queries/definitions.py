"""Deployed definitions: their versions, enabled flags, and the entities they declare."""

from __future__ import annotations

import json
from typing import Any

from procflow.errors import StoreError
from procflow.store.codec import dumps
from procflow.store.queries.base import ENDED_SQL, Queries
from procflow.store.rows import VersionRow

# The FROM and WHERE of the latest version of every enabled flow (d: its definition, v: the
# version); selected ordered by d.name.
LATEST_ENABLED_FLOWS = (
    "FROM definitions d JOIN versions v ON v.name=d.name AND v.version=d.latest "
    "WHERE d.dialect='flow' AND d.enabled<>0"
)


def flow_version_ids(conn: Any) -> list[int]:
    """The version id of the latest version of every enabled flow, by name."""
    rows = conn.execute(f"SELECT v.id {LATEST_ENABLED_FLOWS} ORDER BY d.name").fetchall()
    return [int(r[0]) for r in rows]


class DefinitionQueries(Queries):
    def lock_deploys(self) -> None:
        """One deploy at a time until commit (PostgreSQL; SQLite's write lock already does):
        version numbers and the unchanged-source check are read, then written."""
        self.b.advisory_lock("procflow:deploy")

    def version_by_hash(self, name: str, hash_: str) -> VersionRow | None:
        row = self.c.execute(
            "SELECT * FROM versions WHERE name=? AND hash=? ORDER BY version DESC LIMIT 1",
            (name, hash_),
        ).fetchone()
        return VersionRow(*row) if row else None

    def latest_version(self, name: str) -> VersionRow | None:
        row = self.c.execute(
            "SELECT v.* FROM versions v JOIN definitions d ON d.name=v.name AND d.latest=v.version "
            "WHERE d.name=?",
            (name,),
        ).fetchone()
        return VersionRow(*row) if row else None

    def latest_version_enabled(self, name: str) -> tuple[VersionRow, bool] | None:
        """The latest version of ``name`` and whether the definition is enabled, in one query
        (what starting a run checks)."""
        row = self.c.execute(
            "SELECT v.*, d.enabled FROM versions v JOIN definitions d ON d.name=v.name AND "
            "d.latest=v.version WHERE d.name=?",
            (name,),
        ).fetchone()
        return (VersionRow(*row[:-1]), bool(row[-1])) if row else None

    def latest_version_id(self, name: str) -> tuple[int, str, bool] | None:
        """(id, dialect, enabled) of the latest version of ``name``: what a call step resolves
        with every child it starts, without the version's source (its compiled form is
        cached by id)."""
        row = self.c.execute(
            "SELECT v.id, v.dialect, d.enabled FROM versions v JOIN definitions d "
            "ON d.name=v.name AND d.latest=v.version WHERE d.name=?",
            (name,),
        ).fetchone()
        return (int(row[0]), str(row[1]), bool(row[2])) if row else None

    def version(self, version_id: int) -> VersionRow:
        row = self.c.execute("SELECT * FROM versions WHERE id=?", (version_id,)).fetchone()
        if row is None:
            raise StoreError(f"definition version {version_id} is missing from the database")
        return VersionRow(*row)

    def insert_version(
        self,
        name: str,
        dialect: str,
        hash_: str,
        file: str,
        project_dir: str,
        source: str,
        now: int,
        vars_: list[str] | None = None,
    ) -> VersionRow:
        row = self.c.execute("SELECT latest FROM definitions WHERE name=?", (name,)).fetchone()
        number = (row[0] if row else 0) + 1
        new_id = self.c.execute(
            "INSERT INTO versions(name, version, dialect, hash, file, project_dir, source, "
            "created_at, vars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                name,
                number,
                dialect,
                hash_,
                file,
                project_dir,
                source,
                now,
                None if vars_ is None else dumps(vars_),
            ),
        ).fetchone()[0]
        self.c.execute(
            "INSERT INTO definitions(name, dialect, enabled, latest, first_version) "
            "VALUES (?, ?, 1, ?, ?) ON CONFLICT(name) DO UPDATE SET latest=excluded.latest",
            (name, dialect, number, new_id),
        )
        return self.version(int(new_id))

    def definitions(self) -> list[tuple[str, str, bool, int]]:
        rows = self.c.execute(
            "SELECT name, dialect, enabled, latest FROM definitions ORDER BY name"
        ).fetchall()
        return [(r[0], r[1], bool(r[2]), r[3]) for r in rows]

    def latest_enabled_flow_versions(self) -> list[int]:
        """The version id of the latest version of every enabled flow, by name: one query
        however many are deployed (events look for the flows they trigger with it)."""
        return flow_version_ids(self.c)

    def definition(self, name: str) -> tuple[str, str, bool, int] | None:
        """(name, dialect, enabled, latest version) of one deployed definition."""
        row = self.c.execute(
            "SELECT name, dialect, enabled, latest FROM definitions WHERE name=?", (name,)
        ).fetchone()
        return None if row is None else (row[0], row[1], bool(row[2]), row[3])

    def definitions_before(
        self, before: int | None, limit: int
    ) -> list[tuple[str, str, bool, int, int]]:
        """A page of definitions, newest first by the id of their first version (a redeploy
        does not move one): (name, dialect, enabled, latest, first version id)."""
        below = "" if before is None else " WHERE first_version<?"
        args = (limit,) if before is None else (before, limit)
        rows = self.c.execute(
            "SELECT name, dialect, enabled, latest, first_version FROM definitions"
            f"{below} ORDER BY first_version DESC LIMIT ?",
            args,
        ).fetchall()
        return [(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def version_numbered(self, name: str, version: int) -> VersionRow | None:
        """Version ``version`` of the definition ``name``."""
        row = self.c.execute(
            "SELECT * FROM versions WHERE name=? AND version=?", (name, version)
        ).fetchone()
        return VersionRow(*row) if row else None

    def definition_enabled(self, name: str) -> bool | None:
        row = self.c.execute("SELECT enabled FROM definitions WHERE name=?", (name,)).fetchone()
        return None if row is None else bool(row[0])

    def set_enabled(self, name: str, enabled: bool) -> bool:
        cur = self.c.execute("UPDATE definitions SET enabled=? WHERE name=?", (int(enabled), name))
        return bool(cur.rowcount > 0)

    def versions_of(self, name: str) -> list[tuple[int, int, int]]:
        """(version, created_at, active runs) per version."""
        rows = self.c.execute(
            "SELECT v.version, v.created_at, "
            f"(SELECT count(*) FROM runs r WHERE r.version_id=v.id AND r.status NOT IN "
            f"({ENDED_SQL})) FROM versions v WHERE v.name=? ORDER BY v.version",
            (name,),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def entities(self) -> dict[str, tuple[str, dict[str, Any]]]:
        rows = self.c.execute("SELECT name, app, declaration FROM entities").fetchall()
        return {r[0]: (r[1], json.loads(r[2])) for r in rows}

    def put_entity(self, name: str, app: str, version_id: int, declaration: dict[str, Any]) -> None:
        self.c.execute(
            "INSERT INTO entities(name, app, version_id, declaration) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET app=excluded.app, version_id=excluded.version_id, "
            "declaration=excluded.declaration",
            (name, app, version_id, dumps(declaration)),
        )

    def entity_version(self, name: str) -> int | None:
        row = self.c.execute("SELECT version_id FROM entities WHERE name=?", (name,)).fetchone()
        return None if row is None else int(row[0])
