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
