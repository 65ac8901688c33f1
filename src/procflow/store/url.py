"""Database URLs: the one place a store URL is read, for the store and for whoever needs to know
where its database lives (the var key beside a SQLite file).

Rules:

- The scheme is case-insensitive. ``sqlite`` is SQLite; ``postgresql``, ``postgres`` and
  ``postgresql+psycopg`` are PostgreSQL. Anything else is refused.
- ``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db``: the rest after ``sqlite:///``
  is the file, verbatim. ``sqlite://`` and ``sqlite:///:memory:`` are in memory.
  ``sqlite://host/...`` (anything between ``//`` and the path) is malformed.
- A path starting with ``file:`` is a SQLite URI filename and is opened as one, options and all
  (``sqlite:///file:app.db?mode=ro``); it is in memory when it names ``:memory:`` or says
  ``mode=memory``. Any other path with a ``?`` is refused: SQLite would otherwise make a file
  whose name ends in the would-be options.
- A PostgreSQL URL is handed to libpq as ``postgresql://...`` (the ``+psycopg`` suffix, which
  libpq does not know, dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from procflow.errors import UsageError

__all__ = ["Dialect", "StoreUrl", "dialect_of", "no_store_here"]

Dialect = Literal["sqlite", "postgresql"]

_DIALECTS: dict[str, Dialect] = {
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+psycopg": "postgresql",
}
_MEMORY = ":memory:"


def dialect_of(url: str) -> Dialect | None:
    """The dialect a URL's scheme names; ``None`` for a scheme the store does not support."""
    scheme, sep, _ = url.partition("://")
    return _DIALECTS.get(scheme.lower()) if sep else None


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL.

    SQLite: ``sqlite_path`` is what ``sqlite3.connect`` opens (a path, ``:memory:`` or a URI
    filename, then ``sqlite_uri``), ``sqlite_file`` the file on disk (``None`` in memory).
    PostgreSQL: ``conninfo`` is what libpq connects with.
    """

    url: str
    dialect: Dialect
    sqlite_path: str = ""
    sqlite_uri: bool = False
    sqlite_file: str | None = None
    conninfo: str = ""

    @property
    def in_memory(self) -> bool:
        return self.dialect == "sqlite" and self.sqlite_file is None

    @property
    def shown(self) -> str:
        """The URL as messages name it: as given, with a password masked."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        user, _, host = parts.netloc.rpartition("@")
        return parts._replace(netloc=f"{user.partition(':')[0]}:***@{host}").geturl()

    @classmethod
    def parse(cls, url: str) -> StoreUrl:
        dialect = dialect_of(url)
        if dialect is None:
            raise UsageError(
                f"unsupported database URL [{url}]; use sqlite:///path/to/file.db or "
                "postgresql://user:password@host/database"
            )
        rest = url.partition("://")[2]
        if dialect == "postgresql":
            return cls(url, dialect, conninfo=f"postgresql://{rest}")
        return _sqlite(url, rest)


def no_store_here(url: StoreUrl, why: str) -> UsageError:
    """The refusal of a command that needs a store where there is none (exit 2: only
    `procflow db init` makes one, so a mistyped URL never becomes a new, empty store)."""
    return UsageError(
        f"no procflow store at {url.shown}: {why}; create one with `procflow db init`"
    )


def _sqlite(url: str, rest: str) -> StoreUrl:
    if rest in ("", "/"):
        return StoreUrl(url, "sqlite", sqlite_path=_MEMORY)
    if not rest.startswith("/"):
        raise UsageError(
            f"malformed database URL [{url}]; use sqlite:///relative.db or sqlite:////abs.db"
        )
    path = rest[1:]
    if path == _MEMORY:
        return StoreUrl(url, "sqlite", sqlite_path=_MEMORY)
    if path.startswith("file:"):
        return StoreUrl(
            url, "sqlite", sqlite_path=path, sqlite_uri=True, sqlite_file=_uri_file(path)
        )
    if "?" in path:
        raise UsageError(
            f"malformed database URL [{url}]: a SQLite path takes no ?options; to pass SQLite "
            "options, name a URI filename: sqlite:///file:path/to/file.db?mode=ro"
        )
    return StoreUrl(url, "sqlite", sqlite_path=path, sqlite_file=path)


def _uri_file(uri: str) -> str | None:
    """The file a SQLite URI filename opens, as SQLite reads it (``?`` and ``#`` end the path,
    ``%XX`` escapes decoded); ``None`` for an in-memory database."""
    parts = urlsplit(uri)
    file = unquote(parts.path)
    if file in ("", _MEMORY) or "memory" in parse_qs(parts.query).get("mode", []):
        return None
    return file
