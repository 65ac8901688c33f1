"""The built-in ``slack`` connector: ``slack.post`` posts a message with ``chat.postMessage``.

Without a ``token`` (``SLACK_TOKEN``) it works in outbox mode: the message is kept in
``ctx.outbox`` (committed with the step, listed by ``procflow outbox list``) and the
action returns a ``ts`` minted by procflow from the step's idempotency key, so every attempt of
the same step execution returns the same ids.

Configured, it posts to ``{base_url}/chat.postMessage``. Slack answers failures with HTTP 200 and
``{"ok": false, "error": "..."}``: errors that no retry can fix (a bad token, an unknown channel,
...) raise :class:`SlackFatalError`, a :class:`~procflow.errors.NonRetryableError`; the others, a
rate limit (429) and server errors raise :class:`SlackError`, a failed attempt that ``retry``
applies to. The token never appears in an error message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import httpx

from procflow.errors import NonRetryableError, SlackError, SlackFatalError
from procflow.runtime.interpret.context import KeptMessage, StepContext

DEFAULT_BASE_URL = "https://slack.com/api"
# The request timeout when the step sets none (an unbounded request would hold the worker).
DEFAULT_TIMEOUT = 30.0
EXCERPT_CHARS = 200

# Slack ``error`` codes that the same call cannot get past by trying again.
FATAL_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "token_revoked",
        "token_expired",
        "account_inactive",
        "no_permission",
        "missing_scope",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "msg_too_long",
        "no_text",
        "invalid_blocks",
        "invalid_arguments",
    }
)


def outbox_ts(idempotency_key: str) -> str:
    """The ``ts`` minted for a message kept in the outbox: stable for one step execution."""
    return "outbox-" + hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()[:16]


def post(
    ctx: StepContext,
    channel: str,
    text: str,
    blocks: Sequence[Any] | None = None,
    thread_ts: str | None = None,
) -> dict[str, Any]:
    """Posts ``text`` (and ``blocks``) to ``channel``; returns ``{ts, channel}``."""
    token = ctx.config.get("token")
    if not token:
        ctx.outbox.append(KeptMessage("slack", channel, None, text))
        return {"ts": outbox_ts(ctx.idempotency_key), "channel": channel}

    base = str(ctx.config.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
    if not base.lower().startswith(("http://", "https://")):
        raise NonRetryableError(
            "slack.post: base_url (SLACK_BASE_URL) must be an absolute http:// or https:// URL"
        )
    url = f"{base}/chat.postMessage"
    payload: dict[str, Any] = {"channel": channel, "text": text}
    if blocks is not None:
        payload["blocks"] = list(blocks)
    if thread_ts is not None:
        payload["thread_ts"] = thread_ts
    try:
        with httpx.Client(
            timeout=DEFAULT_TIMEOUT if ctx.timeout is None else ctx.timeout, follow_redirects=False
        ) as client:
            response = client.post(
                url,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json; charset=utf-8",
                },
                json=payload,
            )
    except httpx.HTTPError as exc:
        raise SlackError(
            f"slack.post to [{channel}]: chat.postMessage failed: {type(exc).__name__}: "
            f"{_scrub(str(exc), str(token))}"
        ) from exc

    data = _answer(response, channel, str(token))
    ts, posted_to = data.get("ts"), data.get("channel", channel)
    if not isinstance(ts, str) or not ts or not isinstance(posted_to, str):
        raise SlackError(
            f"slack.post to [{channel}]: chat.postMessage answered ok without a message ts"
        )
    warning = data.get("warning")
    if isinstance(warning, str) and warning:
        ctx.log.warning("slack.post: Slack warned: %s", warning)
    ctx.sent.append(channel)
    return {"ts": ts, "channel": posted_to}


def _answer(response: httpx.Response, channel: str, token: str) -> dict[str, Any]:
    """The parsed body of a successful call, else the matching exception."""
    where = f"slack.post to [{channel}]"
    status = response.status_code
    if status == 429:
        after = response.headers.get("Retry-After")
        hint = f" (retry after {after}s)" if after else ""
        raise SlackError(f"{where}: Slack rate-limited the call (HTTP 429){hint}", "ratelimited")
    if status != 200:
        raise SlackError(
            f"{where}: chat.postMessage answered HTTP {status}: "
            f"{_excerpt(_scrub(response.text, token))}"
        )
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise SlackError(
            f"{where}: chat.postMessage answered something that is not a JSON object: "
            f"{_excerpt(_scrub(response.text, token))}"
        )
    if data.get("ok") is not True:
        error = data.get("error")
        code = error if isinstance(error, str) and error else "unknown_error"
        code = _scrub(code, token)
        message = f"{where}: Slack answered error [{code}]"
        if code in FATAL_ERRORS:
            raise SlackFatalError(message + " (not retried)", code)
        raise SlackError(message, code)
    return data


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty body)"
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"
