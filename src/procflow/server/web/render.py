"""The Jinja2 templates of the web UI, and the filters they use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

__all__ = ["html_page", "render", "url_with"]

_ENV = Environment(
    loader=PackageLoader("procflow.server.web", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def url_with(path: str, query: Mapping[str, Any]) -> str:
    """``path`` with the non-empty ``query`` values as its query string."""
    kept = {k: v for k, v in query.items() if v not in (None, "", False)}
    return f"{path}?{urlencode(kept)}" if kept else path


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


# A page shows this much of a run's bindings; "Download JSON" has them all (a loop of 5,000
# iterations binds every iteration's scope: 400 KiB of page for what nobody reads in a browser).
SHOWN_JSON = 20_000


def _pretty_capped(value: Any) -> str:
    text = _pretty(value)
    if len(text) <= SHOWN_JSON:
        return text
    return f"{text[:SHOWN_JSON]}\n… ({len(text) - SHOWN_JSON:,} more characters: Download JSON)"


def _when(value: Any) -> str:
    """A timestamp as shown: ``2027-01-01 00:00:30Z`` (the T dropped for readability)."""
    return "" if value is None else str(value).replace("T", " ")


_ENV.filters["pretty"] = _pretty
_ENV.filters["pretty_capped"] = _pretty_capped
_ENV.filters["when"] = _when
_ENV.filters["q"] = lambda text: quote(str(text), safe="")
_ENV.globals["url_with"] = url_with


def render(template: str, context: Mapping[str, Any]) -> str:
    return _ENV.get_template(template).render(**context)


def html_page(
    template: str,
    context: Mapping[str, Any],
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    return HTMLResponse(render(template, context), status_code=status, headers=dict(headers or {}))
