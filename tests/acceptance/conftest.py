from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import run_procflow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def procflow() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs the real `procflow` command in a process of its own, as a user would."""

    def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        done, _ = run_procflow(list(args), {**os.environ, "NO_COLOR": "1"}, cwd)
        return done

    return run
