"""What the crash tests share: a store of one backend (`Db`) and `CaseStores`, which makes a
fresh store per crash case so module-scoped fixtures can run the cases side by side."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from procflow.store.store import Store


@dataclass(frozen=True)
class Db:
    url: str
    env: dict[str, str]  # what a procflow process needs beyond the URL (the key on PostgreSQL)

    def query(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        """Rows of one statement on a connection of its own (autocommit on both backends)."""
        store = Store(self.url)
        try:
            cursor = store.conn.execute(sql, args)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        finally:
            store.close()


class CaseStores:
    """Fresh stores (SQLite files or PostgreSQL databases) and a 3-thread pool to run cases in;
    everything is dropped when the requesting fixture ends."""

    def __init__(
        self, request: pytest.FixtureRequest, backend_envs: dict[str, dict[str, str]], pg: bool
    ) -> None:
        self.envs = backend_envs
        self.pg = request.getfixturevalue("pg_databases") if pg else None
        self.made: list[str] = []
        self.pool = ThreadPoolExecutor(max_workers=3)
        request.addfinalizer(self._finish)

    def store(self, backend: str, tmp_path: Path) -> Db:
        if backend == "sqlite":
            return Db(f"sqlite:///{tmp_path / 'crash.db'}", self.envs[backend])
        assert self.pg is not None
        self.made.append(self.pg.create())
        return Db(self.made[-1], self.envs[backend])

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self.pool.submit(fn, *args)

    def _finish(self) -> None:
        self.pool.shutdown()
        for url in self.made:
            assert self.pg is not None
            self.pg.drop(url)
