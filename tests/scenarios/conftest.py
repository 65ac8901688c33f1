"""Helpers of the `procflow test` tests: a project folder to write definitions and test files
into (a copy of the provisioning example, with its delegates), and the CLI run in-process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from scenario_helpers import EXAMPLES, PROBE_FLOW, Project, Ran

from procflow.cli import _run


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A folder holding the provisioning example (app.intent, custom/), the orders example
    (orders.intent) and the probe flow."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES / "provisioning", root, ignore=shutil.ignore_patterns("*.test.yaml"))
    (root / "probe.flow.yaml").write_text(PROBE_FLOW, encoding="utf-8")
    shutil.copy(EXAMPLES / "orders" / "orders.intent", root / "orders.intent")
    return Project(root)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """``procflow ARGS`` in this process (``cwd``: where it runs); its exit code and output."""

    def run(*args: str, cwd: Path | None = None) -> Ran:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = _run(list(args))
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
