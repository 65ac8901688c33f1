"""The versioned schema: a store made by an older procflow is migrated, step by step, in place."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import pytest

from procflow.store.backend import statements
from procflow.store.store import SCHEMA_VERSION, Store, StoreError

pytestmark = pytest.mark.empty_store  # these tests build the store themselves


def make_version_1(url: str) -> None:
    """A store exactly as procflow's first schema left it, with one run in it."""
    store = Store(url)
    try:
        script = (
            resources.files("procflow.store.sql")
            .joinpath(f"schema_{store.dialect}_1.sql")
            .read_text()
        )
        with store.tx() as tx:
            for statement in statements(script):
                store.conn.execute(statement)
            tx.meta_set("schema_version", "1")
            tx.meta_set("clock", "system")
            tx.c.execute(
                "INSERT INTO runs(id, version_id, name, dialect, status, started_at) "
                "VALUES ('r1', 1, 'old', 'intent', 'waiting', 0)"
            )
    finally:
        store.close()


def table_exists(store: Store, name: str) -> bool:
    try:
        store.conn.execute(f"SELECT count(*) FROM {name}").fetchone()
    except Exception:
        return False
    return True


def test_db_upgrade_migrates_a_version_1_store_keeping_its_rows(db_url: str) -> None:
    make_version_1(db_url)
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "db", "upgrade", "--db", db_url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"schema version 1 → {SCHEMA_VERSION}"
    store = Store(db_url)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        assert table_exists(store, "scopes")
        assert store.read().run("r1") is not None
        assert store.upgrade() == (SCHEMA_VERSION, SCHEMA_VERSION)  # a second upgrade: a no-op
    finally:
        store.close()


def test_an_engine_on_an_old_store_migrates_it_on_start(db_url: str) -> None:
    from procflow.runtime.engine import Engine

    make_version_1(db_url)
    engine = Engine(db_url)
    try:
        assert engine.store.schema_version() == SCHEMA_VERSION
        assert table_exists(engine.store, "scopes")
    finally:
        engine.close()


def test_a_store_newer_than_this_procflow_is_refused(db_url: str) -> None:
    make_version_1(db_url)
    store = Store(db_url)
    try:
        with store.tx() as tx:
            tx.meta_set("schema_version", str(SCHEMA_VERSION + 1))
        with pytest.raises(StoreError, match="newer than this procflow"):
            store.upgrade()
    finally:
        store.close()
