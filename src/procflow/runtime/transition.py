"""A transition: everything one committed state change does to one run.

Decisions build a Transition in memory; the engine commits a batch of them, each run's
transition atomically, in one database transaction (group commit). Nothing here does I/O.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from procflow.store.rows import HistoryRow, RunRow, TokenRow

_last_id = [0]
_last_id_lock = threading.Lock()
# A forked worker starts afresh: two children both going on from their parent's last id would
# make the same id in the same millisecond.
os.register_at_fork(after_in_child=lambda: _last_id.__setitem__(0, 0))


def new_run_id() -> str:
    """Time-ordered, unique across machines: 12 hex digits of milliseconds + 20 random. Ids
    this process makes in one millisecond sort in the order it made them (a random suffix would
    not): a parent's children started in one transition list oldest first."""
    made = (time.time_ns() // 1_000_000) << 80 | uuid.uuid4().int >> 48
    with _last_id_lock:
        made = max(made, _last_id[0] + 1)
        _last_id[0] = made
    return f"{made:032x}"


RUN_ID_PATTERN = "^[0-9a-f]{32}$"
"""What :func:`new_run_id` gives: a filter naming a run by id (``runs list --parent``) is
refused when its text could be no run's id, rather than listing nothing."""


_RUN_ID = re.compile(RUN_ID_PATTERN)


def is_run_id(text: str) -> bool:
    return _RUN_ID.fullmatch(text) is not None


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
    # The call step's path, taken when the step starts: a detached call's token has moved on
    # to the next step by the time the commit writes the link.
    step: str
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
    # What came of the calls whose step this transition took back (metrics): (the called
    # flow, completed | failed | timed_out | cancelled). Never stored.
    calls_ended: list[tuple[str, str]] = field(default_factory=list)

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
