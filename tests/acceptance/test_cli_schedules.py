"""`procflow schedules list|show|pause|resume|trigger|backfill` on both store backends: each
command's text and `--json` output (the shapes of `GET /schedules...` and `engine.schedules`),
and its refusals: one `error:` line, exit 2, nothing changed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_inprocess import Outcome, dump, invoke
from projects import NIGHTLY, TICK

from procflow.runtime.engine import Engine

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Store:
    url: str

    def __call__(self, *args: str, code: int = 0) -> Outcome:
        done = invoke(*args, "--db", self.url)
        assert done.code == code, (args, done.code, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def refused(self, *args: str) -> str:
        """The one `error:` line (exit 2) of a refused command, which changed nothing."""
        before = dump(self.url)
        done = self(*args, code=2)
        assert done.stdout == "" and not done.problems(), done.report(done.problems())
        assert dump(self.url) == before
        return done.stderr.removesuffix("\n")

    def engine(self) -> Engine:
        return Engine(self.url, create=False)


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Iterator[Store]:
    """A virtual-clock store (at 2027-01-01T00:00:00Z) with both flows deployed."""
    engine = Engine.virtual(db_url)
    try:
        for name, text in (("nightly", NIGHTLY), ("tick", TICK)):
            (tmp_path / f"{name}.flow.yaml").write_text(text)
            engine.deploy(str(tmp_path / f"{name}.flow.yaml"))
    finally:
        engine.close()
    yield Store(db_url)


def test_list_prints_a_line_per_schedule_and_pages(store: Store) -> None:
    lines = store("schedules", "list").stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["nightly/early", "nightly/late", "tick"]
    tick = lines[2]
    for part in ("every 15m", "active", "next 2027-01-01T00:15:00Z, 2027-01-01T00:30:00Z, "
                 "2027-01-01T00:45:00Z", "last —", "started 0 skipped 0 missed 0"):  # fmt: skip
        assert part in tick, (part, tick)
    assert "0 18 * * * Europe/Berlin" in lines[1]
    listed = store.json("schedules", "list")
    assert listed == [store.json("schedules", "show", n) for n in ("nightly/early",
                      "nightly/late", "tick")]  # fmt: skip
    assert set(listed[0]) == {
        "name", "flow", "schedule", "spec", "state", "note", "overlap", "missed", "next",
        "due_at", "buffered", "last", "error", "counts", "kind",
    }  # fmt: skip
    first = store("schedules", "list", "--limit", "2")
    *shown, more = first.stdout.splitlines()
    assert len(shown) == 2 and more.startswith("-- more schedules: --cursor ")
    rest = store("schedules", "list", "--cursor", more.split("--cursor ")[1])
    assert [line.split()[0] for line in rest.stdout.splitlines()] == ["tick"]
    paged = store("schedules", "list", "--limit", "2", "--json")
    assert len(json.loads(paged.stdout)) == 2 and paged.stderr.startswith("-- more schedules: ")


def test_list_on_a_store_without_schedules(db_url: str) -> None:
    Engine.virtual(db_url).close()
    done = invoke("schedules", "list", "--db", db_url)
    assert (done.code, done.stdout, done.stderr) == (0, "no schedules\n", "")


def test_show_prints_the_next_slots(store: Store) -> None:
    lines = store("schedules", "show", "nightly/late", "--next", "2").stdout.splitlines()
    assert lines[0].startswith("nightly/late ") and "0 18 * * * Europe/Berlin" in lines[0]
    assert lines[1:] == ["  next 2027-01-01T17:00:00Z", "  next 2027-01-02T17:00:00Z"]
    shown = store.json("schedules", "show", "tick", "--next", "5")
    assert (shown["name"], shown["flow"], shown["schedule"]) == ("tick", "tick", "tick")
    assert len(shown["next"]) == 5 and shown["overlap"] == "skip"


def test_show_refuses_an_unknown_schedule_and_a_bad_next(store: Store) -> None:
    assert store.refused("schedules", "show", "nightly/x") == (
        "error: no schedule [nightly/x]; [nightly] has nightly/early, nightly/late"
    )
    assert store.refused("schedules", "show", "nosuch") == "error: no schedule [nosuch]"
    assert store.refused("schedules", "show", "tick", "--next", "0") == (
        "error: Invalid value for '--next': 0 is not in the range 1<=x<=1000. "
        "(see `procflow schedules show --help`)"
    )


def test_pause_with_a_note_and_resume(store: Store) -> None:
    assert store("schedules", "pause", "tick", "--note", "db upgrade").stdout == "paused tick\n"
    line = store("schedules", "list").stdout.splitlines()[2]
    assert "paused (db upgrade)" in line and "next —" in line
    paused = store.json("schedules", "pause", "nightly/early")
    assert (paused["state"], paused["note"], paused["next"]) == ("paused", None, [])
    assert store("schedules", "resume", "tick").stdout == (
        "resumed tick: next 2027-01-01T00:15:00Z\n"
    )
    resumed = store.json("schedules", "resume", "nightly/early")
    assert (resumed["state"], resumed["next"][0]) == ("active", "2027-01-01T01:00:00Z")


def test_pause_and_resume_refusals(store: Store) -> None:
    assert store.refused("schedules", "pause", "tick", "--note", "two\nlines") == (
        "error: the note must be one line of text, without control characters"
    )
    assert store.refused("schedules", "pause", "tick", "--note", "x" * 501) == (
        "error: the note holds 501 characters; at most 500 are kept"
    )
    assert store.refused("schedules", "resume", "nightly") == (
        "error: no schedule [nightly]; [nightly] has nightly/early, nightly/late"
    )


def test_trigger_prints_the_run_or_why_none_started(store: Store) -> None:
    run_id = store("schedules", "trigger", "tick").stdout.strip()
    assert RUN_ID.match(run_id)
    shown = store.json("runs", "show", run_id)
    assert shown["schedule"] == {"name": "tick", "slot": "2027-01-01T00:00:00Z"}
    store("clock", "advance", "1m")
    assert store("schedules", "trigger", "tick").stdout == (
        "started nothing: skipped: its run is still open (overlap)\n"
    )
    store("clock", "advance", "1m")
    report = store.json("schedules", "trigger", "tick", "--overlap", "allow")
    assert set(report) == {"name", "started", "skipped", "buffered"}
    assert len(report["started"]) == 1 and report["skipped"] == 0


def test_trigger_refusals(store: Store) -> None:
    assert store.refused("schedules", "trigger", "tick", "--overlap", "always").startswith(
        "error: Invalid value for '--overlap': 'always' is not 'allow'."
    )
    store("definitions", "disable", "tick")
    assert store.refused("schedules", "trigger", "tick") == (
        "error: [tick] is disabled; enable it to start runs"
    )


def test_backfill_lists_starts_and_then_finds_each_slot(store: Store) -> None:
    window = ("--from", "2026-12-31T21:00:00Z", "--to", "2026-12-31T23:00:00Z")
    dry = store("schedules", "backfill", "nightly/early", *window, "--dry-run")
    slots = ["2026-12-31T21:00:00Z", "2026-12-31T22:00:00Z", "2026-12-31T23:00:00Z"]
    assert dry.stdout.splitlines() == [f"{s}  would start" for s in slots]
    assert dry.stderr == "3 slots, 3 would start a run (dry run)\n"
    done = store("schedules", "backfill", "nightly/early", *window)
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [[s, "started"] for s in slots]
    runs = [line.split()[2] for line in lines]
    assert all(RUN_ID.match(r) for r in runs) and done.stderr == "3 slots, 3 runs started\n"
    again = store("schedules", "backfill", "nightly/early", *window)
    pairs = list(zip(slots, runs, strict=True))
    assert again.stdout.splitlines() == [f"{s}  has run  {r}" for s, r in pairs]
    assert again.stderr == "3 slots, 0 runs started\n"
    report = store.json("schedules", "backfill", "nightly/early", *window, "--dry-run")
    assert report == {
        "name": "nightly/early", "dry_run": True,
        "slots": [{"slot": s, "run_id": r, "started": False} for s, r in pairs],
    }  # fmt: skip
    dated = store.json("schedules", "backfill", "nightly/early", "--from", "2026-12-31",
                       "--to", "2026-12-31T02:00:00Z", "--dry-run")  # fmt: skip
    assert [s["slot"] for s in dated["slots"]] == [
        "2026-12-31T00:00:00Z", "2026-12-31T01:00:00Z", "2026-12-31T02:00:00Z",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--from", "yesterday", "--to", "2027-01-01T00:00:00Z"),
         "error: backfill from: [yesterday] is not an ISO-8601 timestamp (e.g. "
         "2027-01-10T09:00:00Z or 2027-01-10)"),
        (("--from", "2026-12-31T00:00:00Z", "--to", "2026-12-31T10:00:00"),
         "error: backfill to: timestamp [2026-12-31T10:00:00] has no time zone; add Z (UTC) or "
         "an offset such as +02:00"),
        (("--from", "2026-12-31T10:00:00Z", "--to", "2026-12-31T08:00:00Z"),
         "error: the backfill window ends (2026-12-31T08:00:00Z) before it begins "
         "(2026-12-31T10:00:00Z)"),
        (("--from", "2026-12-31T10:00:00Z", "--to", "2027-01-02T00:00:00Z"),
         "error: the backfill window ends after the current instant (2027-01-01T00:00:00Z)"),
        (("--from", "2026-01-01", "--to", "2027-01-01"),
         "error: the window holds 8,761 slots of [nightly/early], more than the 1,000 one "
         "backfill starts; backfill a shorter one"),
        (("--from", "2026-12-31",),
         "error: Missing option '--to'. (see `procflow schedules backfill --help`)"),
    ],
)  # fmt: skip
def test_backfill_refusals(store: Store, args: tuple[str, ...], error: str) -> None:
    assert store.refused("schedules", "backfill", "nightly/early", *args) == error


def test_backfill_of_an_unknown_schedule(store: Store) -> None:
    assert (
        store.refused(
            "schedules", "backfill", "nosuch", "--from", "2026-12-31", "--to", "2027-01-01"
        )
        == "error: no schedule [nosuch]"
    )


def test_the_list_help_says_it_is_by_name() -> None:
    done = invoke("schedules", "list", "--help")
    assert done.code == 0 and "How many items, by name (default 50" in done.stdout


BUFFERED = """\
flow: buffered
trigger:
  schedule: { every: 1h, overlap: buffer_one }
