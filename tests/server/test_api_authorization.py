"""The role table over HTTP, on both store backends: every route of the API, called by each kind
of user (``authz_site``), is answered as the table says — a 403 problem naming the role it needs
and nothing changed, or the route's own answer. The walk covers every route: a new route must say
here who may call it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from authz_site import (
    BACKFILL_WINDOW,
    BOOM,
    TOKENS,
    USERS,
    allowed,
    deploy_all,
    failed_run,
    token,
    waiting_run,
    write_project,
)
from serving import MakeClient, bearer
from starlette.testclient import TestClient
from store_dump import dump_store

from procflow.runtime.engine import Engine
from procflow.server.api import ENDPOINTS
from procflow.server.openapi import openapi_path


@dataclass
class Site:
    engine: Engine
    client: TestClient
    project: Path

    def call(self, user: str | None, request: Request) -> Any:
        method, path, kwargs = request
        headers = {**kwargs.pop("headers", {}), **(bearer(token(user)) if user else {})}
        return self.client.request(method, path, headers=headers, **kwargs)


Request = tuple[str, str, dict[str, Any]]


@pytest.fixture
def site(tmp_path: Path, db_url: str, make_client: MakeClient) -> Iterator[Site]:
    project = write_project(tmp_path)
    engine = Engine.virtual(db_url, environ=dict(os.environ), project_dir=str(project))
    deploy_all(engine, project)
    client = make_client({"PROCFLOW_API_TOKENS": TOKENS}, str(project))
    yield Site(engine, client, project)
    engine.close()


# --- the walk ------------------------------------------------------------------------------------

# Each route of the role table: (the action, a function making what it acts on as the
# administrator and returning the request to make).
ROLE_ROUTES: dict[tuple[str, str], tuple[str, Callable[[Site], Request]]] = {
    ("POST", "/definitions"): (
        "deploy",
        lambda s: (
            "POST",
            "/definitions?filename=boom.flow.yaml",
            {"content": BOOM, "headers": {"content-type": "application/yaml"}},
        ),
    ),
    ("POST", "/flows/{name}/runs"): (
        "start",
        lambda s: ("POST", "/flows/hold/runs", {"json": {"inputs": {}}}),
    ),
    ("POST", "/processes/{name}/runs"): (
        "start",
        lambda s: (
            "POST",
            "/processes/Remind/runs",
            {"json": {"record": {"entity": "Note", "id": _note(s)}}},
        ),
    ),
    ("POST", "/runs/{id}/cancel"): (
        "cancel",
        lambda s: ("POST", f"/runs/{waiting_run(s.engine)}/cancel", {}),
    ),
    ("POST", "/runs/{id}/retry"): (
        "retry",
        lambda s: ("POST", f"/runs/{failed_run(s.engine)}/retry", {}),
    ),
    ("POST", "/events"): (
        "send_event",
        lambda s: ("POST", "/events", {"json": {"type": "crm.paid", "data": {"invoice": 7}}}),
    ),
    ("POST", "/schedules/{name:path}/trigger"): (
        "trigger_schedule",
        lambda s: ("POST", "/schedules/tick/trigger", {"json": {"overlap": "allow"}}),
    ),
    ("POST", "/schedules/{name:path}/pause"): (
        "pause_schedule",
        lambda s: ("POST", "/schedules/tick/pause", {"json": {"note": "maintenance"}}),
    ),
    ("POST", "/schedules/{name:path}/resume"): (
        "resume_schedule",
        lambda s: (s.engine.schedules.pause("tick"), ("POST", "/schedules/tick/resume", {}))[1],
    ),
    ("POST", "/schedules/{name:path}/backfill"): (
        "backfill_schedule",
        lambda s: (
            "POST",
            "/schedules/tick/backfill",
            {"json": {"from": BACKFILL_WINDOW[0], "to": BACKFILL_WINDOW[1]}},
        ),
    ),
}

# Routes any signed-in user may read: (a function making the request).
READ_ROUTES: dict[tuple[str, str], Callable[[Site], Request]] = {
    ("GET", "/definitions"): lambda s: ("GET", "/definitions", {}),
    ("GET", "/definitions/{name}"): lambda s: ("GET", "/definitions/hold", {}),
    ("GET", "/definitions/{name}/diagram.svg"): lambda s: (
        "GET",
        "/definitions/hold/diagram.svg",
        {},
    ),
    ("GET", "/definitions/{name}/diagram.bpmn"): lambda s: (
        "GET",
        "/definitions/hold/diagram.bpmn",
        {},
    ),
    ("GET", "/runs"): lambda s: ("GET", "/runs", {}),
    ("GET", "/runs/{id}"): lambda s: ("GET", f"/runs/{waiting_run(s.engine)}", {}),
    ("GET", "/tasks"): lambda s: ("GET", "/tasks", {}),
    ("GET", "/tasks/{id}"): lambda s: ("GET", f"/tasks/{_task(s)}", {}),
    ("GET", "/outbox"): lambda s: ("GET", "/outbox", {}),
    ("GET", "/schedules"): lambda s: ("GET", "/schedules", {}),
    ("GET", "/schedules/{name:path}"): lambda s: ("GET", "/schedules/tick", {}),
    ("GET", "/metrics"): lambda s: ("GET", "/metrics", {}),
}

# Routes with rules of their own, tested where the rule is: records (the permissions block,
# below), a task's completion (tests/server/test_api_resources.py, tests/integration/
# test_task_roles.py), and the routes that need no bearer (health; webhooks, signed instead).
OWN_RULES = {
    ("GET", "/entities/{entity}"), ("POST", "/entities/{entity}"),
    ("GET", "/entities/{entity}/{id}"), ("PATCH", "/entities/{entity}/{id}"),
    ("DELETE", "/entities/{entity}/{id}"), ("POST", "/tasks/{id}/complete"),
    ("GET", "/health"), ("GET", "/health/ready"), ("POST", "/webhooks/slack"),
    ("POST", "/webhooks/events"),
}  # fmt: skip


def _note(site: Site) -> int:
    note: int = site.engine.create_record("Note", {"text": "call"})["id"]
    return note


def _task(site: Site) -> int:
    site.engine.start("Remind", record=("Note", _note(site)))
    site.engine.work()
    task_id: int = site.engine.list_tasks()[-1]["id"]
    return task_id


def test_the_walk_names_every_route() -> None:
    routes = {(e.method, e.path) for e in ENDPOINTS}
    named = set(ROLE_ROUTES) | set(READ_ROUTES) | OWN_RULES
    assert routes == named, "say who may call each route"
    assert (
        not set(ROLE_ROUTES) & set(READ_ROUTES)
        and not (set(ROLE_ROUTES) | set(READ_ROUTES)) & OWN_RULES
    )
    assert all(e.public for e in ENDPOINTS if e.path.startswith(("/health", "/webhooks")))


@pytest.mark.parametrize("route", list(ROLE_ROUTES), ids=" ".join)
def test_each_route_of_the_role_table(site: Site, route: tuple[str, str]) -> None:
    action, prepare = ROLE_ROUTES[route]
    for user in USERS:
        request = prepare(site)
        before = dump_store(site.engine.store)
        answer = site.call(user, request)
        if allowed(user, action):
            assert answer.status_code in (200, 201), (user, answer.text)
            continue
        assert answer.status_code == 403, (user, answer.text)
        problem = answer.json()
        assert problem["status"] == 403
        assert f"user [{user}] may not" in problem["detail"]
        assert "needs the role" in problem["detail"]
        assert dump_store(site.engine.store) == before, (
            f"{user}'s refused {route} changed the store"
        )


@pytest.mark.parametrize("route", list(READ_ROUTES), ids=" ".join)
def test_every_signed_in_user_reads(site: Site, route: tuple[str, str]) -> None:
    request = READ_ROUTES[route](site)
    for user in USERS:
        answer = site.call(user, request)
        assert answer.status_code not in (401, 403), (user, answer.text)
    assert site.call(None, request).status_code == 401


def test_records_follow_the_permissions_block_over_http(site: Site) -> None:
    order = site.engine.create_record("Order", {"title": "a"})["id"]
    note = site.engine.create_record("Note", {"text": "n"})["id"]
    cases: list[tuple[str, Request, set[str]]] = [
        ("read", ("GET", f"/entities/Order/{order}", {}), {"cleo", "ada"}),
        ("list", ("GET", "/entities/Order", {}), {"cleo", "ada"}),
        ("create", ("POST", "/entities/Order", {"json": {"title": "b"}}), {"cleo", "ada"}),
        ("update", ("PATCH", f"/entities/Order/{order}", {"json": {"title": "c"}}), {"ada"}),
        ("read note", ("GET", "/entities/Note", {}), set(USERS)),
        (
            "create note",
            ("POST", "/entities/Note", {"json": {"text": "m"}}),
            {"otto", "dee", "ada"},
        ),
    ]
    for what, request, who in cases:
        for user in USERS:
            before = dump_store(site.engine.store)
            answer = site.call(user, (request[0], request[1], dict(request[2])))
            if user in who:
                assert answer.status_code in (200, 201), (what, user, answer.text)
                continue
            assert answer.status_code == 403, (what, user, answer.text)
            assert "records: that needs" in answer.json()["detail"]
            assert dump_store(site.engine.store) == before
    for user in ("vic", "cleo"):
        answer = site.call(user, ("DELETE", f"/entities/Note/{note}", {}))
        assert answer.status_code == 403
    assert site.call("otto", ("DELETE", f"/entities/Note/{note}", {})).status_code == 204


def test_the_document_declares_403_exactly_where_the_role_table_may_refuse(
    site: Site,
) -> None:
    paths = site.client.get("/openapi.json", headers=bearer(token("ada"))).json()["paths"]
    refusable = set(ROLE_ROUTES) | {r for r in OWN_RULES if r[1].startswith("/entities")}
    refusable |= {("POST", "/tasks/{id}/complete")}
    for method, path in set(ROLE_ROUTES) | set(READ_ROUTES) | OWN_RULES:
        declared = "403" in paths[openapi_path(path)][method.lower()]["responses"]
        assert declared == ((method, path) in refusable), (method, path)
