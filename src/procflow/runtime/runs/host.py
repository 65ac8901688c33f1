"""What a module that changes runs outside the work loop needs of the engine, and nothing more.

Completing a task, a record write that resumes or aborts runs, an accepted event: each changes
runs inside a user call's transaction. The modules that do this (``tasks``, ``record_waits``,
``delivery``, ``lifecycle``) take a :class:`RunHost` instead of the engine, so they never import
it and the engine stays the one place that wires the runtime together.
"""

from __future__ import annotations

from typing import Protocol

from procflow.runtime.definitions.catalog import Catalog
from procflow.runtime.interpret.intent import RunCtx
from procflow.runtime.transition import Transition
from procflow.store.rows import RunRow
from procflow.store.store import Store, Tx

__all__ = ["RunHost"]


class RunHost(Protocol):
    """The engine as seen by code that advances a run inside someone else's transaction."""

    @property
    def store(self) -> Store: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def environ(self) -> dict[str, str]: ...

    def now(self) -> int:
        """The store's clock (virtual or system), in microseconds."""
        ...

    def inline_ctx(self, tx: Tx, run: RunRow) -> RunCtx:
        """An intent run's context as ``tx`` sees it."""
        ...

    def apply_inline(self, tx: Tx, rc: RunCtx, tr: Transition) -> None:
        """Commit ``tr`` as part of ``tx`` (the run's lease released)."""
        ...
