"""Shared test set-up: procflow.testing provides the virtual-clock `engine` fixture.

The store matrix: every behaviour test takes ``db_url`` (or ``backend``) and runs once per backend,
ids ``sqlite`` and ``postgresql``. PostgreSQL is found once per session (``PROCFLOW_TEST_PG``, else
``scripts/ensure-postgres.sh``: the local server when it answers, otherwise a throwaway cluster);
when none can be had the PostgreSQL tests fail, they are never skipped. Each test gets a fresh
database cloned from a template that already holds procflow's schema (``CREATE DATABASE ...
TEMPLATE``: milliseconds), dropped afterwards. ``PROCFLOW_TEST_BACKENDS=sqlite`` (or
``postgresql``) narrows the matrix for a quick local run; the default, and CI, is both.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from procflow.runtime.engine import Engine
from procflow.store.store import Store

pytest_plugins = ["procflow.testing"]

ROOT = Path(__file__).resolve().parents[1]
ALL_BACKENDS = ("sqlite", "postgresql")
# The key every worker of a PostgreSQL store must share (procflow refuses to start without one).
TEST_SECRET_KEY = "procflow-test-secret-key-" + "k" * 24


def _selected_backends() -> tuple[str, ...]:
    raw = os.environ.get("PROCFLOW_TEST_BACKENDS", "").strip()
    if not raw:
        return ALL_BACKENDS
    chosen = tuple(b.strip() for b in raw.split(",") if b.strip())
    unknown = [b for b in chosen if b not in ALL_BACKENDS]
    if unknown or not chosen:
        raise pytest.UsageError(
            f"PROCFLOW_TEST_BACKENDS={raw!r}: use a comma-separated subset of {ALL_BACKENDS}"
        )
    return chosen


BACKENDS = _selected_backends()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "empty_store: on PostgreSQL, db_url names an empty database (no procflow schema), as a "
        "SQLite URL names a file not created yet (for `procflow db init` tests)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    narrowed = "" if BACKENDS == ALL_BACKENDS else "  (narrowed by PROCFLOW_TEST_BACKENDS)"
    return f"procflow store backends: {', '.join(BACKENDS)}{narrowed}"


_BACKEND_OF: dict[str, str] = {}  # node id → backend, for the tests that run on one


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "backend" in callspec.params:
            _BACKEND_OF[item.nodeid] = callspec.params["backend"]


def _backend_of(nodeid: str) -> str | None:
    """The backend a test ran on, from its id (``test_x[sqlite]``, ``test_y[postgresql-3]``):
    read from the id, so the summary also works where the tests ran in other processes."""
    known = _BACKEND_OF.get(nodeid)
    if known is not None or "[" not in nodeid:
        return known
    params = nodeid.rsplit("[", 1)[1].rstrip("]").split("-")
    return next((b for b in ALL_BACKENDS if b in params), None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Outcomes per backend, so a missing or short leg of the matrix shows."""
    counts: dict[str, dict[str, int]] = {b: {} for b in BACKENDS}
    seen: set[tuple[str, str]] = set()
    for outcome in ("failed", "error", "skipped", "xfailed", "xpassed", "passed"):
        for report in terminalreporter.stats.get(outcome, []):
            backend = _backend_of(getattr(report, "nodeid", ""))
            if backend is None or (report.nodeid, outcome) in seen:
                continue
            seen.add((report.nodeid, outcome))
            per = counts[backend]
            per[outcome] = per.get(outcome, 0) + 1
    if not any(counts.values()):
        return
    terminalreporter.section("store backends")
    for backend, per in counts.items():
        shown = ", ".join(f"{n} {outcome}" for outcome, n in per.items()) or "no tests"
        terminalreporter.write_line(f"{backend}: {shown}")
    for backend in ALL_BACKENDS:
        if backend not in BACKENDS:
            terminalreporter.write_line(
                f"{backend}: NOT RUN (narrowed by PROCFLOW_TEST_BACKENDS)", yellow=True, bold=True
            )


# --- PostgreSQL -----------------------------------------------------------------------------


def _with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (user, host, port and query kept)."""
    return urlsplit(url)._replace(path=f"/{name}").geturl()


def _locate_postgres() -> tuple[str | None, str | None]:
    """(URL of a PostgreSQL that answers, None) or (None, why there is none)."""
    url = os.environ.get("PROCFLOW_TEST_PG", "").strip()
    if not url:
        script = ROOT / "scripts" / "ensure-postgres.sh"
        try:
            done = subprocess.run(
                ["bash", str(script)], capture_output=True, text=True, timeout=600, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{script} failed: {exc}"
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return None, (
                f"no PostgreSQL answers and {script} could not start one "
                f"(exit {done.returncode}):\n{done.stderr.strip()}"
            )
        url = lines[-1].strip()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return None, f"{url} does not answer: {exc}"
    return url, None


_POSTGRES: tuple[str | None, str | None] = (None, "PostgreSQL was not looked for")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Find PostgreSQL before collection, and export it as PROCFLOW_TEST_PG for every test
    (and subprocess) that reads it, e.g. when a throwaway cluster had to be started."""
    global _POSTGRES
    if "postgresql" in BACKENDS:
        _POSTGRES = _locate_postgres()
        if _POSTGRES[0] is not None:
            os.environ["PROCFLOW_TEST_PG"] = _POSTGRES[0]


