"""Intent schedules (sweeps) on both store backends, on the virtual clock: each slot acts on the
records that match its ``where`` at the slot's instant — notify, generate or start — once per
record and slot, also when the slot is cut short between two batches; each slot's outcome is
kept; trigger, pause, deploys and missed slots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from projects import write

from procflow.errors import DeployError, NotFoundError, UsageError
from procflow.runtime.clock import from_iso
from procflow.runtime.engine import Engine
from procflow.runtime.schedules import sweep_actions, sweeps
from procflow.runtime.schedules.firing import fire_due

ENTITIES = """\
name: prov
entities:
  - name: TenantStatus
    function: Setting
    fields: [ { name: id, type: integer, primaryKey: true }, { name: name, type: string } ]
  - name: TenantApplication
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true }
      - { name: contact, type: string }
      - { name: amount, type: decimal }
      - { name: due, type: date }
      - { name: at, type: timestamp }
      - { name: vip, type: boolean }
    relations:
      - name: ProvisioningStatus
        kind: manyToOne
        to: TenantStatus
        function: EntityStatus
        init: Requested
  - name: Reminder
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: note, type: string, required: true }
      - { name: day, type: date }
      - { name: at, type: timestamp }
    relations:
      - { name: application, kind: manyToOne, to: TenantApplication }
seeds:
  - name: statuses
    entity: TenantStatus
    rows: [ { id: 1, name: Requested }, { id: 2, name: Provisioned } ]
processes:
  - name: Chase
    steps: [ { name: call, kind: userTask, args: { assignee: ops } } ]
  - name: Remind
    trigger: { onCreate: Reminder }
    steps: [ { name: done, kind: end } ]
schedules:
"""

STUCK = """\
  - name: stuck
    cron: "0 */5 * * * ?"
    entity: TenantApplication
    where:
      - { field: ProvisioningStatus, op: eq, value: Requested }
      - { field: changedAt, op: lt, value: "CURRENT_TIMESTAMP-PT30M" }
    notify:
      to: contact
      subject: "Application {id} has been provisioning for 30 minutes"
      body: "{title}: {ProvisioningStatus.name}"
"""


class Site:
    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        self.engine = Engine.virtual(db_url, project_dir=str(root))

    def deploy(self, schedules: str) -> None:
        self.engine.deploy(write(self.root / "app.intent", ENTITIES + schedules))

    def app(self, title: str, **fields: Any) -> int:
        made = self.engine.create_record("TenantApplication", {"title": title, **fields})
        return int(made["id"])

    def outbox(self, key: str | None = None) -> list[tuple[str, str | None]]:
        rows = self.engine.store.read().outbox()
        return [(r.recipient, r.subject) for r in rows if key is None or r.step == key]

    def show(self, key: str) -> dict[str, Any]:
        return self.engine.schedules.show(key)

    def last(self, key: str) -> dict[str, Any]:
        return dict(self.show(key)["sweep"]["last"][0])


@pytest.fixture
def site(tmp_path: Path, db_url: str) -> Iterator[Site]:
    made = Site(tmp_path, db_url)
    yield made
    made.engine.close()


def counts(outcome: dict[str, Any]) -> tuple[int, int, int, int]:
    return outcome["matched"], outcome["done"], outcome["skipped"], outcome["failed"]


def _jump(site: Site, to: str) -> None:
    """Move the store's clock without running what falls due on the way."""
    with site.engine.store.tx() as tx:
        tx.meta_set("clock_now", str(from_iso(to)))


# --- notify ------------------------------------------------------------------------------------


def test_the_stuck_application_sweep_notifies_each_matching_record_once_per_slot(
    site: Site,
) -> None:
    site.deploy(STUCK)
    first, second, done = (site.app(t, contact=f"{t}@x") for t in ("a", "b", "c"))
    site.engine.update_record("TenantApplication", done, {"ProvisioningStatus": "Provisioned"})
    site.engine.advance("PT30M")
    assert site.outbox() == []  # changedAt 00:00 is not before 00:30 - 30 minutes
    assert counts(site.last("prov/stuck")) == (0, 0, 0, 0)
    site.engine.advance("PT5M")
    assert site.outbox() == [
        ("a@x", f"Application {first} has been provisioning for 30 minutes"),
        ("b@x", f"Application {second} has been provisioning for 30 minutes"),
    ]
    body = site.engine.store.read().outbox()[0].body
    assert body == "a: Requested"
    last = site.last("prov/stuck")
    assert (last["slot"], counts(last)) == ("2027-01-01T00:35:00Z", (2, 2, 0, 0))
    site.engine.update_record("TenantApplication", first, {"title": "a2"})  # a write: changedAt
    site.engine.advance("PT5M")
    assert [to for to, _ in site.outbox()] == ["a@x", "b@x", "b@x"]
    shown = site.show("prov/stuck")
    assert (shown["kind"], shown["flow"], shown["spec"]) == ("intent", "prov", "0 */5 * * * ? UTC")
    assert shown["sweep"]["totals"] == {"matched": 3, "done": 3, "skipped": 0, "failed": 0}
    assert shown["counts"]["started"] == 8  # slots swept


