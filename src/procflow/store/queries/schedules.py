"""Schedules: each flow schedule's row, its armed slot, and its counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from procflow.store.codec import dumps
from procflow.store.queries.base import Queries
from procflow.store.rows import ScheduleRow

_COLS = (
    "key, flow, name, spec, plan, paused, note, disabled, next_slot, due_at, buffered, open_runs, "
    "last_slot, last_run, started, skipped, missed, buffers, error, sweep"
)


_SAVE = (
    "UPDATE schedules SET spec=?, plan=?, paused=?, note=?, disabled=?, next_slot=?, due_at=?, "
    "buffered=?, open_runs=?, last_slot=?, last_run=?, started=?, skipped=?, missed=?, "
    "buffers=?, error=?, sweep=? WHERE key=?"
)

# What firing a flow schedule's slot changes (its spec, plan, pause and sweep stay as read).
_SAVE_FIRED = (
    "UPDATE schedules SET next_slot=?, due_at=?, buffered=?, open_runs=?, last_slot=?, "
    "last_run=?, started=?, skipped=?, missed=?, buffers=?, error=? WHERE key=?"
)
_SAVE_FIRED_ARRAYS = (
    "UPDATE schedules AS s SET next_slot=u.next_slot, due_at=u.due_at, buffered=u.buffered, "
    "open_runs=u.open_runs, last_slot=u.last_slot, last_run=u.last_run, started=u.started, "
    "skipped=u.skipped, missed=u.missed, buffers=u.buffers, error=u.error "
    "FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], ?::text[], ?::bigint[], ?::text[], "
    "?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[], ?::text[], ?::text[]) AS u(next_slot, "
    "due_at, buffered, open_runs, last_slot, last_run, started, skipped, missed, buffers, error, "
    "key) WHERE s.key=u.key"
)


def schedule_row(row: Sequence[Any]) -> ScheduleRow:
    (key, flow, name, spec, plan, paused, note, disabled, next_slot, due_at, buffered, open_runs,
     last_slot, last_run, started, skipped, missed, buffers, error, sweep) = row  # fmt: skip
    return ScheduleRow(
        key, flow, name, json.loads(spec), json.loads(plan), bool(paused), note, bool(disabled),
        _int(next_slot), _int(due_at), _int(buffered), json.loads(open_runs), _int(last_slot),
        last_run, int(started), int(skipped), int(missed), int(buffers), error,
        None if sweep is None else json.loads(sweep),
    )  # fmt: skip


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


class ScheduleQueries(Queries):
    def insert_schedule(self, s: ScheduleRow) -> None:
        self.c.execute(
            f"INSERT INTO schedules({_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            _values(s),
        )

    def save_schedule(self, s: ScheduleRow) -> None:
        """Write every column of ``s`` but its key, flow and name."""
        self.c.execute(_SAVE, (*_values(s)[3:], s.key))

    def save_fired(self, rows: Sequence[ScheduleRow]) -> None:
        """Write what firing their slots changed of flow schedules' ``rows`` (locked in this
        transaction): the armed slot, open runs, last run, counts and error; one statement
        over arrays where the backend takes them."""
        self.b.batch(
            _SAVE_FIRED, _SAVE_FIRED_ARRAYS,
            [(s.next_slot, s.due_at, s.buffered, dumps(s.open_runs), s.last_slot, s.last_run,
              s.started, s.skipped, s.missed, s.buffers, s.error, s.key) for s in rows],
        )  # fmt: skip

    def delete_schedule(self, key: str) -> None:
        self.c.execute("DELETE FROM schedules WHERE key=?", (key,))

    def schedule(
        self, key: str, *, lock: bool = False, skip_locked: bool = False
    ) -> ScheduleRow | None:
        """The schedule ``key``; ``lock``: locked for a change (``skip_locked``: None when
        another transaction holds it, rather than waiting)."""
        tail = (self.b.skip_locked if skip_locked else self.b.for_update) if lock else ""
        row = self.c.execute(f"SELECT {_COLS} FROM schedules WHERE key=?{tail}", (key,)).fetchone()
        return schedule_row(row) if row else None

    def schedules_of_flow(self, flow: str, *, lock: bool = False) -> list[ScheduleRow]:
        tail = self.b.for_update if lock else ""
        rows = self.c.execute(
            f"SELECT {_COLS} FROM schedules WHERE flow=? ORDER BY key{tail}", (flow,)
        ).fetchall()
        return [schedule_row(r) for r in rows]

    def schedules_after(self, after: str | None, limit: int) -> list[ScheduleRow]:
        """Up to ``limit`` schedules by key, after the key ``after`` (None: from the first)."""
        if after is None:
            rows = self.c.execute(
                f"SELECT {_COLS} FROM schedules ORDER BY key LIMIT ?", (limit,)
            ).fetchall()
        else:
            rows = self.c.execute(
                f"SELECT {_COLS} FROM schedules WHERE key>? ORDER BY key LIMIT ?", (after, limit)
            ).fetchall()
        return [schedule_row(r) for r in rows]

    def due_schedules(self, now: int, limit: int) -> list[ScheduleRow]:
        """Schedules whose armed slot is due by ``now``, earliest first, locked; those another
        worker is firing are skipped (it fires them)."""
        rows = self.c.execute(
            f"SELECT {_COLS} FROM schedules WHERE due_at<=? ORDER BY due_at LIMIT ?"
            + self.b.skip_locked,
            (now, limit),
        ).fetchall()
        return [schedule_row(r) for r in rows]

    def next_schedule_due(self) -> int | None:
        """The earliest armed slot's due time: one probe of the due-time index."""
        row = self.c.execute(
            "SELECT due_at FROM schedules WHERE due_at IS NOT NULL ORDER BY due_at LIMIT 1"
        ).fetchone()
        return None if row is None else int(row[0])


def _values(s: ScheduleRow) -> tuple[Any, ...]:
    return (
        s.key, s.flow, s.name, dumps(s.spec), dumps(s.plan), int(s.paused), s.note, int(s.disabled),
        s.next_slot, s.due_at, s.buffered, dumps(s.open_runs), s.last_slot, s.last_run,
        s.started, s.skipped, s.missed, s.buffers, s.error,
        None if s.sweep is None else dumps(s.sweep),
    )  # fmt: skip