def _find_postgres() -> str:
    """The PostgreSQL found at session start, or a loud failure (never a skip)."""
    url, error = _POSTGRES
    if url is None:
        pytest.fail(
            f"PostgreSQL tests cannot run: {error}\nSet PROCFLOW_TEST_PG to a server URL, or "
            "PROCFLOW_TEST_BACKENDS=sqlite to run the SQLite leg alone.",
            pytrace=False,
        )
    return url


def close_pool(url: str) -> None:
    """Close procflow's connection pool for ``url`` (it keeps connections open between uses)."""
    from procflow.store import pg

    with pg._pools_lock:
        found = pg._pools.pop(url, None)
    if found is not None:
        found.close()


# The shape of a database's schema: every relation (tables, indexes, sequences) of ``public`` with
# its columns. A database whose shape is the template's can be emptied and used again.
_SHAPE_SQL = (
    "SELECT md5(string_agg(c.relname || ':' || c.relkind::text || ':' || a.attname || ':' || "
    "a.atttypid::text, ',' ORDER BY c.relname, a.attnum)) FROM pg_class c JOIN pg_attribute a "
    "ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
    "WHERE c.relnamespace = 'public'::regnamespace"
)
_OTHERS_SQL = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid()"
)


@dataclass(frozen=True)
class _TemplateState:
    """What a database cloned from the template holds before a test: its schema's shape, the
    rows of each table, and each sequence's position."""

    shape: str
    rows: dict[str, list[tuple[object, ...]]]
    sequences: dict[str, tuple[int, bool]]

    @classmethod
    def read(cls, url: str) -> _TemplateState:
        with psycopg.connect(url, autocommit=True) as conn:
            shape = conn.execute(_SHAPE_SQL).fetchone()
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            ).fetchall()
            rows = {t: conn.execute(f'SELECT * FROM "{t}"'.encode()).fetchall() for (t,) in tables}
            sequences: dict[str, tuple[int, bool]] = {}
            for (name,) in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
            ).fetchall():
                position = conn.execute(f'SELECT last_value, is_called FROM "{name}"'.encode())
                value, called = position.fetchone() or (1, False)
                sequences[name] = (int(value), bool(called))
        assert shape is not None
        return cls(str(shape[0]), rows, sequences)

    def restore(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """Put a clone of the template back as it was made: every row deleted (foreign keys
        not checked while it is), the template's rows inserted again, sequences rewound."""
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '2s'")
            conn.execute("SET LOCAL session_replication_role = replica")
            for table, rows in self.rows.items():
                conn.execute(f'DELETE FROM "{table}"'.encode())
                if rows:
                    marks = ", ".join(["%s"] * len(rows[0]))
                    with conn.cursor() as cur:
                        cur.executemany(f'INSERT INTO "{table}" VALUES ({marks})'.encode(), rows)
            for sequence, (value, called) in self.sequences.items():
                conn.execute("SELECT setval(%s, %s, %s)", (sequence, value, called))


class PgDatabases:
    """Fresh test databases on one server, safe to use from threads. A test's database cloned
    from the schema template is emptied back to the template's state when the test ends and given
    to a later test of this process (cloning and dropping a database costs the server some
    0.15 s of CPU, emptying one a tenth of that); one whose schema a test changed, or that is
    still in use, is dropped instead."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.conn = psycopg.connect(admin_url, autocommit=True)
        self.prefix = f"procflow_test_{os.getpid()}"
        self.template = f"procflow_test_template_{os.getpid()}"
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._spare: list[str] = []  # emptied clones of the template, ready for a test
        self._clones: set[str] = set()  # the databases made from the template
        self._drop(self.template)  # a leftover of an earlier session with the same pid
        self._sql(f"CREATE DATABASE {self.template} TEMPLATE template0")
        from procflow.store.store import Store

        template_url = _with_database(admin_url, self.template)
        store = Store(template_url)
        try:
            store.init()
        finally:
            store.close()
            close_pool(template_url)  # no connection may stay on a template being cloned
        self._state = _TemplateState.read(template_url)

    def _sql(self, sql: str) -> None:
        with self._lock:
            self.conn.execute(sql.encode())

    def _drop(self, name: str) -> None:
        self._sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def create(self, *, empty: bool = False) -> str:
        """A database: a clone of the schema template, or (``empty``) one with no tables."""
        if not empty:
            with self._lock:
                spare = self._spare.pop() if self._spare else None
            if spare is not None:
                return _with_database(self.admin_url, spare)
        name = f"{self.prefix}_{next(self._numbers)}"
        self._sql(f"CREATE DATABASE {name} TEMPLATE {'template0' if empty else self.template}")
        if not empty:
            with self._lock:
                self._clones.add(name)
        return _with_database(self.admin_url, name)

    def drop(self, url: str) -> None:
        """Done with ``url``: emptied for a later test, or dropped."""
        close_pool(url)
        name = urlsplit(url).path.lstrip("/")
        if name in self._clones and self._emptied(url):
            with self._lock:
                self._spare.append(name)
            return
        with self._lock:
            self._clones.discard(name)
        # Terminate what is still connected (a worker subprocess, a listener) before dropping.
        self._drop(name)

    def _emptied(self, url: str) -> bool:
        """Whether ``url`` is back as the template made it, with nothing connected to it."""
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                others = conn.execute(_OTHERS_SQL).fetchall()
                if others:  # a process of the test still connected: not to be shared
                    return False
                shape = conn.execute(_SHAPE_SQL).fetchone()
                if shape is None or shape[0] != self._state.shape:
                    return False
                self._state.restore(conn)
                return not conn.execute(_OTHERS_SQL).fetchall()
        except psycopg.Error:
            return False

    def close(self) -> None:
        try:
            for name in [*self._spare, self.template]:
                self._drop(name)
        finally:
            self.conn.close()


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[PgDatabases]:
    databases = PgDatabases(_find_postgres())
    try:
        yield databases
    finally:
        databases.close()


# --- the matrix -----------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store backend of this test; on PostgreSQL the shared secret key is set in the
    environment (inherited by CLI subprocesses; see ``db_env`` for tests that build their own)."""
    name: str = request.param
    if name == "postgresql":
        monkeypatch.setenv("PROCFLOW_SECRET_KEY", TEST_SECRET_KEY)
    return name


def backend_env(backend: str) -> dict[str, str]:
    """Environment a procflow process needs for ``backend`` beyond the URL (the key on
    PostgreSQL; nothing on SQLite, whose key file procflow makes itself)."""
    return {"PROCFLOW_SECRET_KEY": TEST_SECRET_KEY} if backend == "postgresql" else {}


@pytest.fixture(scope="session")
def backend_envs() -> dict[str, dict[str, str]]:
    """:func:`backend_env` of every backend (for fixtures wider than one test)."""
    return {b: backend_env(b) for b in ALL_BACKENDS}


@pytest.fixture
def db_env(backend: str) -> dict[str, str]:
    """:func:`backend_env` of this test's backend."""
    return backend_env(backend)


@pytest.fixture
def db_factory(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PgOrFile]:
    factory = PgOrFile(backend, request, tmp_path)
    try:
        yield factory
    finally:
        factory.drop_all()


class PgOrFile:
    """Fresh store URLs of one backend: SQLite files in ``tmp_path`` or new PostgreSQL databases
    (dropped when the test ends). Either holds procflow's schema, as `procflow db init` leaves
    it, or (``empty``) nothing: a SQLite file not created yet, an empty database."""

    def __init__(self, backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.backend = backend
        self.request = request
        self.tmp_path = tmp_path
        self.made: list[str] = []
        self.pg: PgDatabases | None = None

    def __call__(self, name: str = "procflow", *, empty: bool = False) -> str:
        if self.backend == "sqlite":
            path = self.tmp_path / f"{name}.db"
            if not empty:  # only `procflow db init` (or `run`) makes a store: copy one it made
                shutil.copyfile(_sqlite_template(self.request), path)
            return f"sqlite:///{path}"
        if self.pg is None:
            self.pg = self.request.getfixturevalue("pg_databases")
        url = self.pg.create(empty=empty)
        self.made.append(url)
        return url

    def drop_all(self) -> None:
        if self.pg is not None:
            for url in self.made:
                self.pg.drop(url)


_SQLITE_TEMPLATE: list[Path] = []  # this process's store made by Store.init, once


def _sqlite_template(request: pytest.FixtureRequest) -> Path:
    """A SQLite file holding a store as ``Store.init`` makes it, made once per test process:
    copying it costs a fortieth of making the schema anew (some 20 ms, mostly fsync), and the
    tests make some 1,500 stores. Closed before any copy, so it has no WAL file beside it."""
    if not _SQLITE_TEMPLATE:
        folder = request.getfixturevalue("tmp_path_factory").mktemp("sqlite_template")
        store = Store(f"sqlite:///{folder / 'template.db'}")
        try:
            store.init()
        finally:
            store.close()
        _SQLITE_TEMPLATE.append(folder / "template.db")
    return _SQLITE_TEMPLATE[0]


@pytest.fixture
def db_url(db_factory: PgOrFile, request: pytest.FixtureRequest) -> str:
    """A fresh store for this test: ``sqlite:///<tmp_path>/procflow.db`` or a new PostgreSQL
    database, holding procflow's schema (neither made with ``@pytest.mark.empty_store``)."""
    return db_factory(empty=request.node.get_closest_marker("empty_store") is not None)


# --- what many behaviour tests open on that store -----------------------------------------------


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """procflow's store at ``db_url``, ready for use, closed when the test ends."""
    opened = Store(db_url)
    opened.ensure_ready()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def eng(db_url: str) -> Iterator[Engine]:
    """A virtual-clock engine on ``db_url`` (either backend), closed when the test ends."""
    engine = Engine.virtual(db_url)
    try:
        yield engine
    finally:
        engine.close()
