"""Flows through the real `procflow` command, end to end, on both store backends.

Every command is its own `procflow` process that has exited before the next one starts, on a
store made by `procflow db init --virtual-clock` (the clock starts at 2027-01-01T00:00:00Z). Time
only moves with `procflow clock advance` (or `run --wait`), so a waiting run is woken by a *new*
process reading the store, never by one kept alive in between.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Cli, live_processes

ROOT = Path(__file__).resolve().parents[2]
ONBOARDING = ROOT / "examples" / "onboarding"

# `procflow db init` must create the schema itself: on PostgreSQL, db_url names an empty database.
pytestmark = pytest.mark.empty_store


@pytest.fixture
def cli(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Cli:
    cli = Cli(db_url, db_env, tmp_path)
    assert "virtual clock at 2027-01-01T00:00:00Z" in cli("db", "init", "--virtual-clock").stdout
    return cli


def history(shown: dict[str, Any], *types: str) -> list[tuple[Any, ...]]:
    """(type, path, at) of the history entries of the given types (all when none given)."""
    return [
        (h["type"], h.get("path"), h["at"])
        for h in shown["history"]
        if not types or h["type"] in types
    ]


def search_project(root: Path, index: dict[str, str]) -> Path:
    """A project folder with the onboarding example's `search` connector and its index file."""
    root.mkdir()
    shutil.copytree(ONBOARDING / "connectors", root / "connectors")
    (root / "search-index.json").write_text(json.dumps(index))
    return root


# --- 1. wait: for / until ----------------------------------------------------------------------

WAITS = """\
flow: waits
inputs:
  hire: { type: object, required: true }
steps:
  - cooling_off:
      wait: { for: 2d }

  - day_before:
      wait: { until: "{{ hire.start_date | minus(1d) }}" }

  - greet: { set: { name: "{{ hire.name }}" } }
output:
  greeted: "{{ greet.name }}"
"""


def test_wait_for_and_until_wake_exactly_on_time_in_new_processes(cli: Cli, tmp_path: Path) -> None:
    flow = tmp_path / "waits.flow.yaml"
    flow.write_text(WAITS)
    hire = 'hire={"start_date": "2027-01-10", "name": "Ada"}'
    shown = cli.json("run", str(flow), "--input", hire)
    run_id = shown["id"]
    # A second run whose day-before instant (2027-01-01) is already past when its cooling-off ends.
    early = cli.json("run", str(flow), "--input", 'hire={"start_date": "2027-01-02", "name": "Bo"}')
    assert live_processes(cli.url) == []

    shown = cli.show(run_id)
    assert (shown["status"], shown["dialect"], shown["record"]) == ("waiting", "flow", None)
    assert shown["tokens"] == [
        {
            "step": "cooling_off",
            "state": "waiting",
            "waiting_for": {"kind": "timer", "due": "2027-01-03T00:00:00Z"},
            "since": "2027-01-01T00:00:00Z",
        }
    ]
    assert shown["bindings"] == {}

    cli.advance("1d23h59m", "2027-01-02T23:59:00Z")
    assert live_processes(cli.url) == []
    assert cli.show(run_id)["tokens"] == shown["tokens"]  # one minute early: still asleep

    cli.advance("1m", "2027-01-03T00:00:00Z")
    shown = cli.show(run_id)
    assert shown["status"] == "waiting"
    assert shown["tokens"] == [
        {
            "step": "day_before",
            "state": "waiting",
            "waiting_for": {"kind": "timer", "due": "2027-01-09T00:00:00Z"},
            "since": "2027-01-03T00:00:00Z",
        }
    ]
    assert shown["bindings"] == {"cooling_off": {"until": "2027-01-03T00:00:00Z"}}
    assert ("timer.fired", "cooling_off", "2027-01-03T00:00:00Z") in history(shown)

    # The past instant resumed at once: that run ended the moment its cooling-off did.
    early = cli.show(early["id"])
    assert early["status"] == "completed"
    assert early["ended_at"] == "2027-01-03T00:00:00Z"
    assert early["bindings"]["day_before"] == {"until": "2027-01-03T00:00:00Z"}
    assert early["output"] == {"greeted": "Bo"}

    cli.advance("5d23h59m", "2027-01-08T23:59:00Z")
    assert cli.show(run_id)["tokens"] == shown["tokens"]
    cli.advance("1m", "2027-01-09T00:00:00Z")
    assert live_processes(cli.url) == []
    shown = cli.show(run_id)
    assert shown["status"] == "completed", shown
    assert shown["ended_at"] == "2027-01-09T00:00:00Z"
    assert shown["tokens"] == []
    assert shown["bindings"] == {
        "cooling_off": {"until": "2027-01-03T00:00:00Z"},
        "day_before": {"until": "2027-01-09T00:00:00Z"},
        "greet": {"name": "Ada"},
    }
    assert shown["output"] == {"greeted": "Ada"}
    assert history(shown, "timer.armed", "timer.fired") == [
        ("timer.armed", "cooling_off", "2027-01-01T00:00:00Z"),
        ("timer.fired", "cooling_off", "2027-01-03T00:00:00Z"),
        ("timer.armed", "day_before", "2027-01-03T00:00:00Z"),
        ("timer.fired", "day_before", "2027-01-09T00:00:00Z"),
    ]


