"""The schedules page: every flow schedule (by name, keyset paged with the API's cursor) with its
spec, state, next slots, last run and counts, and its pause (with an optional note), resume and
trigger buttons. A button whose action the signed-in user's role may not take, or that the
schedule's state makes pointless, is disabled and says why; each POST makes the engine call the
API makes and comes back to the page, which says what it did."""

from __future__ import annotations

from typing import Any

from starlette.responses import RedirectResponse, Response

from procflow.runtime.data.access import Action
from procflow.server.paging import page_json, str_page
from procflow.server.web.handling import PREFIX, WebCall
from procflow.server.web.render import url_with

__all__ = ["pause_schedule", "resume_schedule", "schedules_page", "trigger_schedule"]

PAGE = f"{PREFIX}/schedules"
# What a POST did, as the page it comes back to says it (``?done=``).
DONE = {
    "paused": "Paused {name}.",
    "resumed": "Resumed {name}.",
    "started": "Triggered {name}: started run",
    "skipped": "Triggered {name}: started nothing, as its run is still open (overlap: skip).",
    "buffered": "Triggered {name}: the slot waits until its open run ends (overlap: buffer_one).",
}


def schedules_page(call: WebCall) -> Response:
    asked = str_page(call.query, "schedules")
    page = call.engine.schedules.page(limit=asked.limit, after=asked.before)
    cursor = page_json(asked, page)["next_cursor"]
    limit = call.query.get("limit")
    return call.page(
        "schedules.html", "Schedules", rows=[_row(call, s) for s in page.items],
        message=_message(call),
        started=call.query.get("run") if call.query.get("done") == "started" else None,
        next_url=url_with(PAGE, {"limit": limit, "cursor": cursor}) if cursor else None,
    )  # fmt: skip


def _row(call: WebCall, schedule: dict[str, Any]) -> dict[str, Any]:
    """A schedule, and why each of its buttons is disabled (None: it is not)."""
    state = schedule["state"]
    return {
        **schedule,
        "pause_note": call.needs(Action.PAUSE_SCHEDULE)
        or ("It is paused already" if state == "paused" else None),
        "resume_note": call.needs(Action.PAUSE_SCHEDULE)
        or (None if state == "paused" else "It is not paused"),
        "trigger_note": call.needs(Action.TRIGGER_SCHEDULE)
        or ("Its flow is disabled: enable it to start runs" if state == "disabled" else None),
    }


def _message(call: WebCall) -> str | None:
    """What the POST the browser comes back from did (a fixed sentence naming the schedule)."""
    done, name = call.query.get("done"), call.query.get("schedule", "")
    if done not in DONE:
        return None
    return DONE[done].format(name=name[:200])


def pause_schedule(call: WebCall) -> Response:
    name = call.params["name"]
    call.engine.schedules.pause(name, call.form.get("note") or None, user=call.actor)
    return _back(name, "paused")


def resume_schedule(call: WebCall) -> Response:
    name = call.params["name"]
    call.engine.schedules.resume(name, user=call.actor)
    return _back(name, "resumed")


def trigger_schedule(call: WebCall) -> Response:
    """As the API's trigger without ``overlap``: the schedule's own overlap applies."""
    name = call.params["name"]
    report = call.engine.schedules.trigger(name, user=call.actor)
    if report["started"]:
        return _back(name, "started", report["started"][0])
    return _back(name, "buffered" if report["buffered"] else "skipped")  # by its overlap rule


def _back(name: str, done: str, run_id: str | None = None) -> Response:
    target = url_with(PAGE, {"done": done, "schedule": name, "run": run_id})
    return RedirectResponse(f"{target}#schedule-{name}", status_code=303)
