"""The Python API (docs/reference/python.md) and the procflow.testing fixture/fakes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import procflow
from procflow.testing import fake_delegate

# On SQLite these tests use procflow.testing's own `engine` fixture (the one users get); on
# PostgreSQL, an engine on the test's database.


@pytest.fixture
def engine(engine: procflow.Engine, db_url: str) -> Iterator[procflow.Engine]:
    if db_url.startswith("sqlite"):
        yield engine
        return
    eng = procflow.Engine.virtual(db_url)
    try:
        yield eng
    finally:
        eng.close()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "provisioning"


@pytest.fixture
def app(tmp_path: Path) -> str:
    target = tmp_path / "provisioning"
    shutil.copytree(EXAMPLE, target)
    return str(target / "app.intent")


def test_the_documented_python_api_runs_a_process(engine: procflow.Engine, app: str) -> None:
    assert isinstance(engine, procflow.Engine)
    engine.deploy(app)
    rec = engine.records.create("TenantApplication", {"title": "acme flaky-1"})
    engine.work(until_idle=True)
    run = engine.runs.for_record("TenantApplication", rec["id"])[0]
    assert run["status"] == "waiting"
    assert run["tokens"][0]["waiting_for"]["kind"] == "retry"
    engine.advance("PT30S")
    run = engine.runs.show(run["id"])
    assert run["status"] == "completed"
    assert engine.records.get("TenantApplication", rec["id"])["ProvisioningStatus"] == 1


def test_fake_delegate_replaces_project_code_for_the_block(
    engine: procflow.Engine, app: str
) -> None:
    calls: list[int] = []

    def fake(ctx: procflow.StepContext) -> None:
        calls.append(ctx.attempt)
        ctx.vars["dbPassword"] = "x" * 20

    engine.deploy(app)
    with fake_delegate("custom.SchemaProvisioner", fake):
        rec = engine.records.create("TenantApplication", {"title": "flaky-3"})
        engine.work()
    assert calls == [1]  # the real delegate would have failed its first three attempts
    run = engine.runs.for_record("TenantApplication", rec["id"])[0]
    assert run["status"] == "completed"


def test_the_python_api_offers_what_the_cli_does_and_refuses_the_same(
    engine: procflow.Engine, app: str
) -> None:
    from procflow.errors import UsageError

    engine.deploy(app)
    rec = engine.records.create("TenantApplication", {"title": "acme"})
    engine.work()
    (run,) = engine.runs.for_record("TenantApplication", rec["id"])
    with pytest.raises(UsageError, match="0 or more"):
        engine.runs.show(run["id"], history=-1)
    with pytest.raises(UsageError):  # a triggered process runs once per record
        engine.runs.start_for_record("TenantProvisioning", "TenantApplication", rec["id"])
    again = engine.runs.start_for_record(
        "TenantProvisioning", "TenantApplication", rec["id"], again=True
    )
    assert again != run["id"]
    report = engine.events.send("slack.approval", {"message": "1.2", "approved": True}, "evt-1")
    assert report["event_id"] == "evt-1" and report["resumed"] == [] == report["started"]
    engine.enable("TenantProvisioning", False)
    with pytest.raises(UsageError, match="disabled"):
        engine.runs.start_for_record(
            "TenantProvisioning", "TenantApplication", rec["id"], again=True
        )


# --- schedules ---------------------------------------------------------------------------------

SCHEDULED = """\
flow: nightly
trigger:
  - schedule: { name: early, every: 1h }
  - schedule: { name: late, cron: "0 18 * * *", timezone: Europe/Berlin }
steps:
  - hold: { wait: { for: 90m } }
"""


def test_engine_schedules_list_show_pause_resume_trigger_and_backfill(
    engine: procflow.Engine, tmp_path: Path
) -> None:
    from datetime import datetime

    from procflow.errors import NotFoundError, UsageError

    flow = tmp_path / "nightly.flow.yaml"
    flow.write_text(SCHEDULED)
    engine.deploy(str(flow))
    names = [s["name"] for s in engine.schedules.list()]
    assert names == ["nightly/early", "nightly/late"]
    first = engine.schedules.page(limit=1)
    assert [s["name"] for s in first.items] == ["nightly/early"] and first.next_cursor
    rest = engine.schedules.page(limit=1, cursor=first.next_cursor)
    assert [s["name"] for s in rest.items] == ["nightly/late"] and rest.next_cursor is None
    late = engine.schedules.show("nightly/late", next=2)
    assert late["spec"] == "0 18 * * * Europe/Berlin"
    assert late["next"] == ["2027-01-01T17:00:00Z", "2027-01-02T17:00:00Z"]

    paused = engine.schedules.pause("nightly/early", "maintenance")
    assert (paused["state"], paused["note"], paused["next"]) == ("paused", "maintenance", [])
    engine.advance("PT2H")
    assert engine.runs.list(name="nightly") == []
    resumed = engine.schedules.resume("nightly/early")
    assert (resumed["state"], resumed["next"][0]) == ("active", "2027-01-01T03:00:00Z")

    started = engine.schedules.trigger("nightly/early")["started"]
    assert engine.runs.show(started[0])["schedule"] == {
        "name": "nightly/early", "slot": "2027-01-01T02:00:00Z",
    }  # fmt: skip
    skipped = engine.schedules.trigger("nightly/early")
    assert (skipped["started"], skipped["skipped"]) == ([], 1)  # its run is open: overlap skip

    window = ("2026-12-31T21:00:00Z", datetime(2026, 12, 31, 23))  # text, and a naive datetime
    dry = engine.schedules.backfill("nightly/early", *window, dry_run=True)
    assert [s["slot"] for s in dry["slots"]] == [
        "2026-12-31T21:00:00Z", "2026-12-31T22:00:00Z", "2026-12-31T23:00:00Z",
    ]  # fmt: skip
    assert not any(s["started"] for s in dry["slots"])
    done = engine.schedules.backfill("nightly/early", *window)
    assert all(s["started"] for s in done["slots"])
    assert len(engine.runs.list(name="nightly")) == 4
    assert engine.schedules.show("nightly/early")["counts"]["started"] == 4

    with pytest.raises(NotFoundError, match=r"no schedule \[nightly/x\]"):
        engine.schedules.show("nightly/x")
    with pytest.raises(UsageError, match=r'overlap takes only "allow"'):
        engine.schedules.trigger("nightly/early", overlap="always")
    with pytest.raises(UsageError, match=r"^backfill to: \[soon\] is not an ISO-8601 timestamp"):
        engine.schedules.backfill("nightly/early", "2026-12-31T21:00:00Z", "soon")
    with pytest.raises(UsageError, match=r"ends .* before it begins"):
        engine.schedules.backfill("nightly/early", "2026-12-31T23:00:00Z", "2026-12-31")
    with pytest.raises(UsageError, match="1 to 1000"):
        engine.schedules.show("nightly/early", next=0)
    with pytest.raises(UsageError, match="one line of text"):
        engine.schedules.pause("nightly/early", "two\nlines")
    with pytest.raises(UsageError, match="at most 500"):
        engine.schedules.pause("nightly/early", "x" * 501)
    assert engine.schedules.show("nightly/early")["state"] == "active"  # refused: unchanged
