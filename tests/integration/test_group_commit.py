"""Group commit: a run whose lease is lost, or that is cancelled, while its batch is in flight is
left alone by the batch's commit; the other runs of the batch commit normally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from procflow.runtime.engine import Engine
from procflow.store.store import Store

APP = """\
name: chain
entities:
  - name: Job
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 50 }
processes:
  - name: Chain
    trigger: { onCreate: Job }
    steps:
      - { name: s1, kind: serviceTask, args: { delegate: Step, next: s2 } }
      - { name: s2, kind: serviceTask, args: { delegate: Step, next: s3 } }
      - { name: s3, kind: serviceTask, args: { delegate: Step, next: end } }
"""

DELEGATES = """\
HOOK = None


def Step(ctx):
    if HOOK is not None:
        HOOK(ctx)
"""


def test_a_lost_lease_or_a_cancel_mid_batch_leaves_that_run_alone(
    tmp_path: Path, db_url: str
) -> None:
    project = tmp_path / "project"
    (project / "custom").mkdir(parents=True)
    (project / "custom" / "__init__.py").write_text(DELEGATES)
    (project / "app.intent").write_text(APP)
    engine = Engine.virtual(db_url, project_dir=str(project))
    engine.deploy(str(project / "app.intent"))
    for title in ("plain", "stolen", "cancelled", "plain too"):
        engine.create_record("Job", {"title": title})
    runs = {r.business_key: r.id for r in engine.list_runs()}
    stolen, cancelled = runs["2"], runs["3"]
    other = Engine(db_url, project_dir=str(project))
    outside = Store(db_url)  # a connection of its own, behind the engines' backs

    def hook(ctx: Any) -> None:  # in the second round, behind the worker's back
        if ctx.step != "s2" or ctx.run_id not in (stolen, cancelled):
            return
        if ctx.run_id == stolen:
            outside.conn.execute("UPDATE runs SET lease_owner='thief' WHERE id=?", (stolen,))
        else:
            other.cancel(cancelled)

    from procflow.runtime.interpret.delegates import load_attr

    module = load_attr(str(project), "custom", "Step").__globals__
    module["HOOK"] = hook
    try:
        engine.work(until_idle=True)
    finally:
        module["HOOK"] = None

    def steps(run_id: str) -> list[tuple[str, str | None]]:
        shown = engine.show(run_id)
        return [(h["type"], h.get("step")) for h in shown["history"]]

    for key in ("1", "4"):
        assert engine.show(runs[key])["status"] == "completed"
    # The stolen run: s1 committed, s2's transition discarded; the thief holds it now.
    assert ("step.completed", "s1") in steps(stolen)
    assert ("step.started", "s2") not in steps(stolen)
    row = outside.conn.execute(
        "SELECT status, lease_owner FROM runs WHERE id=?", (stolen,)
    ).fetchone()
    assert tuple(row) == ("running", "thief")
    # The cancelled run stays cancelled: the batch did not resurrect it.
    assert engine.show(cancelled)["status"] == "cancelled"
    assert ("step.started", "s2") not in steps(cancelled)
    outside.close()
    other.close()
    engine.close()
