"""Records of an entity, the outbox, the send-event form, and signing in and out."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.responses import RedirectResponse, Response

from procflow.errors import EventError, ProcflowError
from procflow.server.oidc import looks_like_jwt
from procflow.server.paging import int_page, page_json
from procflow.server.problems import Problem, problem_for
from procflow.server.web.handling import PREFIX, WebCall
from procflow.server.web.render import url_with
from procflow.server.web.session import COOKIE, MAX_COOKIE_CHARS
from procflow.store.codec import depth_problem

__all__ = [
    "login",
    "login_page",
    "logout",
    "outbox_page",
    "records_page",
    "send_event",
    "send_event_page",
]


# --- records and outbox --------------------------------------------------------------------------


def records_page(call: WebCall) -> Response:
    entity = call.params["entity"]
    asked = int_page(call.query, "records")
    page = call.engine.records_page(entity, limit=asked.limit, before=asked.before, user=call.actor)
    columns: list[str] = []
    for record in page.items:
        columns += [k for k in record if k not in columns]
    cursor = page_json(asked, page)["next_cursor"]
    return call.page(
        "records.html", f"{entity} records", entity=entity, records=page.items, columns=columns,
        next_url=url_with(f"{PREFIX}/entities/{entity}", {"cursor": cursor}) if cursor else None,
    )  # fmt: skip


def outbox_page(call: WebCall) -> Response:
    asked = int_page(call.query, "outbox")
    page = call.engine.outbox_page(limit=asked.limit, before=asked.before)
    cursor = page_json(asked, page)["next_cursor"]
    return call.page(
        "outbox.html", "Outbox", messages=page.items,
        next_url=url_with(f"{PREFIX}/outbox", {"cursor": cursor}) if cursor else None,
    )  # fmt: skip


# --- events --------------------------------------------------------------------------------------


def send_event_page(call: WebCall) -> Response:
    return call.page("event.html", "Send event", sent={}, errors={}, report=None)


def send_event(call: WebCall) -> Response:
    sent = {k: call.form.get(k, "") for k in ("type", "data", "id")}
    errors: dict[str, str] = {}
    if not sent["type"].strip():
        errors["type"] = "Give the event's type."
    data: Any = {}
    too_deep = depth_problem(sent["data"])
    if too_deep is not None:  # before parsing: the parser recurses once per level
        errors["data"] = f"The data is {too_deep}."
    elif sent["data"].strip():
        try:
            data = json.loads(sent["data"])
        except ValueError as exc:
            errors["data"] = f"The data is not valid JSON: {exc}"
    if errors:
        return call.page("event.html", "Send event", status=422, sent=sent, errors=errors)
    try:
        report = call.engine.send_event(
            sent["type"].strip(), data, sent["id"].strip() or None, user=call.actor
        )
    except ProcflowError as exc:
        field = getattr(exc, "field", None) if isinstance(exc, EventError) else None
        place = field if field in ("type", "id") else "data" if field else "type"
        return call.page(
            "event.html", "Send event", status=problem_for(exc).status, sent=sent,
            errors={place: str(exc)},
        )  # fmt: skip
    return call.page("event.html", "Send event", sent=sent, errors={}, report=report)


# --- signing in ----------------------------------------------------------------------------------


def login_page(call: WebCall) -> Response:
    if call.ui.state.open or call.session.forwarded:  # nothing to sign in to, or signed in
        return RedirectResponse(_next(call.query.get("next")), status_code=303)
    return _login_form(call, _next(call.query.get("next")))


def login(call: WebCall) -> Response:
    """Signs in with a token of the table or a JWT: a session cookie naming the user and the
    roles they give, ending no later than the JWT does."""
    target = _next(call.form.get("next"))
    if call.ui.state.open:
        return RedirectResponse(target, status_code=303)
    token = call.form.get("token", "").strip()
    try:
        identity = call.ui.state.identify(token)
    except Problem as problem:
        if problem.status == 503:
            return _login_form(call, target, problem.detail, 503)
        jwt = call.ui.state.oidc is not None and looks_like_jwt(token)
        said = f"That JWT is not valid: {problem.detail}" if jwt else "That token is not valid"
        return _login_form(call, target, said, 401)
    now = time.time()
    cookie = call.ui.signer.issue(identity.actor, identity.expires, now)
    if len(COOKIE) + len(cookie) > MAX_COOKIE_CHARS:
        return _login_form(call, target, _TOO_MANY_ROLES.format(len(identity.actor.roles)), 400)
    lasts = call.ui.signer.ends(cookie) - int(now)
    if lasts < 1:
        return _login_form(call, target, "That JWT has expired: get a new one", 401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE, cookie, max_age=lasts, path=PREFIX, httponly=True, samesite="strict",
        secure=call.request.url.scheme == "https",
    )  # fmt: skip
    return response


_TOO_MANY_ROLES = (
    "That token gives {} roles, too many to keep in a session cookie: sign in through an "
    "authenticating proxy that forwards it as a bearer token instead"
)


def _login_form(call: WebCall, target: str, problem: str = "", status: int = 200) -> Response:
    state = call.ui.state
    return call.page(
        "login.html", "Sign in", status=status, next=target, problem=problem,
        oidc=state.oidc is not None, tokens=state.tokens is not None,
    )  # fmt: skip


def logout(call: WebCall) -> Response:
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return response


def _next(target: str | None) -> str:
    """Where to go after signing in: a page of the UI, never another site."""
    unsafe = ("\\", "\n", "\r")
    if target and target.startswith(f"{PREFIX}/") and not any(c in target for c in unsafe):
        return target
    return f"{PREFIX}/runs"