# --- 2. repeat: bounded polling ----------------------------------------------------------------

POLL = """\
flow: {name}
inputs:
  ticket: {{ type: object, required: true }}
steps:
  - indexed:{optional}
      repeat: {{ every: 30s, max: 20, until: "{{{{ check.status == 'indexed' }}}}" }}
      steps:
        - check: {{ search.status: {{ id: "{{{{ ticket.id }}}}" }} }}
output:
  polls: "{{{{ indexed | length }}}}"
"""
TICKET = 'ticket={"id": "T-1"}'


def poll_flow(project: Path, name: str, optional: bool = False) -> str:
    path = project / f"{name}.flow.yaml"
    extra = "\n      optional: true" if optional else ""
    path.write_text(POLL.format(name=name, optional=extra))
    return str(path)


def test_repeat_polls_every_30s_and_completes_once_the_index_says_so(
    cli: Cli, tmp_path: Path
) -> None:
    project = search_project(tmp_path / "project", {})
    shown = cli.json("run", poll_flow(project, "poll"), "--input", TICKET)
    run_id = shown["id"]
    assert shown["status"] == "waiting"
    # The first check ran at once; the next waits 30 s.
    assert history(shown, "step.completed") == [
        ("step.completed", "indexed[0].check", "2027-01-01T00:00:00Z")
    ]
    assert shown["tokens"] == [
        {
            "step": "indexed",
            "state": "waiting",
            "waiting_for": {
                "kind": "poll",
                "iteration": 2,
                "of": 20,
                "due": "2027-01-01T00:00:30Z",
            },
            "since": "2027-01-01T00:00:00Z",
        }
    ]

    cli.advance("30s", "2027-01-01T00:00:30Z")
    shown = cli.show(run_id)
    wait = shown["tokens"][0]["waiting_for"]
    assert wait == {"kind": "poll", "iteration": 3, "of": 20, "due": "2027-01-01T00:01:00Z"}
    assert ("step.completed", "indexed[1].check", "2027-01-01T00:00:30Z") in history(shown)

    # Between two CLI calls, the search service indexes the ticket.
    (project / "search-index.json").write_text(json.dumps({"T-1": "indexed"}))
    cli.advance("29s", "2027-01-01T00:00:59Z")
    assert cli.show(run_id)["tokens"] == shown["tokens"]  # not polled early

    cli.advance("1s", "2027-01-01T00:01:00Z")
    shown = cli.show(run_id)
    assert shown["status"] == "completed", shown
    assert shown["ended_at"] == "2027-01-01T00:01:00Z"
    assert shown["bindings"] == {
        "indexed": [
            {"check": {"status": "pending"}},
            {"check": {"status": "pending"}},
            {"check": {"status": "indexed"}},
        ]
    }
    assert shown["output"] == {"polls": 3}
    checks = [at for kind, path, at in history(shown, "step.started") if path != "indexed"]
    assert checks == ["2027-01-01T00:00:00Z", "2027-01-01T00:00:30Z", "2027-01-01T00:01:00Z"]
    done = [h for h in shown["history"] if h["type"] == "step.completed" and h["step"] == "indexed"]
    assert [h["iterations"] for h in done] == [3]


REPEAT_EXHAUSTED = (
    "repeat [indexed] ran its max of 20 iterations and [check.status == 'indexed'] is still "
    "false (check.status = 'pending')"
)


