"""Flows that call flows (docs/reference/calls.md), on both store backends: completion with
output, failure through retry/optional/recover, timeout, cancellation down the chain, detach,
the depth limit, a disabled flow, and purge keeping a child while its parent is stored.

Each test writes a small project into ``tmp_path``: a few ``*.flow.yaml`` files and a project
connector ``gate`` whose ``pass`` action fails with "quota exceeded" until the file ``open`` exists
in the project folder. Time is the virtual clock.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.engine import Engine

MANIFEST = """\
connector: gate
description: A test connector of test_calls.py
actions:
  pass:
    args: {}
    result:
      ok: { type: boolean }
"""

CONNECTOR = """\
from pathlib import Path


def _pass(ctx):
    if not (Path(ctx.project_dir) / "open").exists():
        raise RuntimeError("quota exceeded")
    return {"ok": True}


globals()["pass"] = _pass
"""

FLOWS = {
    "child": """
        flow: child
        inputs:
          tenant: { type: string, required: true }
          plan: { type: string, default: basic }
        steps:
          - hello: { set: { msg: "hi {{ tenant }}" } }
        output: { url: "https://x/{{ tenant }}/{{ plan }}" }
        """,
    "quiet": """
        flow: quiet
        steps:
          - nothing: { set: { x: 1 } }
        """,
    "gated": """
        flow: gated
        steps:
          - createDb: { gate.pass: {} }
        output: { done: true }
        """,
    "sleeper": """
        flow: sleeper
        steps:
          - nap: { wait: { for: 1h } }
        output: { slept: true }
        """,
    "mid": """
        flow: mid
        steps:
          - down: { call: sleeper }
        """,
    "top": """
        flow: top
        steps:
          - side: { call: sleeper, detach: true }
          - down: { call: mid }
        """,
    "deep": """
        flow: deep
        inputs:
          n: { type: integer, default: 0 }
        steps:
          - again: { call: deep, inputs: { n: "{{ n + 1 }}" } }
        """,
}


class Project:
    def __init__(self, root: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.dir = root / "project"
        connector = self.dir / "connectors" / "gate"
        connector.mkdir(parents=True)
        (connector / "manifest.yaml").write_text(MANIFEST)
        (connector / "__init__.py").write_text(CONNECTOR)
        self.eng = Engine.virtual(db_url, project_dir=str(self.dir), environ=dict(db_env))
        self.db_url = db_url

    def deploy(self, *names: str, **texts: str) -> None:
        """Deploy the named flows of :data:`FLOWS` and the flows given as ``name=text``."""
        for name, text in [(n, FLOWS[n]) for n in names] + list(texts.items()):
            path = self.dir / f"{name}.flow.yaml"
            path.write_text(textwrap.dedent(text))
            self.eng.deploy(str(path))

    def start(self, name: str, inputs: dict[str, Any] | None = None) -> str:
        run_id = self.eng.start_flow(name, inputs or {})
        self.eng.work()
        return run_id

    def show(self, run_id: str) -> dict[str, Any]:
        return self.eng.show(run_id)

    def runs(self, name: str) -> list[Any]:
        return sorted(self.eng.list_runs(name=name), key=lambda r: r.id)

    def children(self, run_id: str) -> list[Any]:
        return self.eng.store.read().children_of(run_id)

    def step_history(self, run_id: str, type_: str) -> list[dict[str, Any]]:
        return [h for h in self.show(run_id)["history"] if h["type"] == type_]


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    proj = Project(tmp_path, db_url, db_env)
    try:
        yield proj
    finally:
        proj.eng.close()


# --- completion -------------------------------------------------------------------------------


def test_a_call_binds_the_childs_run_id_status_and_output(project: Project) -> None:
    project.deploy(
        "child",
        parent="""
        flow: parent
        steps:
          - provision: { call: child, inputs: { tenant: acme, plan: pro } }
          - after: { set: { url: "{{ provision.output.url }}", how: "{{ provision.status }}" } }
        output: "{{ after }}"
        """,
    )
    rid = project.start("parent")
    run = project.show(rid)
    [child] = project.runs("child")
    assert run["status"] == "completed"
    assert run["bindings"]["provision"] == {
        "run_id": child.id, "status": "completed", "output": {"url": "https://x/acme/pro"},
    }  # fmt: skip
    assert run["output"] == {"url": "https://x/acme/pro", "how": "completed"}
    assert child.status == "completed"
    started = project.show(child.id)["history"][0]
    assert started["type"] == "run.started"
    assert (started["parent"], started["step"]) == (rid, "provision")
    [link] = project.children(rid)
    assert (link.child_id, link.step, link.flow, link.detached, link.depth) == (
        child.id, "provision", "child", False, 1,
    )  # fmt: skip
    [ended] = project.step_history(rid, "call.ended")
    assert (ended["run_id"], ended["flow"], ended["status"]) == (child.id, "child", "completed")


def test_a_child_without_output_binds_null(project: Project) -> None:
    project.deploy("quiet", parent="flow: parent\nsteps:\n  - q: { call: quiet }\n")
    rid = project.start("parent")
    binding = project.show(rid)["bindings"]["q"]
    assert (binding["status"], binding["output"]) == ("completed", None)


def test_the_parent_waits_holding_no_lease_while_the_child_waits(project: Project) -> None:
    project.deploy("sleeper", parent="flow: parent\nsteps:\n  - s: { call: sleeper }\n")
    rid = project.start("parent")
    [child] = project.runs("sleeper")
    reader = project.eng.store.read()
    leased = reader.c.execute(
        "SELECT status, lease_owner, lease_until FROM runs WHERE id=?", (rid,)
    ).fetchone()
    assert tuple(leased) == ("waiting", None, None)
    [token] = project.show(rid)["tokens"]
    waiting = token["waiting_for"]
    assert (waiting["kind"], waiting["run_id"], waiting["flow"]) == ("call", child.id, "sleeper")
    assert waiting["child"]["status"] == "waiting"
    project.eng.advance("1h")
    project.eng.work()
    assert project.show(rid)["status"] == "completed"
    assert project.show(rid)["bindings"]["s"]["output"] == {"slept": True}


# --- failure ----------------------------------------------------------------------------------


def test_a_failed_child_fails_the_call_naming_run_flow_step_and_message(project: Project) -> None:
    project.deploy("gated", parent="flow: parent\nsteps:\n  - provision: { call: gated }\n")
    rid = project.start("parent")
    [child] = project.runs("gated")
    run = project.show(rid)
    assert child.status == "failed"
    assert run["status"] == "failed"
    assert run["error"] == {
        "step": "provision", "type": "call",
        "message": f"run {child.id} of gated failed at createDb: quota exceeded",
    }  # fmt: skip


def test_retry_starts_a_new_child_per_attempt_and_keeps_the_failed_ones(project: Project) -> None:
    project.deploy(
        "gated",
        parent="""
        flow: parent
        steps:
          - provision: { call: gated, retry: { count: 2, every: 5m } }
        """,
    )
    rid = project.start("parent")
    assert len(project.runs("gated")) == 1
    project.eng.advance("5m")
    project.eng.work()
    assert len(project.runs("gated")) == 2
    (project.dir / "open").write_text("")
    project.eng.advance("5m")
    project.eng.work()
    first, second, third = project.runs("gated")
    assert [r.status for r in (first, second, third)] == ["failed", "failed", "completed"]
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"]["provision"]["run_id"] == third.id
    assert [h["attempt"] for h in project.step_history(rid, "call.started")] == [1, 2, 3]


def test_optional_binds_the_error_and_recover_handles_it(project: Project) -> None:
    project.deploy(
        "gated",
        parent="""
        flow: parent
        steps:
          - try: { call: gated, optional: true }
          - guarded:
              steps:
                - inner: { call: gated }
              recover:
                - note: { set: { why: "{{ error.message }}", kind: "{{ error.type }}" } }
        """,
    )
    rid = project.start("parent")
    first, second = project.runs("gated")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"]["try"] == {
        "error": {
            "step": "try", "type": "call",
            "message": f"run {first.id} of gated failed at createDb: quota exceeded",
        },
    }  # fmt: skip
    assert run["bindings"]["guarded"]["note"] == {
        "why": f"run {second.id} of gated failed at createDb: quota exceeded", "kind": "call",
    }  # fmt: skip


def test_a_failed_child_retried_by_hand_does_not_resume_its_parent(project: Project) -> None:
    project.deploy("gated", parent="flow: parent\nsteps:\n  - provision: { call: gated }\n")
    rid = project.start("parent")
    [child] = project.runs("gated")
    assert project.show(rid)["status"] == "failed"
    (project.dir / "open").write_text("")
    project.eng.retry(child.id)
    project.eng.work()
    assert project.show(child.id)["status"] == "completed"
    run = project.show(rid)
    assert run["status"] == "failed"
    assert len(project.step_history(rid, "call.ended")) == 1


def test_inputs_that_do_not_fit_at_run_time_fail_the_call(project: Project) -> None:
    project.deploy(
        "child",
        parent="""
        flow: parent
        steps:
          - provision: { call: child, inputs: { tenant: "{{ 42 }}" } }
        """,
    )
    rid = project.start("parent")
    run = project.show(rid)
    assert project.runs("child") == []
    assert run["error"]["type"] == "call"
    assert run["error"]["message"].startswith("the inputs of [child]: ")
    assert "tenant" in run["error"]["message"]


# --- timeout ----------------------------------------------------------------------------------


def test_a_timeout_cancels_the_child_and_fails_the_step(project: Project) -> None:
    project.deploy(
        "sleeper",
        parent="flow: parent\nsteps:\n  - s: { call: sleeper, timeout: 10m }\n",
    )
    rid = project.start("parent")
    [child] = project.runs("sleeper")
    project.eng.advance("10m")
    project.eng.work()
    run = project.show(rid)
    assert project.show(child.id)["status"] == "cancelled"
    assert run["status"] == "failed"
    assert run["error"] == {
        "step": "s", "type": "timeout",
        "message": f"run {child.id} of sleeper did not end within 10m",
    }  # fmt: skip
    cancelled = project.step_history(child.id, "run.cancelled")
    assert cancelled[0]["reason"] == "its parent's call timed out"
    # the child's end came after the timeout: it resumes nothing
    project.eng.advance("1h")
    project.eng.work()
    assert project.show(rid)["status"] == "failed"


def test_a_timed_out_call_retries_with_a_new_child(project: Project) -> None:
    project.deploy(
        "sleeper",
        parent="""
        flow: parent
        steps:
          - s: { call: sleeper, timeout: 30m, retry: { count: 1, every: 1m } }
        """,
    )
    rid = project.start("parent")
    project.eng.advance("30m")
    project.eng.work()
    project.eng.advance("1m")
    project.eng.work()
    first, second = project.runs("sleeper")
    assert (first.status, second.status) == ("cancelled", "waiting")
    project.eng.advance("30m")
    project.eng.work()  # the second child's hour is not up: the retry times out too
    assert project.show(rid)["status"] == "failed"


def test_a_child_ending_before_the_timeout_wins(project: Project) -> None:
    project.deploy(
        "sleeper",
        parent="flow: parent\nsteps:\n  - s: { call: sleeper, timeout: 2h }\n",
    )
    rid = project.start("parent")
    project.eng.advance("2h")  # the child's 1h wait ends first, the 2h timeout never fires
    project.eng.work()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert project.runs("sleeper")[0].status == "completed"


# --- cancellation -----------------------------------------------------------------------------


def test_cancelling_a_parent_cancels_its_children_two_levels_down_but_not_detached(
    project: Project,
) -> None:
    project.deploy("sleeper", "mid", "top")
    rid = project.start("top")
    [mid] = project.runs("mid")
    side, leaf = project.runs("sleeper")
    assert project.show(rid)["bindings"]["side"] == {"run_id": side.id}
    project.eng.cancel(rid, user=None)
    assert project.show(rid)["status"] == "cancelled"
    assert project.show(mid.id)["status"] == "cancelled"
    assert project.show(leaf.id)["status"] == "cancelled"
    reason = project.step_history(leaf.id, "run.cancelled")[0]["reason"]
    assert reason == f"its parent run {mid.id} was cancelled"
    assert project.show(side.id)["status"] == "waiting"  # detached: independent
    project.eng.advance("1h")
    project.eng.work()
    assert project.show(side.id)["status"] == "completed"


def test_cancelling_a_child_by_hand_fails_its_parents_call(project: Project) -> None:
    project.deploy("sleeper", parent="flow: parent\nsteps:\n  - s: { call: sleeper }\n")
    rid = project.start("parent")
    [child] = project.runs("sleeper")
    project.eng.cancel(child.id)
    project.eng.work()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {
        "step": "s", "type": "call", "message": f"run {child.id} of sleeper was cancelled",
    }  # fmt: skip


# --- detach, depth, disabled ------------------------------------------------------------------


def test_a_detached_call_goes_on_at_once_and_its_end_resumes_nothing(project: Project) -> None:
    project.deploy(
        "sleeper",
        parent="""
        flow: parent
        steps:
          - bg: { call: sleeper, detach: true }
          - after: { set: { child: "{{ bg.run_id }}" } }
        """,
    )
    rid = project.start("parent")
    [child] = project.runs("sleeper")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"]["after"] == {"child": child.id}
    [link] = project.children(rid)
    assert link.detached is True
    project.eng.advance("1h")
    project.eng.work()
    assert project.show(child.id)["status"] == "completed"
    assert project.step_history(rid, "call.ended") == []


def test_calls_nested_deeper_than_16_fail_the_step_naming_the_depth(project: Project) -> None:
    project.deploy("deep")
    rid = project.start("deep")
    runs = project.runs("deep")
    assert len(runs) == 17  # the top run and 16 nested calls
    deepest = max(runs, key=lambda r: r.state.get("depth", 0))
    assert deepest.state["depth"] == 16
    assert project.show(deepest.id)["error"] == {
        "step": "again", "type": "call",
        "message": "call of [deep] would start a run nested 17 calls deep; calls nest at most "
        "16 deep",
    }  # fmt: skip
    assert all(r.status == "failed" for r in runs)
    assert project.show(rid)["error"]["type"] == "call"


def test_a_disabled_called_flow_fails_the_step_naming_it(project: Project) -> None:
    project.deploy(
        "child", parent="flow: parent\nsteps:\n  - c: { call: child, inputs: { tenant: t } }\n"
    )
    project.eng.set_enabled("child", False)
    rid = project.start("parent")
    assert project.runs("child") == []
    assert project.show(rid)["error"] == {
        "step": "c", "type": "call",
        "message": "flow [child] is disabled; enable it to start runs",
    }  # fmt: skip


def test_the_child_runs_the_newest_enabled_version_and_stays_on_it(project: Project) -> None:
    project.deploy("sleeper", parent="flow: parent\nsteps:\n  - s: { call: sleeper }\n")
    rid = project.start("parent")
    [child] = project.runs("sleeper")
    project.deploy(
        sleeper="flow: sleeper\nsteps:\n  - nap: { wait: { for: 1h } }\noutput: { v: 2 }\n"
    )
    project.eng.advance("1h")
    project.eng.work()
    assert project.show(rid)["bindings"]["s"]["output"] == {"slept": True}
    assert project.show(child.id)["version"] == 1
    rid2 = project.start("parent")
    project.eng.advance("1h")
    project.eng.work()
    assert project.show(rid2)["bindings"]["s"]["output"] == {"v": 2}


# --- purge ------------------------------------------------------------------------------------


def test_purge_keeps_a_child_while_its_parent_is_stored(project: Project) -> None:
    project.deploy(
        "quiet",
        parent="""
        flow: parent
        steps:
          - bg: { call: quiet, detach: true }
          - nap: { wait: { for: 30d } }
        """,
    )
    rid = project.start("parent")
    [child] = project.runs("quiet")
    assert project.show(child.id)["status"] == "completed"
    project.eng.advance("10d")
    assert project.eng.purge("1d")["purged"] == 0  # the child's parent is still waiting
    assert project.show(child.id)["status"] == "completed"
    project.eng.cancel(rid)
    project.eng.advance("10d")
    report = project.eng.purge("1d")
    assert report["purged"] == 2
    assert report["rows"]["calls"] == 1
    assert project.children(rid) == []


def test_a_timeout_due_with_the_childs_end_lets_exactly_one_of_them_win(project: Project) -> None:
    project.deploy(
        "sleeper",
        parent="flow: parent\nsteps:\n  - s: { call: sleeper, timeout: 1h }\n",
    )
    rid = project.start("parent")
    project.eng.advance("1h")  # the child's wait and the parent's timeout fall due together
    project.eng.work()
    run = project.show(rid)
    ended = project.step_history(rid, "call.ended")
    timed_out = run["error"] is not None and run["error"]["type"] == "timeout"
    assert len(ended) + int(timed_out) == 1
    assert run["status"] == ("failed" if timed_out else "completed")