def test_a_recipient_that_resolves_to_nothing_skips_the_record(site: Site) -> None:
    site.deploy(STUCK)
    site.app("a", contact="a@x")
    site.app("b")
    site.engine.advance("PT35M")
    assert site.outbox() == [("a@x", "Application 1 has been provisioning for 30 minutes")]
    assert counts(site.last("prov/stuck")) == (2, 1, 1, 0)


# --- where: operators and moments -----------------------------------------------------------

WHERE = """\
  - name: sweep
    cron: "0 0 1 1 *"
    entity: TenantApplication
    where: [ {conditions} ]
    notify: {{ to: contact }}
"""


@pytest.mark.parametrize(
    ("conditions", "matched"),
    [
        ("{ field: title, op: eq, value: b }", "b"),
        ("{ field: title, op: ne, value: b }", "acd"),
        ("{ field: amount, op: gt, value: 10 }", "cd"),
        ("{ field: amount, op: ge, value: 10 }", "bcd"),
        ("{ field: amount, op: lt, value: 10.5 }", "ab"),
        ("{ field: amount, op: le, value: 10 }", "ab"),
        ("{ field: title, op: like, value: '_' }", "abcd"),
        ("{ field: contact, op: like, value: 'C%' }", "c"),
        ("{ field: contact, op: like, value: 'c%' }", ""),  # case-sensitive: C@x is not
        ("{ field: amount, op: eq, value: null }", ""),
        ("{ field: due, op: eq, value: null }", "d"),
        ("{ field: due, op: ne, value: null }", "abc"),
        ("{ field: due, op: lt, value: CURRENT_DATE }", "a"),
        ("{ field: due, op: le, value: 'CURRENT_DATE+P1D' }", "ab"),
        ("{ field: due, op: ge, value: 'CURRENT_DATE+P1M' }", "c"),
        ("{ field: due, op: gt, value: 'CURRENT_DATE+P1M' }", ""),
        ("{ field: at, op: ge, value: 'NOW-P1DT1H' }", "bc"),
        ("{ field: at, op: lt, value: '2027-01-01T00:59:59.5+00:00' }", "a"),
        ("{ field: createdAt, op: lt, value: 'CURRENT_TIMESTAMP-P1D' }", "ab"),
        ("{ field: ProvisioningStatus, op: eq, value: Provisioned }", "c"),
        ("{ field: ProvisioningStatus, op: ne, value: 2 }", "abd"),
        ("{ field: vip, op: eq, value: true }", "d"),
        ("{ field: amount, op: gt, value: 1 }, { field: due, op: ne, value: null }", "bc"),
    ],
)
def test_where_operators_and_moments(site: Site, conditions: str, matched: str) -> None:
    """The records (a, b, c, d) against each condition, swept at 02:00 on 2 January."""
    site.deploy(WHERE.format(conditions=conditions))
    site.app("a", contact="a@x", amount=1, due="2027-01-01", at="2027-01-01T00:00:00Z")
    site.app("b", contact="b@x", amount=10, due="2027-01-02", at="2027-01-01T01:00:00Z")
    site.engine.advance("PT2H")
    site.app("c", contact="C@x", amount=10.5, due="2027-02-02", at="2027-01-01T02:00:00.000001Z")
    site.app("d", contact="d@x", amount=99, vip=True)
    site.engine.update_record("TenantApplication", 3, {"ProvisioningStatus": "Provisioned"})
    site.engine.advance("PT24H")  # the 2nd of January, 02:00: CURRENT_DATE is 2027-01-02
    report = site.engine.schedules.trigger("prov/sweep")
    assert report["sweep"]["slot"] == "2027-01-02T02:00:00Z"
    assert "".join(sorted(to[0].lower() for to, _ in site.outbox())) == matched


