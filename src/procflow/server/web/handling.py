"""How a page of the web UI is declared and called.

A page is a plain function of a :class:`WebCall` that returns a response; like an API route it
runs on a thread of the server's pool with that thread's engine, and makes the same engine calls
the API and the CLI make. Before it runs: the caller is found (a bearer an authenticating proxy
forwards, else the session cookie; without a token table or an issuer, the local administrator;
no session: a redirect to ``/ui/login``), a POST's form is read (URL-encoded, or multipart for
an upload) and its CSRF token checked. Whatever goes wrong becomes an HTML page with the status
the API would answer and the engine's sentence; no traceback ever reaches the browser.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from procflow.errors import NotFoundError, ProcflowError, StoreError
from procflow.runtime.data.access import Action, may, role_needed
from procflow.runtime.data.identity import Actor
from procflow.runtime.engine import Engine
from procflow.server.problems import Problem, problem_for
from procflow.server.routing import read_body, refuse_nul
from procflow.server.state import LOCAL, ServerState
from procflow.server.web.render import html_page
from procflow.server.web.session import COOKIE, Session, Signer

__all__ = ["PREFIX", "Upload", "WebCall", "WebUi", "error_page", "page_route"]

log = logging.getLogger("procflow.server")

PREFIX = "/ui"
CSRF_FIELD = "csrf"
_NOBODY = Session(Actor(""), "", "")  # what a page shows before anyone signed in


@dataclass(frozen=True)
class Upload:
    """A file sent in a multipart form."""

    filename: str
    content: bytes


@dataclass
class WebUi:
    """What the web UI of one server process holds besides the server's state."""

    state: ServerState
    signer: Signer
    caches: dict[str, Any] = field(default_factory=dict)  # diagrams, counts (see their modules)


@dataclass
class WebCall:
    """One request, as a page's function sees it."""

    request: Request
    ui: WebUi
    session: Session
    form: dict[str, str] = field(default_factory=dict)
    files: dict[str, Upload] = field(default_factory=dict)

    @property
    def engine(self) -> Engine:
        return self.ui.state.engines.get()

    @property
    def actor(self) -> Actor:
        return self.session.actor

    @property
    def params(self) -> Mapping[str, str]:
        return self.request.path_params

    @property
    def query(self) -> Mapping[str, str]:
        return self.request.query_params

    def needs(self, action: Action) -> str | None:
        """Why the caller may not do ``action``, said beside its disabled button; None: it may."""
        if may(self.actor, action):
            return None
        roles = ", ".join(sorted(self.actor.roles)) or "no role"
        return f"Needs the role {role_needed(action)} ({self.actor.user} has {roles})"

    def context(self, title: str, **values: Any) -> dict[str, Any]:
        """What every template gets: the title, who is signed in, the CSRF token."""
        return {
            "title": title,
            "user": self.actor.user,
            "signed_in": bool(self.session.cookie),
            "csrf": self.session.csrf,
            "csrf_field": CSRF_FIELD,
            "path": self.request.url.path,
            "needs": lambda name: self.needs(Action[name]),  # a template's disabled buttons
            **values,
        }

    def page(self, template: str, title: str, status: int = 200, **values: Any) -> Response:
        return html_page(template, self.context(title, **values), status)


Handler = Callable[[WebCall], Response]


def page_route(
    ui: WebUi, path: str, handler: Handler, methods: tuple[str, ...] = ("GET",), *,
    public: bool = False,
) -> Route:  # fmt: skip
    """The route of a page under ``/ui``; ``public``: reachable without a session (login)."""

    async def endpoint(request: Request) -> Response:
        return await _answer(ui, request, handler, public)

    return Route(path, endpoint, methods=list(methods))


async def _answer(ui: WebUi, request: Request, handler: Handler, public: bool) -> Response:
    try:
        session = await _session(ui, request)
    except Problem as problem:  # a forwarded bearer that is not valid, or keys out of reach
        return error_page(_NOBODY, problem.status, problem.detail)
    if session is None and not public:
        return _to_login(request)
    shown = session or _NOBODY
    try:
        refuse_nul(request)
        call = WebCall(request, ui, shown)
        if request.method == "POST":
            call.form, call.files = _form(request, await read_body(request))
            if not public and not ui.signer.csrf_ok(
                ui.signer.csrf_subject(shown), call.form.get(CSRF_FIELD, "")
            ):
                raise Problem(
                    403,
                    "This form was not sent from a page of this server (its CSRF token is "
                    "missing or out of date). Reload the page and send it again.",
                )
    except Problem as problem:
        return error_page(shown, problem.status, problem.detail)
    return await ui.state.engines.call(_call, handler, call)


async def _session(ui: WebUi, request: Request) -> Session | None:
    """Who calls: the local administrator when no identity is configured; else the bearer an
    authenticating proxy forwards (``Authorization: Bearer``), else the session cookie."""
    if ui.state.open:
        return ui.signer.local_session(LOCAL)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return ui.signer.forwarded_session(await ui.state.authenticate(request.headers))
    return ui.signer.session_of(request.cookies.get(COOKIE))


def _to_login(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{PREFIX}/login?next={quote(target, safe='')}", status_code=303)


def _call(handler: Handler, call: WebCall) -> Response:
    try:
        return handler(call)
    except Problem as problem:
        return error_page(call.session, problem.status, problem.detail)
    except StoreError as exc:
        log.error("store error on %s %s: %s", call.request.method, call.request.url.path, exc)
        return error_page(call.session, 503, f"The store is not available: {exc}")
    except NotFoundError as exc:
        return error_page(call.session, 404, str(exc))
    except ProcflowError as exc:
        refusal = problem_for(exc)
        return error_page(call.session, refusal.status, refusal.detail)
    except Exception:  # a bug: logged here in full, never shown
        log.exception("internal error on %s %s", call.request.method, call.request.url.path)
        return error_page(call.session, 500, "An internal error occurred; it has been logged.")


def error_page(session: Session, status: int, detail: str) -> Response:
    """The HTML page of a refusal: ``Not found`` for 404, else the status's phrase."""
    heading = "Not found" if status == 404 else HTTPStatus(status).phrase
    context = {
        "title": heading,
        "heading": heading,
        "detail": detail,
        "status": status,
        "user": session.actor.user,
        "signed_in": bool(session.cookie),
        "csrf": session.csrf,
        "csrf_field": CSRF_FIELD,
    }
    return html_page("error.html", context, status)


# --- forms -------------------------------------------------------------------------------------


def _form(request: Request, body: bytes) -> tuple[dict[str, str], dict[str, Upload]]:
    media = request.headers.get("content-type", "")
    kind = media.split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        return _multipart(media, body)
    if kind in ("application/x-www-form-urlencoded", ""):
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        except (UnicodeDecodeError, ValueError):
            raise Problem(400, "the form is not UTF-8 text") from None
        return _first(pairs), {}
    raise Problem(400, f"a form is sent as a web form, not [{kind}]")


def _first(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in pairs:
        out.setdefault(name, value)
    return out


def _multipart(media: str, body: bytes) -> tuple[dict[str, str], dict[str, Upload]]:
    head = f"Content-Type: {media}\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise Problem(400, "the multipart form could not be read")
    fields: list[tuple[str, str]] = []
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            payload = b""
        filename = part.get_filename()
        if filename is not None:
            files.setdefault(name, Upload(filename, payload))
            continue
        try:
            fields.append((name, payload.decode("utf-8")))
        except UnicodeDecodeError:
            raise Problem(400, f"the form field [{name}] is not UTF-8 text") from None
    return _first(fields), files
