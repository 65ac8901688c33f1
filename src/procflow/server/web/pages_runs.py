"""The runs pages: the list (filters in the URL, counts per status, keyset paging with the API's
cursor), one run (diagram, why it waits, the run that called it and those it called, timeline,
bindings and vars, retry and cancel), the
fragment a run's page polls while the run has not ended, and the run as JSON."""

from __future__ import annotations

import threading
import time
from typing import Any

from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from procflow.errors import ProcflowError
from procflow.runtime.data.access import Action
from procflow.runtime.operations.listing import (
    FAILURE_TYPES,
    HISTORY_TYPES,
    WAIT_KINDS,
    bad_parent,
)
from procflow.runtime.operations.views import why_line
from procflow.runtime.transition import is_run_id
from procflow.server.diagrams import NO_DOT, DiagramCache, join_classes, mark_run, step_classes
from procflow.server.paging import bad_query, page_json, str_page
from procflow.server.problems import Problem
from procflow.server.web.handling import PREFIX, WebCall
from procflow.server.web.render import render, url_with
from procflow.states import ENDED, RunStatus

__all__ = [
    "CHILDREN_SHOWN",
    "TIMELINE_PAGE",
    "cancel_run",
    "retry_run",
    "run_json",
    "run_live",
    "run_page",
    "runs_page",
]

STATUSES = [s.value for s in RunStatus]
TIMELINE_PAGE = 100  # history entries per timeline page
CHILDREN_SHOWN = 50  # called runs listed on a run's page; the rest: the runs list of its children
COUNTS_SECONDS = 2.0  # how long the counts per status are reused (one GROUP BY over all runs)


