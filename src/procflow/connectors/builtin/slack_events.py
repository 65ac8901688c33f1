"""Slack interactivity → ``slack.approval`` events (what ``POST /webhooks/slack`` will feed, and
what ``procflow events send --slack-payload`` does today).

A button click on a message posted by ``slack.post`` arrives as a ``block_actions`` payload; the
message's ``ts`` is the correlation value (``match: { message: "{{ ask.ts }}" }``). An action
whose ``value`` or ``action_id`` says approve (``approve``, ``approved``, ``yes``, ``true``)
approves; anything else rejects.
"""

from __future__ import annotations

from typing import Any

from procflow.errors import UsageError

APPROVE = frozenset({"approve", "approved", "yes", "true"})


def approval_event(payload: Any) -> tuple[dict[str, Any], str]:
    """(the ``slack.approval`` data, an event id stable for this click) from a payload."""
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        raise UsageError("a Slack interactivity payload must be an object with type block_actions")
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise UsageError("the Slack payload has no [actions]: not a button click")
    message = _object(payload, "message")
    container = _object(payload, "container")
    ts = message.get("ts") or container.get("message_ts")
    if not isinstance(ts, str) or not ts:
        raise UsageError("the Slack payload names no message (message.ts / container.message_ts)")
    action = actions[0]
    said = {str(action.get("value", "")).lower(), str(action.get("action_id", "")).lower()}
    user = _object(payload, "user")
    name = user.get("username") or user.get("name") or user.get("id")
    data: dict[str, Any] = {"message": ts, "approved": bool(said & APPROVE)}
    if isinstance(name, str):
        data["user"] = name
    click = action.get("action_ts") or payload.get("trigger_id") or ""
    return data, f"slack:{ts}:{click}"


def _object(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    return value if isinstance(value, dict) else {}