def test_current_date_is_the_slots_day_in_the_schedules_zone(site: Site) -> None:
    """23:30 UTC on 1 January is already 2 January in Berlin."""
    site.deploy(
        WHERE.format(conditions="{ field: due, op: eq, value: CURRENT_DATE }").replace(
            '"0 0 1 1 *"', '"0 30 0 * * ?"\n    timezone: Europe/Berlin'
        )
    )
    site.app("a", contact="a@x", due="2027-01-01")
    site.app("b", contact="b@x", due="2027-01-02")
    site.engine.advance("PT23H30M")  # 00:30 in Berlin on the 2nd
    assert [to for to, _ in site.outbox()] == ["b@x"]


# --- generate ----------------------------------------------------------------------------------

GENERATE = """\
  - name: remind
    cron: "0 0 * * * ?"
    entity: TenantApplication
    where: [ { field: due, op: le, value: CURRENT_DATE } ]
    generate:
      to: Reminder
      map: { application: id, note: title }
      defaults: { day: now, at: now }
"""


def test_generate_writes_a_record_per_match_and_fires_its_triggers(site: Site) -> None:
    site.deploy(GENERATE)
    site.app("due", due="2027-01-01")
    site.app("later", due="2027-01-05")
    site.engine.advance("PT1H")
    (reminder,) = site.engine.list_records("Reminder")
    assert reminder == {
        "id": 1, "note": "due", "day": "2027-01-01", "at": "2027-01-01T01:00:00Z",
        "application": 1,
    }  # fmt: skip
    runs = site.engine.list_runs(name="Remind")
    assert [(r.record_entity, r.record_id, r.status) for r in runs] == [
        ("Reminder", 1, "completed")
    ]
    assert counts(site.last("prov/remind")) == (1, 1, 0, 0)


def test_generate_into_its_own_entity_stops_at_the_records_the_slot_began_with(
    site: Site,
) -> None:
    site.deploy(
        '  - name: copy\n    cron: "0 0 * * * ?"\n    entity: TenantApplication\n'
        "    where: [ { field: title, op: like, value: 'x%' } ]\n"
        "    generate: { to: TenantApplication, map: { title: title } }\n"
    )
    site.app("x1")
    site.app("x2")
    site.engine.advance("PT1H")
    assert len(site.engine.list_records("TenantApplication")) == 4  # not an endless chain
    site.engine.advance("PT1H")
    assert len(site.engine.list_records("TenantApplication")) == 8


def test_a_write_the_declaration_refuses_fails_that_record_only(site: Site) -> None:
    """``note`` is required; a record without a title cannot be made (none has one: the
    source is ``contact``, empty for one record)."""
    site.deploy(GENERATE.replace("note: title", "note: contact"))
    site.app("a", due="2027-01-01", contact="a@x")
    site.app("b", due="2027-01-01")
    site.engine.advance("PT1H")
    assert [r["note"] for r in site.engine.list_records("Reminder")] == ["a@x"]
    last = site.last("prov/remind")
    assert counts(last) == (2, 1, 0, 1)
    assert last["error"].startswith("[TenantApplication] record 2: ")
    assert "note" in last["error"]
    assert site.show("prov/remind")["sweep"]["totals"]["failed"] == 1


# --- start -------------------------------------------------------------------------------------

START = """\
  - name: chase
    cron: "0 0 * * * ?"
    entity: TenantApplication
    where: [ {{ field: vip, op: eq, value: true }} ]
    start: Chase{extra}
"""


def test_start_runs_the_process_for_each_record_without_an_active_run(site: Site) -> None:
    site.deploy(START.format(extra=""))
    site.app("a", vip=True)
    site.app("b", vip=True)
    site.app("c")
    site.engine.advance("PT1H")
    runs = site.engine.list_runs(name="Chase")
    assert sorted((r.record_id, r.status) for r in runs) == [(1, "waiting"), (2, "waiting")]
    shown = site.engine.show(runs[0].id)
    assert shown["schedule"]["name"] == "prov/chase"
    assert shown["schedule"]["slot"] == "2027-01-01T01:00:00Z"
    site.engine.advance("PT1H")  # both runs still wait for their task: skipped
    assert len(site.engine.list_runs(name="Chase")) == 2
    assert counts(site.last("prov/chase")) == (2, 0, 2, 0)
    task = next(t for t in site.engine.list_tasks() if t["record"]["id"] == 1)
    site.engine.complete_task(task["id"], "complete")
    site.engine.advance("PT1H")
    assert len(site.engine.list_runs(name="Chase")) == 3
    assert counts(site.last("prov/chase")) == (2, 1, 1, 0)


