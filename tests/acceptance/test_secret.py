"""The secret test: a var's plain text never reaches the disk, the output or the logs.

The provisioning example runs through the real CLI with delegates (``secret_project/custom``) that
set a known, long random password as ``dbPassword``, log it, and raise exceptions quoting it. While
the runs wait between produce and use (in retry waits, the encrypted var stored) and after they
end, the password appears nowhere: not in the SQLite main file, ``-wal``, ``-shm`` or a journal
(read raw), not in ``runs show`` (JSON or text), history, records, nor any command's
stdout/stderr. Where it would have been, ``***`` stands.

On PostgreSQL the store is not a file of ours: every table's rows rendered as text, every bytea
column's raw bytes, and every page of every relation of the database read raw (``pageinspect``:
dead row versions too) are scanned instead; the key comes from ``PROCFLOW_SECRET_KEY`` (no key
file), and a command without it is refused.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run_procflow

from procflow.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "provisioning"
DELEGATES = Path(__file__).parent / "secret_project" / "custom"


def leak_forms(password: str) -> list[bytes]:
    """Byte strings whose presence would give the password (or a good part of it) away."""
    raw = password.encode()
    forms = [
        raw,
        password.encode("utf-16-le"),
        raw.hex().encode(),
        base64.b64encode(raw).rstrip(b"="),
        base64.urlsafe_b64encode(raw).rstrip(b"="),
    ]
    window = 12  # any 12-character piece of it (a cut {error}, a wrapped line)
    forms += [raw[i : i + window] for i in range(len(raw) - window + 1)]
    return forms


class Scenario:
    def __init__(self, tmp_path: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.password = "pw-" + secrets.token_urlsafe(36)
        self.project = tmp_path / "provisioning"
        shutil.copytree(EXAMPLE, self.project, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copyfile(DELEGATES / "__init__.py", self.project / "custom" / "__init__.py")
        self.url = db_url
        self.sqlite = db_url.startswith("sqlite:")
        self.db = Path(db_url.removeprefix("sqlite:///")) if self.sqlite else None
        self.db_env = db_env  # the shared key on PostgreSQL
        self.outputs: list[tuple[str, str]] = []  # (command, stdout + stderr), every command
        self.watcher: subprocess.Popen[bytes] | None = None

    def __call__(self, *args: str, key: bool = True) -> str:
        done = self.run(*args, key=key)
        assert done.returncode == 0, f"procflow {' '.join(args)}: {done.stderr}"
        return done.stdout

    def run(self, *args: str, key: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
        env.update(NO_COLOR="1", PROCFLOW_TEST_PASSWORD=self.password)
        if key:
            env.update(self.db_env)
        done, _ = run_procflow([*args, "--db", self.url], env, Path.cwd(), timeout=60)
        command = "procflow " + " ".join(args)
        self.outputs.append((command, done.stdout + done.stderr))
        return done

    def keep_wal(self) -> None:
        """Hold a connection open so the WAL and shm files stay after each command exits.

        It lives in a process of its own: reading the files raw here would drop this process's
        POSIX locks on them, and with them the connection's hold on the WAL.
        """
        assert self.db is not None
        self.watcher = subprocess.Popen(
            [sys.executable, "-c", WATCHER, str(self.db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.watcher.stdout is not None
        assert self.watcher.stdout.readline() == b"open\n"

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.communicate(timeout=10)

    def query(self, sql: str, *args: object) -> list[tuple]:
        store = Store(self.url)
        try:
            return [tuple(row) for row in store.conn.execute(sql, args).fetchall()]
        finally:
            store.close()

    def show(self, run_id: str) -> dict:
        return json.loads(self("runs", "show", run_id, "--json"))

    def create(self, *titles: str) -> list[str]:
        """Create tenants; returns the ids of the runs their creation started, in order."""
        ids = []
        for title in titles:
            data = json.dumps({"title": title})
            args = ("records", "create", "TenantApplication", "--data", data, "--json")
            ids.append(str(json.loads(self(*args))["id"]))
        runs = {r["business_key"]: r["id"] for r in json.loads(self("runs", "list", "--json"))}
        return [runs[id_] for id_ in ids]

    def assert_nowhere(self, moment: str) -> None:
        """The password is in no part of the store (raw bytes) and in no output so far."""
        present = self.sqlite_files() if self.sqlite else self.postgresql_contents()
        forms = leak_forms(self.password)
        for name, data in present.items():
            assert not any(form in data for form in forms), f"{moment}: password in {name}"
        for command, output in self.outputs:
            data = output.encode()
            assert not any(form in data for form in forms), f"{moment}: password in `{command}`"

    def sqlite_files(self) -> dict[str, bytes]:
        """The store's files, raw: main file, WAL, shared memory, journal."""
        assert self.db is not None
        files = [self.db, *(Path(f"{self.db}{s}") for s in ("-wal", "-shm", "-journal"))]
        present = {f.name: f.read_bytes() for f in files if f.exists()}
        assert {f"{self.db.name}", f"{self.db.name}-wal", f"{self.db.name}-shm"} <= set(present)
        assert present[f"{self.db.name}-wal"], "an empty WAL would make this check vacuous"
        return present

    def postgresql_contents(self) -> dict[str, bytes]:
        """Every table's rows as text, every bytea column raw, and every page of every relation
        (tables, their TOAST, indexes) raw, dead row versions included."""
        store = Store(self.url)
        conn = store.conn
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()]  # fmt: skip
            assert {"runs", "vars", "history", "records", "tokens", "timers"} <= set(tables)
            present: dict[str, bytes] = {}
            for table in tables:
                rows = conn.execute(f"SELECT t::text FROM {table} t").fetchall()
                present[f"{table} (rows as text)"] = "\n".join(r[0] for r in rows).encode()
                blobs = [r[0] for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "'public' AND table_name = ? AND data_type = 'bytea'", (table,)
                ).fetchall()]  # fmt: skip
                for column in blobs:
                    values = conn.execute(f"SELECT {column} FROM {table}").fetchall()
                    present[f"{table}.{column} (bytea)"] = b"".join(
                        bytes(v[0] or b"") for v in values
                    )
            relations = conn.execute(
                "SELECT c.oid::regclass::text, pg_relation_size(c.oid) / "
                "current_setting('block_size')::int FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname IN ('public', 'pg_toast') AND c.relkind IN ('r', 'i', 't') "
                "AND c.relfilenode <> 0 AND pg_relation_size(c.oid) > 0"
            ).fetchall()
            for name, blocks in relations:
                pages = conn.execute(
                    "SELECT get_raw_page(?, 'main', b) FROM generate_series(0, ? - 1) b",
                    (name, blocks),
                ).fetchall()
                present[f"{name} (raw pages)"] = b"".join(bytes(p[0]) for p in pages)
        finally:
            store.close()
        assert b"dbPassword" in present["vars (raw pages)"], "a vacuous raw-page scan"
        assert b"TenantApplication" in present["records (rows as text)"], "a vacuous row scan"
        return present

    def sealed_vars(self) -> dict[str, list[bytes]]:
        rows = self.query("SELECT run_id, name, value FROM vars")
        out: dict[str, list[bytes]] = {}
        for run_id, name, value in rows:
            assert name == "dbPassword"
            out.setdefault(run_id, []).append(bytes(value))
        return out


