"""User tasks: the open ones newest first, one task, and completing one as the caller (its
assigned user, a member of its assigned role, or an administrator; anyone else gets a 403).
Tasks are answered in the ``tasks list --json`` shape; a closed task adds its outcome, as
``tasks complete --json`` prints it."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from procflow.server.inputs import (
    JSON_OBJECT,
    id_param,
    json_object,
    member,
    path_number,
    text_param,
)
from procflow.server.paging import PAGE_PARAMS, int_page, page_json, page_schema
from procflow.server.routing import Call, Endpoint, json_response

__all__ = ["ENDPOINTS", "TASK_SCHEMA"]


def _not_found(text: str) -> str:
    return f"no task with id [{text}]"


_MAYBE_TEXT = {"type": ["string", "null"]}

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A `tasks list --json` item; a closed task adds status, ended_at, action, "
    "by and data.",
    "properties": {
        "id": {"type": "integer"},
        "run_id": {"type": "string"},
        "step": {"type": "string"},
        "assignee": {"type": "string"},
        "form": _MAYBE_TEXT,
        "actions": {"type": "array", "items": {"type": "string"}},
        "record": {
            "type": ["object", "null"],
            "properties": {"entity": {"type": "string"}, "id": {"type": "integer"}},
        },
        "created_at": {"type": "string", "format": "date-time"},
        "status": {"enum": ["completed", "withdrawn"]},
        "ended_at": {"type": "string", "format": "date-time"},
        "action": _MAYBE_TEXT,
        "by": _MAYBE_TEXT,
        "data": JSON_OBJECT,
    },
    "required": ["id", "run_id", "step", "assignee", "form", "actions", "record", "created_at"],
}


def list_tasks(call: Call) -> Response:
    asked = int_page(call.query, "tasks")
    assignee = call.query.get("assignee") or None
    page = call.engine.tasks_page(assignee, limit=asked.limit, before=asked.before)
    return json_response(page_json(asked, page))


def show_task(call: Call) -> Response:
    return json_response(call.engine.task(path_number(call, "id", _not_found)))


def complete_task(call: Call) -> Response:
    task_id = path_number(call, "id", _not_found)
    body = json_object(call, {"action", "data"})
    action = member(body, "action", str, None)
    data = member(body, "data", dict, {})
    return json_response(call.engine.complete_task(task_id, action, data, call.actor))


_TASK_ID = id_param("id", "The task's id.", number=True)
_TASK = {"schema": TASK_SCHEMA}

ENDPOINTS = [
    Endpoint(
        "GET", "/tasks", list_tasks, "Open tasks, newest first.",
        params=(text_param("assignee", "Only tasks assigned to this user or role."),
                *PAGE_PARAMS),
        responses={"200": {"description": "a page of open tasks",
                           "schema": page_schema(TASK_SCHEMA)}},
    ),
    Endpoint(
        "GET", "/tasks/{id}", show_task, "One task, open or closed.",
        params=(_TASK_ID,),
        responses={"200": {"description": "the task", **_TASK},
                   "404": {"description": "no such task"}},
    ),
    Endpoint(
        "POST", "/tasks/{id}/complete", complete_task,
        "Complete an open task as the caller: write its form's fields, move its run on.",
        params=(_TASK_ID,),
        body={"application/json": {"schema": {
            "type": "object",
            "properties": {
                "action": {"type": ["string", "null"],
                           "description": "One of the form's actions (no form: free text)."},
                "data": {"type": ["object", "null"],
                         "description": "The form's fields to write (null: none)."},
            },
            "additionalProperties": False,
        }}},
        responses={
            "200": {"description": "completed: the task with its outcome", **_TASK},
            "403": {"description": "the task is not the caller's (another user's, or a role "
                                   "the caller is not a member of)"},
            "404": {"description": "no such task"},
            "409": {"description": "the task is not open (completed, withdrawn, its run ended)"},
            "422": {"description": "an action or field the task's form does not allow"},
        },
    ),
]  # fmt: skip
