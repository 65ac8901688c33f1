"""Files procflow refuses to read, end to end: `--max-file-size` (and PROCFLOW_MAX_FILE_SIZE) on
validate, graph, deploy and run; named pipes and devices refused without waiting; a folder's
non-regular entries skipped. A refused file is exit 2, one line on stderr, and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import Cli

Procflow = Callable[..., subprocess.CompletedProcess[str]]

FLOW = "flow: tiny\nsteps:\n  - a: { set: { v: 1 } }\n"
HINT = "raise it with --max-file-size or PROCFLOW_MAX_FILE_SIZE"
POSIX = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


def tiny(folder: Path, name: str = "tiny.flow.yaml") -> Path:
    path = folder / name
    path.write_text(FLOW)
    return path


def over(path: Path, shown: str) -> str:
    size = path.stat().st_size  # under 1 KiB: said once, in bytes
    return f"error: {path}: is {size} bytes, over the limit of {shown}; {HINT}\n"


def test_validate_refuses_a_file_over_the_limit(procflow: Procflow, tmp_path: Path) -> None:
    path = tiny(tmp_path)
    done = procflow("validate", "--max-file-size", "20", str(path))
    assert done.returncode == 2
    assert done.stderr == "checked 0 files: 0 error(s), 0 warning(s)\n" + over(path, "20 bytes")
    assert procflow("validate", "--max-file-size", "1KiB", str(path)).returncode == 0


def test_the_limit_can_come_from_the_environment(tmp_path: Path) -> None:
    path = tiny(tmp_path)
    env = {**os.environ, "PROCFLOW_MAX_FILE_SIZE": "20"}
    done = subprocess.run(
        [sys.executable, "-m", "procflow.cli", "graph", str(path)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == over(path, "20 bytes")


def test_a_size_that_is_not_one_is_refused(procflow: Procflow, tmp_path: Path) -> None:
    done = procflow("validate", "--max-file-size", "ten", str(tiny(tmp_path)))
    assert done.returncode == 2
    assert "Invalid value for '--max-file-size'" in done.stderr
    assert "[ten] is not a size; give bytes or a size like 10MiB or 512KiB" in done.stderr


def test_help_shows_the_flag_and_its_variable(procflow: Procflow) -> None:
    for command in ("validate", "graph", "deploy", "run"):
        done = procflow(command, "--help")
        assert "--max-file-size SIZE" in done.stdout, command
        assert "PROCFLOW_MAX_FILE_SIZE" in done.stdout, command


@POSIX
def test_a_named_pipe_is_refused_at_once(procflow: Procflow, tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.intent"
    os.mkfifo(pipe)
    done = procflow("validate", str(pipe))  # would wait for a writer forever if it were opened
    assert done.returncode == 2
    assert done.stderr.endswith(
        f"error: {pipe}: not a regular file (a named pipe); procflow reads only regular files\n"
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_link_to_an_endless_device_is_refused(procflow: Procflow, tmp_path: Path) -> None:
    link = tmp_path / "zero.flow.yaml"
    link.symlink_to("/dev/zero")
    done = procflow("graph", str(link))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {link}: not a regular file (a character device); procflow reads only regular "
        "files\n"
    )


@POSIX
def test_a_folder_skips_what_is_not_a_regular_file(procflow: Procflow, tmp_path: Path) -> None:
    tiny(tmp_path)
    os.mkfifo(tmp_path / "pipe.flow.yaml")
    (tmp_path / "folder.intent").mkdir()
    done = procflow("validate", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"note: skipped {tmp_path / 'folder.intent'}: not a regular file\n"
        f"note: skipped {tmp_path / 'pipe.flow.yaml'}: not a regular file\n"
        "checked 1 file: 0 error(s), 0 warning(s)\n"
    )


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    return Cli(db_url, db_env, tmp_path)


def test_deploy_over_the_limit_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    path = tiny(tmp_path)
    assert cli.error("deploy", "--max-file-size", "20", str(path)) == over(path, "20 bytes")
    assert cli.json("definitions", "list") == []
    cli("deploy", "--max-file-size", "1KiB", str(path))
    assert [d["name"] for d in cli.json("definitions", "list")] == ["tiny"]


def test_run_over_the_limit_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    path = tiny(tmp_path)
    assert cli.error("run", "--max-file-size", "20", str(path)) == over(path, "20 bytes")
    assert cli.json("runs", "list") == []
    assert cli.json("definitions", "list") == []


def test_a_limit_raised_by_the_flag_reaches_the_deploy(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "padded.flow.yaml"
    path.write_text(FLOW + "#" * 2000 + "\n")
    cli.env["PROCFLOW_MAX_FILE_SIZE"] = "1KiB"
    cli.error("deploy", str(path))
    cli("deploy", "--max-file-size", "4KiB", str(path))  # the flag wins over the variable
    assert [d["name"] for d in cli.json("definitions", "list")] == ["tiny"]
