"""The engine's read calls that the faces page: one shape each, newest first (``listing``).

A mixin of :class:`~procflow.runtime.engine.Engine`: every call reads the store through the
engine's ``store``, in a read transaction of its own, and changes nothing. Reads need no role: any
signed-in user may make them (records excepted, which follow their application's permissions and
stay on the engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from procflow.runtime.operations import listing
from procflow.runtime.operations.listing import Page
from procflow.runtime.operations.views import waiting_for
from procflow.store.store import Store

__all__ = ["ListingCalls"]


class ListingCalls:
    """``runs list``, ``tasks list``, ``outbox list``, ``definitions list`` and their pages."""

    store: Store

    def runs_page(
        self, status: str | None = None, name: str | None = None, *, limit: int = 50,
        before: str | None = None, waiting: str | None = None, parent: str | None = None,
    ) -> Page[str]:  # fmt: skip
        """``runs list --json`` items after the run ``before`` (None: from the newest);
        ``waiting``: only runs with a token waiting for that kind (``retry``, ``task``…);
        ``parent``: only the runs that run started by ``call``."""
        return listing.runs_page(self.store.read(), status, name, limit, before, waiting, parent)

    def run_counts(self, name: str | None = None) -> dict[str, int]:
        """How many runs (of the definition ``name``) have each status; absent: none."""
        return self.store.read().run_counts(name)

    def waits_of_runs(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The ``waiting_for`` of each waiting token of the runs ``run_ids``, by run id."""
        out: dict[str, list[dict[str, Any]]] = {}
        for token in self.store.read().tokens_of_runs(run_ids):
            wait = waiting_for(token)
            if wait is not None:
                out.setdefault(token.run_id, []).append(wait)
        return out

    def history_page(
        self, run_id: str, *, limit: int = 100, before: int | None = None,
        types: Sequence[str] = (),
    ) -> Page[int]:  # fmt: skip
        """A run's history entries before ``seq`` ``before``, newest first, of ``types``."""
        return listing.history_page(self.store.read(), run_id, limit, before, types)

    def step_outcomes(self, run_id: str) -> dict[str, str]:
        """Each step's last outcome in the run's history (``step.completed``, ``step.failed``,
        ``step.recovered``, ``step.skipped``), by step name: what its diagram shows."""
        latest: dict[str, tuple[int, str]] = {}
        for step, kind, seq in self.store.read().step_outcomes(run_id):
            if step not in latest or seq > latest[step][0]:
                latest[step] = (seq, kind)
        return {step: kind for step, (_, kind) in latest.items()}

    def tasks_page(
        self, assignee: str | None = None, *, limit: int = 50, before: int | None = None
    ) -> Page[int]:
        """Open tasks (``tasks list --json`` items) after the task ``before``."""
        return listing.tasks_page(self.store.read(), assignee, limit, before)

    def task(self, task_id: int) -> dict[str, Any]:
        """One task, open or not (a closed one with its outcome)."""
        return listing.one_task(self.store.read(), task_id)

    def outbox_page(self, *, limit: int = 50, before: int | None = None) -> Page[int]:
        """Kept messages (``outbox list --json`` items) after the message ``before``."""
        return listing.outbox_page(self.store.read(), limit, before)

    def list_outbox(self) -> list[dict[str, Any]]:
        """Every kept message, oldest first (``procflow test``); the faces page them."""
        return [listing.outbox_json(m) for m in self.store.read().outbox()]

    def definitions_page(self, *, limit: int = 50, before: int | None = None) -> Page[int]:
        """Definitions after the one whose first version is ``before``, newest first."""
        return listing.definitions_page(self.store.read(), limit, before)

    def definition(self, name: str) -> dict[str, Any]:
        """One deployed definition with its versions (a ``definitions list --json`` item)."""
        return listing.one_definition(self.store.read(), name)