def test_repeat_fails_after_max_iterations_unless_optional(cli: Cli, tmp_path: Path) -> None:
    project = search_project(tmp_path / "project", {"T-2": "indexed"})  # not T-1
    failed = cli("run", poll_flow(project, "poll"), "--input", TICKET, "--wait", code=1)
    assert REPEAT_EXHAUSTED in failed.stdout + failed.stderr
    [run] = cli.json("runs", "list")
    shown = cli.show(run["id"])
    assert shown["status"] == "failed"
    assert shown["error"] == {"step": "indexed", "message": REPEAT_EXHAUSTED, "type": "repeat"}
    assert shown["tokens"] == [{"step": "indexed", "state": "failed"}]
    checks = [at for _, path, at in history(shown, "step.completed") if path.endswith(".check")]
    assert len(checks) == 20
    assert (checks[0], checks[-1]) == ("2027-01-01T00:00:00Z", "2027-01-01T00:09:30Z")
    assert len(history(shown, "timer.armed")) == 19
    assert history(shown, "step.failed")[-1][:2] == ("step.failed", "indexed")

    # optional: the failure is bound instead, and the run goes on (here: to its output).
    shown = cli.json(
        "run", poll_flow(project, "poll-optional", optional=True), "--input", TICKET, "--wait"
    )
    assert shown["status"] == "completed", shown
    error = {"message": REPEAT_EXHAUSTED, "step": "indexed", "type": "repeat"}
    assert shown["bindings"] == {"indexed": {"error": error}}
    assert shown["error"] is None
    # It started where the first run's --wait left the clock, and polled 19 × 30 s.
    assert (shown["started_at"], shown["ended_at"]) == (
        "2027-01-01T00:09:30Z",
        "2027-01-01T00:19:00Z",
    )


# --- 3, 4. the onboarding example --------------------------------------------------------------

APPROVAL_WAIT = """\
  - approval:
      wait_for: slack.approval
      match: { message: "{{ ask.ts }}" }
      timeout: 24h
"""
APPROVAL_SET = "  - approval: { set: { status: received, event: { approved: true } } }\n"
ONBOARDING_INPUTS = (
    "--input", 'hire={"start_date": "2027-01-10", "name": "Ada"}',
    "--input", 'deal={"name": "Acme"}',
    "--input", 'ticket={"id": "T-1"}',
)  # fmt: skip
ONBOARDING_STEPS = ("cooling_off", "day_before", "ask", "approval", "indexed", "check", "note")


def test_onboarding_unmodified_waits_for_its_approval_until_the_24h_timeout(cli: Cli) -> None:
    """No click at all: `run --wait` advances the virtual clock through every due time; the
    approval times out at exactly 24 h, `indexed` is skipped, and the run completes."""
    flow = str(ONBOARDING / "onboarding.flow.yaml")
    shown = cli.json("run", flow, *ONBOARDING_INPUTS, "--wait")
    assert shown["status"] == "completed", shown["error"]
    assert shown["bindings"]["approval"] == {"status": "timeout", "event": None}
    assert shown["bindings"]["indexed"] is None
    assert shown["output"] == {"approved": False, "polls": 0}
    assert shown["ended_at"] == "2027-01-10T00:00:00Z"  # day_before (01-09) + 24 h


