"""A delegate's bad output fails its own step; it never takes the worker or the batch down.

Found by the secret/crash work: a var value that is not JSON data could not be sealed, and the
error surfaced inside the group commit, rolling back every run of the batch and killing the
worker, again on every restart (a poison pill).
"""

from __future__ import annotations

from pathlib import Path

from procflow.runtime.engine import Engine

APP = """\
name: poison
entities:
  - name: Job
    fields:
      - { name: id,    type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
processes:
  - name: Produce
    trigger: { onCreate: Job }
    vars:
      - { name: token }
    steps:
      - name: make
        kind: serviceTask
        args: { delegate: Make, produces: [token] }
      - { name: done, kind: end }
"""

DELEGATE = """\
class Make:
    def execute(self, ctx):
        bad = "bad" in ctx.record["title"]
        ctx.vars["token"] = object() if bad else "a-fine-token-value"
"""


def test_a_var_value_that_is_not_json_fails_its_step_and_nothing_else(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "__init__.py").write_text(DELEGATE)
    (tmp_path / "app.intent").write_text(APP)
    engine = Engine.virtual(db_url, environ=db_env)
    try:
        engine.deploy(str(tmp_path / "app.intent"))
        good = engine.create_record("Job", {"title": "good"})
        bad = engine.create_record("Job", {"title": "bad"})
        engine.work(until_idle=True)  # one batch holds both runs
        (good_run,) = engine.runs_for_record("Job", good["id"])
        (bad_run,) = engine.runs_for_record("Job", bad["id"])
        assert good_run.status == "completed"
        assert bad_run.status == "failed"
        assert bad_run.error == {
            "step": "make",
            "message": "step [make] set var [token] to a [object], which is not JSON data",
            "type": "action",
        }
        assert engine.store.read().vars(bad_run.id) == {}
    finally:
        engine.close()
