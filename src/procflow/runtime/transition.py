"""A transition: everything one committed state change does to one run.

Decisions build a Transition in memory; the engine commits a batch of them, each run's
transition atomically, in one database transaction (group commit). Nothing here does I/O.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from procflow.store.rows import HistoryRow, RunRow, TokenRow


def new_run_id() -> str:
    """Time-ordered, unique across machines: 12 hex digits of milliseconds + 20 random."""
    return f"{time.time_ns() // 1_000_000:012x}{uuid.uuid4().hex[:20]}"


@dataclass(slots=True)
class ChildStart:
    """A run of another flow that a call step starts, in the commit of its transition."""

    run_id: str
    version_id: int
    flow: str
    first: str  # the called flow's first step
    inputs: dict[str, Any]
    token: TokenRow  # the parent's token at the call step
    depth: int  # 1 for a top-level run's child
    detach: bool
    limited: bool = False  # the called flow has a concurrency limit


@dataclass(slots=True)
class OutboxMessage:
    channel: str
    recipient: str
    subject: str | None
    body: str | None
    step: str | None


@dataclass(slots=True)
class RecordWrite:
    entity: str
    id: int
    before: dict[str, Any]
    after: dict[str, Any]


@dataclass(slots=True)
class Transition:
    run: RunRow
    now: int
    history: list[HistoryRow] = field(default_factory=list)
    tokens_update: list[TokenRow] = field(default_factory=list)
    tokens_insert: list[TokenRow] = field(default_factory=list)
    tokens_delete: list[int] = field(default_factory=list)
    timers: list[tuple[TokenRow, str, int]] = field(default_factory=list)  # token, kind, due
    timers_drop: list[int] = field(default_factory=list)  # token ids whose timers go
    record_write: RecordWrite | None = None
    vars_set: dict[str, Any] = field(default_factory=dict)
    vars_clear: list[str] = field(default_factory=list)
    vars_sweep: bool = False
    outbox: list[OutboxMessage] = field(default_factory=list)
    scope_ops: list[tuple[str, str, int, Any]] = field(default_factory=list)  # flow loop rows
    # Tokens parked on the outside world: (token, kind 'event'|'record', type, keys); the wait
    # row is written with the token (docs/runtime.md, "Events and wait_for").
    waits: list[tuple[TokenRow, str, str, str]] = field(default_factory=list)
    # New event waits with a lookback window: (token, type, keys, accepted since); resolved in
    # the commit, where an earlier matching event still undelivered to the run satisfies them.
    lookbacks: list[tuple[TokenRow, str, str, int]] = field(default_factory=list)
    calls: list[ChildStart] = field(default_factory=list)  # child runs to start
    cancels: list[str] = field(default_factory=list)  # child runs to cancel (a call timed out)

    def add(
        self,
        type_: str,
        step: str | None = None,
        path: str | None = None,
        attempt: int | None = None,
        at: int | None = None,
        **data: Any,
    ) -> None:
        self.run.seq += 1
        self.history.append(
            HistoryRow(
                self.run.seq, self.now if at is None else at, type_, step, path, attempt,
                data or None,
            )
        )  # fmt: skip

    def update(self, token: TokenRow) -> None:
        if token.id is None:
            if token not in self.tokens_insert:
                self.tokens_insert.append(token)
        elif token not in self.tokens_update:
            self.tokens_update.append(token)
