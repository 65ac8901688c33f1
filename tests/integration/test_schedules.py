"""Scheduled starts on both store backends, on the virtual clock: a slot starts one run and arms
the next; overlap and missed slots; deploys, disable and pause; trigger and backfill; exactly one
run per slot when two engines fire it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from projects import write

from procflow.errors import NotFoundError, NotPermittedError, StateConflictError, UsageError
from procflow.runtime.clock import from_iso, iso
from procflow.runtime.engine import Engine

EPOCH = "2027-01-01T00:00:00Z"  # the virtual clock's start

HOURLY = """\
flow: hourly
trigger:
  schedule: {{ cron: "0 * * * *"{extra} }}
inputs:
  region: {{ type: string, default: eu }}
steps:
  - report: {{ set: {{ at: "{{{{ run.scheduled_at }}}}", region: "{{{{ region }}}}" }} }}
"""

SLOW = """\
flow: slow
trigger:
  schedule: {{ every: 1h, overlap: {overlap} }}
steps:
  - hold: {{ wait: {{ for: 90m }} }}
"""


class Site:
    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        self.engine = Engine.virtual(db_url)

    def deploy(self, name: str, text: str) -> None:
        self.engine.deploy(write(self.root / f"{name}.flow.yaml", text))

    def runs(self, name: str) -> list[dict[str, Any]]:
        rows = sorted(self.engine.list_runs(name=name), key=lambda r: r.started_at)
        return [self.engine.show(r.id) for r in rows]

    def slots(self, name: str) -> list[str]:
        return [r["schedule"]["slot"] for r in self.runs(name)]

    def schedule(self, key: str) -> dict[str, Any]:
        return self.engine.schedules.show(key)


@pytest.fixture
def site(tmp_path: Path, db_url: str) -> Iterator[Site]:
    made = Site(tmp_path, db_url)
    yield made
    made.engine.close()


def test_a_deploy_arms_the_first_slot_and_advancing_starts_one_run_per_slot(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    shown = site.schedule("hourly")
    assert shown["next"] == ["2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z", "2027-01-01T03:00:00Z"]
    assert (shown["state"], shown["spec"]) == ("active", "0 * * * * UTC")
    site.engine.advance("P1D")
    runs = site.runs("hourly")
    assert len(runs) == 24
    assert [r["schedule"]["slot"] for r in runs[:2]] == [
        "2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z",
    ]  # fmt: skip
    assert {r["status"] for r in runs} == {"completed"}
    assert runs[0]["bindings"]["report"] == {"at": "2027-01-01T01:00:00Z", "region": "eu"}
    assert site.schedule("hourly")["counts"] == {
        "started": 24, "skipped": 0, "missed": 0, "buffered": 0,
    }  # fmt: skip


def test_run_scheduled_at_is_null_in_a_run_started_by_hand(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    run_id = site.engine.start_flow("hourly", {})
    site.engine.work()
    shown = site.engine.show(run_id)
    assert shown["bindings"]["report"]["at"] is None
    assert shown.get("schedule") is None


@pytest.mark.parametrize(
    ("overlap", "started", "skipped", "buffered"),
    # buffer_one: 02:00 waits for the 01:00 run (ends 02:30), 03:00 for that one (ends 04:00);
    # 04:00 arrives while 03:00 waits, and is skipped
    [("skip", 2, 2, 0), ("allow", 4, 0, 0), ("buffer_one", 3, 1, 2)],
)
def test_overlap_decides_while_a_run_is_open(
    site: Site, overlap: str, started: int, skipped: int, buffered: int
) -> None:
    """Each run holds 90 minutes; slots come every hour, for four hours."""
    site.deploy("slow", SLOW.format(overlap=overlap))
    site.engine.advance("PT4H")
    counts = site.schedule("slow")["counts"]
    assert (counts["started"], counts["skipped"], counts["buffered"]) == (
        started, skipped, buffered,
    )  # fmt: skip


def test_cancel_previous_cancels_the_open_run_then_starts(site: Site) -> None:
    site.deploy("slow", SLOW.format(overlap="cancel_previous"))
    site.engine.advance("PT2H")
    first, second = site.runs("slow")
    assert first["status"] == "cancelled" and second["status"] == "waiting"
    cancelled = [h for h in first["history"] if h["type"] == "run.cancelled"]
    assert cancelled[0]["reason"] == "cancelled by its schedule [slow]: the next slot started"


def test_a_buffered_slot_starts_when_the_open_run_ends(site: Site) -> None:
    site.deploy("slow", SLOW.format(overlap="buffer_one"))
    site.engine.advance("PT2H")  # 01:00 starts, 02:00 buffered
    assert len(site.runs("slow")) == 1
    site.engine.advance("PT30M")  # the 01:00 run ends at 02:30: the buffered slot starts
    runs = site.runs("slow")
    assert [r["schedule"]["slot"] for r in runs] == [
        "2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z",
    ]  # fmt: skip
    assert runs[1]["started_at"] == "2027-01-01T02:30:00Z"


def test_cancelling_the_open_run_releases_a_buffered_slot(site: Site) -> None:
    site.deploy("slow", SLOW.format(overlap="buffer_one"))
    site.engine.advance("PT2H")
    [first] = site.runs("slow")
    site.engine.cancel(first["id"])
    assert len(site.runs("slow")) == 2


def test_disable_fires_nothing_and_enable_arms_from_now(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    site.engine.set_enabled("hourly", False)
    assert site.schedule("hourly")["state"] == "disabled"
    site.engine.advance("PT5H")
    assert site.runs("hourly") == []
    assert site.schedule("hourly")["counts"]["missed"] == 0
    site.engine.set_enabled("hourly", True)
    assert site.schedule("hourly")["next"][0] == "2027-01-01T06:00:00Z"


def test_pause_and_resume(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    paused = site.engine.schedules.pause("hourly", "maintenance")
    assert (paused["state"], paused["note"], paused["next"]) == ("paused", "maintenance", [])
    site.engine.advance("PT3H")
    assert site.runs("hourly") == []
    resumed = site.engine.schedules.resume("hourly")
    assert resumed["next"][0] == "2027-01-01T04:00:00Z"


def test_a_deploy_that_changes_a_schedule_rearms_it_and_one_that_removes_it_stops_it(
    site: Site,
) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    site.engine.advance("PT90M")
    site.deploy("hourly", HOURLY.format(extra="").replace('"0 * * * *"', '"*/15 * * * *"'))
    assert site.schedule("hourly")["next"][0] == "2027-01-01T01:45:00Z"
    site.deploy("hourly", "flow: hourly\nsteps:\n  - a: { set: { b: 1 } }\n")
    with pytest.raises(NotFoundError, match=r"no schedule \[hourly\]"):
        site.schedule("hourly")


def test_missed_slots_after_downtime_start_the_latest_only(site: Site) -> None:
    """A real-clock store whose worker was down: the due slot fires late."""
    site.deploy("hourly", HOURLY.format(extra=", missed: latest"))
    _jump(site, "2027-01-01T05:30:00Z")
    site.engine.work()
    assert site.slots("hourly") == ["2027-01-01T05:00:00Z"]
    assert site.schedule("hourly")["counts"]["missed"] == 4
    assert site.schedule("hourly")["next"][0] == "2027-01-01T06:00:00Z"


@pytest.mark.parametrize(("missed", "runs", "counted"), [("all", 5, 0), ("none", 0, 5)])
def test_missed_all_and_none(site: Site, missed: str, runs: int, counted: int) -> None:
    site.deploy("hourly", HOURLY.format(extra=f", missed: {missed}"))
    _jump(site, "2027-01-01T05:30:00Z")
    site.engine.work()
    assert len(site.runs("hourly")) == runs
    assert site.schedule("hourly")["counts"]["missed"] == counted


def _jump(site: Site, to: str) -> None:
    """Move the store's clock without running what falls due on the way (as a worker that was
    down for that long would find it)."""
    with site.engine.store.tx() as tx:
        tx.meta_set("clock_now", str(from_iso(to)))


def test_trigger_starts_a_run_now_and_respects_overlap(site: Site) -> None:
    site.deploy("slow", SLOW.format(overlap="skip"))
    report = site.engine.schedules.trigger("slow")
    assert len(report["started"]) == 1
    again = site.engine.schedules.trigger("slow")
    assert (again["started"], again["skipped"]) == ([], 1)
    forced = site.engine.schedules.trigger("slow", allow_overlap=True)
    assert len(forced["started"]) == 1
    assert [r["schedule"]["slot"] for r in site.runs("slow")] == [EPOCH, EPOCH]


def test_backfill_twice_starts_each_slot_once(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    _jump(site, "2027-01-02T00:00:00Z")
    site.engine.schedules.pause("hourly")
    window = (from_iso("2027-01-01T03:00:00Z"), from_iso("2027-01-01T06:00:00Z"))
    dry = site.engine.schedules.backfill("hourly", *window, dry_run=True)
    assert [s["slot"] for s in dry["slots"]] == [
        iso(from_iso(f"2027-01-01T0{h}:00:00Z")) for h in (3, 4, 5, 6)
    ]
    assert site.runs("hourly") == []
    first = site.engine.schedules.backfill("hourly", *window)
    assert [s["started"] for s in first["slots"]] == [True] * 4
    second = site.engine.schedules.backfill("hourly", *window)
    assert [s["started"] for s in second["slots"]] == [False] * 4
    assert len(site.runs("hourly")) == 4


def test_bad_backfill_windows_and_names_are_refused(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    _jump(site, "2028-01-01T00:00:00Z")
    a, b = from_iso("2027-01-01T03:00:00Z"), from_iso("2027-01-01T01:00:00Z")
    with pytest.raises(UsageError, match=r"ends .* before it begins"):
        site.engine.schedules.backfill("hourly", a, b)
    with pytest.raises(
        UsageError, match=r"^the window holds 8,016 slots of \[hourly\], more than "
    ):
        site.engine.schedules.backfill("hourly", b, from_iso("2027-12-01T00:00:00Z"))
    with pytest.raises(NotFoundError, match=r"no schedule \[hourly/x\]; \[hourly\] has hourly"):
        site.engine.schedules.trigger("hourly/x")


def test_the_role_table_guards_schedules(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    from procflow.runtime.data.identity import Actor

    operator, nobody = Actor("otto", frozenset({"operator"})), Actor("vic")
    with pytest.raises(NotPermittedError, match="may not trigger schedules"):
        site.engine.schedules.trigger("hourly", user=nobody)
    with pytest.raises(NotPermittedError, match="may not pause or resume schedules"):
        site.engine.schedules.pause("hourly", user=operator)
    assert site.engine.schedules.trigger("hourly", user=operator)["started"]


def test_two_engines_firing_one_slot_start_one_run(site: Site, db_url: str) -> None:
    """Both read the row while the 01:00 slot was armed; each fires it; the start key lets one
    run in (overlap allow: an open run would not stop the second)."""
    site.deploy("hourly", HOURLY.format(extra=", overlap: allow"))
    other = Engine(db_url)
    try:
        _jump(site, "2027-01-01T01:00:00Z")
        read = site.engine.store.read()
        first, second = read.schedule("hourly"), read.schedule("hourly")
        assert first is not None and second is not None
        from procflow.runtime.schedules.firing import fire_slot

        with site.engine.store.tx() as tx:
            assert len(fire_slot(site.engine, tx, first, site.engine.now()).started) == 1
        with other.store.tx() as tx:
            assert fire_slot(other, tx, second, other.now()).started == []
    finally:
        other.close()
    assert site.slots("hourly") == ["2027-01-01T01:00:00Z"]


DAILY = """\
flow: daily
trigger:
  schedule: {{ cron: "{cron}", timezone: {zone} }}
