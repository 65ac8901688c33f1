"""Traces (docs/operations/deployment.md, "Tracing"), with the OpenTelemetry SDK recording in
memory, on both store backends and a virtual clock:

- a span per step attempt, carrying run id, definition, version, step, path, attempt and
  worker, and never a payload;
- one trace per run, across attempts made two (virtual) days apart and a retry;
- a ``traceparent`` on ``POST /flows/{name}/runs`` and ``POST /events`` becomes a link from the
  run's trace to the caller's span;
- without a tracer provider, no span and no cost beyond a check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from starlette.testclient import TestClient

from procflow.runtime.engine import Engine
from procflow.runtime.work import tracing
from procflow.server.app import create_app
from procflow.server.state import ServerState
from procflow.testing import fake_action

SECRET_INPUT = "s3cret-payload-never-in-a-span"

PAUSED = """\
flow: paused
inputs:
  token: { type: string, default: "none" }
steps:
  - first: { set: { seen: "{{ token }}" } }
  - pause: { wait: { for: 2d } }
  - last: { set: { again: "{{ first.seen }}" } }
output: "{{ last.again }}"
"""

FLAKY = """\
flow: flaky
steps:
  - call:
      svc.call: { n: 1 }
      retry: { count: 2, every: 1h }
"""

PAY_WAIT = """\
flow: pay-wait
inputs:
  invoice: { type: number, required: true }
steps:
  - paid:
      wait_for: svc.paid
      match: { invoice: "{{ invoice }}" }
      timeout: 24h
"""

MANIFEST = """\
connector: svc
description: A stand-in service (its action is faked).
actions:
  call:
    args: { n: { type: any } }
events:
  paid:
    payload:
      invoice: { type: number, required: true }
    correlate_on: [invoice]