@pytest.mark.parametrize(
    ("overlap", "runs", "cancelled"), [("allow", 2, 0), ("cancel_previous", 2, 1)]
)
def test_overlap_allow_and_cancel_previous(
    site: Site, overlap: str, runs: int, cancelled: int
) -> None:
    site.deploy(START.format(extra=f"\n    overlap: {overlap}"))
    site.app("a", vip=True)
    site.engine.advance("PT2H")
    statuses = [r.status for r in site.engine.list_runs(name="Chase")]
    assert (len(statuses), statuses.count("cancelled")) == (runs, cancelled)


def test_start_of_a_disabled_process_fails_each_record(site: Site) -> None:
    site.deploy(START.format(extra=""))
    site.engine.set_enabled("Chase", False)
    site.app("a", vip=True)
    site.engine.advance("PT1H")
    assert site.engine.list_runs(name="Chase") == []
    last = site.last("prov/chase")
    assert counts(last) == (1, 0, 0, 1)
    assert last["error"] == "[Chase] is disabled; enable it to start runs"


# --- exactly once, batch by batch ---------------------------------------------------------------


def test_a_slot_cut_short_between_batches_notifies_no_record_twice(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two records a batch; the second batch fails after acting on one of its records (its
    transaction is rolled back, as a worker dying there leaves it); the slot goes on where the
    first batch left it."""
    monkeypatch.setattr(sweeps, "ROWS_PER_BATCH", 2)
    site.deploy(STUCK)
    for name in "abcde":
        site.app(name, contact=f"{name}@x")
    real = sweep_actions.send_email
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:  # the second record of the second batch
            raise RuntimeError("the worker died")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_actions, "send_email", failing)
    site.engine.advance("PT34M")
    _jump(site, "2027-01-01T00:35:00Z")
    with pytest.raises(RuntimeError, match="the worker died"):
        fire_due(site.engine, site.engine.now(), 10)
    assert [to for to, _ in site.outbox()] == ["a@x", "b@x"]  # the first batch's
    sweeping = site.show("prov/stuck")["sweep"]["sweeping"]
    assert (sweeping["slot"], sweeping["matched"], sweeping["done"]) == (
        "2027-01-01T00:35:00Z", 2, 2,
    )  # fmt: skip
    monkeypatch.setattr(sweep_actions, "send_email", real)
    site.engine.work()
    assert [to for to, _ in site.outbox()] == ["a@x", "b@x", "c@x", "d@x", "e@x"]
    last = site.last("prov/stuck")
    assert (last["slot"], counts(last)) == ("2027-01-01T00:35:00Z", (5, 5, 0, 0))
    assert site.show("prov/stuck")["sweep"]["sweeping"] is None


def test_a_start_sweep_cut_short_starts_each_run_once(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweeps, "ROWS_PER_BATCH", 2)
    site.deploy(START.format(extra=""))
    for name in "abcde":
        site.app(name, vip=True)
    real = sweep_actions.insert_intent_run
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("the worker died")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_actions, "insert_intent_run", failing)
    _jump(site, "2027-01-01T01:00:00Z")
    with pytest.raises(RuntimeError, match="the worker died"):
        fire_due(site.engine, site.engine.now(), 10)
    assert len(site.engine.list_runs(name="Chase")) == 2
    monkeypatch.setattr(sweep_actions, "insert_intent_run", real)
    site.engine.work()
    runs = site.engine.list_runs(name="Chase")
    assert sorted(r.record_id for r in runs) == [1, 2, 3, 4, 5]


# --- by hand, deploys, pause, missed slots ------------------------------------------------------


def test_trigger_sweeps_now_once_and_backfill_is_refused(site: Site) -> None:
    site.deploy(STUCK)
    site.app("a", contact="a@x")
    site.engine.advance("PT31M")  # 00:31: slots at 00:05 … 00:30 matched nothing
    report = site.engine.schedules.trigger("prov/stuck")
    assert report["sweep"]["slot"] == "2027-01-01T00:31:00Z"
    assert counts(report["sweep"]) == (1, 1, 0, 0)
    assert site.show("prov/stuck")["next"][0] == "2027-01-01T00:35:00Z"  # still armed
    with pytest.raises(UsageError, match=r"has swept \(or is sweeping\) a slot at .*:31:00Z"):
        site.engine.schedules.trigger("prov/stuck")
    with pytest.raises(UsageError, match="is an intent schedule: backfill starts a flow's runs"):
        site.engine.schedules.backfill("prov/stuck", 0, site.engine.now())
    assert len(site.outbox()) == 1


def test_a_slot_swept_by_trigger_is_not_swept_again_when_it_fires(site: Site) -> None:
    site.deploy(STUCK)
    site.app("a", contact="a@x")
    _jump(site, "2027-01-01T00:40:00Z")  # the slot at 00:40 is due; no worker has run
    assert counts(site.engine.schedules.trigger("prov/stuck")["sweep"]) == (1, 1, 0, 0)
    site.engine.work()
    assert len(site.outbox()) == 1
    shown = site.show("prov/stuck")
    assert [o["slot"] for o in shown["sweep"]["last"]] == ["2027-01-01T00:40:00Z"]
    assert shown["next"][0] == "2027-01-01T00:45:00Z"


def test_pause_resume_and_deploys_follow_the_file(site: Site) -> None:
    site.deploy(STUCK)
    assert [s["name"] for s in site.engine.schedules.page().items] == ["prov/stuck"]
    paused = site.engine.schedules.pause("prov/stuck", "holiday")
    assert (paused["state"], paused["next"]) == ("paused", [])
    site.app("a", contact="a@x")
    site.engine.advance("PT1H")
    assert site.outbox() == []
    assert site.engine.schedules.resume("prov/stuck")["next"][0] == "2027-01-01T01:05:00Z"
    site.deploy(STUCK.replace("*/5", "*/10"))
    assert site.show("prov/stuck")["next"][0] == "2027-01-01T01:10:00Z"
    site.deploy("")
    with pytest.raises(NotFoundError, match=r"no schedule \[prov/stuck\]"):
        site.show("prov/stuck")


def test_a_schedule_key_taken_by_a_flow_refuses_the_deploy(site: Site) -> None:
    with site.engine.store.tx() as tx:  # a flow [prov] with a schedule [stuck] in its list
        from procflow.store.rows import ScheduleRow

        tx.insert_schedule(ScheduleRow("prov/stuck", "prov", "stuck", {"every": 3_600_000_000}, {}))
    with pytest.raises(DeployError, match=r"\[prov/stuck\] is already a schedule of the flow"):
        site.deploy(STUCK)
    assert site.engine.store.read().entities() == {}  # nothing of the file was stored


def test_disabling_a_process_named_like_the_application_leaves_its_schedules(
    site: Site,
) -> None:
    """Schedule rows hold the application's name where a flow's hold the flow's: disabling a
    definition of that name concerns its own schedules only."""
    site.engine.deploy(
        write(
            site.root / "app.intent",
            ENTITIES.replace(
                "  - name: Chase\n",
                "  - name: prov\n    steps: [ { name: e, kind: end } ]\n  - name: Chase\n",
            )
            + STUCK,
        )
    )
    site.engine.set_enabled("prov", False)
    site.app("a", contact="a@x")
    site.engine.advance("PT35M")
    assert len(site.outbox()) == 1
    assert site.show("prov/stuck")["state"] == "active"


def test_a_flow_named_like_the_application_leaves_its_schedules(site: Site) -> None:
    site.deploy(STUCK)
    flow = "flow: prov\nsteps:\n  - a: { set: { b: 1 } }\n"
    site.engine.deploy(write(site.root / "prov.flow.yaml", flow))
    assert site.show("prov/stuck")["state"] == "active"


@pytest.mark.parametrize(
    ("missed", "slots", "counted"), [("latest", 1, 4), ("all", 5, 0), ("none", 0, 5)]
)
def test_missed_slots_after_downtime(site: Site, missed: str, slots: int, counted: int) -> None:
    site.deploy(STUCK.replace("*/5", "0").replace("notify:", f"missed: {missed}\n    notify:"))
    site.app("a", contact="a@x")
    _jump(site, "2027-01-01T05:30:00Z")  # the worker was down until then
    site.engine.work()
    assert len(site.outbox()) == slots
    shown = site.show("prov/stuck")
    assert (shown["counts"]["missed"], shown["counts"]["started"]) == (counted, slots)
    assert [o["slot"] for o in shown["sweep"]["last"]][:1] == (
        ["2027-01-01T05:00:00Z"] if slots else []
    )
    assert shown["next"][0] == "2027-01-01T06:00:00Z"