steps:
  - s: {{ set: {{ at: "{{{{ run.scheduled_at }}}}" }} }}
"""


@pytest.mark.parametrize(
    ("zone", "cron", "before", "slots"),
    [
        # spring: 02:30 does not exist; it fires once, at the first instant after the gap
        ("Europe/Berlin", "30 2 * * *", "2027-03-27T12:00:00Z",
         ["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]),
        ("America/New_York", "30 2 * * *", "2027-03-13T12:00:00Z",
         ["2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"]),
        # autumn: 02:30 (Berlin) and 01:30 (New York) happen twice; each fires once, the first
        ("Europe/Berlin", "30 2 * * *", "2027-10-30T12:00:00Z",
         ["2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"]),
        ("America/New_York", "30 1 * * *", "2027-11-06T12:00:00Z",
         ["2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"]),
    ],
)  # fmt: skip
def test_daylight_saving_days_fire_each_local_time_once(
    site: Site, zone: str, cron: str, before: str, slots: list[str]
) -> None:
    _jump(site, before)
    site.deploy("daily", DAILY.format(cron=cron, zone=zone))
    site.engine.advance("P2D")
    assert site.slots("daily") == slots
    assert [r["bindings"]["s"]["at"] for r in site.runs("daily")] == slots


def test_a_minute_level_cron_keeps_real_time_through_the_autumn_repeat(site: Site) -> None:
    _jump(site, "2027-10-30T23:50:00Z")  # 01:50 in Berlin; the clocks go back at 01:00Z
    site.deploy("daily", DAILY.format(cron="*/30 * * * *", zone="Europe/Berlin"))
    site.engine.advance("PT2H")
    assert site.slots("daily") == [
        "2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z", "2027-10-31T01:00:00Z",
        "2027-10-31T01:30:00Z",
    ]  # fmt: skip


def test_a_backfill_keeps_the_runs_open_before_it_for_the_overlap_rule(site: Site) -> None:
    """The window's runs join the schedule's open runs; they never replace them."""
    site.deploy("slow", SLOW.format(overlap="skip"))
    site.engine.advance("PT1H")  # 01:00 starts a run that holds until 02:30
    (first,) = site.runs("slow")
    window = site.engine.schedules.backfill("slow", "2026-12-31T23:00:00Z", "2026-12-31T23:00:00Z")
    site.engine.cancel(window["slots"][0]["run_id"])  # the backfilled run ends at once
    site.engine.advance("PT1H")  # 02:00: the 01:00 run is still open, so the slot is skipped
    assert [r["id"] for r in site.runs("slow") if r["status"] == "waiting"] == [first["id"]]
    assert site.schedule("slow")["counts"]["skipped"] == 1


def test_a_backfill_keeps_the_last_slot_the_newest(site: Site) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    site.engine.advance("PT5H")  # 01:00 … 05:00 started
    window = (from_iso("2027-01-01T00:00:00Z"), from_iso("2027-01-01T00:00:00Z"))
    site.engine.schedules.backfill("hourly", *window)
    assert site.schedule("hourly")["last"]["slot"] == "2027-01-01T05:00:00Z"


def test_a_jittered_slot_is_not_late_for_its_jitter(site: Site) -> None:
    """jitter 10m, grace 1m: a slot due up to 10 minutes after its instant is on time."""
    site.deploy("hourly", HOURLY.format(extra=", jitter: 10m, missed: none"))
    site.engine.advance("PT5H10M")  # the 05:00 slot is due by 05:10
    assert len(site.runs("hourly")) == 5
    assert site.schedule("hourly")["counts"]["missed"] == 0
    lags = [
        from_iso(r["started_at"]) - from_iso(r["schedule"]["slot"]) for r in site.runs("hourly")
    ]
    assert all(0 <= lag < 600_000_000 for lag in lags)  # within the jitter, never past the next


def test_a_long_downtime_starts_the_newest_slot_and_counts_every_missed_one(site: Site) -> None:
    site.deploy("minutely", MINUTELY)
    _jump(site, "2027-01-02T00:00:30Z")  # a day and a half-minute later
    site.engine.work()
    assert site.slots("minutely") == ["2027-01-02T00:00:00Z"]
    assert site.schedule("minutely")["counts"]["missed"] == 1439


def test_missed_all_starts_a_thousand_and_counts_the_rest(site: Site) -> None:
    site.deploy("minutely", MINUTELY.replace("every: 1m", "every: 1m, missed: all, overlap: allow"))
    _jump(site, "2027-01-02T00:00:30Z")
    site.engine.work()
    slots = sorted(site.slots("minutely"))  # all started at one instant
    assert (len(slots), slots[0]) == (1000, "2027-01-01T00:01:00Z")
    assert site.schedule("minutely")["counts"]["missed"] == 440


def test_pausing_or_disabling_drops_a_buffered_slot(site: Site) -> None:
    site.deploy("slow", SLOW.format(overlap="buffer_one"))
    site.engine.advance("PT2H")  # 02:00 waits for the 01:00 run
    assert site.schedule("slow")["buffered"] == "2027-01-01T02:00:00Z"
    site.engine.schedules.pause("slow")
    shown = site.schedule("slow")
    assert (shown["buffered"], shown["counts"]["skipped"]) == (None, 1)
    site.engine.advance("PT1H")  # the 01:00 run ends at 02:30: nothing starts
    assert len(site.runs("slow")) == 1


def test_backfill_of_a_disabled_flow_and_resume_of_an_active_schedule_are_refused(
    site: Site,
) -> None:
    site.deploy("hourly", HOURLY.format(extra=""))
    with pytest.raises(StateConflictError, match=r"^schedule \[hourly\] is not paused; nothing"):
        site.engine.schedules.resume("hourly")
    _jump(site, "2027-01-01T05:00:00Z")
    site.engine.set_enabled("hourly", False)
    with pytest.raises(UsageError, match=r"^\[hourly\] is disabled; enable it to start runs$"):
        site.engine.schedules.backfill("hourly", 0, from_iso("2027-01-01T03:00:00Z"))
    assert site.runs("hourly") == []


MINUTELY = """\
flow: minutely
trigger:
  schedule: { every: 1m }
