"""An outside fuzzer, Schemathesis, against ``/openapi.json``: every operation the document lists
gets requests generated from the document alone, both ones it says are valid and ones it says
are not, sent in-process to the ASGI app (Schemathesis's own ASGI transport) with a token table
configured and the administrator's real bearer token, on a SQLite store where a flow, a scheduled
flow and an intent app are deployed, runs started, a record made and its task opened (so that
known names and ids lead part of the requests past 404 into the routes' real work). Each response
must:

- never be a 5xx (``not_a_server_error``);
- have a status code, a content type, headers and a body the document declares for the
  operation (``status_code_conformance``, ``content_type_conformance``,
  ``response_headers_conformance``, ``response_schema_conformance``);
- refuse (4xx) what the document says is not valid (``negative_data_rejection``): the server
  takes nothing the document does not.

Bounded and repeatable: for each operation, Schemathesis's coverage phase (a fixed list of cases
at the edges of each constraint: some 740 in all), then ``EXAMPLES`` generated requests per
generation mode, derandomized; each operation on its own copy of the seeded store, so the same
requests get the same answers on every run, in any order and test process. About 9 s.

Not checked: that the server takes every request the document calls valid
(``positive_data_acceptance``), as no schema can say which cursor a list gave out, which event
types the connectors declare or which fields an entity has. The webhooks are reached up to their
signature check (401): a signature cannot be generated from the document. The operations are
driven through ``as_strategy`` and ``iter_coverage_cases`` rather than ``schema.parametrize()``,
whose lazy (fixture) form fails on pytest 9 (Schemathesis 4.32 reads ``Function._nodeid``).
``tests/server/test_fuzz.py`` is this project's own fuzzer, whose strategies know the routes;
this one knows only the document, as a client would.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fuzz_project import INTENT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from serving import ADMIN_TOKEN, TOKENS, bearer

from procflow.runtime.engine import Engine
from procflow.server.api import ENDPOINTS
from procflow.server.app import create_app
from procflow.server.openapi import document, openapi_endpoint
from procflow.server.state import ServerState

EXAMPLES = 10  # per generation mode (valid, invalid, valid with known path values) and operation

FLOW = """\
flow: greet
inputs:
  who: { type: string }
  extra: { type: object }
steps:
  - answer:
      wait_for: slack.approval
      match: { message: "{{ who }}" }
      timeout: 24h
"""
# A scheduled flow: its schedule's routes reach past 404 (pause, trigger, backfill it).
TICK = """\
flow: tick
trigger:
  schedule: { every: 1h, overlap: allow }
steps:
  - hold: { wait: { for: 1d } }
