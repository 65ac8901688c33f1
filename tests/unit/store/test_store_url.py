"""Store URLs are read by one set of rules, which the store and the var key's location share."""

from __future__ import annotations

from pathlib import Path

import pytest

from procflow.config import DEFAULT_DATABASE_URL
from procflow.errors import UsageError
from procflow.runtime.data.secrets import load_cipher
from procflow.store.store import DEFAULT_URL, Store
from procflow.store.url import StoreUrl, dialect_of


@pytest.mark.parametrize(
    ("url", "path", "file"),
    [
        ("sqlite:///./procflow.db", "./procflow.db", "./procflow.db"),
        ("sqlite:///rel/a.db", "rel/a.db", "rel/a.db"),
        ("sqlite:////abs/a.db", "/abs/a.db", "/abs/a.db"),
        ("SQLite:///a.db", "a.db", "a.db"),  # the scheme is case-insensitive
        ("sqlite:///a#b.db", "a#b.db", "a#b.db"),  # verbatim: '#' is part of the name
        ("sqlite://", ":memory:", None),
        ("sqlite:///", ":memory:", None),
        ("sqlite:///:memory:", ":memory:", None),
    ],
)
def test_sqlite_paths(url: str, path: str, file: str | None) -> None:
    parsed = StoreUrl.parse(url)
    assert (parsed.dialect, parsed.sqlite_path, parsed.sqlite_file) == ("sqlite", path, file)
    assert parsed.sqlite_uri is False
    assert parsed.in_memory is (file is None)


@pytest.mark.parametrize(
    ("url", "file"),
    [
        ("sqlite:///file:data/app.db?mode=rwc", "data/app.db"),
        ("sqlite:///file:/abs/my%20app.db", "/abs/my app.db"),
        ("sqlite:///file::memory:?cache=shared", None),
        ("sqlite:///file:shared?mode=memory&cache=shared", None),
    ],
)
def test_sqlite_uri_filenames(url: str, file: str | None) -> None:
    parsed = StoreUrl.parse(url)
    assert parsed.sqlite_uri is True
    assert parsed.sqlite_path == url.removeprefix("sqlite:///")
    assert parsed.sqlite_file == file


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p@h:5432/db",
        "postgres://u:p@h:5432/db",
        "postgresql+psycopg://u:p@h:5432/db",
        "PostgreSQL://u:p@h:5432/db",
    ],
)
def test_postgres_urls_become_libpq_conninfo(url: str) -> None:
    parsed = StoreUrl.parse(url)
    assert parsed.dialect == "postgresql"
    assert parsed.conninfo == "postgresql://u:p@h:5432/db"
    assert not parsed.in_memory


def test_unsupported_url_is_refused() -> None:
    with pytest.raises(UsageError) as info:
        StoreUrl.parse("mysql://h/db")
    assert str(info.value) == (
        "unsupported database URL [mysql://h/db]; use sqlite:///path/to/file.db or "
        "postgresql://user:password@host/database"
    )
    assert dialect_of("mysql://h/db") is None
    assert dialect_of("procflow.db") is None


def test_sqlite_url_with_a_host_is_malformed() -> None:
    with pytest.raises(UsageError) as info:
        StoreUrl.parse("sqlite://host/a.db")
    assert str(info.value) == (
        "malformed database URL [sqlite://host/a.db]; use sqlite:///relative.db or sqlite:////abs.db"
    )


def test_sqlite_path_with_options_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db?mode=memory"
    with pytest.raises(UsageError) as info:
        Store(url)
    assert str(info.value) == (
        f"malformed database URL [{url}]: a SQLite path takes no ?options; to pass SQLite "
        "options, name a URI filename: sqlite:///file:path/to/file.db?mode=ro"
    )
    with pytest.raises(UsageError):  # the key finder reads it the same way
        load_cipher(url, {})
    assert list(tmp_path.iterdir()) == []


def test_default_url_is_the_configured_default() -> None:
    assert DEFAULT_URL == DEFAULT_DATABASE_URL


# --- the store opens what the URL says, and the var key sits beside it ---------------------


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_store_and_key_agree_on_a_uri_filename(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    url = f"sqlite:///file:{tmp_path}/data/app.db?mode=rwc"
    store = Store(url)
    try:
        assert store.init()
    finally:
        store.close()
    load_cipher(url, {})
    assert "data/app.db" in _files(tmp_path)  # SQLite opened the URI's file...
    assert "data/app.db.key" in _files(tmp_path)  # ...and the key is beside that very file
    assert not any("?" in name or name.startswith("file:") for name in _files(tmp_path))


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:mem?mode=memory&cache=shared"]
)
def test_in_memory_store_writes_no_file_and_gets_an_ephemeral_key(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store(url)
    try:
        assert store.init()
        assert store.read().meta_get("clock") == "system"
    finally:
        store.close()
    load_cipher(url, {})
    assert list(tmp_path.iterdir()) == []


def test_relative_paths_resolve_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///./sub.db"
    store = Store(url)
    store.close()
    load_cipher(url, {})
    assert {"sub.db", "sub.db.key"} <= set(_files(tmp_path))
