"""What an intent schedule's slot does for one matching record, inside its batch's transaction.

- ``notify``: the message a process step's ``notify`` would send about the record — the same
  ``email.send`` attempt (SMTP, or the outbox without ``PROCFLOW_SMTP_URL``), its Message-ID
  from the idempotency key ``schedule:<key>@<slot>/<entity>/<id>``; a kept message is written
  to the outbox with the batch (its ``step`` is the schedule's key). A recipient that resolves
  to nothing skips the record; a delivery failure fails it (counted, with its message).
- ``generate``: a new record of the target entity, written as ``records create`` writes one
  (checked, then its ``onCreate`` triggers fired); a write the declaration refuses fails the
  record.
- ``start``: a run of the process about the record, with the start key
  ``schedule:<key>@<slot>/<id>``; a record whose run of the process is still active is skipped
  (``overlap: skip``), started anyway (``allow``) or has that run cancelled first
  (``cancel_previous``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from procflow.errors import NotFoundError, RecordError, UsageError
from procflow.model.ir import Application, Entity, Notify, Process
from procflow.model.schedule import Generate, IntentSchedule, Moment, Overlap, StartProcess
from procflow.runtime.data.records import record_json
from procflow.runtime.interpret.actions import Caller, send_email
from procflow.runtime.operations.lifecycle import cancel_run
from procflow.runtime.operations.record_calls import write_new_record
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.starts import insert_intent_run
from procflow.runtime.schedules.sweep_match import moment_value
from procflow.store.rows import RecordRow
from procflow.store.store import Tx

__all__ = ["Acted", "Sweeper"]


@dataclass(frozen=True)
class Acted:
    """One record's outcome: ``done``, ``skipped`` or ``failed`` (``why``: the message)."""

    outcome: str
    why: str | None = None
    run_id: str | None = None


@dataclass
class Sweeper:
    """The action of ``schedule`` (of ``app``, keyed ``key``) for the records of one batch of
    the slot ``slot``, fired at ``now``."""

    host: RunHost
    tx: Tx
    key: str
    app: Application
    schedule: IntentSchedule
    slot: int
    now: int
    _process: tuple[int, Process] | str | None = field(default=None, repr=False)

    @property
    def entity(self) -> Entity:
        found = self.app.entity(self.schedule.entity)
        assert found is not None  # the compiler checked it is declared
        return found

    def act(self, row: RecordRow) -> Acted:
        action = self.schedule.action
        if isinstance(action, Notify):
            return self._notify(action, row)
        if isinstance(action, Generate):
            return self._generate(action, row)
        return self._start(action, row)

    # --- notify ---------------------------------------------------------------------------

    def _notify(self, action: Notify, row: RecordRow) -> Acted:
        to = action.to.address or _text(self._value(row, action.to.path))
        if not to:
            return Acted("skipped", "the recipient resolved to nothing")
        subject, _ = action.subject.render(lambda path: self._value(row, path))
        body, _ = action.body.render(lambda path: self._value(row, path))
        key = f"schedule:{self.key}@{self.slot}/{self.entity.name}/{row.id}"
        caller = Caller(f"schedule:{self.key}", self.key, 1, key, self.app.project_dir)
        sent = send_email(caller, (to, subject, body), environ=self.host.environ)
        if sent.error is not None:
            return Acted("failed", f"[{self.entity.name}] record {row.id}: {sent.error}")
        for message in sent.outbox:
            self.tx.add_outbox(
                message.channel, message.recipient, message.subject, message.body, None,
                self.key, self.now,
            )  # fmt: skip
        return Acted("done")

    def _value(self, row: RecordRow, path: tuple[str, ...]) -> Any:
        """A ``field`` or one-hop ``relation.field`` of ``row``, as a process's notify reads
        its trigger record."""
        entity = self.entity
        if len(path) == 1:
            return record_json(entity, row.data).get(path[0])
        relation, related_id = entity.relation(path[0]), row.data.get(path[0])
        if relation is None or related_id is None:
            return None
        related = self.tx.record(relation.to, int(related_id))
        return None if related is None else related.data.get(path[1])

    # --- generate -------------------------------------------------------------------------

    def _generate(self, action: Generate, row: RecordRow) -> Acted:
        target = self.app.entity(action.to)
        assert target is not None
        data = {name: row.data.get(source) for name, source in action.map}
        for name, value in action.defaults:
            data[name] = (
                moment_value(value, self.slot, self.schedule.timezone)
                if isinstance(value, Moment)
                else value
            )
        try:
            write_new_record(self.host, self.tx, self.app, target, data, None, self.now)
        except (RecordError, UsageError) as exc:
            return Acted("failed", f"[{self.entity.name}] record {row.id}: {exc}")
        return Acted("done")

    # --- start ----------------------------------------------------------------------------

    def _start(self, action: StartProcess, row: RecordRow) -> Acted:
        found = self._startable(action.process)
        if isinstance(found, str):
            return Acted("failed", found)
        version_id, process = found
        entity = self.entity.name
        runs = self.tx.active_runs_for_record(entity, row.id)
        active = [r for r in runs if r.name == process.name]
        overlap = self.schedule.overlap
        if active and overlap is Overlap.SKIP:
            return Acted("skipped", f"run {active[-1].id} of [{process.name}] is still active")
        if overlap is Overlap.CANCEL_PREVIOUS:
            for run in active:
                reason = f"cancelled by its schedule [{self.key}]: the next slot started"
                cancel_run(self.tx, run, self.now, reason=reason)
        run_id = insert_intent_run(
            self.tx, version_id, process, self.now, (entity, row.id), str(row.id),
            start_key=f"schedule:{self.key}@{self.slot}/{row.id}", schedule=(self.key, self.slot),
        )  # fmt: skip
        if run_id is None:
            return Acted("skipped", "this slot started a run for the record already")
        return Acted("done", run_id=run_id)

    def _startable(self, name: str) -> tuple[int, Process] | str:
        """The process's newest enabled version (once a batch), or why it cannot start."""
        if self._process is None:
            hint = f"[{name}] is a flow, not a process of [{self.app.name}]"
            try:
                version = self.host.catalog.startable(self.tx, name, "intent", hint)
                _, process = self.host.catalog.process(version.id, name, self.tx)
                self._process = (version.id, process)
            except (NotFoundError, UsageError) as exc:
                self._process = str(exc)
        return self._process


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
