"""The task inbox and one task: its record, its form's fields as inputs, one button per action.

Completing goes through the engine's ``complete_task`` as the signed-in caller, exactly like
``POST /tasks/{id}/complete``: a field the engine refuses is shown next to its input (422), a
task of another user or role is refused with the engine's sentence (403).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import RedirectResponse, Response

from procflow.errors import ForbiddenError, ProcflowError
from procflow.model.ir import Application, Entity
from procflow.server.paging import int_page, page_json
from procflow.server.problems import Problem, problem_for
from procflow.server.web.handling import PREFIX, WebCall
from procflow.server.web.render import url_with

__all__ = ["complete_task", "task_page", "tasks_page"]

_INT64 = 2**63
_INPUT_TYPES = {
    "integer": "number", "int": "number", "long": "number", "decimal": "number",
    "double": "number", "date": "date", "boolean": "checkbox",
}  # fmt: skip


def tasks_page(call: WebCall) -> Response:
    asked = int_page(call.query, "tasks")
    assignee = call.query.get("assignee") or None
    page = call.engine.tasks_page(assignee, limit=asked.limit, before=asked.before)
    cursor = page_json(asked, page)["next_cursor"]
    next_url = (
        url_with(f"{PREFIX}/tasks", {"assignee": assignee, "cursor": cursor}) if cursor else None
    )
    return call.page(
        "tasks.html", "Tasks", tasks=page.items, assignee=assignee or "", next_url=next_url
    )


def task_page(call: WebCall) -> Response:
    task_id = _task_id(call)
    return _task_view(call, task_id, call.engine.task(task_id))


def complete_task(call: WebCall) -> Response:
    task_id = _task_id(call)
    task = call.engine.task(task_id)
    fields = _fields(call, task)
    action = call.form.get("action") or None
    data = {f["name"]: v for f in fields if (v := _value(f, call.form)) is not _ABSENT}
    try:
        call.engine.complete_task(task_id, action, data, call.actor)
    except ForbiddenError as exc:
        note = f"You may not complete this task: {exc}"
        return _task_view(call, task_id, task, status=403, refused=note)
    except ProcflowError as exc:
        problem = problem_for(exc)
        field = getattr(exc, "field", None)
        errors = {str(field): str(exc)} if field else {}
        general = None if field in {f["name"] for f in fields} else str(exc)
        return _task_view(
            call, task_id, task, status=problem.status, errors=errors, refused=general,
            sent=call.form,
        )  # fmt: skip
    return RedirectResponse(f"{PREFIX}/tasks/{task_id}?done={action or 'complete'}", 303)


def _task_id(call: WebCall) -> int:
    text = call.params["id"]
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and int(text) < _INT64):
        raise Problem(404, f"no task with id [{text[:40]}]")
    return int(text)


def _task_view(
    call: WebCall, task_id: int, task: dict[str, Any], *, status: int = 200,
    errors: dict[str, str] | None = None, refused: str | None = None,
    sent: dict[str, str] | None = None,
) -> Response:  # fmt: skip
    record = None
    if task.get("record"):
        ref = task["record"]
        try:
            record = call.engine.get_record(ref["entity"], ref["id"], user=call.actor)
        except ProcflowError:  # deleted since: the task page still shows the task
            record = None
    fields = _fields(call, task)
    values = sent if sent is not None else {k: _shown(v) for k, v in (record or {}).items()}
    return call.page(
        "task.html", f"Task {task_id}", status=status, task=task, record=record, fields=fields,
        values=values, errors=errors or {}, refused=refused, done=call.query.get("done"),
        is_open="status" not in task,
        complete_note=_may_not(call, task_id) if "status" not in task else None,
    )  # fmt: skip


def _may_not(call: WebCall, task_id: int) -> str | None:
    """Why the signed-in user may not complete the task, said beside its disabled buttons."""
    why = call.engine.task_refusal(task_id, call.actor)
    return None if why is None else f"You may not complete this task: {why}"


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else ""
    return str(value)


def _fields(call: WebCall, task: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's form fields with their declared types (from the run's definition version)."""
    if not task.get("form"):
        return []
    run = call.engine.show(task["run_id"], 0)
    try:
        definition = call.engine.definition_version(run["name"], run["version"])
    except ProcflowError:
        return []
    if not isinstance(definition, Application):
        return []
    form = definition.form(task["form"])
    if form is None:
        return []
    entity = definition.entity(form.for_entity)
    return [_field(entity, name) for name in form.fields]


def _field(entity: Entity | None, name: str) -> dict[str, Any]:
    declared = entity.field(name) if entity is not None else None
    kind = declared.type if declared is not None else "string"
    return {
        "name": name,
        "kind": kind,
        "input": _INPUT_TYPES.get(kind, "text"),
        "step": "1" if kind in ("integer", "int", "long") else "any",
        "required": bool(declared and declared.required),
        "long": kind == "text",
    }


_ABSENT = object()


def _value(field: dict[str, Any], form: dict[str, str]) -> Any:
    """A field's value as the engine takes it; text it cannot read is passed on as text, so the
    engine's own sentence names the field. An empty input leaves the field as it is."""
    name, kind = field["name"], field["kind"]
    if kind == "boolean":
        return form.get(name) in ("on", "true", "1")
    text = form.get(name, "")
    if text.strip() == "":
        return _ABSENT
    if kind in ("integer", "int", "long"):
        return int(text) if text.strip().lstrip("-").isdigit() else text
    if kind in ("decimal", "double"):
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if number.is_integer() and "." not in text else number
    return text