def test_onboarding_with_the_approval_stubbed_runs_to_completion(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "onboarding"
    shutil.copytree(ONBOARDING, project)
    flow = project / "onboarding.flow.yaml"
    text = flow.read_text()
    assert text.count(APPROVAL_WAIT) == 1
    flow.write_text(text.replace(APPROVAL_WAIT, APPROVAL_SET))
    (project / "search-index.json").write_text(json.dumps({"T-1": "indexed"}))

    done = cli("run", str(flow), *ONBOARDING_INPUTS, "--wait", "--json")
    shown = json.loads(done.stdout)
    assert shown["status"] == "completed", shown["error"]
    assert shown["output"] == {"approved": True, "polls": 1}
    assert shown["ended_at"] == "2027-01-09T00:00:00Z"  # the day before the start, on the dot
    bindings = shown["bindings"]
    assert bindings["approval"] == {"status": "received", "event": {"approved": True}}
    assert bindings["indexed"] == [{"check": {"status": "indexed"}}]
    # No SLACK_TOKEN: slack.post kept the message in the outbox and minted a ts.
    assert isinstance(bindings["ask"]["ts"], str) and bindings["ask"]["ts"]
    outboxed = [h for h in shown["history"] if h["type"] == "message.outboxed"]
    assert [(h["step"], h["to"]) for h in outboxed] == [("ask", "#sales-ops")]
    # ... and `procflow outbox list` shows it, in the JSON shape of docs/reference/cli.md.
    (message,) = cli.json("outbox", "list")
    assert message == {
        "id": message["id"], "channel": "slack", "to": "#sales-ops", "subject": None,
        "body": "Approve Acme?", "run_id": shown["id"], "step": "ask",
        "created_at": "2027-01-09T00:00:00Z",
    }  # fmt: skip
    assert "slack → #sales-ops" in cli("outbox", "list").stdout


def test_graph_of_the_onboarding_example_draws_every_step() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCFLOW_")}
    for fmt in ("mermaid", "dot"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "procflow.cli",
                "graph",
                "examples/onboarding/onboarding.flow.yaml",
            ]
            + (["--format", fmt] if fmt != "mermaid" else []),  # mermaid is the default
            cwd=ROOT,
            env={**env, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        drawing = done.stdout
        assert drawing.lstrip().startswith("flowchart" if fmt == "mermaid" else "digraph")
        for step in ONBOARDING_STEPS:
            assert re.search(rf"\b{step}\b", drawing), (fmt, step)


# --- 5. inputs ---------------------------------------------------------------------------------

TYPES = """\
flow: types
inputs:
  name:  { type: string, required: true }
  count: { type: integer }
  ratio: { type: number, default: 0.5 }
  vip:   { type: boolean, default: false }
  meta:  { type: object }
  at:    { type: timestamp, default: "2027-01-01" }
steps:
  - echo:
      set:
        name: "{{ name }}"
        count: "{{ count }}"
        next: "{{ count | default(0) + 1 }}"
        ratio: "{{ ratio }}"
        vip: "{{ vip }}"
        meta: "{{ meta }}"
        at: "{{ at }}"
        later: "{{ at | plus(1d) }}"
output:
  summary: "{{ name }}/{{ count }}/{{ vip }}"
  tags: "{{ meta.tags | default([]) | length }}"
"""


def test_flow_inputs_are_converted_checked_and_refused_before_anything_runs(
    cli: Cli, tmp_path: Path
) -> None:
    flow = tmp_path / "types.flow.yaml"
    flow.write_text(TYPES)
    path = str(flow)

    # Unusable inputs: exit 2, every problem on stderr, no run.
    message = cli.error("run", path, "--input", "nme=Ada", "--input", "count=3")
    assert "unknown input [nme]; did you mean [name]?" in message
    assert "missing required input [name] (string)" in message
    message = cli.error(
        "run", path, "--input", "name=A", "--input", "count=abc", "--input", "vip=yes",
        "--input", "meta=[1]", "--input", "at=tomorrow",
    )  # fmt: skip
    assert "input [count] expects an integer, got [abc]" in message
    assert "input [vip] expects true or false, got [yes]" in message
    assert "input [meta] expects an object (JSON), got an array" in message
    assert "input [at] must be an ISO-8601 timestamp" in message
    message = cli.error("run", path, "--inputs", '{"name": 3, "count": 1.5}')
    assert "input [name] must be a string, got an integer (3)" in message
    assert "input [count] must be an integer, got a number (1.5)" in message
    assert "--inputs is not valid JSON" in cli.error("run", path, "--inputs", '{"name": ')
    assert cli.json("runs", "list") == []

    # --input k=v, converted by the declared type.
    ran = cli.json(
        "run", path, "--input", "name=Ada", "--input", "count=42", "--input", "vip=TRUE",
        "--input", 'meta={"tags": ["a", "b"], "n": 1}', "--input", "at=2027-03-01T12:00:00+02:00",
    )  # fmt: skip
    shown = cli.show(ran["id"])
    assert shown["status"] == "completed", shown["error"]
    assert shown["bindings"] == {
        "echo": {
            "name": "Ada",
            "count": 42,
            "next": 43,
            "ratio": 0.5,
            "vip": True,
            "meta": {"tags": ["a", "b"], "n": 1},
            "at": "2027-03-01T10:00:00Z",
            "later": "2027-03-02T10:00:00Z",
        }
    }
    assert shown["output"] == {"summary": "Ada/42/true", "tags": 2}

    # --inputs JSON, with --input overriding one of its values; defaults fill the rest.
    ran = cli.json(
        "run", path, "--inputs", '{"name": "Bo", "count": 1, "meta": {"tags": []}}',
        "--input", "count=7",
    )  # fmt: skip
    shown = cli.show(ran["id"])
    assert shown["status"] == "completed", shown["error"]
    assert shown["bindings"]["echo"] == {
        "name": "Bo",
        "count": 7,
        "next": 8,
        "ratio": 0.5,
        "vip": False,
        "meta": {"tags": []},
        "at": "2027-01-01T00:00:00Z",
        "later": "2027-01-02T00:00:00Z",
    }
    assert shown["output"] == {"summary": "Bo/7/false", "tags": 0}
    assert [r["status"] for r in cli.json("runs", "list")] == ["completed", "completed"]


# --- 6. deploy + start + worker ----------------------------------------------------------------

GREET = """\
flow: greet
inputs:
  who: { type: string, required: true }
  times: { type: integer, default: 1 }
steps:
  - hello: { log.write: { message: "hello {{ who }} x{{ times }}" } }
  - pause: { wait: { for: 1h } }
output:
  said: "{{ who }}"
"""

INTENT = """\
name: starter
entities:
  - name: Thing
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 50 }
processes:
  - name: Handle
    steps:
      - { name: done, kind: end }
"""


def test_deploy_start_and_worker(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "greet.flow.yaml").write_text(GREET)
    (tmp_path / "app.intent").write_text(INTENT)
    assert cli("deploy", "greet.flow.yaml").stdout.strip() == "greet → version 1"
    assert "(unchanged)" in cli("deploy", "greet.flow.yaml").stdout
    assert cli("deploy", "app.intent").stdout.strip() == "Handle → version 1"

    run_id = cli("start", "greet", "--input", "who=Ada", "--input", "times=2").stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", run_id), run_id
    shown = cli.show(run_id)
    assert (shown["name"], shown["version"], shown["status"]) == ("greet", 1, "running")
    assert shown["tokens"] == [{"step": "hello", "state": "ready"}]

    # Usage errors: exit 2, nothing started.
    assert "intent process" in cli.error("start", "Handle", "--input", "who=Ada")
    assert "--record" in cli.error("start", "greet", "--record", "Thing:1")
    assert "[nosuch]" in cli.error("start", "nosuch")
    assert "missing required input [who]" in cli.error("start", "greet", "--input", "times=2")
    assert "expects an integer" in cli.error(
        "start", "greet", "--input", "who=A", "--input", "times=x"
    )

    assert "transitions" in cli("worker", "--until-idle").stderr
    shown = cli.show(run_id)
    assert shown["status"] == "waiting"
    assert shown["tokens"][0]["step"] == "pause"
    assert shown["tokens"][0]["waiting_for"] == {"kind": "timer", "due": "2027-01-01T01:00:00Z"}
    logs = [h["message"] for h in shown["history"] if h["type"] == "log"]
    assert logs == ["hello Ada x2"]

    cli.advance("1h", "2027-01-01T01:00:00Z")  # the clock wakes what falls due
    shown = cli.show(run_id)
    assert (shown["status"], shown["output"]) == ("completed", {"said": "Ada"})

    second = cli("start", "greet", "--inputs", '{"who": "Bo"}').stdout.strip()
    assert cli.show(second)["status"] == "running"
    cli("worker", "--until-idle")
    shown = cli.show(second)
    assert shown["tokens"][0]["waiting_for"] == {"kind": "timer", "due": "2027-01-01T02:00:00Z"}
    assert [h["message"] for h in shown["history"] if h["type"] == "log"] == ["hello Bo x1"]
    statuses = {r["id"]: r["status"] for r in cli.json("runs", "list")}
    assert statuses == {run_id: "completed", second: "waiting"}


# --- 7. a failing flow, fixed and retried ------------------------------------------------------

FILES_MANIFEST = """\
connector: files
description: Reads a text file from the project folder.
actions:
  read:
    args:
      name: { type: string, required: true }
    result:
      text: { type: string }
"""
FILES_CODE = """\
from pathlib import Path


def read(ctx, name):
    path = Path(ctx.project_dir) / name
    if not path.exists():
        raise FileNotFoundError(f"{name} is not there yet")
    return {"text": path.read_text().strip()}
"""
LOAD = """\
flow: load
inputs:
  file: { type: string, default: data.txt }
steps:
  - prep: { set: { file: "{{ file }}" } }
  - load: { files.read: { name: "{{ prep.file }}" } }
output:
  text: "{{ load.text }}"
"""
RUN_KEYS = [
    "id", "name", "dialect", "version", "status", "started_at", "ended_at", "business_key",
    "record", "parent", "children", "tokens", "bindings", "vars", "output", "error", "history",
]  # fmt: skip


def test_a_failed_flow_run_is_retried_after_the_cause_is_fixed(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "connectors" / "files").mkdir(parents=True)
    (tmp_path / "connectors" / "files" / "manifest.yaml").write_text(FILES_MANIFEST)
    (tmp_path / "connectors" / "files" / "__init__.py").write_text(FILES_CODE)
    (tmp_path / "load.flow.yaml").write_text(LOAD)

    failed = cli("run", "load.flow.yaml", code=1)
    assert "data.txt is not there yet" in failed.stdout + failed.stderr
    [run] = cli.json("runs", "list")
    shown = cli.show(run["id"])
    assert list(shown) == RUN_KEYS
    assert (shown["name"], shown["dialect"], shown["version"]) == ("load", "flow", 1)
    assert (shown["status"], shown["record"], shown["business_key"]) == ("failed", None, None)
    assert shown["bindings"] == {"prep": {"file": "data.txt"}}
    assert shown["vars"] == {}
    assert shown["output"] is None
    assert shown["error"] == {
        "step": "load",
        "message": "data.txt is not there yet",
        "type": "action",
    }
    assert shown["tokens"] == [{"step": "load", "state": "failed"}]

    (tmp_path / "data.txt").write_text("hello\n")
    assert "retrying" in cli("runs", "retry", run["id"]).stdout
    cli("worker", "--until-idle")
    shown = cli.show(run["id"])
    assert shown["status"] == "completed", shown["error"]
    assert shown["error"] is None
    assert shown["bindings"] == {"prep": {"file": "data.txt"}, "load": {"text": "hello"}}
    assert shown["output"] == {"text": "hello"}
    started = [path for _, path, _ in history(shown, "step.started")]
    assert started == ["prep", "load", "load"]  # only the failed step ran again
    assert history(shown, "run.retried") == [("run.retried", "load", "2027-01-01T00:00:00Z")]

    assert "only a failed run" in cli.error("runs", "retry", run["id"])
    assert "[nope]" in cli.error("runs", "retry", "nope")
    assert "[nope]" in cli.error("runs", "show", "nope")


# --- 8. cancel ---------------------------------------------------------------------------------


def test_cancelling_a_waiting_flow_run_stops_it_for_good(cli: Cli, tmp_path: Path) -> None:
    flow = tmp_path / "waits.flow.yaml"
    flow.write_text(WAITS)
    ran = cli.json("run", str(flow), "--input", 'hire={"start_date": "2027-01-10", "name": "Ada"}')
    assert ran["status"] == "waiting"
    assert "cancelled" in cli("runs", "cancel", ran["id"]).stdout
    shown = cli.show(ran["id"])
    assert shown["status"] == "cancelled"
    assert shown["ended_at"] == "2027-01-01T00:00:00Z"
    assert shown["tokens"] == []
    assert shown["history"][-1]["type"] == "run.cancelled"

    cli.advance("10d", "2027-01-11T00:00:00Z")
    assert cli.show(ran["id"]) == shown
    assert "already cancelled" in cli.error("runs", "cancel", ran["id"])
    assert cli.show(ran["id"]) == shown


# --- 9. this project's own tour example ---------------------------------------------------------

REMINDERS = ROOT / "examples" / "reminders" / "reminders.flow.yaml"
ACCOUNTS = {
    "accounts": [
        {"name": "Acme", "owner": "@ada", "renews": "2027-02-01"},
        {"name": "Globex", "owner": "@bob", "renews": "2027-03-15"},
    ]
}


def test_the_reminders_example_of_the_tour_runs_as_the_readme_shows(cli: Cli) -> None:
    first = cli.json("run", str(REMINDERS), "--inputs", json.dumps(ACCOUNTS))
    assert first["status"] == "waiting"
    assert first["tokens"][0]["waiting_for"] == {"kind": "timer", "due": "2027-01-02T00:00:00Z"}
    cli.advance("1d", "2027-01-02T00:00:00Z")
    done = cli.show(first["id"])
    assert done["status"] == "completed"
    assert done["output"] == {"reminded": 2, "reported": True}
    assert done["bindings"]["soonest"] == {"renews": "2027-01-25T00:00:00Z"}
    sent = [(m["channel"], m["to"]) for m in cli.json("outbox", "list")]
    assert sent == [("email", "renewals@example.com"), ("slack", "@bob"), ("slack", "@ada")]
