from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def procflow() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs the real `procflow` command in a subprocess, as a user would."""

    def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "NO_COLOR": "1"}
        return subprocess.run(
            [sys.executable, "-m", "procflow.cli", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run
