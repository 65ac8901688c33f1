"""The statements an idle worker sends each time it looks for work read indexes, never a table,
however many timers and schedule slots are armed and runs wait: on PostgreSQL under the generic
plan a prepared statement ends up with (psycopg prepares a statement on its fifth execution), and
without the bitmap scans that never mark the index entries of dead row versions as dead.

Found by ``bench/http.py``: with 30,000 runs parked, ``due_at<=? LIMIT 1`` scanned every timer
on every claim (4.7 ms), and the claim's ``lease_until IS NULL OR lease_until<?`` read 30,000
dead entries of the claimable index each time (6 ms).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine

FLOW = """\
flow: later
steps:
  - pause: { wait: { for: 30d } }
"""
TIMERS = 3_000
TABLES = {"runs", "timers", "tokens", "waits", "history", "scopes", "schedules"}


class Recording:
    """The store's connection, recording every statement it is given."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sent: list[tuple[str, Sequence[Any]]] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self.sent.append((sql, params))
        return self.conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


@pytest.fixture
def engine(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    eng = Engine.virtual(db_url, environ=dict(db_env))
    path = tmp_path / "later.flow.yaml"
    path.write_text(FLOW)
    eng.deploy(str(path))
    run_id = eng.start_flow("later", {})
    eng.work()
    conn = eng.store.conn
    with eng.store.tx():  # many armed timers, all in the future, like the one of the run
        conn.execute(
            "INSERT INTO timers(run_id, token_id, kind, due_at) "
            "SELECT run_id, token_id, kind, due_at + ? FROM timers WHERE run_id=?",
            (1, run_id),
        )
        for _ in range(TIMERS.bit_length()):
            conn.execute(
                "INSERT INTO timers(run_id, token_id, kind, due_at) "
                "SELECT run_id, token_id, kind, due_at + 1 FROM timers"
            )
        # and many runs that wait, like the one that armed it.
        cur = conn.execute("SELECT * FROM runs WHERE id=?", (run_id,))
        columns = [d[0] for d in cur.description]
        row = list(cur.fetchone())
        at = columns.index("id")
        copies = [[*row[:at], f"{n:06d}{run_id[6:]}", *row[at + 1 :]] for n in range(TIMERS)]
        conn.executemany(
            f"INSERT INTO runs({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            copies,
        )
        # and as many armed schedules, none due: looking for work probes their index too.
        later = eng.now() + 3_600_000_000
        conn.executemany(
            "INSERT INTO schedules(key, flow, name, spec, plan, next_slot, due_at) "
            "VALUES (?, ?, ?, '{}', '{}', ?, ?)",
            [(f"f{n}", f"f{n}", f"f{n}", later + n, later + n) for n in range(TIMERS)],
        )
    conn.execute("ANALYZE")
    try:
        yield eng
    finally:
        eng.close()


def literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


def plan(engine: Engine, sql: str, params: Sequence[Any]) -> str:
    conn = engine.store.conn
    if engine.store.dialect == "sqlite":
        return "\n".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    numbered = sql
    for n in range(1, len(params) + 1):
        numbered = numbered.replace("?", f"${n}", 1)
    conn.execute(f"PREPARE looked AS {numbered}")
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        args = f"({', '.join(literal(p) for p in params)})" if params else ""
        shown = conn.execute(f"EXPLAIN EXECUTE looked{args}").fetchall()
    finally:
        conn.execute("DEALLOCATE looked")
        conn.execute("RESET plan_cache_mode")
    return "\n".join(str(r[0]) for r in shown)


def test_looking_for_work_reads_only_indexes(engine: Engine) -> None:
    reader = engine.store.read()
    recording = Recording(reader.c)
    reader.c = recording
    try:
        assert engine.loop.work_batch() == 0  # nothing due, nothing ready
    finally:
        reader.c = recording.conn
    # (The virtual clock's row of meta, a table of a few rows, is read too.)
    looked = [
        (sql, p) for sql, p in recording.sent
        if "timers" in sql or "runs" in sql or "schedules" in sql
    ]  # fmt: skip
    assert len(looked) >= 2, looked  # the timers, then the runs
    for sql, params in looked:
        with engine.store.tx():  # nothing is run, only explained
            shown = plan(engine, sql, params)
        assert "Seq Scan" not in shown and "Bitmap" not in shown, (sql, shown)
        # SQLite: a SCAN of a table that is not along an index (a CTE's own rows are fine).
        tables = [
            line for line in shown.splitlines()
            if line.split(" ")[:1] == ["SCAN"] and line.split(" ")[1] in TABLES
            and "INDEX" not in line
        ]  # fmt: skip
        assert not tables, (sql, shown)
