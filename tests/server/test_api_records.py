"""Tasks, entity records and the outbox over HTTP, on both store backends: each success compared
with the ``procflow ... --json`` output of the same thing, each refusal a problem document with
the right status that changed nothing. Completing a task is tried as callers of a token table:
its role's member, another user, an administrator.
"""

from __future__ import annotations

from typing import Any

import pytest
from api_site import MakeSite, Site
from serving import ADMIN_TOKEN, OPS_TOKEN, PLAIN_TOKEN, TOKENS, bearer

from procflow.server.api import definitions, entities, outbox, runs, schedules, tasks
from procflow.server.openapi import openapi_path
from procflow.server.routing import Endpoint
from procflow.store.store import Store

SALES_TOKEN = "sales-token-0123456789abcdef"
SALES_TABLE = f"{TOKENS};{SALES_TOKEN}=sam:sales"


def open_task(site: Site, title: str = "desk") -> int:
    """A new Order's review task (role `sales`, form Review: approve | reject, may write note)."""
    site.order(title)
    site.work()
    return int(site.client.get("/tasks").json()["items"][0]["id"])


# --- tasks -----------------------------------------------------------------------------------


def test_tasks_list_items_are_the_cli_items_newest_first(site: Site) -> None:
    ids = [open_task(site, t) for t in ("desk", "lamp")]
    listed = site.client.get("/tasks").json()
    assert [t["id"] for t in listed["items"]] == list(reversed(ids))
    assert listed["items"] == site.cli("tasks", "list")  # the same page, newest first
    assert site.client.get("/tasks?assignee=sales").json() == listed
    assert site.client.get("/tasks?assignee=ann").json() == {"items": [], "next_cursor": None}


def test_a_task_is_its_list_item_and_an_unknown_one_a_404(site: Site) -> None:
    task_id = open_task(site)
    [item] = site.client.get("/tasks").json()["items"]
    assert site.client.get(f"/tasks/{task_id}").json() == item
    site.refused("GET", "/tasks/999", 404, detail="[999]")
    site.refused("GET", "/tasks/abc", 404, field="id", detail="[abc]")


def test_completing_a_task_answers_it_with_its_outcome_by_the_caller(site: Site) -> None:
    task_id = open_task(site)
    done = site.client.post(
        f"/tasks/{task_id}/complete", json={"action": "approve", "data": {"note": "ok"}}
    )
    assert done.status_code == 200
    task = done.json()
    assert (task["status"], task["action"], task["by"], task["data"]) == (
        "completed", "approve", "local", {"note": "ok"}
    )  # fmt: skip
    assert site.client.get(f"/tasks/{task_id}").json() == task
    assert site.cli("records", "get", "Order", "1")["note"] == "ok"
    assert site.client.get("/tasks").json()["items"] == []


def test_completing_as_a_member_of_the_role_records_who(make_site: MakeSite) -> None:
    site = make_site({"PROCFLOW_API_TOKENS": SALES_TABLE})
    site.client.headers.update(bearer(ADMIN_TOKEN))
    task_id = open_task(site)
    done = site.client.post(
        f"/tasks/{task_id}/complete", json={"action": "reject"}, headers=bearer(SALES_TOKEN)
    )
    assert done.status_code == 200
    assert done.json()["by"] == "sam"
    assert site.cli("records", "get", "Order", "1")["Progress"] is not None


@pytest.mark.parametrize("token", [OPS_TOKEN, PLAIN_TOKEN])
def test_completing_another_roles_task_is_a_403(make_site: MakeSite, token: str) -> None:
    site = make_site({"PROCFLOW_API_TOKENS": SALES_TABLE})
    site.client.headers.update(bearer(ADMIN_TOKEN))
    task_id = open_task(site)
    body = site.refused(
        "POST", f"/tasks/{task_id}/complete", 403, detail="role [sales]",
        json={"action": "approve"}, headers=bearer(token),
    )  # fmt: skip
    assert "cannot complete it" in body["detail"]


@pytest.mark.parametrize(
    ("body", "status", "field", "detail"),
    [
        ({}, 422, "action", "give an action"),
        ({"action": "maybe"}, 422, "action", "[maybe] is not allowed"),
        ({"action": "approve", "data": {"title": "x"}}, 422, "title", "[title]"),
        ({"action": "approve", "data": {"note": 5}}, 422, "note", "[note]"),
        ({"action": 1}, 422, "action", "must be a string"),
        ({"action": "approve", "data": []}, 422, "data", "must be an object"),
        ({"action": "approve", "by": "me"}, 422, "by", "[by]"),
    ],
)
def test_an_action_or_field_the_form_does_not_allow_is_a_422_naming_it(
    site: Site, body: dict[str, Any], status: int, field: str, detail: str
) -> None:
    task_id = open_task(site)
    url = f"/tasks/{task_id}/complete"
    site.refused("POST", url, status, field=field, detail=detail, json=body)


def test_completing_a_task_that_is_not_open_is_a_409_an_unknown_one_a_404(site: Site) -> None:
    task_id = open_task(site)
    site.client.post(f"/tasks/{task_id}/complete", json={"action": "approve"})
    url = f"/tasks/{task_id}/complete"
    site.refused("POST", url, 409, detail="not open", json={"action": "approve"})
    site.refused("POST", "/tasks/999/complete", 404, json={"action": "approve"})
    site.refused("POST", "/tasks/-1/complete", 404, field="id", json={"action": "approve"})


# --- records ---------------------------------------------------------------------------------


def owner_of(url: str, entity: str, id_: int) -> str | None:
    store = Store(url, create=False)
    try:
        row = store.read().record(entity, id_)
        assert row is not None
        return row.owner
    finally:
        store.close()