"""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
SECRETS = {
    "SLACK_SIGNING_SECRET": "slack-signing-secret-for-the-fuzzer",
    "PROCFLOW_WEBHOOK_SECRET": "whsec_" + base64.b64encode(b"fuzzer-webhook-key-0123").decode(),
}


def operations() -> list[tuple[str, str]]:
    """(METHOD, path) of every operation the served document lists (built without a server)."""
    spec = document([*ENDPOINTS, openapi_endpoint(ENDPOINTS)])
    return [(method.upper(), path) for path, item in spec["paths"].items() for method in item]


@dataclass(frozen=True)
class Target:
    schema: Any  # schemathesis's OpenApiSchema of the served document
    known: dict[str, dict[str, Any]]  # path -> path parameter values that name something


def seed(url: str, folder: Path) -> dict[str, dict[str, Any]]:
    """Deploy, start a run, make an Order (its Approve run opens a task): the path values that
    name something, per path."""
    (folder / "shop.intent").write_text(INTENT, encoding="utf-8")
    (folder / "greet.flow.yaml").write_text(FLOW, encoding="utf-8")
    (folder / "tick.flow.yaml").write_text(TICK, encoding="utf-8")
    engine = Engine(url)
    try:
        engine.deploy(str(folder / "shop.intent"))
        engine.deploy(str(folder / "greet.flow.yaml"))
        engine.deploy(str(folder / "tick.flow.yaml"))
        engine.schedules.trigger("tick")  # a last run to show
        run = engine.start_flow("greet", {"who": "ada"})
        record = engine.create_record("Order", {"title": "first", "total": 3})
        engine.work(until_idle=True)
        task = engine.list_tasks()[0]["id"]
    finally:
        engine.close()
    return {
        "/definitions/{name}": {"name": "greet"},
        "/definitions/{name}/diagram.svg": {"name": "Approve"},
        "/flows/{name}/runs": {"name": "greet"},
        "/processes/{name}/runs": {"name": "Manual"},
        "/runs/{id}": {"id": run},
        "/runs/{id}/cancel": {"id": run},
        "/runs/{id}/retry": {"id": run},
        "/tasks/{id}": {"id": task},
        "/tasks/{id}/complete": {"id": task},
        "/entities/{entity}": {"entity": "Order"},
        "/entities/{entity}/{id}": {"entity": "Order", "id": record["id"]},
        **{path: {"name": "tick"} for path in SCHEDULE_PATHS},
    }


SCHEDULE_PATHS = [f"/schedules/{{name}}{action}" for action in
                  ("", "/pause", "/resume", "/trigger", "/backfill")]  # fmt: skip


@dataclass(frozen=True)
class Seeded:
    folder: Path  # the project, and the seeded store fuzz.db
    known: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """The seeded store, made once (per test process); each test fuzzes a copy of it."""
    folder = tmp_path_factory.mktemp("fuzz-openapi")
    return Seeded(folder, seed(f"sqlite:///{folder / 'fuzz.db'}", folder))


@pytest.fixture
def target(seeded: Seeded, tmp_path: Path) -> Iterator[Target]:
    """The app on a copy of the seeded store (each operation meets the same store, whatever
    ran before it, in whichever test process: the same answers on every run), and its document
    as Schemathesis loaded it. An app per test: loading starts the app's lifespan (its engines),
    and Schemathesis's pytest plugin ends every lifespan it started when a test ends."""
    for name in ("fuzz.db", "fuzz.db-wal", "fuzz.db-shm"):
        if (seeded.folder / name).exists():
            shutil.copyfile(seeded.folder / name, tmp_path / name)
    environ = {"PROCFLOW_API_TOKENS": TOKENS, **SECRETS}
    app = create_app(
        ServerState.of(f"sqlite:///{tmp_path / 'fuzz.db'}", str(seeded.folder), environ)
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=bearer(ADMIN_TOKEN))
    # Every request carries the token, as a client's would: requests without one (401) are
    # test_api_resources's; invalid ones here are invalid in what the document describes.
    schema.config.update(headers=bearer(ADMIN_TOKEN))
    try:
        yield Target(schema, seeded.known)
    finally:
        asgi.shutdown_lifespans()


MODES = [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]


@pytest.mark.parametrize(("method", "path"), operations())
def test_every_operation_agrees_with_the_document(target: Target, method: str, path: str) -> None:
    operation = target.schema[path][method]
    # The coverage phase first: a fixed list of cases at each constraint's edges (a value just
    # past a maximum, a missing required member, another method on the path), a few dozen each.
    config = target.schema.config.generation_for(operation=operation)
    for case in target.schema.iter_coverage_cases(
        operation, generation_modes=MODES, generation_config=config
    ):
        case.call_and_validate(headers=bearer(ADMIN_TOKEN), checks=CHECKS)
    # Then generated requests, valid and not, and valid ones naming what the store holds.
    strategies = [operation.as_strategy(mode) for mode in MODES]
    if path in target.known:
        known = target.known[path]
        strategies.append(operation.as_strategy(MODES[0], path_parameters=known))

    @settings(
        max_examples=EXAMPLES * len(strategies),
        derandomize=True,  # the same requests on every run
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(strategies))
    def send(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    send()
