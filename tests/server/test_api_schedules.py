"""The schedule routes, on both store backends: list (by name, keyset paged), show (``FLOW`` or
``FLOW/NAME``, the slash as it is or percent-encoded), pause, resume, trigger and backfill, each
answering the ``schedules ... --json`` shape of the command line; every refusal a problem that
names what is wrong and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from api_site import Site
from projects import NIGHTLY, TICK


@pytest.fixture
def sched(site: Site) -> Site:
    for name, text in (("nightly", NIGHTLY), ("tick", TICK)):
        assert site.deploy(f"{name}.flow.yaml", text).status_code == 201
    return site


def get(site: Site, path: str) -> Any:
    answer = site.client.get(path)
    assert answer.status_code == 200, answer.text
    return answer.json()


def post(site: Site, path: str, **request: Any) -> Any:
    answer = site.client.post(path, **request)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_list_pages_by_name_in_the_cli_shape(sched: Site) -> None:
    everything = get(sched, "/schedules")
    assert [s["name"] for s in everything["items"]] == ["nightly/early", "nightly/late", "tick"]
    assert everything["next_cursor"] is None
    assert everything["items"] == sched.cli("schedules", "list")
    first = get(sched, "/schedules?limit=2")
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = get(sched, f"/schedules?limit=2&cursor={first['next_cursor']}")
    assert [s["name"] for s in rest["items"]] == ["tick"] and rest["next_cursor"] is None
    sched.start()
    sched.start()  # two runs: the runs list has a next page
    runs_cursor = get(sched, "/runs?limit=1")["next_cursor"]
    sched.refused("GET", f"/schedules?cursor={runs_cursor}", 400, field="cursor")


def test_show_takes_the_flow_or_flow_slash_name(sched: Site) -> None:
    late = get(sched, "/schedules/nightly/late")
    assert late == get(sched, "/schedules/nightly%2Flate")
    assert late == sched.cli("schedules", "show", "nightly/late")
    assert (late["flow"], late["schedule"], late["spec"]) == (
        "nightly", "late", "0 18 * * * Europe/Berlin",
    )  # fmt: skip
    assert late["next"] == [
        "2027-01-01T17:00:00Z", "2027-01-02T17:00:00Z", "2027-01-03T17:00:00Z",
    ]  # fmt: skip
    assert len(get(sched, "/schedules/tick?next=10")["next"]) == 10
    assert get(sched, "/schedules/tick")["state"] == "active"


@pytest.mark.parametrize("next_", ["0", "1001", "-1", "two", "1.5"])
def test_a_bad_next_is_a_400_naming_it(sched: Site, next_: str) -> None:
    sched.refused("GET", f"/schedules/tick?next={next_}", 400, field="next", detail="1 to 1000")


def test_an_unknown_schedule_is_a_404_naming_those_of_its_flow(sched: Site) -> None:
    sched.refused("GET", "/schedules/nosuch", 404, detail="no schedule [nosuch]")
    sched.refused(
        "POST", "/schedules/nightly/noon/pause", 404,
        detail="no schedule [nightly/noon]; [nightly] has nightly/early, nightly/late",
    )  # fmt: skip
    for action in ("resume", "trigger"):
        sched.refused("POST", f"/schedules/nightly/{action}", 404, detail="no schedule [nightly]")
    sched.refused(
        "POST", "/schedules/nosuch/backfill", 404, detail="no schedule [nosuch]",
        json={"from": "2026-12-31T20:00:00Z", "to": "2027-01-01T00:00:00Z"},
    )  # fmt: skip


def test_pause_with_and_without_a_note_and_resume(sched: Site) -> None:
    paused = post(sched, "/schedules/nightly/early/pause", json={"note": "maintenance"})
    assert (paused["state"], paused["note"], paused["next"]) == ("paused", "maintenance", [])
    assert paused == sched.cli("schedules", "show", "nightly/early")
    plain = post(sched, "/schedules/tick/pause")  # no body at all
    assert (plain["state"], plain["note"]) == ("paused", None)
    sched.engine.advance("PT3H")
    assert sched.engine.list_runs(name="nightly") == [] == sched.engine.list_runs(name="tick")
    resumed = post(sched, "/schedules/nightly/early/resume")
    assert (resumed["state"], resumed["note"]) == ("active", None)
    assert resumed["next"][0] == "2027-01-01T04:00:00Z"  # the first slot after now (03:00)
    assert post(sched, "/schedules/tick/pause", json={"note": None})["note"] is None


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        ({"note": 7}, "note", "[note] must be a string, not a number"),
        ({"why": "x"}, "why", "a member [why] this route does not take"),
        ({"note": "two\nlines"}, None, "one line of text, without control characters"),
        ({"note": "x" * 501}, None, "at most 500"),
    ],
)
def test_a_bad_pause_body_is_a_422_and_changes_nothing(
    sched: Site, body: dict[str, Any], field: str | None, detail: str
) -> None:
    sched.refused("POST", "/schedules/tick/pause", 422, field=field, detail=detail, json=body)


def test_a_pause_body_that_is_not_json_is_a_400(sched: Site) -> None:
    sched.refused(
        "POST", "/schedules/tick/pause", 400, detail="must be application/json",
        content=b"note=x", headers={"content-type": "text/plain"},
    )  # fmt: skip


def test_trigger_starts_a_run_the_overlap_may_skip(sched: Site) -> None:
    report = post(sched, "/schedules/tick/trigger")
    assert set(report) == {"name", "started", "skipped", "buffered"}
    (run_id,) = report["started"]
    shown = get(sched, f"/runs/{run_id}")
    assert shown["schedule"] == {"name": "tick", "slot": "2027-01-01T00:00:00Z"}
    sched.engine.advance("1m")
    again = post(sched, "/schedules/tick/trigger")
    assert (again["started"], again["skipped"]) == ([], 1)  # its run is open: overlap skip
    sched.engine.advance("1m")
    forced = post(sched, "/schedules/tick/trigger", json={"overlap": "allow"})
    assert len(forced["started"]) == 1
    assert get(sched, "/schedules/tick")["last"] == {
        "slot": "2027-01-01T00:02:00Z", "run_id": forced["started"][0],
    }  # fmt: skip


def test_a_bad_trigger_is_refused_and_changes_nothing(sched: Site) -> None:
    sched.refused(
        "POST", "/schedules/tick/trigger", 422, field="overlap", detail='only "allow"',
        json={"overlap": "always"},
    )  # fmt: skip
    sched.engine.set_enabled("tick", False)
    sched.refused("POST", "/schedules/tick/trigger", 422, detail="[tick] is disabled")
    assert get(sched, "/schedules/tick")["state"] == "disabled"


def test_backfill_starts_each_slot_of_the_window_once(sched: Site) -> None:
    window = {"from": "2026-12-31T21:00:00Z", "to": "2026-12-31T23:00:00Z"}
    dry = post(sched, "/schedules/nightly/early/backfill", json={**window, "dry_run": True})
    assert dry == {
        "name": "nightly/early", "dry_run": True,
        "slots": [{"slot": f"2026-12-31T2{h}:00:00Z", "run_id": None, "started": False}
                  for h in (1, 2, 3)],
    }  # fmt: skip
    assert sched.engine.list_runs(name="nightly") == []
    done = post(sched, "/schedules/nightly/early/backfill", json=window)
    assert [s["started"] for s in done["slots"]] == [True, True, True]
    again = post(sched, "/schedules/nightly/early/backfill", json={**window, "dry_run": None})
    assert [s["started"] for s in again["slots"]] == [False] * 3
    assert [s["run_id"] for s in again["slots"]] == [s["run_id"] for s in done["slots"]]
    slots = sorted(r["schedule"]["slot"] for r in map(sched.engine.show, _run_ids(sched)))
    assert slots == [s["slot"] for s in done["slots"]]


def _run_ids(site: Site) -> list[str]:
    return [r.id for r in site.engine.list_runs(name="nightly")]


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        ({"to": "2027-01-01T00:00:00Z"}, "from", "give [from]"),
        ({"from": "2027-01-01T00:00:00Z", "to": None}, "to", "give [to]"),
        ({"from": 5, "to": "2027-01-01T00:00:00Z"}, "from", "[from] must be a string"),
        ({"from": "2026-12-31", "to": "2027-01-01", "dry_run": "yes"}, "dry_run",
         "[dry_run] must be true or false"),
        ({"from": "2026-12-31", "to": "2027-01-01", "until": 1}, "until", "does not take"),
        ({"from": "yesterday", "to": "2027-01-01T00:00:00Z"}, None,
         "backfill from: [yesterday] is not an ISO-8601 timestamp"),
        ({"from": "2026-12-31T10:00:00", "to": "2027-01-01T00:00:00Z"}, None, "no time zone"),
        ({"from": "2026-12-31T23:00:00Z", "to": "2026-12-31T21:00:00Z"}, None,
         "ends (2026-12-31T21:00:00Z) before it begins (2026-12-31T23:00:00Z)"),
        ({"from": "2026-12-31T23:00:00Z", "to": "2027-01-02T00:00:00Z"}, None,
         "ends after the current instant"),
        ({"from": "2026-01-01", "to": "2027-01-01"}, None,
         "holds 8,761 slots of [nightly/early], more than the 1,000"),
    ],
)  # fmt: skip
def test_a_bad_backfill_is_a_422_and_changes_nothing(
    sched: Site, body: dict[str, Any], field: str | None, detail: str
) -> None:
    sched.refused(
        "POST", "/schedules/nightly/early/backfill", 422, field=field, detail=detail, json=body
    )