def test_creating_a_record_answers_201_the_record_owned_by_the_caller(
    make_site: MakeSite,
) -> None:
    site = make_site({"PROCFLOW_API_TOKENS": TOKENS})
    site.client.headers.update(bearer(OPS_TOKEN))
    done = site.client.post("/entities/Order", json={"title": "desk", "total": 3})
    assert done.status_code == 201
    assert done.headers["location"] == "/entities/Order/1"
    assert done.json() == {"id": 1, "title": "desk", "total": 3, "note": None, "Progress": 1}
    assert done.json() == site.cli("records", "get", "Order", "1")
    assert owner_of(site.url, "Order", 1) == "olga"
    assert [r["name"] for r in site.cli("runs", "list")] == ["Approve"]  # onCreate fired


def test_records_list_get_patch_and_delete_are_the_cli_shapes(site: Site) -> None:
    for title in ("desk", "lamp", "chair"):
        site.order(title)
    listed = site.client.get("/entities/Order").json()
    assert [r["title"] for r in listed["items"]] == ["chair", "lamp", "desk"]
    assert listed["items"] == site.cli("records", "list", "Order")  # the same page, newest first
    assert site.client.get("/entities/Order/2").json() == site.cli("records", "get", "Order", "2")
    patched = site.client.patch("/entities/Order/2", json={"total": 7})
    assert patched.status_code == 200
    assert patched.json()["total"] == 7 == site.cli("records", "get", "Order", "2")["total"]
    deleted = site.client.delete("/entities/Order/2")
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert [r["id"] for r in site.client.get("/entities/Order").json()["items"]] == [3, 1]


def test_deleting_a_record_cancels_its_runs_by_the_caller(site: Site) -> None:
    site.order()
    [run] = site.cli("runs", "list")
    site.client.delete("/entities/Order/1")
    shown = site.client.get(f"/runs/{run['id']}").json()
    assert shown["status"] == "cancelled"
    assert shown["history"][-1]["by"] == "local"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("GET", "/entities/Nope", None, 404, None),
        ("GET", "/entities/Order/9", None, 404, None),
        ("GET", "/entities/Order/x", None, 404, "id"),
        ("POST", "/entities/Nope", {"title": "x"}, 404, None),
        ("POST", "/entities/Order", {}, 422, "title"),
        ("POST", "/entities/Order", {"title": "x", "total": "many"}, 422, "total"),
        ("POST", "/entities/Order", {"title": "x", "colour": "red"}, 422, "colour"),
        ("POST", "/entities/Order", ["title"], 422, ""),
        ("PATCH", "/entities/Order/9", {"total": 1}, 404, None),
        ("PATCH", "/entities/Order/1", {"total": "many"}, 422, "total"),
        ("PATCH", "/entities/Order/1", "total", 422, ""),
        ("DELETE", "/entities/Order/9", None, 404, None),
        ("DELETE", "/entities/Status/1", None, 422, None),
    ],
)
def test_a_refused_record_request_is_a_problem_that_changes_nothing(
    site: Site, method: str, path: str, body: Any, status: int, field: str | None
) -> None:
    site.order()
    kwargs = {} if body is None else {"json": body}
    site.refused(method, path, status, field=field, **kwargs)


# --- the outbox ------------------------------------------------------------------------------


def test_the_outbox_lists_kept_messages_as_the_cli_does_newest_first(site: Site) -> None:
    assert site.client.get("/outbox").json() == {"items": [], "next_cursor": None}
    for subject in ("printer", "coffee"):
        site.client.post("/entities/Ticket", json={"subject": subject})
    site.work()
    listed = site.client.get("/outbox").json()["items"]
    assert sorted(m["body"] for m in listed) == ["coffee", "printer"]
    assert [m["id"] for m in listed] == sorted((m["id"] for m in listed), reverse=True)
    assert listed == site.cli("outbox", "list")  # the same page, newest first
    assert set(listed[0]) == {
        "id", "channel", "to", "subject", "body", "run_id", "step", "created_at"
    }  # fmt: skip


# --- every resource route needs a token, when there is a table -------------------------------

RESOURCE_ENDPOINTS = [
    *definitions.ENDPOINTS, *runs.ENDPOINTS, *tasks.ENDPOINTS, *entities.ENDPOINTS,
    *outbox.ENDPOINTS, *schedules.ENDPOINTS,
]  # fmt: skip


@pytest.mark.parametrize(
    "endpoint", RESOURCE_ENDPOINTS, ids=[f"{e.method} {e.path}" for e in RESOURCE_ENDPOINTS]
)
def test_without_a_bearer_token_every_resource_route_is_a_401(
    make_site: MakeSite, endpoint: Endpoint
) -> None:
    site = make_site({"PROCFLOW_API_TOKENS": TOKENS})
    site.client.post("/entities/Order", json={"title": "desk"}, headers=bearer(ADMIN_TOKEN))
    path = openapi_path(endpoint.path).format(name="greet", id="1", entity="Order")
    assert not endpoint.public
    site.refused(endpoint.method, path, 401, detail="bearer token", json={})
    wrong = bearer("not-a-token-0123456789abcdef")
    site.refused(endpoint.method, path, 401, detail="not valid", json={}, headers=wrong)


def test_a_completed_task_is_the_shape_tasks_complete_prints(site: Site) -> None:
    task_id = open_task(site)
    printed = site.cli("tasks", "complete", str(task_id), "--action", "reject")
    assert site.client.get(f"/tasks/{task_id}").json() == printed
    assert printed["by"] == "administrator"  # the command line without --as
