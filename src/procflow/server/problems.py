"""Errors as RFC 9457 problem documents (``application/problem+json``): every refusal of the HTTP
face, with the same sentences as the CLI and, per bad field, ``errors[{field, message}]``."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from starlette.responses import Response

from procflow.errors import (
    DefinitionError,
    ForbiddenError,
    HttpProblem,
    LimitReached,
    NotFoundError,
    NotPermittedError,
    ProcflowError,
    StateConflictError,
)

__all__ = ["PROBLEM_TYPE", "Problem", "problem_for", "problem_response"]

PROBLEM_TYPE = "application/problem+json"


Problem = HttpProblem  # the name the routes use


def problem_response(problem: Problem) -> Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(problem.status).phrase,
        "status": problem.status,
        "detail": problem.detail,
    }
    if problem.errors:
        body["errors"] = problem.errors
    return Response(
        json.dumps(body, ensure_ascii=False),
        status_code=problem.status,
        media_type=PROBLEM_TYPE,
        headers=problem.headers,
    )


def problem_for(exc: ProcflowError) -> Problem:
    """The status an engine error means over HTTP: 404 unknown, 409 a state that forbids it,
    403 not the caller's, 422 a readable request the engine rejects (or a bad definition)."""
    message = str(exc)
    if isinstance(exc, DefinitionError):
        items = [d.as_json() for d in exc.diagnostics]
        return Problem(422, message, [_diagnostic_error(i) for i in items])
    field = getattr(exc, "field", None)
    errors = [{"field": str(field), "message": message}] if field else []
    if isinstance(exc, NotFoundError):
        return Problem(404, message, errors)
    if isinstance(exc, StateConflictError | LimitReached):
        return Problem(409, message, errors)
    if isinstance(exc, ForbiddenError | NotPermittedError):
        return Problem(403, message, errors)
    return Problem(422, message, errors)  # readable, and refused by the engine


def _diagnostic_error(item: dict[str, Any]) -> dict[str, Any]:
    """A definition problem: the ``validate --json`` item, with ``field`` = its node path."""
    return {"field": item.get("path") or "", "message": item.get("message", ""), **item}
