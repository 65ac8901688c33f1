"""Every row of every table of a store: what a refused request must leave exactly as it was."""

from __future__ import annotations

from typing import Any

from procflow.store.store import Store

Dump = dict[str, list[tuple[Any, ...]]]


def dump(url: str) -> Dump:
    """Every row of every table of the store at ``url``, in a stable order."""
    store = Store(url, create=False)
    try:
        return dump_store(store)
    finally:
        store.close()


def dump_store(store: Store) -> Dump:
    """:func:`dump` through an open ``store``'s own connection: what it has written and not yet
    committed shows too."""
    if store.dialect == "sqlite":
        listing = "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
    else:
        listing = (
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
            "ORDER BY tablename"
        )
    conn = store.read().c
    tables = [row[0] for row in conn.execute(listing).fetchall()]
    return {
        table: sorted(
            (tuple(row) for row in conn.execute(f"SELECT * FROM {table}").fetchall()),
            key=repr,
        )
        for table in tables
    }
