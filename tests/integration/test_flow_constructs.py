"""Every construct and modifier of the flow dialect (docs/reference/flow.md), run on both store
backends.

Each test writes a small project into ``tmp_path``: a ``*.flow.yaml`` and a project connector
``connectors/echo/`` (manifest + package). The connector appends one JSON line per call to
``calls.jsonl`` in the project folder, so a test can see what each attempt received. Time is the
virtual clock (2027-01-01T00:00:00Z at the start): every instant asserted here is exact.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import InputError
from procflow.runtime.engine import Engine

EPOCH = datetime(2027, 1, 1, tzinfo=UTC)

MANIFEST = """\
connector: echo
description: A test connector of test_flow_constructs.py
config:
  region: { env: PF_ECHO_REGION, default: "eu-1" }
  tier: { env: PF_ECHO_TIER, default: "basic" }
actions:
  call:
    args:
      text: { type: string }
      n: { type: integer }
    result:
      text: { type: string }
      n: { type: integer }
  acall:
    args:
      text: { type: string, required: true }
    result:
      text: { type: string }
      kind: { type: string }
  flaky:
    args:
      succeed_on: { type: integer, required: true }
    result:
      attempt: { type: integer }
      key: { type: string }
  refuse:
    args:
      reason: { type: string, required: true }
  slow:
    args:
      seconds: { type: number, required: true }
  leak:
    args:
      token: { type: string, required: true }
    result:
      header: { type: string }
      token: { type: string }
  leak_fail:
    args:
      token: { type: string, required: true }
  status:
    args:
      id: { type: string, required: true }
    result:
      status: { type: string }
      n: { type: integer }
"""

CONNECTOR = '''\
"""The echo test connector: every call is noted in <project>/calls.jsonl."""

import asyncio
import json
import time
from pathlib import Path

from procflow import NonRetryableError


def _calls(ctx):
    path = Path(ctx.project_dir) / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _note(ctx, action):
    entry = {
        "action": action, "run_id": ctx.run_id, "step": ctx.step, "attempt": ctx.attempt,
        "key": ctx.idempotency_key, "args": dict(ctx.args), "config": dict(ctx.config),
    }
    with open(Path(ctx.project_dir) / "calls.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\\n")


def call(ctx, text=None, n=None):
    _note(ctx, "call")
    return {"text": text, "n": n}


async def acall(ctx, text):
    await asyncio.sleep(0)
    _note(ctx, "acall")
    return {"text": text[::-1], "kind": "async"}


def flaky(ctx, succeed_on):
    _note(ctx, "flaky")
    if ctx.attempt < succeed_on:
        raise RuntimeError(f"attempt {ctx.attempt} failed")
    return {"attempt": ctx.attempt, "key": ctx.idempotency_key}


def refuse(ctx, reason):
    _note(ctx, "refuse")
    raise NonRetryableError(reason)


def slow(ctx, seconds):
    _note(ctx, "slow")
    time.sleep(seconds)
    return {"slept": seconds}


def leak(ctx, token):
    _note(ctx, "leak")
    ctx.log.info("using token %s", token)
    return {"header": f"Bearer {token}", "token": token}


def leak_fail(ctx, token):
    _note(ctx, "leak_fail")
    raise RuntimeError(f"token {token} was rejected")


def status(ctx, id):
    """The n-th call answers the n-th entry of <project>/statuses.json (the last one after)."""
    n = sum(1 for c in _calls(ctx) if c["action"] == "status") + 1
    _note(ctx, "status")
    path = Path(ctx.project_dir) / "statuses.json"
    statuses = json.loads(path.read_text()) if path.exists() else ["pending"]
    return {"status": statuses[min(n, len(statuses)) - 1], "n": n}
'''


def at(seconds: float = 0, **delta: float) -> str:
    """The virtual instant ``seconds`` (plus ``delta``) after the epoch, as show() prints it."""
    moment = EPOCH + timedelta(seconds=seconds, **delta)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


T0 = at(0)


class Project:
    """A flow project in ``tmp_path`` and one virtual-clock engine on the test's store."""

    def __init__(self, tmp_path: Path, db_url: str, db_env: dict[str, str]) -> None:
        self.dir = tmp_path / "project"
        self.db_url = db_url
        self.db_env = db_env
        self._eng: Engine | None = None
        self.name = ""

    @property
    def eng(self) -> Engine:
        assert self._eng is not None, "deploy() first"
        return self._eng

    def deploy(self, flow: str, *, statuses: list[str] | None = None, **environ: str) -> Engine:
        """Write the project (flow + echo connector), start an engine seeing only ``environ``
        (plus the backend's key), deploy the flow."""
        connector = self.dir / "connectors" / "echo"
        connector.mkdir(parents=True)
        (connector / "manifest.yaml").write_text(MANIFEST)
        (connector / "__init__.py").write_text(CONNECTOR)
        if statuses is not None:
            (self.dir / "statuses.json").write_text(json.dumps(statuses))
        text = textwrap.dedent(flow)
        found = re.search(r"^flow: (\S+)$", text, re.MULTILINE)
        assert found is not None
        self.name = found.group(1)
        path = self.dir / f"{self.name}.flow.yaml"
        path.write_text(text)
        self._eng = Engine.virtual(self.db_url, environ={**self.db_env, **environ})
        self.eng.deploy(str(path))
        return self.eng

    def start(self, inputs: dict[str, Any] | None = None) -> str:
        """Start a run and work until nothing is due now."""
        run_id = self.eng.start_flow(self.name, inputs or {})
        self.eng.work()
        return run_id

    def show(self, run_id: str) -> dict[str, Any]:
        return self.eng.show(run_id)

    def calls(self, action: str | None = None) -> list[dict[str, Any]]:
        path = self.dir / "calls.jsonl"
        if not path.exists():
            return []
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        return [e for e in entries if action is None or e["action"] == action]

    def close(self) -> None:
        if self._eng is not None:
            self._eng.close()