steps:
  - s: { set: { x: 1 } }
"""


def test_run_wait_returns_while_its_run_waits_for_a_person_despite_a_schedule(
    site: Site,
) -> None:
    """`procflow run FILE --wait` stops once only a person or an event can move the run: the
    file's own schedule, armed by that deploy, is not something its run waits for (stepping
    through its slots would never end)."""
    from procflow.runtime.commands.oneshot import run_once

    path = write(site.root / "claims.intent", CLAIMS)
    shown = run_once(site.engine, path, {"title": "roof"}, None, wait=True)
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["waiting_for"]["kind"] == "task"


CLAIMS = """\
name: claims
entities:
  - name: Claim
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
processes:
  - name: Review
    trigger: { onCreate: Claim }
    steps:
      - { name: review, kind: userTask, args: { assignee: manager } }
schedules:
  - name: nag
    cron: "0 * * * *"
    entity: Claim
    where: [ { field: title, op: ne, value: "" } ]
    notify: { to: ops@example.com, subject: "claim {id} waits" }
"""


def test_a_group_whose_slot_has_its_run_already_fires_one_by_one(site: Site) -> None:
    """Slots fire in groups, their runs written together; a slot whose run is there already (a
    stale firing) rolls the group back, and the slots then fire one by one: each slot still gets
    exactly one run, and the group's other slots theirs."""
    from procflow.runtime.schedules.firing import fire_due, slot_key

    for name in ("a", "b", "c"):
        site.deploy(name, MINUTELY.replace("flow: minutely", f"flow: {name}"))
    taken = from_iso("2027-01-01T00:01:00Z")
    run_id = site.engine.start_flow("b", {})
    with site.engine.store.tx() as tx:  # b's 00:01 slot has a run already
        tx.c.execute("UPDATE runs SET start_key=? WHERE id=?", (slot_key("b", taken), run_id))
    fired = fire_due(site.engine, taken, 100)
    assert sorted(row.key for row, _ in fired) == ["a", "b", "c"]
    started = {row.key: len(f.started) for row, f in fired}
    assert started == {"a": 1, "b": 0, "c": 1}
    assert all(site.schedule(n)["next"][0] == "2027-01-01T00:02:00Z" for n in ("a", "b", "c"))


def test_a_worker_loads_what_a_first_firing_needs_on_start_when_a_schedule_is_armed(
    site: Site,
) -> None:
    """The time zone names every calendar checks (a walk of the zone database) are loaded when
    a worker starts on a store with an armed schedule, not inside its first due slot; a store
    with none costs a worker nothing."""
    from procflow.calendar import _zones
    from procflow.runtime.commands.worker import warm_up

    _zones.cache_clear()
    warm_up(site.engine)
    assert _zones.cache_info().currsize == 0
    site.deploy("minutely", MINUTELY)
    _zones.cache_clear()
    warm_up(site.engine)
    assert _zones.cache_info().currsize == 1
