"""The built-in ``http`` connector: ``http.request`` sends one request with httpx.

A plugin like a project's own connector: it sees only its :class:`StepContext` (the request
gives up with the attempt, ``ctx.timeout``).

A status outside ``expect`` (default: any 2xx) raises :class:`HttpStatusError`, a failed attempt
that ``retry`` applies to; arguments that can never work (a bad method or URL, both ``json`` and
``body``) raise :class:`~procflow.errors.NonRetryableError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from procflow.errors import HttpRequestError, HttpStatusError, NonRetryableError
from procflow.runtime.interpret.context import StepContext

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
# The request timeout when the step sets none (an unbounded request would hold the worker).
DEFAULT_TIMEOUT = 60.0
EXCERPT_CHARS = 200


def request(
    ctx: StepContext,
    url: str,
    method: str = "GET",
    headers: Mapping[str, Any] | None = None,
    json: Any = None,
    body: str | None = None,
    expect: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Sends the request; returns ``{status, headers, json, text}`` (header names lower-case,
    ``json`` the parsed body or ``None`` when it is not JSON)."""
    verb = _method(method)
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise NonRetryableError("http.request: url must be an absolute http:// or https:// URL")
    if json is not None and body is not None:
        raise NonRetryableError("http.request: give json or body, not both")
    accepted = _expect(expect)
    sent_headers = _headers(headers)
    try:
        with httpx.Client(
            timeout=DEFAULT_TIMEOUT if ctx.timeout is None else ctx.timeout, follow_redirects=False
        ) as client:
            response = client.request(
                verb,
                url,
                headers=sent_headers,
                json=json,
                content=None if body is None else body.encode("utf-8"),
            )
    except httpx.HTTPError as exc:
        raise HttpRequestError(
            f"http.request {verb} {_short_url(url)} failed: {type(exc).__name__}: {exc}"
        ) from exc
    text = response.text
    ok = response.status_code in accepted if accepted is not None else _is_2xx(response)
    if not ok:
        wanted = "2xx" if accepted is None else ", ".join(str(s) for s in sorted(accepted))
        raise HttpStatusError(
            f"http.request {verb} {_short_url(url)} answered {response.status_code} "
            f"(expected {wanted}): {_excerpt(text)}",
            response.status_code,
        )
    return {
        "status": response.status_code,
        "headers": {name.lower(): value for name, value in response.headers.items()},
        "json": _parse_json(response),
        "text": text,
    }


def _method(method: Any) -> str:
    verb = method.upper() if isinstance(method, str) else ""
    if verb not in METHODS:
        raise NonRetryableError(
            f"http.request: method [{method}] is not one of {', '.join(METHODS)}"
        )
    return verb


def _expect(expect: Any) -> frozenset[int] | None:
    if expect is None:
        return None
    if not isinstance(expect, list | tuple) or not all(
        isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in expect
    ):
        raise NonRetryableError("http.request: expect must be a list of HTTP status codes")
    return frozenset(expect)


def _headers(headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise NonRetryableError("http.request: headers must be a mapping of name to value")
    out: dict[str, str] = {}
    for name, value in headers.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise NonRetryableError(f"http.request: header [{name}] must be a string")
        out[str(name)] = str(value)
    return out


def _is_2xx(response: httpx.Response) -> bool:
    return 200 <= response.status_code <= 299


def _parse_json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty body)"
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"


def _short_url(url: str) -> str:
    """The URL without its query string (which may carry tokens)."""
    return url.split("?", 1)[0]
