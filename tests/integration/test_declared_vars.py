"""Showing an intent run lists every var its process declares, set or not, from the names kept
with its version when it was deployed (schema 6), so that nothing is compiled to show it; a
version stored before schema 6 keeps none, and its definition is compiled for them instead."""

from __future__ import annotations

import json
from pathlib import Path

from procflow.runtime.engine import Engine

APP = Path(__file__).resolve().parents[2] / "examples" / "provisioning" / "app.intent"


def _started_run(eng: Engine) -> str:
    eng.deploy(str(APP))
    eng.create_record("TenantApplication", {"title": "acme"})
    (run,) = eng.runs_for_record("TenantApplication", 1)
    return run.id


def test_a_deployed_process_keeps_the_names_of_its_vars(eng: Engine) -> None:
    run_id = _started_run(eng)
    reader = eng.store.read()
    run = reader.run(run_id)
    assert run is not None
    assert json.loads(reader.version(run.version_id).vars or "null") == ["dbPassword"]
    assert list(eng.show(run_id)["vars"]) == ["dbPassword"]


def test_a_version_stored_before_the_names_were_kept_is_compiled_for_them(eng: Engine) -> None:
    run_id = _started_run(eng)
    with eng.store.tx() as tx:
        tx.c.execute("UPDATE versions SET vars=NULL")
    assert list(eng.show(run_id)["vars"]) == ["dbPassword"]
