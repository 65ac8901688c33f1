"""Definitions: the list with the upload form, one definition with its diagram and versions
(active runs per version), and the upload itself (``deploy_text``, as ``POST /definitions``:
a file with errors is not deployed, and each problem is listed as ``file:line:col: message``)."""

from __future__ import annotations

from typing import Any

from starlette.responses import RedirectResponse, Response

from procflow.errors import DefinitionError, ProcflowError
from procflow.server.diagrams import NO_DOT
from procflow.server.paging import int_page, page_json
from procflow.server.problems import problem_for
from procflow.server.web.handling import PREFIX, WebCall
from procflow.server.web.pages_runs import diagrams
from procflow.server.web.render import url_with

__all__ = ["definition_page", "definitions_page", "upload_definition"]

_SUFFIXES = (".intent", ".flow.yaml", ".flow.yml")
FILE_FIELD = "file"


def definitions_page(call: WebCall) -> Response:
    return _list(call)


def _list(
    call: WebCall, *, status: int = 200, problems: list[str] | None = None,
    refused: str | None = None,
) -> Response:  # fmt: skip
    asked = int_page(call.query, "definitions")
    page = call.engine.definitions_page(limit=asked.limit, before=asked.before)
    cursor = page_json(asked, page)["next_cursor"]
    return call.page(
        "definitions.html", "Definitions", status=status, definitions=page.items,
        next_url=url_with(f"{PREFIX}/definitions", {"cursor": cursor}) if cursor else None,
        problems=problems or [], refused=refused,
        deployed=[d for d in call.query.get("deployed", "").split(",") if d],
    )  # fmt: skip


def definition_page(call: WebCall) -> Response:
    name = call.params["name"]
    definition = call.engine.definition(name)
    svg, note = _diagram(call, name, definition["latest"])
    return call.page(
        "definition.html", f"Definition {name}", definition=definition, diagram=svg,
        diagram_note=note,
    )  # fmt: skip


def _diagram(call: WebCall, name: str, version: int) -> tuple[str | None, str | None]:
    cache = diagrams(call)
    if not cache.can_draw():
        return None, NO_DOT
    try:
        compiled = call.engine.definition_version(name, version)
        return cache.get(name, version, compiled), None
    except ProcflowError as exc:
        return None, f"The diagram could not be drawn: {exc}"


def upload_definition(call: WebCall) -> Response:
    upload = call.files.get(FILE_FIELD)
    if upload is None or not upload.filename:
        return _list(call, status=422, refused="Choose a definition file to upload.")
    filename = upload.filename.replace("\\", "/").rsplit("/", 1)[-1]
    if not filename.endswith(_SUFFIXES):
        return _list(
            call, status=422,
            refused=f"[{filename[:80]}] is not a definition file: its name must end in .intent, "
            ".flow.yaml or .flow.yml",
        )  # fmt: skip
    try:
        text = upload.content.decode("utf-8")
    except UnicodeDecodeError:
        return _list(call, status=422, refused=f"[{filename}] is not UTF-8 text")
    try:
        report = call.engine.deploy_text(text, filename, user=call.actor)
    except DefinitionError as exc:
        return _list(call, status=422, problems=_problems(exc), refused=None)
    except ProcflowError as exc:
        return _list(call, status=problem_for(exc).status, refused=str(exc))
    names = [f"{d['name']}={d['version']}" for d in report["deployed"]]
    return RedirectResponse(url_with(f"{PREFIX}/definitions", {"deployed": ",".join(names)}), 303)


def _problems(exc: DefinitionError) -> list[str]:
    lines: list[str] = []
    for item in (d.as_json() for d in exc.diagnostics):
        lines.append(_problem_line(item))
    return lines or [str(exc)]


def _problem_line(item: dict[str, Any]) -> str:
    where = item.get("path")
    suffix = f" ({where})" if where else ""
    return f"{item['file']}:{item['line']}:{item['col']}: {item['message']}{suffix}"
