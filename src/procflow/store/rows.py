"""Plain rows that cross the store boundary (no SQL here, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class VersionRow:
    id: int
    name: str
    version: int
    dialect: str
    hash: str
    file: str
    project_dir: str
    source: str
    created_at: int
    vars: str | None  # the process's declared var names, JSON (None: a flow, or stored earlier)


@dataclass(slots=True)
class TokenRow:
    id: int | None
    run_id: str
    step: str
    path: str
    state: str  # ready | waiting | failed
    attempt: int
    since: int
    wait: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RunRow:
    id: str
    version_id: int
    name: str
    dialect: str
    status: str
    started_at: int
    ended_at: int | None = None
    business_key: str | None = None
    record_entity: str | None = None
    record_id: int | None = None
    start_key: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: dict[str, Any] | None = None
    seq: int = 0


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a list of runs shows of each: the run row without its state, output and error
    (which may be large, and are not read for a list)."""

    id: str
    name: str
    dialect: str
    status: str
    started_at: int
    ended_at: int | None
    business_key: str | None


@dataclass(slots=True)
class HistoryRow:
    seq: int
    at: int
    type: str
    step: str | None = None
    path: str | None = None
    attempt: int | None = None
    data: dict[str, Any] | None = None


@dataclass(slots=True)
class TimerRow:
    id: int
    run_id: str
    token_id: int
    kind: str
    due_at: int


@dataclass(slots=True)
class RecordRow:
    entity: str
    id: int
    data: dict[str, Any]
    owner: str | None
    created_at: int
    updated_at: int


@dataclass(slots=True)
class OutboxRow:
    id: int
    channel: str
    recipient: str
    subject: str | None
    body: str | None
    run_id: str | None
    step: str | None
    created_at: int


@dataclass(slots=True)
class ScheduleRow:
    """A ``schedules`` row: one schedule of a flow, and its armed slot."""

    key: str  # FLOW, or FLOW/NAME
    flow: str
    name: str
    spec: dict[str, Any]
    plan: dict[str, Any]  # how its runs start: {version_id, first, inputs} of the newest version
    paused: bool = False
    note: str | None = None
    disabled: bool = False
    next_slot: int | None = None
    due_at: int | None = None
    buffered: int | None = None
    open_runs: list[str] = field(default_factory=list)
    last_slot: int | None = None
    last_run: str | None = None
    started: int = 0
    skipped: int = 0
    missed: int = 0
    buffers: int = 0
    error: str | None = None  # why its last slot could not start its run
    sweep: dict[str, Any] | None = None  # an intent schedule's progress and outcomes