steps:
  - hold: { wait: { for: 90m } }
"""


def test_show_says_what_slot_waits_and_why_the_last_one_started_no_run(
    store: Store, tmp_path: Path
) -> None:
    (tmp_path / "buffered.flow.yaml").write_text(BUFFERED)
    store("deploy", str(tmp_path / "buffered.flow.yaml"))
    store("schedules", "trigger", "buffered")  # a run, open for 90 minutes
    store("clock", "advance", "1m")
    assert store("schedules", "trigger", "buffered").stdout == (
        "started nothing: buffered until its open run ends (overlap)\n"
    )
    lines = store("schedules", "show", "buffered").stdout.splitlines()
    assert "  buffered 2027-01-01T00:01:00Z (starts when its open run ends)" in lines
    engine = store.engine()
    try:  # as a slot records it when its run cannot start (its flow no longer compiles, say)
        with engine.store.tx() as tx:
            row = tx.schedule("tick", lock=True)
            assert row is not None
            row.error = "flow [tick] has no version that compiles"
            tx.save_schedule(row)
    finally:
        engine.close()
    shown = store("schedules", "show", "tick").stdout.splitlines()
    assert shown[-1] == "  error flow [tick] has no version that compiles"
    assert store.json("schedules", "show", "tick")["error"] == (
        "flow [tick] has no version that compiles"
    )
