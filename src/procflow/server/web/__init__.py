"""The web UI of ``procflow serve``: server-rendered pages under ``/ui/`` (Jinja2), made live by
a little htmx served from ``/ui/static/`` (vendored; nothing is fetched at run time).

Every page calls the engine calls the HTTP API calls and shows the same serialized shapes; see
``docs/web-ui.md`` for what each page shows and the decisions behind the session cookie, the
diagram cache and the timeline's page size.

The pages import the server's shared modules and the runtime's engine calls; never ``server.api``.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from procflow.runtime.data.identity import Actor
from procflow.server.state import ServerState
from procflow.server.web import pages_definitions as defs
from procflow.server.web import pages_misc as misc
from procflow.server.web import pages_runs as runs
from procflow.server.web import pages_schedules as schedules
from procflow.server.web import pages_tasks as tasks
from procflow.server.web.handling import PREFIX, Handler, WebUi, error_page, page_route
from procflow.server.web.session import Session, Signer

__all__ = ["PREFIX", "WebUi", "web_routes"]

STATIC = Path(__file__).parent / "static"


def web_routes(state: ServerState, ui: WebUi | None = None) -> list[BaseRoute]:
    """``/`` (a redirect to the runs page) and everything under ``/ui``."""
    ui = ui or WebUi(state, Signer())

    def page(path: str, handler: Handler, *methods: str, public: bool = False) -> Route:
        return page_route(ui, path, handler, methods or ("GET",), public=public)

    pages = [
        page("/", lambda call: RedirectResponse(f"{PREFIX}/runs", status_code=303)),
        page("/runs", runs.runs_page),
        page("/runs/{id}.json", runs.run_json),
        page("/runs/{id}/live", runs.run_live),
        page("/runs/{id}/retry", runs.retry_run, "POST"),
        page("/runs/{id}/cancel", runs.cancel_run, "POST"),
        page("/runs/{id}", runs.run_page),
        page("/tasks", tasks.tasks_page),
        page("/tasks/{id}", tasks.task_page),
        page("/tasks/{id}", tasks.complete_task, "POST"),
        page("/definitions", defs.definitions_page),
        page("/definitions", defs.upload_definition, "POST"),
        page("/definitions/{name}", defs.definition_page),
        page("/schedules", schedules.schedules_page),
        page("/schedules/{name:path}/pause", schedules.pause_schedule, "POST"),
        page("/schedules/{name:path}/resume", schedules.resume_schedule, "POST"),
        page("/schedules/{name:path}/trigger", schedules.trigger_schedule, "POST"),
        page("/entities/{entity}", misc.records_page),
        page("/outbox", misc.outbox_page),
        page("/events/new", misc.send_event_page),
        page("/events/new", misc.send_event, "POST"),
        page("/login", misc.login_page, public=True),
        page("/login", misc.login, "POST", public=True),
        page("/logout", misc.logout, "POST"),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]

    async def redirect_root(request: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/runs", status_code=303)

    return [
        Route("/", redirect_root, methods=["GET"]),
        Mount(PREFIX, app=Router(routes=pages, default=_not_found())),
    ]


def _not_found() -> ASGIApp:
    """An unknown path under ``/ui``: the HTML 404 page (the API's unknown paths stay JSON)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"There is no page at [{scope.get('path', '')}]."
        await error_page(Session(Actor(""), "", ""), 404, detail)(scope, receive, send)

    return app
