"""Retention: ``procflow runs purge --ended-before T [--dry-run]``, ``engine.runs.purge`` and the
periodic job of ``--retain``, on both store backends. Only completed, cancelled and aborted runs
that ended before T go, with every row of theirs in every table; nothing else changes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from opsite import Site
from store_dump import Dump, dump

import procflow
from procflow.errors import UsageError
from procflow.runtime.clock import from_iso
from procflow.runtime.operations.retention import RetentionJob, cutoff, purge
from procflow.store.queries.runrows.purge import RUN_TABLES
from procflow.store.store import Store

HOUR = 3_600_000_000


def timeline(site: Site) -> dict[str, list[str]]:
    """``early``: 2 runs completed at 00:00. At 02:00: ``late`` (a completed run, a run
    completed by an event, a cancelled run), and ``kept`` (a failed run, a run waiting on a
    timer, one on an event, one on a retry). Then the clock moves to 03:00 (nothing runs)."""
    early = site.start("done", 2)
    site.engine.work()
    site.engine.advance("2h")
    late = site.start("done") + site.start("eventful", order="o-1")
    cancelled = site.start("sleepy")
    kept = site.start("broken") + site.start("sleepy") + site.start("eventful", order="o-2")
    kept += site.start("flaky")
    site.engine.work()
    site.engine.cancel(cancelled[0])
    site.engine.send_event("slack.approval", {"message": "o-1", "approved": True})
    site.engine.work()
    with site.engine.store.tx() as tx:
        tx.meta_set("clock_now", str(site.engine.now() + HOUR))
    statuses = {r: site.engine.show(r)["status"] for r in site.all_runs()}
    assert [statuses[r] for r in early + late + cancelled] == ["completed"] * 4 + ["cancelled"]
    assert [statuses[r] for r in kept] == ["failed", "waiting", "waiting", "waiting"]
    return {"early": early, "late": late + cancelled, "kept": kept}


def leftovers(rows: Dump, run_ids: list[str]) -> list[str]:
    """Where any of ``run_ids`` still appears in the store."""
    return [
        f"{table}: {row}"
        for table, table_rows in rows.items()
        for row in table_rows
        if any(run_id in repr(row) for run_id in run_ids)
    ]


def test_a_dry_run_counts_and_changes_nothing(site: Site, db_url: str) -> None:
    runs = timeline(site)
    before = dump(db_url)
    report = purge(site.engine.store, "30m", dry_run=True).to_json()
    assert report == {
        "purged": len(runs["early"] + runs["late"]),
        "dry_run": True,
        "ended_before": "2027-01-01T02:30:00Z",
        "rows": {},
    }
    assert dump(db_url) == before


def test_purge_deletes_ended_runs_before_the_cut_off_with_all_their_rows(
    site: Site, db_url: str
) -> None:
    runs = timeline(site)
    before = dump(db_url)
    assert leftovers(before, runs["late"])  # history, deliveries...
    first = purge(site.engine.store, "2027-01-01T01:00:00Z")
    assert (first.runs, first.rows["runs"]) == (2, 2)
    after_first = dump(db_url)
    assert leftovers(after_first, runs["early"]) == []
    assert leftovers(after_first, runs["late"]) == leftovers(before, runs["late"])
    second = purge(site.engine.store, timedelta(minutes=30), batch=2)  # ended before 02:30
    assert second.runs == 3 and second.rows["deliveries"] == 1 and second.rows["history"] > 0
    after = dump(db_url)
    assert leftovers(after, runs["early"] + runs["late"]) == []
    assert leftovers(after, runs["kept"]) == leftovers(before, runs["kept"])
    assert after["events"] == before["events"]  # an event is not a run's: it stays
    assert {r[0] for r in after["runs"]} == set(runs["kept"])
    assert purge(site.engine.store, "1s").runs == 0  # waiting and failed runs never go


def test_every_table_with_a_run_id_is_purged(db_url: str, backend: str) -> None:
    store = Store(db_url)
    try:
        if backend == "sqlite":
            tables = [
                r[0]
                for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            with_run = {
                t for t in tables
                if any(c[1] == "run_id" for c in store.conn.execute(f"PRAGMA table_info({t})"))
            }  # fmt: skip
        else:
            with_run = {
                r[0] for r in store.conn.execute(
                    "SELECT table_name FROM information_schema.columns "
                    "WHERE column_name='run_id' AND table_schema=current_schema()"
                )
            }  # fmt: skip
    finally:
        store.close()
    assert with_run == set(RUN_TABLES)


def test_rows_of_every_table_go_with_their_run(site: Site, db_url: str) -> None:
    """An ended run with a row in every table (left by whatever wrote them): all go."""
    run_id = site.start("done")[0]
    other = site.start("sleepy")[0]
    site.engine.work()
    with site.engine.store.tx() as tx:
        for run in (run_id, other):
            tx.c.execute(
                "INSERT INTO tokens(run_id, step, path, state, since) "
                "VALUES (?, 'x', 'x', 'waiting', 0)",
                (run,),
            )
            tx.insert_timers([(run, 999, "timer", 0)])
            tx.insert_waits([(998 if run == run_id else 997, run, "event", "t", "[]", 0)])
            tx.apply_scope_ops(run, [("put", "loop", 0, {"n": 1})])
            tx.set_var(run, "v", b"sealed")
            tx.c.execute("INSERT INTO deliveries(event_id, run_id) VALUES ('e1', ?)", (run,))
            tx.c.execute(
                "INSERT INTO tasks(run_id, step, assignee, assignee_kind, actions, fields, "
                "status, created_at) VALUES (?, 's', 'a', 'user', '[]', '[]', 'completed', 0)",
                (run,),
            )
            tx.c.execute(
                "INSERT INTO outbox(channel, recipient, run_id, created_at) "
                "VALUES ('email', 'a@b', ?, 0)",
                (run,),
            )
        tx.meta_set("clock_now", str(site.engine.now() + HOUR))
    report = purge(site.engine.store, "30m")
    assert report.runs == 1
    assert {t: n for t, n in report.rows.items() if n} == dict.fromkeys(
        ("runs", *RUN_TABLES), 1
    ) | {"history": report.rows["history"]}
    rows = dump(db_url)
    assert leftovers(rows, [run_id]) == []
    assert all(any(other in repr(r) for r in rows[t]) for t in RUN_TABLES)


# --- the cut-off ----------------------------------------------------------------------------


def test_the_cut_off_is_a_timestamp_or_a_duration_back_from_now() -> None:
    now = from_iso("2027-01-10T00:00:00Z")
    assert cutoff("2027-01-01T00:00:00Z", now) == from_iso("2027-01-01T00:00:00Z")
    assert cutoff("2027-01-01T01:00:00+01:00", now) == from_iso("2027-01-01T00:00:00Z")
    assert cutoff("2027-01-02", now) == from_iso("2027-01-02T00:00:00Z")  # a date: UTC midnight
    assert cutoff("2d", now) == from_iso("2027-01-08T00:00:00Z")
    assert cutoff("P1DT12H", now) == from_iso("2027-01-08T12:00:00Z")
    assert cutoff(timedelta(hours=1), now) == from_iso("2027-01-09T23:00:00Z")


@pytest.mark.parametrize(
    "bad", ["", "soon", "2027-13-01T00:00:00Z", "2027-01-01T00:00:00", "-1d", "1x"]
)
def test_a_bad_cut_off_is_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        cutoff(bad, 0)


# --- the faces ------------------------------------------------------------------------------


def cli(
    db_url: str, env: dict[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "procflow.cli", "runs", "purge", "--db", db_url, *args],
        env={"PATH": "/usr/bin:/bin", **env}, cwd=cwd, text=True, capture_output=True,
        timeout=60, check=False,
    )  # fmt: skip


def test_the_command_purges_and_says_how_many(
    site: Site, db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    runs = timeline(site)
    before = dump(db_url)
    dry = cli(db_url, db_env, tmp_path, "--ended-before", "30m", "--dry-run")
    assert (dry.returncode, dry.stdout) == (
        0, "would purge 5 runs that ended before 2027-01-01T02:30:00Z\n"
    )  # fmt: skip
    assert dump(db_url) == before
    done = cli(db_url, db_env, tmp_path, "--ended-before", "30m", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert (report["purged"], report["dry_run"], report["rows"]["runs"]) == (5, False, 5)
    assert leftovers(dump(db_url), runs["early"] + runs["late"]) == []
    again = cli(db_url, db_env, tmp_path, "--ended-before", "30m")
    assert again.stdout == "purged 0 runs that ended before 2027-01-01T02:30:00Z\n"


@pytest.mark.parametrize("args", [["--ended-before", "yesterday"], [], ["--ended-before", "-2d"]])
def test_the_command_refuses_a_bad_cut_off_in_one_line(
    site: Site, db_url: str, db_env: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    timeline(site)
    before = dump(db_url)
    done = cli(db_url, db_env, tmp_path, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert dump(db_url) == before


def test_the_python_api_purges_the_same_way(
    site: Site, db_url: str, db_env: dict[str, str]
) -> None:
    runs = timeline(site)
    with procflow.Engine(db_url, environ=db_env) as engine:
        dry = engine.runs.purge(ended_before="30m", dry_run=True)
        assert (dry["purged"], dry["dry_run"]) == (5, True)
        done = engine.runs.purge(ended_before=timedelta(minutes=30))
    assert done["purged"] == 5
    assert leftovers(dump(db_url), runs["early"] + runs["late"]) == []


def test_the_retention_job_purges_what_ended_longer_ago_than_kept(site: Site, db_url: str) -> None:
    runs = timeline(site)
    job = RetentionJob(db_url, timedelta(hours=2), every=3600, first=0)
    assert job.run_once().runs == 2  # ended before 01:00
    job.start()
    job.stop()
    assert leftovers(dump(db_url), runs["early"]) == []
    assert leftovers(dump(db_url), runs["late"])


def test_a_bad_retain_is_refused_before_the_worker_starts(
    db_url: str, db_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "worker", "--until-idle", "--db", db_url,
         "--retain", "0d"],
        env={"PATH": "/usr/bin:/bin", **db_env}, cwd=tmp_path, text=True, capture_output=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--retain must be longer than zero" in done.stderr


PURGE_QUERIES = {
    "select": "SELECT id FROM runs WHERE status IN ('aborted','cancelled','completed') "
    "AND started_at < 5 AND ended_at < 5 ORDER BY started_at, id LIMIT 500",
    **{table: f"DELETE FROM {table} WHERE run_id IN ('a','b')" for table in RUN_TABLES},
}


@pytest.mark.parametrize("query", sorted(PURGE_QUERIES))
def test_each_purge_statement_reads_an_index(query: str, db_url: str, backend: str) -> None:
    store = Store(db_url)
    try:
        if backend == "sqlite":
            plan = [
                str(r[-1]) for r in store.conn.execute(f"EXPLAIN QUERY PLAN {PURGE_QUERIES[query]}")
            ]
            reads = [s for s in plan if s.startswith(("SCAN", "SEARCH"))]
            assert reads and all(s.startswith("SEARCH") for s in reads), plan
        else:
            store.conn.execute("SET enable_seqscan = off")  # a tiny table: see if an index can
            rows = store.conn.execute(f"EXPLAIN {PURGE_QUERIES[query]}").fetchall()
            plan = [str(r[0]) for r in rows]
            assert any("Index" in s for s in plan) and not any("Seq Scan" in s for s in plan), plan
    finally:
        store.close()