class CountsCache:
    """Counts per status by definition name (None: all), reused for a couple of seconds: on a
    store of a million runs the GROUP BY is the page's largest cost."""

    def __init__(self, seconds: float = COUNTS_SECONDS) -> None:
        self.seconds = seconds
        self._items: dict[str | None, tuple[float, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def get(self, call: WebCall, name: str | None) -> dict[str, int]:
        now = time.monotonic()
        with self._lock:
            kept = self._items.get(name)
        if kept is not None and now - kept[0] < self.seconds:
            return kept[1]
        counts = call.engine.run_counts(name)
        with self._lock:
            if len(self._items) > 256:  # many names looked at: start over rather than grow
                self._items.clear()
            self._items[name] = (now, counts)
        return counts


def _counts(call: WebCall) -> CountsCache:
    found = call.ui.caches.setdefault("counts", CountsCache())
    assert isinstance(found, CountsCache)
    return found


def diagrams(call: WebCall) -> DiagramCache:
    found = call.ui.caches.setdefault("diagrams", DiagramCache())
    assert isinstance(found, DiagramCache)
    return found


# --- the list ----------------------------------------------------------------------------------


def runs_page(call: WebCall) -> Response:
    status = call.query.get("status") or None
    if status is not None and status not in STATUSES:
        raise bad_query("status", f"status must be one of {', '.join(STATUSES)}, not [{status}]")
    waiting = call.query.get("waiting") or None
    if waiting is not None and waiting not in WAIT_KINDS:
        raise bad_query("waiting", f"waiting must be one of {', '.join(WAIT_KINDS)}")
    name = call.query.get("name") or None
    parent = call.query.get("parent") or None
    if parent is not None and not is_run_id(parent):
        raise bad_query("parent", bad_parent(parent))
    asked = str_page(call.query, "runs")
    # What runs wait for is looked up per run: among waiting runs unless a status is chosen.
    shown_status = status or ("waiting" if waiting else None)
    page = call.engine.runs_page(
        shown_status, name, limit=asked.limit, before=asked.before, waiting=waiting,
        parent=parent,
    )  # fmt: skip
    waits = call.engine.waits_of_runs([r["id"] for r in page.items])
    rows = [{**r, "waits": sorted({w.get("kind", "") for w in waits.get(r["id"], [])})}
            for r in page.items]  # fmt: skip
    counts = _counts(call).get(call, name)
    filters = {"status": status, "name": name, "waiting": waiting, "parent": parent}
    cursor = page_json(asked, page)["next_cursor"]
    limit = call.query.get("limit")
    return call.page(
        "runs.html", "Runs", rows=rows, filters=filters, statuses=STATUSES, kinds=WAIT_KINDS,
        counts=[(s, counts.get(s, 0)) for s in STATUSES],
        next_url=url_with(f"{PREFIX}/runs", {**filters, "limit": limit, "cursor": cursor})
        if cursor else None,
    )  # fmt: skip


# --- one run -----------------------------------------------------------------------------------


def run_page(call: WebCall) -> Response:
    run_id = call.params["id"]
    view = _run_view(call, run_id)
    return call.page("run.html", f"Run {run_id}", **view)


def run_live(call: WebCall) -> Response:
    """The part of a run's page that refreshes itself while the run has not ended."""
    view = _run_view(call, call.params["id"])
    return HTMLResponse(render("run_live.html", call.context(f"Run {view['run']['id']}", **view)))


def run_json(call: WebCall) -> Response:
    """``Download JSON``: the ``runs show --json`` shape, the same as ``GET /runs/{id}``."""
    run_id = call.params["id"]
    return JSONResponse(
        call.engine.show(run_id),
        headers={"Content-Disposition": f'attachment; filename="run-{run_id}.json"'},
    )


def _run_view(call: WebCall, run_id: str) -> dict[str, Any]:
    run = call.engine.show(run_id, 0)  # the history is paged below
    timeline = _timeline(call, run_id)
    ended = run["status"] in ENDED
    diagram, diagram_note = _diagram(call, run)
    return {
        "run": run,
        "ended": ended,
        "why": [_why(t) for t in run["tokens"] if t.get("waiting_for")],
        "children": run["children"][:CHILDREN_SHOWN],
        "all_children_url": url_with(f"{PREFIX}/runs", {"parent": run_id})
        if len(run["children"]) > CHILDREN_SHOWN else None,
        "diagram": diagram,
        "diagram_note": diagram_note,
        "retry_note": call.needs(Action.RETRY)
        or (None if run["status"] == "failed" else "Only a failed run can be retried"),
        "cancel_note": call.needs(Action.CANCEL)
        or (f"This run has ended ({run['status']}): there is nothing to cancel" if ended else None),
        "done": call.query.get("done"),
        "live_url": url_with(f"{PREFIX}/runs/{run_id}/live", _timeline_query(call)),
        **timeline,
    }  # fmt: skip


def _timeline_query(call: WebCall) -> dict[str, str | None]:
    return {k: call.query.get(k) for k in ("type", "failed", "before")}


def _timeline(call: WebCall, run_id: str) -> dict[str, Any]:
    entry_type = call.query.get("type") or None
    if entry_type is not None and entry_type not in HISTORY_TYPES:
        raise bad_query("type", f"no history entry type [{entry_type[:60]}]")
    failed = call.query.get("failed") in ("1", "on", "true")
    before = _seq(call.query.get("before", ""))
    types: tuple[str, ...] = FAILURE_TYPES if failed else ()
    if entry_type is not None:
        types = (entry_type,) if not failed or entry_type in FAILURE_TYPES else ()
    entries: list[dict[str, Any]] = []
    older = None
    if not (failed and entry_type is not None and not types):  # a failure type none can be
        page = call.engine.history_page(run_id, limit=TIMELINE_PAGE, before=before, types=types)
        entries, older = page.items, page.next_key
    query = {"type": entry_type, "failed": "1" if failed else None}
    return {
        "entries": [_entry(e) for e in entries],
        "entry_types": HISTORY_TYPES,
        "timeline": {"type": entry_type, "failed": failed, "before": before},
        "older_url": url_with(f"{PREFIX}/runs/{run_id}", {**query, "before": older})
        if older is not None else None,
        "newest_url": url_with(f"{PREFIX}/runs/{run_id}", query) if before is not None else None,
    }  # fmt: skip


def _seq(text: str) -> int | None:
    if text == "":
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise bad_query("before", f"before must be a history entry's number, not [{text[:40]}]")
    return int(text)


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A timeline row: its number, time, type and step, and the rest as ``key: value``."""
    skip = {"seq", "at", "type", "step", "path", "attempt"}
    details = [f"{k}: {v}" for k, v in entry.items() if k not in skip]
    step = entry.get("path") or entry.get("step")
    if step and entry.get("attempt") is not None:
        step = f"{step} (attempt {entry['attempt']})"
    return {
        "seq": entry["seq"], "at": entry["at"], "type": entry["type"], "step": step or "",
        "details": "; ".join(details),
        "failure": entry["type"] in FAILURE_TYPES,
    }  # fmt: skip


def _why(token: dict[str, Any]) -> str:
    """One line of "Why it waits", from the ``runs show`` shape of a waiting token."""
    return why_line(token.get("path") or token["step"], token["waiting_for"])


def _diagram(call: WebCall, run: dict[str, Any]) -> tuple[str | None, str | None]:
    """The run's diagram with its steps' state classes, or why there is none."""
    cache = diagrams(call)
    if not cache.can_draw():
        return None, NO_DOT
    try:
        definition = call.engine.definition_version(run["name"], run["version"])
        svg = cache.get(run["name"], run["version"], definition)
    except ProcflowError as exc:
        return None, f"The diagram could not be drawn: {exc}"
    outcomes = call.engine.step_outcomes(run["id"])
    steps = step_classes(run["tokens"], outcomes)
    return mark_run(svg, steps, join_classes(run["tokens"], outcomes)), None


# --- retry and cancel ----------------------------------------------------------------------------


def retry_run(call: WebCall) -> Response:
    return _confirmed(call, "retry")


def cancel_run(call: WebCall) -> Response:
    return _confirmed(call, "cancel")


def _confirmed(call: WebCall, action: str) -> Response:
    """The first POST (from the run's page) shows a confirmation; the second, with
    ``confirm=yes``, does it and goes back to the run's page."""
    run_id = call.params["id"]
    if call.form.get("confirm") != "yes":
        run = call.engine.show(run_id, 0)
        return call.page(
            "confirm.html", f"{action.capitalize()} run {run_id}?", run=run, action=action
        )
    if action == "retry":
        call.engine.retry(run_id, user=call.actor)
    elif action == "cancel":
        call.engine.cancel(run_id, user=call.actor)
    else:  # the routes name only these two
        raise Problem(404, f"no action [{action}]")
    done = "retried" if action == "retry" else "cancelled"
    return RedirectResponse(f"{PREFIX}/runs/{run_id}?done={done}", status_code=303)