@pytest.fixture
def project(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Project]:
    proj = Project(tmp_path, db_url, db_env)
    try:
        yield proj
    finally:
        proj.close()


def trail(run: dict[str, Any], *types: str) -> list[tuple[str, str | None, str]]:
    """(type, path, at) of each history entry (of ``types``, when given)."""
    return [
        (h["type"], h.get("path"), h["at"])
        for h in run["history"]
        if not types or h["type"] in types
    ]


def entries(run: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    """History entries of one type, without their seq."""
    return [
        {k: v for k, v in h.items() if k != "seq"} for h in run["history"] if h["type"] == type_
    ]


def types(run: dict[str, Any]) -> list[str]:
    return [h["type"] for h in run["history"]]


# --- action ---------------------------------------------------------------------------------------


def test_action_binds_its_result_with_rendered_args(project: Project) -> None:
    project.deploy(
        """
        flow: act
        inputs:
          who: { type: string, required: true }
          n: { type: integer, default: 4 }
        steps:
          - greet:
              description: a step description is only documentation
              echo.call: { text: "hi {{ who }} x{{ n }}", n: "{{ n * 10 + 1 }}" }
          - after:
              set: { got: "{{ greet.text }}", twice: "{{ greet.n * 2 }}" }
        output: "{{ greet }}"
        """
    )
    rid = project.start({"who": "ann"})
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["error"] is None
    assert run["tokens"] == []
    assert run["bindings"] == {
        "greet": {"text": "hi ann x4", "n": 41},
        "after": {"got": "hi ann x4", "twice": 82},
    }
    assert run["output"] == {"text": "hi ann x4", "n": 41}
    [call] = project.calls()
    assert call["args"] == {"text": "hi ann x4", "n": 41}
    assert (call["run_id"], call["step"], call["attempt"]) == (rid, "greet", 1)
    assert trail(run) == [
        ("run.started", None, T0),
        ("step.started", "greet", T0),
        ("step.completed", "greet", T0),
        ("step.started", "after", T0),
        ("step.completed", "after", T0),
        ("run.completed", None, T0),
    ]


def test_async_action_is_awaited_and_its_result_bound(project: Project) -> None:
    project.deploy(
        """
        flow: act_async
        steps:
          - flip: { echo.acall: { text: "{{ 'abc' | upper }}" } }
          - after: { set: { kind: "{{ flip.kind }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "flip": {"text": "CBA", "kind": "async"},
        "after": {"kind": "async"},
    }
    assert [c["args"] for c in project.calls("acall")] == [{"text": "ABC"}]


def test_idempotency_key_is_run_id_and_path_stable_across_retries(project: Project) -> None:
    project.deploy(
        """
        flow: idem
        steps:
          - outer:
              steps:
                - charge:
                    echo.flaky: { succeed_on: 3 }
                    retry: { count: 3, every: PT20S }
        """
    )
    rid = project.start()
    project.eng.advance("20s")
    assert project.show(rid)["status"] == "waiting"
    project.eng.advance("20s")
    run = project.show(rid)
    assert run["status"] == "completed"
    key = f"{rid}/outer.charge"
    calls = project.calls("flaky")
    assert [(c["attempt"], c["key"], c["step"]) for c in calls] == [
        (1, key, "charge"),
        (2, key, "charge"),
        (3, key, "charge"),
    ]
    assert run["bindings"] == {"outer": {"charge": {"attempt": 3, "key": key}}}
    assert trail(run, "step.started") == [
        ("step.started", "outer", T0),
        ("step.started", "outer.charge", T0),
        ("step.started", "outer.charge", at(20)),
        ("step.started", "outer.charge", at(40)),
    ]


def test_action_config_is_resolved_from_the_env_with_defaults(project: Project) -> None:
    project.deploy(
        """
        flow: conf
        steps:
          - ping: { echo.call: { text: "x" } }
        """,
        PF_ECHO_REGION="us-2",
    )
    rid = project.start()
    assert project.show(rid)["status"] == "completed"
    [call] = project.calls()
    assert call["config"] == {"region": "us-2", "tier": "basic"}


def test_log_write_adds_a_log_history_entry(project: Project) -> None:
    project.deploy(
        """
        flow: logging
        inputs:
          who: { type: string, default: "ann" }
        steps:
          - note: { log.write: { message: "hello {{ who }} ({{ 2 + 3 }})" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"note": {}}
    assert entries(run, "log") == [
        {
            "at": T0,
            "type": "log",
            "step": "note",
            "path": "note",
            "attempt": 1,
            "level": "info",
            "message": "hello ann (5)",
        }
    ]
    assert types(run) == [
        "run.started",
        "step.started",
        "log",
        "step.completed",
        "run.completed",
    ]


# --- retry, timeout, failing attempts -------------------------------------------------------------


def test_retry_runs_attempts_at_each_interval_on_durable_timers(project: Project) -> None:
    project.deploy(
        """
        flow: retrying
        steps:
          - charge:
              echo.flaky: { succeed_on: 99 }
              retry: { count: 2, every: 30s }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "waiting"
    assert run["tokens"] == [
        {
            "step": "charge",
            "state": "waiting",
            "waiting_for": {
                "kind": "retry",
                "attempt": 2,
                "of": 3,
                "last_error": "attempt 1 failed",
                "due": at(30),
            },
            "since": T0,
        }
    ]
    project.eng.advance("29s")
    assert len(project.calls()) == 1
    project.eng.advance("1s")
    assert [c["attempt"] for c in project.calls()] == [1, 2]
    run = project.show(rid)
    assert run["tokens"][0]["waiting_for"] == {
        "kind": "retry",
        "attempt": 3,
        "of": 3,
        "last_error": "attempt 2 failed",
        "due": at(60),
    }
    assert run["tokens"][0]["since"] == at(30)
    project.eng.advance("30s")
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {"message": "attempt 3 failed", "step": "charge", "type": "action"}
    assert run["tokens"] == [{"step": "charge", "state": "failed"}]
    assert [c["attempt"] for c in project.calls()] == [1, 2, 3]
    assert [(h["type"], h["at"], h.get("attempt")) for h in run["history"]] == [
        ("run.started", T0, None),
        ("step.started", T0, 1),
        ("attempt.failed", T0, 1),
        ("retry.scheduled", T0, 2),
        ("timer.fired", at(30), 2),
        ("step.started", at(30), 2),
        ("attempt.failed", at(30), 2),
        ("retry.scheduled", at(30), 3),
        ("timer.fired", at(60), 3),
        ("step.started", at(60), 3),
        ("attempt.failed", at(60), 3),
        ("step.failed", at(60), 3),
        ("run.failed", at(60), 3),
    ]
    assert [h["due"] for h in entries(run, "retry.scheduled")] == [at(30), at(60)]


def test_timeout_abandons_a_slow_attempt_with_type_timeout(project: Project) -> None:
    project.deploy(
        """
        flow: slowpoke
        steps:
          - nap:
              echo.slow: { seconds: 1.5 }
              timeout: 100ms
              retry: { count: 1, every: 10s }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "waiting"
    assert run["tokens"][0]["waiting_for"] == {
        "kind": "retry",
        "attempt": 2,
        "of": 2,
        "last_error": "the attempt ran longer than 0.1s",
        "due": at(10),
    }
    project.eng.advance("10s")
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {
        "message": "the attempt ran longer than 0.1s",
        "step": "nap",
        "type": "timeout",
    }
    assert run["bindings"] == {}
    assert [h["message"] for h in entries(run, "attempt.failed")] == [
        "the attempt ran longer than 0.1s"
    ] * 2
    assert entries(run, "step.failed")[0]["error_type"] == "timeout"


def test_non_retryable_error_skips_the_remaining_retries(project: Project) -> None:
    project.deploy(
        """
        flow: refusing
        steps:
          - charge:
              echo.refuse: { reason: "card declined" }
              retry: { count: 3, every: 10s }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {"message": "card declined", "step": "charge", "type": "action"}
    assert types(run) == [
        "run.started",
        "step.started",
        "attempt.failed",
        "step.failed",
        "run.failed",
    ]
    project.eng.advance("1h")
    assert len(project.calls()) == 1
    assert project.show(rid) == run


def test_wrong_typed_rendered_arg_fails_without_retry_naming_the_arg(project: Project) -> None:
    project.deploy(
        """
        flow: typed
        inputs:
          who: { type: string, default: "ann" }
        steps:
          - ping:
              echo.call: { n: "{{ who }}" }
              retry: { count: 2, every: 10s }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {
        "message": "action [echo.call] arg [n] must be an integer, got a string",
        "step": "ping",
        "type": "action",
    }
    assert "retry.scheduled" not in types(run)
    project.eng.advance("1h")
    assert project.calls() == []
    assert project.show(rid) == run


def test_missing_secret_fails_the_attempt_naming_it(project: Project) -> None:
    project.deploy(
        """
        flow: secretless
        steps:
          - ping:
              echo.call: { text: "{{ secret('PF_TEST_ABSENT_TOKEN') }}" }
              retry: { count: 1, every: 10s }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "waiting"  # an ordinary failed attempt: retried
    wait = run["tokens"][0]["waiting_for"]
    assert (wait["kind"], wait["attempt"], wait["due"]) == ("retry", 2, at(10))
    assert wait["last_error"].startswith("secret [PF_TEST_ABSENT_TOKEN] is not set")
    project.eng.advance("10s")
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"]["type"] == "action"
    assert run["error"]["step"] == "ping"
    assert run["error"]["message"].startswith("secret [PF_TEST_ABSENT_TOKEN] is not set")
    assert project.calls() == []


def test_secret_reaches_the_action_but_nothing_show_returns(project: Project) -> None:
    secret = "s3cr3t-Zq9-value"
    project.deploy(
        """
        flow: secretive
        steps:
          - auth: { echo.leak: { token: "{{ secret('PF_TEST_API_TOKEN') }}" } }
          - note: { log.write: { message: "header was {{ auth.header }}" } }
          - reject:
              echo.leak_fail: { token: "{{ secret('PF_TEST_API_TOKEN') }}" }
              retry: { count: 1, every: 10s }
        """,
        PF_TEST_API_TOKEN=secret,
    )
    rid = project.start()
    waiting = project.show(rid)
    assert waiting["tokens"][0]["waiting_for"]["last_error"] == "token *** was rejected"
    assert secret not in json.dumps(waiting)
    project.eng.advance("10s")
    assert [c["args"] for c in project.calls()] == [{"token": secret}] * 3
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["bindings"] == {"auth": {"header": "Bearer ***", "token": "***"}, "note": {}}
    assert [e["message"] for e in entries(run, "log")] == [
        "using token ***",
        "header was Bearer ***",
    ]
    assert run["error"] == {"message": "token *** was rejected", "step": "reject", "type": "action"}
    assert secret not in json.dumps(run)


def stored_text(engine: Engine, run_id: str) -> str:
    """Every column of every row procflow keeps about the run, as text."""
    conn = engine.store.conn
    out = []
    for table in ("runs", "history", "tokens", "timers", "scopes"):
        column = "id" if table == "runs" else "run_id"
        rows = conn.execute(f"SELECT * FROM {table} WHERE {column}=?", (run_id,)).fetchall()
        out.append(repr(rows))
    return "\n".join(out)


def test_a_secret_in_the_message_of_an_args_expression_error_is_masked_in_show_and_the_store(
    project: Project,
) -> None:
    secret = "s3cr3t-Zq9-value"
    project.deploy(
        """
        flow: badport
        steps:
          - ping: { log.write: { message: "port {{ secret('PF_TEST_PORT') | int }}" } }
        """,
        PF_TEST_PORT=secret,
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert secret not in json.dumps(run), run["error"]
    assert secret not in stored_text(project.eng, rid)


# --- wait -----------------------------------------------------------------------------------------


def test_wait_for_a_literal_duration(project: Project) -> None:
    project.deploy(
        """
        flow: pause
        steps:
          - pause: { wait: { for: 2h } }
          - after: { set: { resumed: "{{ pause.until }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "waiting"
    assert run["tokens"] == [
        {
            "step": "pause",
            "state": "waiting",
            "waiting_for": {"kind": "timer", "due": at(hours=2)},
            "since": T0,
        }
    ]
    assert entries(run, "timer.armed") == [
        {
            "at": T0,
            "type": "timer.armed",
            "step": "pause",
            "path": "pause",
            "attempt": 1,
            "due": at(hours=2),
        }
    ]
    project.eng.advance("1h59m59s")
    assert project.show(rid)["status"] == "waiting"
    project.eng.advance("1s")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "pause": {"until": "2027-01-01T02:00:00Z"},
        "after": {"resumed": "2027-01-01T02:00:00Z"},
    }
    assert trail(run, "timer.fired", "run.completed") == [
        ("timer.fired", "pause", at(hours=2)),
        ("run.completed", None, at(hours=2)),
    ]


def test_wait_for_an_expression(project: Project) -> None:
    project.deploy(
        """
        flow: pause_expr
        inputs:
          delay: { type: string, required: true }
        steps:
          - pause: { wait: { for: "{{ duration(delay) }}" } }
        """
    )
    rid = project.start({"delay": "PT45M"})
    run = project.show(rid)
    assert run["tokens"][0]["waiting_for"] == {"kind": "timer", "due": at(minutes=45)}
    project.eng.advance("45m")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"pause": {"until": "2027-01-01T00:45:00Z"}}


def test_wait_until_an_expression(project: Project) -> None:
    project.deploy(
        """
        flow: until_expr
        inputs:
          start: { type: timestamp, required: true }
        steps:
          - day_before: { wait: { until: "{{ start | minus(1d) }}" } }
        """
    )
    rid = project.start({"start": "2027-01-05T09:00:00+02:00"})
    run = project.show(rid)
    assert run["tokens"][0]["waiting_for"] == {"kind": "timer", "due": "2027-01-04T07:00:00Z"}
    project.eng.advance("3d6h59m59s")
    assert project.show(rid)["status"] == "waiting"
    project.eng.advance("1s")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"day_before": {"until": "2027-01-04T07:00:00Z"}}


def test_wait_until_a_date_means_the_start_of_that_day(project: Project) -> None:
    project.deploy(
        """
        flow: until_date
        steps:
          - on_day: { wait: { until: "2027-01-03" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["tokens"][0]["waiting_for"] == {"kind": "timer", "due": "2027-01-03T00:00:00Z"}
    project.eng.advance("47h59m59s")
    assert project.show(rid)["status"] == "waiting"
    project.eng.advance("1s")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"on_day": {"until": "2027-01-03T00:00:00Z"}}


def test_wait_until_a_past_instant_resumes_at_once(project: Project) -> None:
    project.deploy(
        """
        flow: until_past
        steps:
          - late: { wait: { until: "2026-12-31T23:00:00Z" } }
          - after: { set: { at: "{{ late.until }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"late": {"until": T0}, "after": {"at": T0}}
    assert "timer.armed" not in types(run)
    assert "timer.fired" not in types(run)


# --- set, fail, if --------------------------------------------------------------------------------


def test_set_binds_the_evaluated_mapping(project: Project) -> None:
    project.deploy(
        """
        flow: setting
        inputs:
          who: { type: string, default: "ann" }
        steps:
          - vals:
              set:
                sum: "{{ 1 + 2 }}"
                ratio: "{{ 3 / 2 }}"
                label: "to {{ who }}"
                same: "{{ who }}"
                list: ["{{ who | upper }}", 2]
                nested: { flag: "{{ 2 > 1 }}" }
                when: "{{ run.started_at | plus(1d) }}"
                gap: "{{ 30s }}"
                literal: plain
          - more: { set: { next: "{{ vals.sum + 1 }}", first: "{{ vals.list[0] }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "vals": {
            "sum": 3,
            "ratio": 1.5,
            "label": "to ann",
            "same": "ann",
            "list": ["ANN", 2],
            "nested": {"flag": True},
            "when": "2027-01-02T00:00:00Z",
            "gap": "PT30S",
            "literal": "plain",
        },
        "more": {"next": 4, "first": "ANN"},
    }


def test_fail_fails_the_run_with_exactly_the_rendered_message(project: Project) -> None:
    project.deploy(
        """
        flow: failing
        inputs:
          who: { type: string, default: "ann" }
        steps:
          - check: { set: { limit: 100 } }
          - stop: { fail: "deal {{ who }} is over {{ check.limit }}: {{ [1, 2] }}" }
          - never: { set: { x: 1 } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    message = "deal ann is over 100: [1,2]"
    assert run["status"] == "failed"
    assert run["error"] == {"message": message, "step": "stop", "type": "fail"}
    assert run["bindings"] == {"check": {"limit": 100}}
    assert run["tokens"] == [{"step": "stop", "state": "failed"}]
    assert entries(run, "step.failed") == [
        {
            "at": T0,
            "type": "step.failed",
            "step": "stop",
            "path": "stop",
            "attempt": 1,
            "message": message,
            "error_type": "fail",
        }
    ]
    assert types(run)[-1] == "run.failed"


IF_FLOW = """
flow: branching
inputs:
  amount: { type: integer, required: true }
steps:
  - big:
      if: "{{ amount > 10 }}"
      echo.call: { text: "big {{ amount }}" }
  - after: { set: { skipped: "{{ big == null }}" } }
"""


def test_if_true_runs_the_step(project: Project) -> None:
    project.deploy(IF_FLOW)
    rid = project.start({"amount": 50})
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "big": {"text": "big 50", "n": None},
        "after": {"skipped": False},
    }
    assert [c["args"] for c in project.calls()] == [{"text": "big 50"}]
    assert "step.skipped" not in types(run)


def test_if_false_skips_the_step_and_binds_null(project: Project) -> None:
    project.deploy(IF_FLOW)
    rid = project.start({"amount": 5})
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"big": None, "after": {"skipped": True}}
    assert project.calls() == []
    assert trail(run) == [
        ("run.started", None, T0),
        ("step.skipped", "big", T0),
        ("step.started", "after", T0),
        ("step.completed", "after", T0),
        ("run.completed", None, T0),
    ]
    [skipped] = entries(run, "step.skipped")
    assert skipped["step"] == "big"


def test_if_that_is_not_a_boolean_is_an_expression_error(project: Project) -> None:
    project.deploy(
        """
        flow: bad_if
        inputs:
          who: { type: string, default: "ann" }
        steps:
          - gate:
              if: "{{ who }}"
              set: { v: 1 }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {
        "message": "if: condition [who] must be a boolean, got string",
        "step": "gate",
        "type": "expression",
    }
    assert run["bindings"] == {}


# --- group, optional, recover ---------------------------------------------------------------------


def test_group_binds_its_scope_and_later_steps_reach_inside(project: Project) -> None:
    project.deploy(
        """
        flow: grouping
        steps:
          - grp:
              steps:
                - a: { set: { x: 1 } }
                - b: { set: { y: "{{ a.x + 1 }}" } }
          - after: { set: { y: "{{ grp.b.y }}", whole: "{{ grp }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    grp = {"a": {"x": 1}, "b": {"y": 2}}
    assert run["bindings"] == {"grp": grp, "after": {"y": 2, "whole": grp}}
    assert [(t, p) for t, p, _ in trail(run, "step.started", "step.completed")] == [
        ("step.started", "grp"),
        ("step.started", "grp.a"),
        ("step.completed", "grp.a"),
        ("step.started", "grp.b"),
        ("step.completed", "grp.b"),
        ("step.completed", "grp"),
        ("step.started", "after"),
        ("step.completed", "after"),
    ]


def test_optional_step_binds_its_error_and_the_scope_continues(project: Project) -> None:
    project.deploy(
        """
        flow: optional
        steps:
          - risky:
              optional: true
              fail: "nope"
          - after: { set: { msg: "{{ risky.error.message }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "risky": {"error": {"message": "nope", "step": "risky", "type": "fail"}},
        "after": {"msg": "nope"},
    }


def test_group_recover_runs_in_the_failed_scope(project: Project) -> None:
    project.deploy(
        """
        flow: recovering
        steps:
          - grp:
              steps:
                - a: { set: { x: 1 } }
                - boom: { fail: "bad {{ a.x }}" }
                - never: { set: { y: 2 } }
              recover:
                - r: { set: { seen: "{{ a.x }}", why: "{{ error }}" } }
          - after: { set: { failed_step: "{{ grp.r.why.step }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    error = {"message": "bad 1", "step": "boom", "type": "fail"}
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "grp": {"a": {"x": 1}, "r": {"seen": 1, "why": error}},
        "after": {"failed_step": "boom"},
    }
    [recovered] = entries(run, "step.recovered")
    assert (recovered["step"], recovered["path"], recovered["error"]) == ("grp", "grp", error)


def test_unhandled_failure_propagates_through_its_owner(project: Project) -> None:
    project.deploy(
        """
        flow: propagating
        steps:
          - grp:
              steps:
                - a: { set: { x: 1 } }
                - boom: { fail: "bad {{ a.x }}" }
          - never: { set: { y: 2 } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {"message": "bad 1", "step": "boom", "type": "fail"}
    assert run["tokens"] == [{"step": "boom", "path": "grp.boom", "state": "failed"}]
    assert run["bindings"] == {}
    assert [(e["path"], e["message"], e["error_type"]) for e in entries(run, "step.failed")] == [
        ("grp.boom", "bad 1", "fail"),
        ("grp", "bad 1", "fail"),
    ]


def test_optional_owner_binds_the_inner_error(project: Project) -> None:
    project.deploy(
        """
        flow: optional_group
        steps:
          - grp:
              optional: true
              steps:
                - boom: { fail: "inner" }
          - after: { set: { step: "{{ grp.error.step }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "grp": {"error": {"message": "inner", "step": "boom", "type": "fail"}},
        "after": {"step": "boom"},
    }


def test_top_level_recover_completes_the_run(project: Project) -> None:
    project.deploy(
        """
        flow: top_recover
        steps:
          - boom: { fail: "broken" }
        recover:
          - note: { log.write: { message: "stopped: {{ error.message }}" } }
        output: { result: "recovered" }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["error"] is None
    assert run["output"] == {"result": "recovered"}
    assert run["bindings"] == {"note": {}}  # recover steps run in the failed (top) scope
    assert [e["message"] for e in entries(run, "log")] == ["stopped: broken"]
    [recovered] = entries(run, "step.recovered")
    assert "step" not in recovered
    assert recovered["error"] == {"message": "broken", "step": "boom", "type": "fail"}


def test_output_after_top_level_recover_sees_abandoned_steps_as_null(project: Project) -> None:
    # The pattern of examples/onboarding: a recovered run still renders its output, and
    # `default` covers a step that was abandoned (validation accepts the name there).
    project.deploy(
        """
        flow: recover_output
        steps:
          - indexed:
              repeat: { every: 1m, max: 2, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { echo.status: { id: "T-1" } }
        recover:
          - note: { log.write: { message: "stopped: {{ error.message }}" } }
        output:
          polls: "{{ indexed | default([]) | length }}"
        """
    )
    rid = project.start()
    project.eng.advance("1m")
    run = project.show(rid)
    assert run["error"] is None
    assert run["status"] == "completed"
    assert run["output"] == {"polls": 0}


# --- for_each -------------------------------------------------------------------------------------


def test_for_each_runs_iterations_in_order_under_the_as_name(project: Project) -> None:
    project.deploy(
        """
        flow: looping
        inputs:
          nums: { type: array, default: [1, 2, 3] }
        steps:
          - each:
              for_each: "{{ nums }}"
              as: n
              steps:
                - double: { set: { v: "{{ n * 2 }}" } }
                - ping: { echo.call: { text: "n={{ n }}", n: "{{ double.v }}" } }
          - pick:
              set:
                second: "{{ each[1].double.v }}"
                count: "{{ each | length }}"
                last: "{{ each[-1].ping.n }}"
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "each": [
            {"double": {"v": 2}, "ping": {"text": "n=1", "n": 2}},
            {"double": {"v": 4}, "ping": {"text": "n=2", "n": 4}},
            {"double": {"v": 6}, "ping": {"text": "n=3", "n": 6}},
        ],
        "pick": {"second": 4, "count": 3, "last": 6},
    }
    calls = project.calls()
    assert [c["args"]["text"] for c in calls] == ["n=1", "n=2", "n=3"]
    assert [c["key"] for c in calls] == [f"{rid}/each[{i}].ping" for i in range(3)]
    inner = [(t, p) for t, p, _ in trail(run, "step.started", "step.completed")]
    assert inner == [
        ("step.started", "each"),
        *[
            (kind, f"each[{i}].{step}")
            for i in range(3)
            for step in ("double", "ping")
            for kind in ("step.started", "step.completed")
        ],
        ("step.completed", "each"),
        ("step.started", "pick"),
        ("step.completed", "pick"),
    ]


def test_for_each_default_loop_name_is_item(project: Project) -> None:
    project.deploy(
        """
        flow: items
        steps:
          - each:
              for_each: "{{ ['a', 'b'] }}"
              steps:
                - up: { set: { v: "{{ item | upper }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"each": [{"up": {"v": "A"}}, {"up": {"v": "B"}}]}


def test_for_each_over_an_empty_list_binds_an_empty_list(project: Project) -> None:
    project.deploy(
        """
        flow: empty_loop
        inputs:
          nums: { type: array, default: [] }
        steps:
          - each:
              for_each: "{{ nums }}"
              steps:
                - ping: { echo.call: { n: "{{ item }}" } }
          - after: { set: { count: "{{ each | length }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"each": [], "after": {"count": 0}}
    assert project.calls() == []
    assert [p for _, p, _ in trail(run, "step.started", "step.completed")] == [
        "each",
        "each",
        "after",
        "after",
    ]


def test_no_binding_crosses_from_one_iteration_to_the_next(project: Project) -> None:
    project.deploy(
        """
        flow: isolation
        steps:
          - each:
              for_each: "{{ ['stop', 'go', 'stop'] }}"
              as: word
              steps:
                - a: { set: { v: "{{ word }}" } }
                - gate:
                    if: "{{ word == 'stop' }}"
                    fail: "stopped at {{ a.v }}"
                - b: { set: { v: "{{ a.v | upper }}" } }
              recover:
                - r: { set: { why: "{{ error.message }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    stopped = {"a": {"v": "stop"}, "r": {"why": "stopped at stop"}}
    assert run["bindings"] == {
        "each": [stopped, {"a": {"v": "go"}, "gate": None, "b": {"v": "GO"}}, stopped]
    }
    assert [(e["step"], e["path"]) for e in entries(run, "step.recovered")] == [
        ("each", "each"),
        ("each", "each"),
    ]


# --- repeat ---------------------------------------------------------------------------------------

REPEAT_FLOW = """
flow: polling
steps:
  - indexed:
      repeat: { every: 30s, max: 5, until: "{{ check.status == 'indexed' }}" }
      steps:
        - check: { echo.status: { id: "T-1" } }
  - after: { set: { polls: "{{ indexed | length }}", last: "{{ indexed[-1].check.status }}" } }
"""


def test_repeat_polls_every_interval_until_the_condition_holds(project: Project) -> None:
    project.deploy(REPEAT_FLOW, statuses=["pending", "pending", "indexed"])
    rid = project.start()
    assert len(project.calls()) == 1  # the first iteration runs at once
    run = project.show(rid)
    assert run["status"] == "waiting"
    assert run["tokens"] == [
        {
            "step": "indexed",
            "state": "waiting",
            "waiting_for": {"kind": "poll", "iteration": 2, "of": 5, "due": at(30)},
            "since": T0,
        }
    ]
    project.eng.advance("29s")
    assert len(project.calls()) == 1
    project.eng.advance("1s")
    assert len(project.calls()) == 2
    run = project.show(rid)
    assert run["tokens"] == [
        {
            "step": "indexed",
            "state": "waiting",
            "waiting_for": {"kind": "poll", "iteration": 3, "of": 5, "due": at(60)},
            "since": at(30),
        }
    ]
    project.eng.advance("30s")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert len(project.calls()) == 3
    assert run["bindings"] == {
        "indexed": [
            {"check": {"status": "pending", "n": 1}},
            {"check": {"status": "pending", "n": 2}},
            {"check": {"status": "indexed", "n": 3}},
        ],
        "after": {"polls": 3, "last": "indexed"},
    }
    assert [
        (h["type"], h["path"], h["at"], h.get("iteration"), h.get("due"))
        for h in run["history"]
        if h["type"] in ("step.started", "timer.armed") and h["path"] != "after"
    ] == [
        ("step.started", "indexed", T0, 1, None),
        ("step.started", "indexed[0].check", T0, None, None),
        ("timer.armed", "indexed", T0, None, at(30)),
        ("step.started", "indexed", at(30), 2, None),
        ("step.started", "indexed[1].check", at(30), None, None),
        ("timer.armed", "indexed", at(30), None, at(60)),
        ("step.started", "indexed", at(60), 3, None),
        ("step.started", "indexed[2].check", at(60), None, None),
    ]
    [done] = [e for e in entries(run, "step.completed") if e["step"] == "indexed"]
    assert (done["at"], done["iterations"]) == (at(60), 3)


def test_repeat_waits_every_after_the_previous_iteration_ended(project: Project) -> None:
    project.deploy(
        """
        flow: slow_polling
        steps:
          - indexed:
              repeat: { every: 30s, max: 5, until: "{{ check.status == 'indexed' }}" }
              steps:
                - pause: { wait: { for: 10s } }
                - check: { echo.status: { id: "T-1" } }
        """,
        statuses=["pending", "pending", "indexed"],
    )
    rid = project.start()
    run = project.show(rid)
    assert run["tokens"] == [
        {
            "step": "pause",
            "path": "indexed[0].pause",
            "state": "waiting",
            "waiting_for": {"kind": "timer", "due": at(10)},
            "since": T0,
        }
    ]
    project.eng.advance("2m")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert [(p, t) for kind, p, t in trail(run, "step.started") if p.endswith("check")] == [
        ("indexed[0].check", at(10)),
        ("indexed[1].check", at(50)),
        ("indexed[2].check", at(90)),
    ]
    assert [t for _, p, t in trail(run, "step.started") if p == "indexed"] == [T0, at(40), at(80)]


def test_repeat_exhausted_fails_naming_max_and_until(project: Project) -> None:
    project.deploy(
        """
        flow: exhausted
        steps:
          - indexed:
              repeat: { every: 1m, max: 3, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { echo.status: { id: "T-1" } }
        """
    )
    rid = project.start()
    project.eng.advance("5m")
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"] == {
        "message": (
            "repeat [indexed] ran its max of 3 iterations and [check.status == 'indexed'] "
            "is still false (check.status = 'pending')"
        ),
        "step": "indexed",
        "type": "repeat",
    }
    assert run["bindings"] == {}
    assert run["tokens"] == [{"step": "indexed", "state": "failed"}]
    assert len(project.calls()) == 3
    assert trail(run, "run.failed") == [("run.failed", "indexed", at(minutes=2))]
    assert entries(run, "step.failed")[0]["error_type"] == "repeat"


def test_repeat_until_sees_only_the_just_completed_iteration(project: Project) -> None:
    # `hit` runs only when count.n is odd. A leaked `hit` from iteration 1 would make `until`
    # true in iteration 2; in iteration 2's own scope `hit` is null, so it takes 3 iterations.
    project.deploy(
        """
        flow: until_scope
        steps:
          - poll:
              repeat: { every: 10s, max: 5, until: "{{ hit != null and count.n >= 2 }}" }
              steps:
                - count: { echo.status: { id: "x" } }
                - hit:
                    if: "{{ count.n % 2 == 1 }}"
                    set: { n: "{{ count.n }}" }
        """
    )
    rid = project.start()
    project.eng.advance("1m")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "poll": [
            {"count": {"status": "pending", "n": 1}, "hit": {"n": 1}},
            {"count": {"status": "pending", "n": 2}, "hit": None},
            {"count": {"status": "pending", "n": 3}, "hit": {"n": 3}},
        ]
    }
    [done] = [e for e in entries(run, "step.completed") if e["step"] == "poll"]
    assert (done["at"], done["iterations"]) == (at(20), 3)


def test_repeat_evaluates_until_in_a_recovered_iteration(project: Project) -> None:
    project.deploy(
        """
        flow: recovered_poll
        steps:
          - indexed:
              repeat: { every: 30s, max: 4, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { echo.status: { id: "T-1" } }
                - gate:
                    if: "{{ check.status == 'error' }}"
                    fail: "lookup failed"
              recover:
                - r: { set: { why: "{{ error.message }}", status: "{{ check.status }}" } }
        """,
        statuses=["error", "indexed"],
    )
    rid = project.start()
    run = project.show(rid)
    assert run["tokens"][0]["waiting_for"] == {
        "kind": "poll",
        "iteration": 2,
        "of": 4,
        "due": at(30),
    }
    project.eng.advance("30s")
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "indexed": [
            {
                "check": {"status": "error", "n": 1},
                "r": {"why": "lookup failed", "status": "error"},
            },
            {"check": {"status": "indexed", "n": 2}, "gate": None},
        ]
    }
    assert [(e["path"], e["at"]) for e in entries(run, "step.recovered")] == [("indexed", T0)]


# --- expressions, output, inputs, show, cancel ----------------------------------------------------


def test_null_rendered_into_text_is_an_expression_error_naming_the_path(
    project: Project,
) -> None:
    project.deploy(
        """
        flow: strict_null
        inputs:
          person: { type: object, default: { name: "x" } }
        steps:
          - ok:
              set:
                nick: "{{ person.nickname }}"
                shown: "{{ person.nickname | default('none') }}"
          - greet: { set: { msg: "hello {{ person.nickname }}" } }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["bindings"] == {"ok": {"nick": None, "shown": "none"}}
    assert run["error"] == {
        "message": (
            "[person.nickname] is null and cannot be rendered into text "
            "(use | default('') to render it empty)"
        ),
        "step": "greet",
        "type": "expression",
    }


def test_expression_error_in_action_args_fails_without_retry(project: Project) -> None:
    project.deploy(
        """
        flow: null_arg
        inputs:
          person: { type: object, default: { name: "x" } }
        steps:
          - ping:
              echo.call: { text: "hello {{ person.nickname }}" }
              retry: { count: 2, every: 10s }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["error"]["type"] == "expression"
    assert run["error"]["step"] == "ping"
    assert "[person.nickname]" in run["error"]["message"]
    assert "retry.scheduled" not in types(run)
    assert project.calls() == []


def test_output_renders_mappings_and_lists(project: Project) -> None:
    project.deploy(
        """
        flow: outputs
        inputs:
          who: { type: string, default: "ann" }
        steps:
          - s: { set: { n: 3 } }
        output:
          name: "{{ who }}"
          n: "{{ s.n * 2 }}"
          tags: ["a", "{{ who | upper }}", { deep: "{{ 1 == 1 }}" }]
          text: "n={{ s.n }}"
          fixed: 7
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["output"] == {
        "name": "ann",
        "n": 6,
        "tags": ["a", "ANN", {"deep": True}],
        "text": "n=3",
        "fixed": 7,
    }


def test_output_render_error_fails_the_run_at_step_output(project: Project) -> None:
    project.deploy(
        """
        flow: bad_output
        inputs:
          person: { type: object, default: { name: "x" } }
        steps:
          - s: { set: { n: 3 } }
        output: { summary: "done for {{ person.nickname }}" }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "failed"
    assert run["output"] is None
    assert run["bindings"] == {"s": {"n": 3}}
    assert run["error"] == {
        "message": (
            "output: [person.nickname] is null and cannot be rendered into text "
            "(use | default('') to render it empty)"
        ),
        "step": "output",
        "type": "expression",
    }
    assert "run.completed" not in types(run)
    assert types(run)[-1] == "run.failed"


INPUTS_FLOW = """
flow: inputs
inputs:
  who: { type: string, default: "ann" }
  tags: { type: array, default: ["x"] }
  note: { type: string }
  n: { type: integer, required: true }
steps:
  - echo: { set: { who: "{{ who }}", tags: "{{ tags }}", note: "{{ note }}", n: "{{ n }}" } }
"""


def test_inputs_get_their_defaults_and_absent_optionals_bind_null(project: Project) -> None:
    project.deploy(INPUTS_FLOW)
    rid = project.start({"n": 3})
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {"echo": {"who": "ann", "tags": ["x"], "note": None, "n": 3}}
    rid = project.start({"n": 4, "who": "bob", "note": "hi"})
    assert project.show(rid)["bindings"] == {
        "echo": {"who": "bob", "tags": ["x"], "note": "hi", "n": 4}
    }


def test_bad_inputs_are_rejected_before_anything_is_stored(project: Project) -> None:
    project.deploy(INPUTS_FLOW)
    with pytest.raises(InputError) as caught:
        project.eng.start_flow("inputs", {"extra": 1, "n": "three", "tags": "x"})
    problems = caught.value.problems
    assert len(problems) == 3
    assert problems[0].startswith("unknown input [extra]")
    assert problems[1] == 'input [tags] must be an array, got a string ("x")'
    assert problems[2] == 'input [n] must be an integer, got a string ("three")'
    with pytest.raises(InputError) as caught:
        project.eng.start_flow("inputs", {})
    assert caught.value.problems == ["missing required input [n] (integer)"]
    assert project.eng.list_runs() == []
    assert project.eng.work() == 0


def test_show_bindings_are_exactly_the_top_level_scope(project: Project) -> None:
    project.deploy(
        """
        flow: scopes
        steps:
          - a: { set: { x: 1 } }
          - grp:
              steps:
                - inner: { set: { y: 2 } }
          - each:
              for_each: "{{ [1, 2] }}"
              steps:
                - it: { set: { v: "{{ item }}" } }
          - skipped:
              if: "{{ false }}"
              set: { z: 3 }
        output: { a: "{{ a }}", grp: "{{ grp }}", each: "{{ each }}", skipped: "{{ skipped }}" }
        """
    )
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "completed"
    assert run["bindings"] == {
        "a": {"x": 1},
        "grp": {"inner": {"y": 2}},
        "each": [{"it": {"v": 1}}, {"it": {"v": 2}}],
        "skipped": None,
    }
    assert run["output"] == run["bindings"]  # what expressions at the top level see


CANCEL_FLOWS = {
    "wait": """
        flow: cancelled
        steps:
          - pause: { wait: { for: 1h } }
          - after: { echo.call: { text: "after" } }
    """,
    "retry": """
        flow: cancelled
        steps:
          - charge:
              echo.flaky: { succeed_on: 2 }
              retry: { count: 1, every: 1h }
    """,
    "poll": """
        flow: cancelled
        steps:
          - indexed:
              repeat: { every: 1h, max: 3, until: "{{ check.status == 'indexed' }}" }
              steps:
                - check: { echo.status: { id: "T-1" } }
    """,
}


@pytest.mark.parametrize("kind", sorted(CANCEL_FLOWS))
def test_cancel_of_a_waiting_flow_run_removes_its_timers(project: Project, kind: str) -> None:
    project.deploy(CANCEL_FLOWS[kind], statuses=["pending", "indexed"])
    rid = project.start()
    run = project.show(rid)
    assert run["status"] == "waiting"
    assert run["tokens"][0]["waiting_for"]["kind"] == {"wait": "timer"}.get(kind, kind)
    calls_before = project.calls()
    project.eng.advance("10m")
    project.eng.cancel(rid)
    cancelled = project.show(rid)
    assert cancelled["status"] == "cancelled"
    assert cancelled["tokens"] == []
    assert entries(cancelled, "run.cancelled") == [
        {"at": at(minutes=10), "type": "run.cancelled", "reason": "cancelled by an operator"}
    ]
    assert project.eng.store.read().next_due() is None
    project.eng.advance("3h")
    assert project.show(rid) == cancelled
    assert project.calls() == calls_before
