"""The static checks of ``call`` on the command line: ``procflow validate`` checks a flow's calls
against the files validated together; ``procflow deploy`` and ``procflow run`` against the
files deployed together and the flows already deployed, storing all the files or none."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import Cli
from store_dump import dump

Procflow = Callable[..., subprocess.CompletedProcess[str]]

PARENT = """\
flow: parent
steps:
  - kid:
      call: child
      inputs: { name: ann }
"""
CHILD = """\
flow: child
inputs:
  name: { type: string, required: true }
output:
  greeting: "hi {{ name }}"
steps:
  - hi: { log.write: { message: "hi {{ name }}" } }
"""
UNKNOWN = (
    "parent.flow.yaml:4:13: error: step [kid]: call: no flow [child] is deployed or validated "
    "with this file (steps[0].kid.call)"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "parent.flow.yaml").write_text(PARENT)
    (tmp_path / "child.flow.yaml").write_text(CHILD)
    return tmp_path


def test_validate_checks_calls_against_the_files_validated_together(
    procflow: Procflow, project: Path
) -> None:
    together = procflow("validate", "parent.flow.yaml", "child.flow.yaml", cwd=project)
    assert together.returncode == 0, together.stdout + together.stderr
    assert together.stdout == ""
    assert procflow("validate", ".", cwd=project).returncode == 0  # a folder: its files together
    alone = procflow("validate", "parent.flow.yaml", cwd=project)
    assert alone.returncode == 1
    assert alone.stdout == UNKNOWN + "\n"
    assert "checked 1 file: 1 error(s), 0 warning(s)" in alone.stderr


def test_validate_json_lists_a_call_problem_as_any_other(procflow: Procflow, project: Path) -> None:
    (project / "parent.flow.yaml").write_text(PARENT.replace("name: ann", "nme: ann"))
    done = procflow("validate", "--json", "parent.flow.yaml", "child.flow.yaml", cwd=project)
    assert done.returncode == 1
    assert json.loads(done.stdout) == [
        {
            "file": "parent.flow.yaml",
            "line": 5,
            "col": 17,
            "severity": "error",
            "message": "step [kid]: flow [child] has no input [nme]; did you mean [name]? "
            "(its inputs: name)",
            "path": "steps[0].kid.inputs.nme",
        }
    ]


@pytest.fixture
def cli(project: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    return Cli(db_url, db_env, project)


def test_deploy_takes_a_caller_before_the_flow_it_calls(cli: Cli, db_url: str) -> None:
    done = cli("deploy", "parent.flow.yaml", "child.flow.yaml")
    assert done.stdout == "parent → version 1\nchild → version 1\n"
    run = cli.json("run", "parent.flow.yaml")  # calls the deployed child
    assert run["status"] == "completed", run


def test_a_deploy_with_an_unknown_call_exits_1_and_stores_nothing(cli: Cli, db_url: str) -> None:
    before = dump(db_url)
    (cli.cwd / "parent.flow.yaml").write_text(PARENT.replace("call: child", "call: chidl"))
    refused = cli("deploy", "child.flow.yaml", "parent.flow.yaml", code=1)
    assert refused.stdout == ""
    assert refused.stderr == (
        "parent.flow.yaml:4:13: error: step [kid]: call: no flow [chidl] is deployed or "
        "validated with this file; did you mean [child]? (steps[0].kid.call)\n"
    )
    assert dump(db_url) == before  # not even the good file
    ran = cli("run", "parent.flow.yaml", code=1)
    assert "no flow [chidl]" in ran.stderr
    assert dump(db_url) == before
