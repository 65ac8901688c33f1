"""A deploy checks every ``call`` against the files deployed together and the flows already
deployed (their latest version's inputs), and stores all its files or none; on both backends.

A refused deploy is a :class:`DefinitionError` with every problem at its position, and leaves
every table as it was (``store_dump``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_dump import dump_store

from procflow.errors import DefinitionError, DeployError
from procflow.runtime.engine import Engine
from procflow.runtime.interpret.flow_call import CALL_FAKES

CHILD = """\
flow: child
inputs:
  name: { type: string, required: true }
  seats: { type: integer }
output:
  greeting: "hi {{ name }}"
steps:
  - hi: { log.write: { message: "hi {{ name }}" } }
"""
PARENT = """\
flow: parent
steps:
  - kid:
      call: child
      inputs: { name: ann, seats: 2 }
"""
SHOP = """\
name: shop
entities:
  - name: Item
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
processes:
  - name: Tidy
    trigger: { onCreate: Item }
    steps:
      - { name: done, kind: end }
"""


class Project:
    """Flow files in a folder and a virtual-clock engine on the test's store."""

    def __init__(self, root: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.root = root
        self.db_url = db_url
        self.db_env = db_env
        self.engine = self.new_engine()

    def new_engine(self) -> Engine:
        """An engine of its own (a catalog that has compiled nothing yet)."""
        return Engine.virtual(self.db_url, project_dir=str(self.root), environ=dict(self.db_env))

    def write(self, name: str, text: str) -> str:
        path = self.root / name
        path.write_text(text)
        return str(path)

    def refused(self, *paths: str) -> list[str]:
        """Deploying ``paths`` is refused and changes nothing: its problems, as validate
        prints them (file name only)."""
        before = dump_store(self.engine.store)
        with pytest.raises(DefinitionError) as caught:
            self.engine.deploy(*paths)
        assert dump_store(self.engine.store) == before
        return [d.format().split("/")[-1] for d in caught.value.diagnostics]

    def names(self) -> list[str]:
        return [row[0] for row in self.engine.store.read().definitions()]


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    made = Project(tmp_path, db_url, db_env)
    yield made
    made.engine.close()


def test_a_caller_deploys_before_its_callee_in_one_deploy(project: Project) -> None:
    parent = project.write("parent.flow.yaml", PARENT)
    child = project.write("child.flow.yaml", CHILD)
    done = project.engine.deploy(parent, child)
    assert [(d.name, d.version) for d in done] == [("parent", 1), ("child", 1)]
    run_id = project.engine.start_flow("parent", {})
    project.engine.work()
    shown = project.engine.show(run_id)
    assert shown["status"] == "completed", shown


def test_a_call_of_a_deployed_flow_is_checked_with_its_latest_inputs(project: Project) -> None:
    project.engine.deploy(project.write("child.flow.yaml", CHILD))
    project.engine.deploy(project.write("parent.flow.yaml", PARENT))  # child is deployed
    newer = CHILD.replace("  seats: { type: integer }\n", "  plan: { type: string }\n")
    project.engine.deploy(project.write("child.flow.yaml", newer))  # the latest: no seats
    wrong = project.write("wrong.flow.yaml", PARENT.replace("parent", "wrong"))
    assert project.refused(wrong) == [
        "wrong.flow.yaml:5:28: error: step [kid]: flow [child] has no input [seats] (its inputs: "
        "name, plan) (steps[0].kid.inputs.seats)"
    ]


def test_an_unknown_flow_refuses_every_file_of_the_deploy(project: Project) -> None:
    child = project.write("child.flow.yaml", CHILD)
    parent = project.write("parent.flow.yaml", PARENT.replace("call: child", "call: chidl"))
    assert project.refused(child, parent) == [
        "parent.flow.yaml:4:13: error: step [kid]: call: no flow [chidl] is deployed or "
        "validated with this file; did you mean [child]? (steps[0].kid.call)"
    ]
    assert project.names() == []


def test_every_file_s_problems_are_reported_at_once(project: Project) -> None:
    parent = project.write("parent.flow.yaml", PARENT.replace("seats: 2", "seats: two"))
    broken = project.write("broken.flow.yaml", "flow: broken\nsteps:\n  - a: { call: nope }\n")
    shown = project.refused(parent, broken)
    assert [s.split(": error: ")[0] for s in shown] == [
        "parent.flow.yaml:4:13",  # no flow [child]
        "broken.flow.yaml:3:16",  # no flow [nope]
    ]
    child = project.write("child.flow.yaml", CHILD)
    assert project.refused(child, parent) == [
        "parent.flow.yaml:5:35: error: step [kid]: input [seats] of flow [child] must be an "
        "integer, got a string (steps[0].kid.inputs.seats)"
    ]


def test_an_intent_process_cannot_be_called(project: Project) -> None:
    project.engine.deploy(project.write("shop.intent", SHOP))
    caller = project.write("caller.flow.yaml", "flow: caller\nsteps:\n  - a: { call: Tidy }\n")
    assert project.refused(caller) == [
        "caller.flow.yaml:3:16: error: step [a]: call: [Tidy] is an intent process; call starts "
        "flows only (steps[0].a.call)"
    ]


def test_a_flow_may_call_itself(project: Project) -> None:
    text = 'flow: loop\nsteps:\n  - again: { call: loop, if: "{{ false }}" }\n'
    done = project.engine.deploy(project.write("loop.flow.yaml", text))
    assert [d.name for d in done] == ["loop"]


def test_a_file_refused_over_what_is_deployed_stores_none_of_the_deploy(
    project: Project,
) -> None:
    project.engine.deploy(project.write("shop.intent", SHOP))
    child = project.write("child.flow.yaml", CHILD)
    tidy = project.write(
        "tidy.flow.yaml", "flow: Tidy\nsteps:\n  - a: { call: child, inputs: { name: x } }\n"
    )
    before = dump_store(project.engine.store)
    with pytest.raises(DeployError, match=r"\[Tidy\] is already deployed as an intent process"):
        project.engine.deploy(child, tidy)
    assert dump_store(project.engine.store) == before  # child was not stored either


def test_a_new_version_that_breaks_a_deployed_caller_is_allowed(project: Project) -> None:
    # As in Camunda and Temporal: the callers are not checked; the call fails at run time.
    project.engine.deploy(project.write("child.flow.yaml", CHILD))
    project.engine.deploy(project.write("parent.flow.yaml", PARENT))
    narrower = CHILD.replace("  seats: { type: integer }\n", "")
    assert project.engine.deploy(project.write("child.flow.yaml", narrower))[0].version == 2
    run_id = project.engine.start_flow("parent", {})
    project.engine.work()
    shown = project.engine.show(run_id)
    assert shown["status"] == "failed"
    assert "the inputs of [child]" in str(shown), shown


def test_a_deployed_flow_that_no_longer_compiles_is_called_by_name_only(
    project: Project,
) -> None:
    connector = project.root / "connectors" / "mini"
    connector.mkdir(parents=True)
    (connector / "manifest.yaml").write_text("connector: mini\nactions:\n  go: {}\n")
    child = CHILD.replace('log.write: { message: "hi {{ name }}" }', "mini.go: {}")
    project.engine.deploy(project.write("child.flow.yaml", child))
    shutil.rmtree(connector)  # the stored version no longer compiles in this project
    fresh = project.new_engine()
    try:
        caller = PARENT.replace("seats: 2", "anything: 2")
        assert [d.name for d in fresh.deploy(project.write("p.flow.yaml", caller))] == ["parent"]
    finally:
        fresh.close()


def test_a_flow_faked_by_procflow_test_may_be_called(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = project.write("p.flow.yaml", PARENT.replace("call: child", "call: faked"))
    assert project.refused(caller)[0].endswith(
        "no flow [faked] is deployed or validated with this file (steps[0].kid.call)"
    )
    monkeypatch.setitem(CALL_FAKES, "faked", lambda inputs: {"ok": True})
    assert [d.name for d in project.engine.deploy(caller)] == ["parent"]


def test_the_version_anchoring_an_intent_file_s_entities_is_no_process(project: Project) -> None:
    entities_only = SHOP[: SHOP.index("processes:")]
    project.engine.deploy(project.write("shop.intent", entities_only))
    assert "shop@entities" in project.names()
    caller = project.write("c.flow.yaml", "flow: c\nsteps:\n  - a: { call: shop@entities }\n")
    assert project.refused(caller) == [
        "c.flow.yaml:3:16: error: step [a]: call: no flow [shop@entities] is deployed or "
        "validated with this file (steps[0].a.call)"
    ]
