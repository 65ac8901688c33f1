"""`procflow validate` and `procflow graph` end to end: output format, JSON, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

EXAMPLES = [
    "examples/provisioning/app.intent",
    "examples/orders/orders.intent",
    "examples/onboarding/onboarding.flow.yaml",
]
LINE = re.compile(
    r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): .+ \(.+\)$"
)

BAD_FLOW = """\
flow: bad
steps:
  - cool:
      wait: { for: 2d, until: "2027-01-01" }
  - poll:
      repeat: { every: 30s, max: 0, until: "{{ true }}" }
      steps:
        - x: { log.write: { message: hi } }
"""


def test_examples_validate_clean(procflow):
    result = procflow("validate", *EXAMPLES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "checked 3 files: 0 error(s), 0 warning(s)" in result.stderr


def test_a_folder_validates_every_definition_inside(procflow):
    result = procflow("validate", "examples")
    assert result.returncode == 0, result.stdout + result.stderr
    # the three shared examples plus reminders/ (this project's own flow for the tour),
    # nightly-report/, tenant-onboarding/'s three, customer-sync/ and order-review/
    assert "checked 10 files" in result.stderr


def test_problems_are_printed_as_path_line_col_sorted_with_exit_1(procflow, tmp_path: Path):
    (tmp_path / "bad.flow.yaml").write_text(BAD_FLOW)
    result = procflow("validate", "bad.flow.yaml", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) >= 2, result.stdout
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert all(m["file"] == "bad.flow.yaml" for m in parsed if m)  # the path as given
    positions = [(int(m["line"]), int(m["col"])) for m in parsed if m]
    assert positions == sorted(positions)
    assert "Traceback" not in result.stderr


def test_json_output_has_the_documented_shape(procflow, tmp_path: Path):
    (tmp_path / "bad.flow.yaml").write_text(BAD_FLOW)
    result = procflow("validate", "--json", "bad.flow.yaml", cwd=tmp_path)
    assert result.returncode == 1
    problems = json.loads(result.stdout)
    assert problems and all(
        set(p) == {"file", "line", "col", "severity", "message", "path"} for p in problems
    )
    assert {p["severity"] for p in problems} == {"error"}


def test_warnings_alone_exit_0_and_are_printed(procflow, tmp_path: Path):
    (tmp_path / "w.intent").write_text("name: t\nreports: []\n")
    result = procflow("validate", "w.intent", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == (
        "w.intent:2:1: warning: file: key [reports] is not run by procflow (ignored) (reports)\n"
    )
    as_json = procflow("validate", "--json", "w.intent", cwd=tmp_path)
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == [
        {
            "file": "w.intent",
            "line": 2,
            "col": 1,
            "severity": "warning",
            "message": "file: key [reports] is not run by procflow (ignored)",
            "path": "reports",
        }
    ]


def test_json_of_clean_files_is_an_empty_array(procflow):
    result = procflow("validate", "--json", *EXAMPLES)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_a_folder_without_definitions_is_an_unusable_request(procflow, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    result = procflow("validate", "empty", cwd=tmp_path)
    assert result.returncode == 2
    assert "empty: no *.intent or *.flow.yaml files in this folder" in result.stderr


def test_missing_file_is_an_unusable_request(procflow):
    result = procflow("validate", "nowhere.intent")
    assert result.returncode == 2
    assert "nowhere.intent: no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_that_is_not_a_definition_is_refused(procflow, tmp_path: Path):
    (tmp_path / "notes.txt").write_text("hello")
    result = procflow("validate", "notes.txt", cwd=tmp_path)
    assert result.returncode == 2
    assert "procflow reads *.intent and *.flow.yaml files" in result.stderr


def test_yaml_syntax_errors_are_reported_with_position(procflow, tmp_path: Path):
    (tmp_path / "broken.intent").write_text("name: x\nprocesses: [\n")
    result = procflow("validate", "broken.intent", cwd=tmp_path)
    assert result.returncode == 1
    assert re.search(r"^broken\.intent:\d+:\d+: error: YAML syntax error", result.stdout, re.M)


def test_unknown_flag_is_exit_2(procflow):
    result = procflow("validate", "--nope", "examples")
    assert result.returncode == 2


def test_graph_draws_mermaid_and_dot(procflow):
    mermaid = procflow("graph", "examples/provisioning/app.intent")
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout.startswith(("flowchart", "graph"))
    assert "on error (after 3 retries)" in mermaid.stdout
    dot = procflow("graph", "examples/onboarding/onboarding.flow.yaml", "--format", "dot")
    assert dot.returncode == 0, dot.stderr
    assert dot.stdout.lstrip().startswith("digraph")


def test_graph_of_an_invalid_file_prints_its_problems(procflow, tmp_path: Path):
    (tmp_path / "bad.flow.yaml").write_text(BAD_FLOW)
    result = procflow("graph", "bad.flow.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "bad.flow.yaml:" in result.stderr


def test_a_missing_file_does_not_hide_the_other_files_problems(procflow, tmp_path: Path):
    (tmp_path / "bad.flow.yaml").write_text(BAD_FLOW)
    result = procflow("validate", "--json", "bad.flow.yaml", "missing.intent", cwd=tmp_path)
    assert result.returncode == 2
    assert json.loads(result.stdout)  # bad.flow.yaml's problems are still reported
    assert "missing.intent: no such file" in result.stderr
