"""What the faces list, in the one JSON shape every face shows: deployed definitions, kept
messages, a deploy's report, and pages of every list, newest first.

A page is keyset-paged: it holds the items whose key (a run's id, a task's, record's or
message's id, a definition's first version id) sorts below the key the previous page ended
on, read as one index range with ``ORDER BY key DESC LIMIT n`` — never an offset, so a page
costs the same however deep it is, and items added while a caller pages through land before
its position (on no page it has still to read) instead of shifting the pages it has not read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from procflow.cursors import MAX_PAGE
from procflow.errors import NotFoundError, UsageError
from procflow.model.source import Diagnostic
from procflow.runtime.clock import iso
from procflow.runtime.data.records import record_json
from procflow.runtime.definitions.catalog import Catalog
from procflow.runtime.operations.views import history_json, run_summary_json
from procflow.runtime.transition import is_run_id
from procflow.runtime.waits.task_rows import Task, task_json
from procflow.store.rows import OutboxRow, VersionRow
from procflow.store.store import Tx

if TYPE_CHECKING:
    from procflow.model.ir import Entity

if TYPE_CHECKING:  # deploying is imported by what deploys, not by what lists
    from procflow.runtime.definitions.deploy import Deployed

__all__ = [
    "FAILURE_TYPES",
    "HISTORY_TYPES",
    "MAX_PAGE",
    "WAIT_KINDS",
    "Page",
    "bad_parent",
    "definition_json",
    "definitions_page",
    "deploy_report_json",
    "deployed_json",
    "history_page",
    "one_definition",
    "one_task",
    "outbox_json",
    "outbox_page",
    "record_key",
    "records_page",
    "runs_page",
    "tasks_page",
    "version_row",
]


Key = TypeVar("Key", int, str)
Row = TypeVar("Row")


@dataclass(frozen=True)
class Page(Generic[Key]):
    """Items newest first, and the key of the last one when more follow (pass it as the next
    page's ``before``; None: this page is the last)."""

    items: list[dict[str, Any]]
    next_key: Key | None


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise UsageError(f"a page holds from 1 to {MAX_PAGE} items, not {limit}")


def _page(
    rows: Sequence[Row], limit: int, key: Callable[[Row], Key], shape: Callable[[Row], Any]
) -> Page[Key]:
    """``rows`` read with ``limit + 1``: the one past the page only says that more follow."""
    kept = rows[:limit]
    more = len(rows) > limit
    return Page([shape(r) for r in kept], key(kept[-1]) if more else None)


# --- shapes ----------------------------------------------------------------------------------


def definition_json(
    reader: Tx, name: str, dialect: str, enabled: bool, latest: int
) -> dict[str, Any]:
    """``definitions list --json``'s item: the definition and each version with when it was
    deployed and its active runs. ``disabled`` is the definition's flag (a disabled definition
    starts no new runs, whichever version they would be on)."""
    return {
        "name": name,
        "dialect": dialect,
        "enabled": enabled,
        "latest": latest,
        "versions": [
            {"version": v, "deployed_at": iso(at), "active_runs": active, "disabled": not enabled}
            for v, at, active in reader.versions_of(name)
        ],
    }


def outbox_json(row: OutboxRow) -> dict[str, Any]:
    """``outbox list --json``'s item: a kept message."""
    return {
        "id": row.id, "channel": row.channel, "to": row.recipient, "subject": row.subject,
        "body": row.body, "run_id": row.run_id, "step": row.step, "created_at": iso(row.created_at),
    }  # fmt: skip


def deployed_json(done: Deployed) -> dict[str, Any]:
    """``deploy --json``'s item: a definition of the file, and whether it was new."""
    return {
        "name": done.name,
        "dialect": done.dialect,
        "version": done.version,
        "unchanged": not done.created,
    }


def deploy_report_json(done: list[Deployed], diagnostics: list[Diagnostic]) -> dict[str, Any]:
    """A deploy's report: what it stored, and the warnings of the file (``validate --json``
    items; a file with errors is not deployed)."""
    return {
        "deployed": [deployed_json(d) for d in done],
        "warnings": [d.as_json() for d in diagnostics if d.severity == "warning"],
    }


# --- one item ----------------------------------------------------------------------------------


def one_definition(reader: Tx, name: str) -> dict[str, Any]:
    found = reader.definition(name)
    if found is None:
        raise NotFoundError.definition(name)
    return definition_json(reader, *found)


def version_row(reader: Tx, name: str, version: int | None) -> VersionRow:
    """Version ``version`` of ``name`` (None: its latest)."""
    row = reader.latest_version(name) if version is None else reader.version_numbered(name, version)
    if row is not None:
        return row
    found = reader.definition(name)
    if version is None or found is None:
        raise NotFoundError.definition(name)
    raise NotFoundError(
        f"[{name}] has no version {version} (its versions: 1 to {found[3]})",
        kind="definition",
        key=name,
    )


def one_task(reader: Tx, task_id: int) -> dict[str, Any]:
    row = reader.task(task_id)
    if row is None:
        raise NotFoundError(f"no task with id [{task_id}]", kind="task", key=task_id)
    return task_json(Task(**row))


def record_key(reader: Tx, catalog: Catalog, entity: str) -> str:
    return _declared(reader, catalog, entity).primary_key.name


def _declared(reader: Tx, catalog: Catalog, entity: str) -> Entity:
    declared = catalog.application_of(entity, reader).entity(entity)
    assert declared is not None  # application_of found the application declaring it
    return declared


# --- pages -----------------------------------------------------------------------------------


WAIT_KINDS = (
    "timer", "retry", "poll", "event", "record", "task", "call", "queue", "throttle", "join",
)  # fmt: skip
"""What a token can wait for (``waiting_for.kind``)."""
HISTORY_TYPES = (
    "run.started", "step.started", "step.completed", "step.failed", "step.skipped",
    "step.recovered", "attempt.failed", "retry.scheduled", "timer.armed", "timer.fired",
    "event.received", "task.created", "task.completed", "task.withdrawn", "var.produced",
    "var.cleared", "message.sent", "message.outboxed", "call.started", "call.ended",
    "token.forked", "token.joined", "token.ended",
    "run.completed", "run.failed", "run.cancelled", "run.aborted", "run.retried",
    "run.dequeued", "step.throttled",
)  # fmt: skip
"""Every history entry type, in the order a run meets them (flow control's last)."""
FAILURE_TYPES = ("step.failed", "attempt.failed", "run.failed", "run.aborted")
"""The history entry types that say something went wrong."""


def runs_page(
    reader: Tx, status: str | None, name: str | None, limit: int, before: str | None,
    waiting: str | None = None, parent: str | None = None,
) -> Page[str]:  # fmt: skip
    """``runs list --json`` items, newest first, optionally of one status and definition, and
    only those with a token waiting for ``waiting`` (one of :data:`WAIT_KINDS`), and only the
    runs that the run ``parent`` started by ``call`` (an unknown run: none)."""
    check_limit(limit)
    if waiting is not None and waiting not in WAIT_KINDS:
        raise UsageError(f"a token waits for one of {', '.join(WAIT_KINDS)}, not [{waiting}]")
    if parent is not None and not is_run_id(parent):
        raise UsageError(bad_parent(parent))
    rows = reader.run_summaries_before(status, name, before, limit + 1, waiting, parent)
    return _page(rows, limit, lambda r: r.id, run_summary_json)


def bad_parent(text: str) -> str:
    """Why ``text`` is no ``parent`` filter (every face says it the same)."""
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    return f"parent must be a run's id (32 hexadecimal digits), not [{shown}]"


def history_page(
    reader: Tx, run_id: str, limit: int, before: int | None, types: Sequence[str] = ()
) -> Page[int]:
    """A run's history entries (``runs show`` items), newest first, of ``types`` when given;
    the key is an entry's ``seq``."""
    check_limit(limit)
    if reader.run(run_id) is None:
        raise NotFoundError.run(run_id)
    unknown = [t for t in types if t not in HISTORY_TYPES]
    if unknown:
        raise UsageError(f"no history entry type [{unknown[0]}]")
    rows = reader.history_before(run_id, before, limit + 1, types)
    return _page(rows, limit, lambda r: r.seq, history_json)


def tasks_page(reader: Tx, assignee: str | None, limit: int, before: int | None) -> Page[int]:
    """``tasks list --json`` items (open tasks), newest first, optionally of one assignee."""
    check_limit(limit)
    rows = reader.open_tasks_before(assignee, before, limit + 1)
    return _page(rows, limit, lambda r: int(r["id"]), lambda r: task_json(Task(**r)))


def records_page(
    reader: Tx, catalog: Catalog, entity: str, limit: int, before: int | None
) -> Page[int]:
    """Record JSON of ``entity``'s records, newest (highest id) first."""
    check_limit(limit)
    declared = _declared(reader, catalog, entity)
    rows = reader.records_before(entity, before, limit + 1)
    return _page(rows, limit, lambda r: r.id, lambda r: record_json(declared, r.data))


def outbox_page(reader: Tx, limit: int, before: int | None) -> Page[int]:
    """``outbox list --json`` items, newest first."""
    check_limit(limit)
    rows = reader.outbox_before(before, limit + 1)
    return _page(rows, limit, lambda r: r.id, outbox_json)


def definitions_page(reader: Tx, limit: int, before: int | None) -> Page[int]:
    """``definitions list --json`` items, the most recently first deployed first."""
    check_limit(limit)
    rows = reader.definitions_before(before, limit + 1)
    return _page(rows, limit, lambda r: r[4], lambda r: definition_json(reader, *r[:4]))