WATCHER = """\
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("SELECT count(*) FROM meta").fetchall()
print("open", flush=True)
sys.stdin.read()
conn.close()
"""
FLAKY = "globex schema-leak app-flaky-2"
REFUSED = "initech refused"


@pytest.fixture
def scenario(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Scenario]:
    scenario = Scenario(tmp_path, db_url, db_env)
    yield scenario
    scenario.close()


@pytest.mark.empty_store  # `db init` makes the store
def test_the_password_is_never_stored_printed_or_logged_in_plain_text(scenario: Scenario) -> None:
    cli = scenario
    cli("db", "init", "--virtual-clock")
    if cli.sqlite:
        cli.keep_wal()
    cli("deploy", str(cli.project / "app.intent"))
    flaky, refused = cli.create(FLAKY, REFUSED)

    # t=0: globex's first schema attempt set the var and failed: that write is discarded.
    # initech produced its password and waits to retry provisionApp (attempt 2 at +1m).
    cli("worker", "--until-idle")
    assert set(cli.sealed_vars()) == {refused}
    if cli.db is not None:  # SQLite: procflow made a key file beside the store, owner-only
        key_file = Path(f"{cli.db}.key")
        assert key_file.is_file()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    else:  # PostgreSQL: the key is the shared PROCFLOW_SECRET_KEY; without it, refused
        assert not list(cli.project.parent.glob("*.key"))
        refused_ = cli.run("runs", "list", key=False)
        assert refused_.returncode != 0
        assert "PROCFLOW_SECRET_KEY" in refused_.stderr
        assert "Traceback" not in refused_.stderr
    shown = cli.show(flaky)
    assert shown["tokens"][0]["waiting_for"]["kind"] == "retry"
    assert shown["tokens"][0]["step"] == "createSchema"
    assert "***" in shown["tokens"][0]["waiting_for"]["last_error"]
    assert shown["vars"] == {"dbPassword": {"set": False, "value": None}}
    shown = cli.show(refused)
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["step"] == "provisionApp"
    assert shown["vars"] == {"dbPassword": {"set": True, "value": "***"}}
    cli.assert_nowhere("t=0, initech waiting between produce and use")

    # t=30s: globex produced its password too; both wait on provisionApp's retry.
    cli("clock", "advance", "PT30S")
    sealed = cli.sealed_vars()
    assert set(sealed) == {flaky, refused}
    plain = json.dumps(cli.password).encode()
    for (blob,) in sealed.values():
        assert blob[:1] == b"\x01" and len(blob) == 1 + 12 + len(plain) + 16  # AES-GCM sealed
    for run_id in (flaky, refused):
        shown = cli.show(run_id)
        assert shown["status"] == "waiting"
        (token,) = shown["tokens"]
        assert token["step"] == "provisionApp"
        assert token["waiting_for"]["kind"] == "retry"
        assert token["waiting_for"]["last_error"] == "login refused for password *** (attempt 1)"
        assert shown["vars"] == {"dbPassword": {"set": True, "value": "***"}}
    cli("runs", "show", refused)  # the human-readable form too (scanned below)
    cli.assert_nowhere("t=30s, both waiting between produce and use")

    # t=1m30s: one more failed attempt each, still waiting with the var set.
    cli("clock", "advance", "PT1M")
    assert set(cli.sealed_vars()) == {flaky, refused}
    cli.assert_nowhere("t=1m30s, both waiting between produce and use")

    # t=2m30s: globex's third attempt succeeds; clearAfter erases its password in that commit.
    cli("clock", "advance", "PT1M")
    assert set(cli.sealed_vars()) == {refused}
    shown = cli.show(flaky)
    assert shown["status"] == "completed"
    assert shown["vars"] == {"dbPassword": {"set": False, "value": None}}
    history = shown["history"]
    logs = [h["message"] for h in history if h["type"] == "log"]
    assert "schema created; its password is ***" in logs
    assert "logging in with ***" in logs
    failures = [h["message"] for h in history if h["type"] == "attempt.failed"]
    assert failures == [
        "schema service hung up after password *** was set",
        "login refused for password *** (attempt 1)",
        "login refused for password *** (attempt 2)",
    ]
    assert [h["var"] for h in history if h["type"] == "var.cleared"] == ["dbPassword"]
    cli.assert_nowhere("t=2m30s, initech still waiting between produce and use")

    # Later: initech's retries run out; onError writes {error} into the record, masked.
    cli("clock", "advance", "PT5M")
    assert cli.sealed_vars() == {}
    shown = cli.show(refused)
    assert shown["status"] == "completed"
    failed = [h for h in shown["history"] if h["type"] == "step.failed"]
    assert [h["message"] for h in failed] == ["login refused for password *** (attempt 6)"]
    records = json.loads(cli("records", "list", "TenantApplication", "--json"))
    by_title = {r["title"]: r for r in records}
    assert by_title[REFUSED]["failureMessage"] == "login refused for password *** (attempt 6)"
    assert by_title[REFUSED]["ProvisioningStatus"] == 3  # Failed
    assert by_title[FLAKY]["failureMessage"] is None
    cli("runs", "show", refused)
    cli.assert_nowhere("after both runs ended")
    # The check is not vacuous: masked text was printed where the password would have been.
    assert any("***" in output for _, output in cli.outputs)
