"""Opening a store: only where one is meant to be made is one made, and every way a URL can fail
to name a usable store is one clear error (exit 2 for the URL's fault, 1 for an outage or a
damaged store), raised before anything is written."""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import procflow
from procflow.errors import StoreError, UsageError
from procflow.runtime.engine import Engine
from procflow.store import pg
from procflow.store.store import SCHEMA_VERSION, Store

# --- SQLite: the file ------------------------------------------------------------------------


def test_a_missing_file_is_refused_naming_it_and_is_not_made(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    with pytest.raises(UsageError) as caught:
        Store(url, create=False)
    assert str(caught.value) == (
        f"no procflow store at {url}: {tmp_path / 'typo.db'} does not exist; create one with "
        "`procflow db init`"
    )
    assert caught.value.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def a_folder(d: Path) -> str:
    (d / "folder").mkdir()
    return "folder"


def not_sqlite(d: Path) -> str:
    (d / "notes.db").write_text("notes\n")
    return "notes.db"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (a_folder, "{p} is a folder, not a SQLite database file"),
        (lambda d: "gone/x.db", "the folder {d}/gone does not exist"),
        (not_sqlite, "{p} is not a SQLite database"),
    ],
    ids=["a folder", "a missing folder", "not SQLite"],
)
@pytest.mark.parametrize("create", [True, False], ids=["create", "open"])
def test_a_path_that_cannot_be_a_store_is_refused_as_it_is(
    tmp_path: Path, make: Callable[[Path], str], message: str, create: bool
) -> None:
    """Even where a store may be made (`db init`): the path's problem is named, nothing made."""
    path = tmp_path / make(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    content = path.read_bytes() if path.is_file() else None
    with pytest.raises(UsageError) as caught:
        Store(f"sqlite:///{path}", create=create)
    assert str(caught.value) == f"sqlite:///{path}: " + message.format(p=path, d=tmp_path)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert (path.read_bytes() if path.is_file() else None) == content


def test_an_empty_file_is_no_store_and_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(UsageError, match=r"empty\.db is an empty file; create one with"):
        Store(f"sqlite:///{path}", create=False)
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_another_programs_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    """Not even switched to WAL (which is written into the file) before being refused."""
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.commit()
    conn.close()
    content = path.read_bytes()
    with pytest.raises(UsageError, match=r"app\.db: the database holds no procflow schema"):
        Store(f"sqlite:///{path}", create=False)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_a_store_is_made_where_one_may_be(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    store = Store(url)
    try:
        assert store.init()
    finally:
        store.close()
    Store(url, create=False).close()


def test_the_engine_refuses_a_missing_store_without_create_and_the_api_makes_one(
    tmp_path: Path,
) -> None:
    """The decision for Python: `procflow.Engine(url)` makes the store when there is none, like
    `sqlite3.connect`; `create=False` refuses it as the CLI does."""
    url = f"sqlite:///{tmp_path / 'api.db'}"
    with pytest.raises(UsageError, match="no procflow store at"):
        Engine(url, create=False)
    with pytest.raises(UsageError, match="no procflow store at"):
        procflow.Engine(url, create=False)
    assert not (tmp_path / "api.db").exists()
    procflow.Engine(url).close()
    engine = Engine(url, create=False)
    try:
        assert engine.store.schema_version() == SCHEMA_VERSION
    finally:
        engine.close()


# --- both backends: a store that is not there, a damaged one ---------------------------------


def table_names(url: str) -> list[str]:
    store = Store(url)
    try:
        if store.dialect == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
        else:
            sql = (
                "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
                "ORDER BY tablename"
            )
        return [row[0] for row in store.conn.execute(sql).fetchall()]
    finally:
        store.close()


@pytest.mark.empty_store
def test_a_database_without_a_store_is_refused_and_left_empty(db_url: str) -> None:
    """SQLite: a file not there; PostgreSQL: a database with no procflow schema."""
    with pytest.raises(UsageError, match="no procflow store at"):
        Store(db_url, create=False)
    with pytest.raises(UsageError, match="no procflow store at"):
        Engine(db_url, create=False)
    if db_url.startswith("postgresql"):
        assert table_names(db_url) == []
    else:
        assert not Path(db_url.removeprefix("sqlite:///")).exists()


def set_version(url: str, value: str | None) -> None:
    store = Store(url)
    try:
        with store.tx():
            store.conn.execute("DELETE FROM meta WHERE key='schema_version'")
            if value is not None:
                store.conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (value,)
                )
    finally:
        store.close()


def meta(url: str) -> list[tuple[str, str]]:
    store = Store(url)
    try:
        rows = store.conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
        return [tuple(r) for r in rows]
    finally:
        store.close()


@pytest.mark.parametrize(
    "version", ["abc", "", "0", "-1", "3.0", " 3", "\u0663", "9" * 5000, None],
    ids=["text", "blank", "zero", "negative", "decimal", "spaced", "arabic", "huge", "missing"],
)  # fmt: skip
def test_a_schema_version_that_makes_no_sense_is_a_damaged_store(
    db_url: str, version: str | None
) -> None:
    set_version(db_url, version)
    before = meta(db_url)
    for opening in (lambda: Engine(db_url), lambda: Engine(db_url, create=False)):
        with pytest.raises(StoreError) as caught:
            opening()
        message = str(caught.value)
        assert "the store's schema version is" in message and "the store is damaged" in message
        assert "\n" not in message and len(message) < 300
        assert caught.value.exit_code == 1
    store = Store(db_url)
    try:
        with pytest.raises(StoreError, match="the store is damaged"):
            store.init()
        with pytest.raises(StoreError, match="the store is damaged"):
            store.upgrade()
    finally:
        store.close()
    assert meta(db_url) == before


def test_a_schema_version_from_a_newer_procflow_is_refused(db_url: str) -> None:
    set_version(db_url, str(SCHEMA_VERSION + 1))
    before = meta(db_url)
    with pytest.raises(StoreError, match=f"version {SCHEMA_VERSION + 1}, newer than this"):
        Engine(db_url, create=False)
    assert meta(db_url) == before


# --- PostgreSQL: the server ------------------------------------------------------------------


def test_an_unreachable_server_fails_at_once_naming_it() -> None:
    url = "postgresql://procflow:secret@127.0.0.1:1/procflow"
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        Store(url)
    assert time.monotonic() - started < pg.CONNECT_TIMEOUT
    message = str(caught.value)
    assert message.startswith(
        "cannot connect to PostgreSQL at postgresql://procflow:***@127.0.0.1:1/procflow: "
    )
    assert '"127.0.0.1", port 1 failed: Connection refused' in message
    assert "secret" not in message and "\n" not in message
    assert caught.value.exit_code == 1
    assert url not in pg._pools  # nothing kept: the next attempt connects afresh


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a server hung or behind a firewall
    that swallows replies)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_a_silent_server_fails_within_the_connect_timeout(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not after the pool's 30 s: the connect timeout (5 s; 2 s here), or the URL's own."""
    monkeypatch.setattr(pg, "CONNECT_TIMEOUT", 2)
    for url in (
        f"postgresql://127.0.0.1:{silent_server}/procflow",
        f"postgresql://127.0.0.1:{silent_server}/procflow?connect_timeout=2&application_name=t",
    ):
        started = time.monotonic()
        shown = re.escape(f"cannot connect to PostgreSQL at {url}: ")
        with pytest.raises(StoreError, match=f"{shown}.*timeout"):
            Store(url)
        assert 1.5 < time.monotonic() - started < 10


def test_connect_options_add_a_timeout_unless_the_url_has_one() -> None:
    from procflow.store.url import StoreUrl

    assert pg.connect_options(StoreUrl.parse("postgresql://h/db")) == {
        "autocommit": True,
        "connect_timeout": pg.CONNECT_TIMEOUT,
    }
    assert pg.connect_options(StoreUrl.parse("postgresql://h/db?connect_timeout=9")) == {
        "autocommit": True
    }
    with pytest.raises(UsageError, match=r"malformed database URL \[postgresql://h/db\?bogus=1\]"):
        pg.connect_options(StoreUrl.parse("postgresql://h/db?bogus=1"))


def test_a_database_that_does_not_exist_is_the_urls_fault(backend: str, db_url: str) -> None:
    """On the test server: a mistyped database name is refused like a mistyped file (exit 2)."""
    if backend == "sqlite":
        url = f"sqlite:///{Path(db_url.removeprefix('sqlite:///')).parent / 'nope.db'}"
        message = "no procflow store at .*nope.db does not exist"
    else:
        url = urlsplit(db_url)._replace(path="/procflow_no_such_database").geturl()
        message = r"no procflow store at .*: the database does not exist; create it \(CREATE"
    with pytest.raises(UsageError, match=message) as caught:
        Engine(url, create=False)
    assert caught.value.exit_code == 2