"""

# A caller's W3C trace context (the example of the W3C recommendation).
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "connectors" / "svc").mkdir(parents=True)
    (root / "connectors" / "svc" / "manifest.yaml").write_text(MANIFEST)
    (root / "connectors" / "svc" / "__init__.py").write_text(
        "def call(ctx, n=None):\n    raise AssertionError('faked in these tests')\n"
    )
    for name, text in (("paused", PAUSED), ("flaky", FLAKY), ("pay-wait", PAY_WAIT)):
        (root / f"{name}.flow.yaml").write_text(text)
    return root


@pytest.fixture
def engine(db_url: str, db_env: dict[str, str], project: Path) -> Iterator[Engine]:
    eng = Engine.virtual(db_url, environ=db_env, project_dir=str(project))
    try:
        yield eng
    finally:
        eng.close()


def attempts(exporter: InMemorySpanExporter, run_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name.startswith("attempt") and (s.attributes or {}).get("procflow.run.id") == run_id
    ]


def trace_ids(found: list[ReadableSpan]) -> set[int]:
    return {s.context.trace_id for s in found if s.context is not None}


def expected_trace_id(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big")


def test_each_attempt_is_a_span_with_the_runs_coordinates_and_no_payload(
    spans: InMemorySpanExporter, engine: Engine, project: Path
) -> None:
    engine.deploy(str(project / "paused.flow.yaml"))
    run_id = engine.start_flow("paused", {"token": SECRET_INPUT})
    engine.work()
    first = attempts(spans, run_id)
    assert first, "no attempt span"
    span = first[0]
    attrs = dict(span.attributes or {})
    assert attrs == {
        "procflow.run.id": run_id,
        "procflow.definition": "paused",
        "procflow.definition.version": 1,
        "procflow.step": "first",
        "procflow.step.path": "first",
        "procflow.attempt": 1,
        "procflow.worker": attrs["procflow.worker"],
        "procflow.outcome": "ok",
    }
    assert isinstance(attrs["procflow.worker"], str) and attrs["procflow.worker"]
    assert span.name == "attempt first"
    # The parent is the run's derived root, never recorded itself.
    assert span.parent is not None and span.parent.is_remote
    assert span.parent.span_id == tracing.run_trace_ids(run_id)[1]
    engine.advance("3d")
    assert engine.show(run_id)["status"] == "completed"
    for recorded in spans.get_finished_spans():
        assert SECRET_INPUT not in repr(recorded.to_json())


def test_attempts_two_days_apart_are_one_trace_derived_from_the_run_id(
    spans: InMemorySpanExporter, engine: Engine, project: Path
) -> None:
    engine.deploy(str(project / "paused.flow.yaml"))
    run_id = engine.start_flow("paused", {})
    other = engine.start_flow("paused", {})
    engine.work()
    before = attempts(spans, run_id)
    assert engine.show(run_id)["status"] == "waiting"
    engine.advance("2d")
    after = attempts(spans, run_id)[len(before) :]
    assert engine.show(run_id)["status"] == "completed"
    # One attempt goes on through the steps that follow until the run waits or ends.
    assert [(s.attributes or {}).get("procflow.step") for s in before] == ["first"]
    assert [(s.attributes or {}).get("procflow.step") for s in after] == ["pause"]
    assert trace_ids(before) == trace_ids(after) == {expected_trace_id(run_id)}
    assert trace_ids(attempts(spans, other)) == {expected_trace_id(other)}
    assert expected_trace_id(run_id) != expected_trace_id(other)


def test_a_retried_step_has_a_failed_span_per_attempt_in_the_same_trace(
    spans: InMemorySpanExporter, engine: Engine, project: Path
) -> None:
    calls: list[int] = []

    def flaky(ctx: Any, n: Any = None) -> dict[str, Any]:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(f"down, with a value that stays out: {SECRET_INPUT}")
        return {"ok": True}

    engine.deploy(str(project / "flaky.flow.yaml"))
    with fake_action("svc.call", flaky):
        run_id = engine.start_flow("flaky", {})
        engine.work()
        engine.advance("3h")
    assert engine.show(run_id)["status"] == "completed"
    made = attempts(spans, run_id)
    steps = [(s.attributes or {}).get("procflow.attempt") for s in made]
    outcomes = [(s.attributes or {}).get("procflow.outcome") for s in made]
    assert steps == [1, 2, 3]
    assert outcomes == ["failed", "failed", "ok"]
    assert [s.status.status_code for s in made] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert trace_ids(made) == {expected_trace_id(run_id)}
    assert all(SECRET_INPUT not in repr(s.to_json()) for s in made)


@pytest.fixture
def client(db_url: str, db_env: dict[str, str], project: Path) -> Iterator[TestClient]:
    state = ServerState.of(db_url, str(project), db_env)
    with TestClient(create_app(state)) as test_client:
        yield test_client


def linked_to_caller(span: ReadableSpan) -> bool:
    return any(
        link.context.trace_id == int(CALLER_TRACE, 16)
        and link.context.span_id == int(CALLER_SPAN, 16)
        for link in span.links
    )


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_a_traceparent_on_a_run_start_links_the_callers_trace_from_the_runs(
    spans: InMemorySpanExporter, engine: Engine, project: Path, client: TestClient
) -> None:
    engine.deploy(str(project / "paused.flow.yaml"))
    answer = client.post(
        "/flows/paused/runs", json={"inputs": {"token": SECRET_INPUT}},
        headers={"traceparent": TRACEPARENT},
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["id"]
    (start,) = named(spans, "run start")
    assert linked_to_caller(start)
    assert start.context is not None
    assert start.context.trace_id == expected_trace_id(run_id)  # the run's trace, not the caller's
    assert dict(start.attributes or {}) == {
        "procflow.run.id": run_id,
        "procflow.definition": "paused",
        "procflow.definition.version": 1,
    }
    engine.work()
    assert trace_ids(attempts(spans, run_id)) == {expected_trace_id(run_id)}
    # Without the header, the start span is there, unlinked; a malformed one is ignored.
    for headers in ({}, {"traceparent": "00-not-a-trace-01"}):
        assert client.post("/flows/paused/runs", json={}, headers=headers).status_code == 201
    assert [linked_to_caller(s) for s in named(spans, "run start")] == [True, False, False]
    assert all(not s.links for s in named(spans, "run start")[1:])


def test_a_traceparent_on_an_event_links_the_callers_trace_from_each_run_it_resumes(
    spans: InMemorySpanExporter, engine: Engine, project: Path, client: TestClient
) -> None:
    engine.deploy(str(project / "pay-wait.flow.yaml"))
    run_id = engine.start_flow("pay-wait", {"invoice": 7})
    engine.work()
    event = {"type": "svc.paid", "id": "evt-1", "data": {"invoice": 7}}
    answer = client.post("/events", json=event, headers={"traceparent": TRACEPARENT})
    assert answer.status_code == 200, answer.text
    assert answer.json()["resumed"] == [run_id]
    (delivery,) = named(spans, "event delivery")
    assert linked_to_caller(delivery)
    assert delivery.context is not None
    assert delivery.context.trace_id == expected_trace_id(run_id)
    assert dict(delivery.attributes or {}) == {
        "procflow.run.id": run_id,
        "procflow.event.type": "svc.paid",
        "procflow.event.id": "evt-1",
        "procflow.delivery": "resumed",
    }
    # The same event again is a duplicate: it resumes nothing and leaves no span.
    assert client.post("/events", json=event, headers={"traceparent": TRACEPARENT}).json()[
        "duplicate"
    ]
    assert len(named(spans, "event delivery")) == 1


def test_without_a_tracer_provider_attempts_make_no_span(engine: Engine, project: Path) -> None:
    assert tracing._tracer() is None  # the API's default: a proxy with nothing behind it
    engine.deploy(str(project / "paused.flow.yaml"))
    run_id = engine.start_flow("paused", {})
    engine.advance("3d")
    assert engine.show(run_id)["status"] == "completed"


def test_an_attempt_that_raises_is_an_incident_span_without_its_message(
    spans: InMemorySpanExporter, engine: Engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from procflow.runtime.work import advancing

    def broken(*args: Any) -> Any:
        raise RuntimeError(f"the engine broke on {SECRET_INPUT}")

    engine.deploy(str(project / "paused.flow.yaml"))
    run_id = engine.start_flow("paused", {})
    monkeypatch.setattr(advancing, "advance_flow", broken)
    engine.work()
    assert engine.show(run_id)["error"]["type"] == "incident"
    (span,) = attempts(spans, run_id)
    assert (span.attributes or {})["procflow.outcome"] == "incident"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "RuntimeError"
    assert not span.events
    assert SECRET_INPUT not in repr(span.to_json())
