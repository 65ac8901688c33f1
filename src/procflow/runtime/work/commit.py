"""Committing transitions: a batch of runs' steps in one transaction, or one run's change inside
a user call's transaction.

Group commit: the work loop advances every run of its batch by one step, then commits all of the
transitions together — each run's transition stays atomic, the fsync is shared. Each run's lease
is checked inside the update of its row, so a worker that lost a run changes nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from procflow.model.ir import Application
from procflow.runtime import faults
from procflow.runtime.clock import system_now
from procflow.runtime.data.secrets import VarCipher
from procflow.runtime.interpret.flow import FlowCtx
from procflow.runtime.interpret.intent import RunCtx
from procflow.runtime.operations.lifecycle import cancel_run, on_record_write
from procflow.runtime.runs.children import start_children
from procflow.runtime.runs.host import RunHost
from procflow.runtime.runs.limits import free_places
from procflow.runtime.schedules.firing import release_buffered
from procflow.runtime.transition import ChildStart, Transition
from procflow.runtime.waits.calls import wake_parents
from procflow.runtime.waits.delivery import resolve_lookbacks
from procflow.runtime.work.incidents import IncidentCtx
from procflow.runtime.work.lease import Lease
from procflow.states import ENDED, FINISHED, RunStatus
from procflow.store.rows import RunRow, TokenRow
from procflow.store.store import RunImage, Tx, run_image

__all__ = ["Committer", "Step"]

Step = tuple[RunCtx | FlowCtx | IncidentCtx, Transition]


class Committer:
    """Writes transitions to the store."""

    def __init__(self, host: RunHost, lease: Lease, cipher: Callable[[], VarCipher]) -> None:
        self.host = host
        self.lease = lease
        self._cipher = cipher  # loaded on first use: most runs have no vars

    def commit_batch(self, batch: list[Step], now: int) -> set[str]:
        """Commit the transitions of the runs this worker still holds; returns their ids."""
        if not batch:
            return set()
        faults.point("before_commit")
        wall = system_now()
        images = [run_image(rc.run) for rc, _ in batch]
        with self.host.store.tx() as tx:
            # The lease check is the run rows' update itself, guarded by the lease: when every
            # row matches (the usual case) no separate query is needed; otherwise undo it, find
            # the runs still held, and save only those.
            tx.savepoint("held")
            accepted = {rc.run.id for rc, _ in batch}
            if self._save_runs(tx, batch, images, accepted, wall) != len(batch):
                tx.rollback_to("held")
                accepted = tx.leases_held(accepted, self.lease.owner, wall)
                self._save_runs(tx, batch, images, accepted, wall)
            done = (  # the others change nothing
                batch
                if len(accepted) == len(batch)
                else [(rc, tr) for rc, tr in batch if rc.run.id in accepted]
            )
            rows = _Rows()
            for rc, tr in done:
                self._apply(tx, rc, tr, now, rows)
            rows.write(tx)
            tx.append_history_many([(rc.run.id, h) for rc, tr in done for h in tr.history])
            if rows.calls or rows.cancels:
                self._calls(tx, rows, now)
            # Record writes go last, and their lifecycle effects (abortOn, record waits,
            # triggers) after all of them: those effects may reach runs of this very batch, so
            # they must find every run's rows already written — the batch behaves as if each
            # run's transition had committed first, then each record write.
            writes = [self._write_record(tx, tr, now) for _, tr in done if tr.record_write]
            for write in writes:
                if write is not None:
                    on_record_write(self.host, tx, "onUpdate", *write, now)
            # A run a schedule started ended: a slot buffered behind it (buffer_one) starts.
            ended = [rc.run for rc, _ in done if rc.run.status in ENDED]
            if any(run.state.get("limit") for run in ended):
                free_places(tx, ended, now)  # a queued run of the key starts in its stead
            if any(run.state.get("schedule") for run in ended):
                release_buffered(self.host, tx, ended)
            # A child that ended or failed resumes the parent waiting on it.
            children = [rc.run for rc, _ in done if rc.run.status in FINISHED]
            if any(run.state.get("parent") for run in children):
                faults.point("child_ended")
                wake_parents(tx, children, now)
        self._remember_saved(batch, images, accepted, wall)
        faults.point("after_commit")
        return accepted

    def commit_inline(self, tx: Tx, rc: RunCtx, tr: Transition) -> None:
        """Commit ``tr`` as part of ``tx``. The run row is saved with its lease released: a
        worker holding the run meanwhile has its commit refused and the run is claimed anew,
        never overwritten with a stale image. The record write goes last, once this run's rows
        are saved, because its lifecycle event may abort or resume this very run."""
        rows = _Rows()
        self._apply(tx, rc, tr, tr.now, rows)  # every row but the record write
        rows.write(tx)
        tx.append_history(rc.run.id, tr.history)
        tx.save_run(rc.run, None, None)
        if rc.run.status == RunStatus.RUNNING:
            tx.notify()
        if tr.record_write is not None:
            write = self._write_record(tx, tr, tr.now)
            if write is not None:
                on_record_write(self.host, tx, "onUpdate", *write, tr.now)

    def _remember_saved(
        self, batch: list[Step], images: list[RunImage], accepted: set[str], wall: int
    ) -> None:
        for (rc, _), image in zip(batch, images, strict=True):
            if rc.run.id in accepted and (
                rc.saved != image or rc.lease_until - wall <= self.lease.length // 2
            ):
                rc.saved, rc.lease_until = image, self.lease.until(wall)  # as _save_runs wrote

    def _save_runs(
        self, tx: Tx, batch: list[Step], images: list[RunImage], accepted: set[str], wall: int
    ) -> int:
        """Write the accepted runs' rows if this worker still holds their leases; returns how
        many it did. A run that still runs keeps its lease; one that waits or ended releases it.
        A row whose only change is ``seq``, with its lease far from expiry, gets a narrow update
        (the heartbeat renews leases of runs held longer)."""
        full: list[tuple[RunRow, RunImage, int | None, str | None]] = []
        seq_only: list[RunRow] = []
        owner, half = self.lease.owner, self.lease.length // 2
        for (rc, _), image in zip(batch, images, strict=True):
            if rc.run.id not in accepted:
                continue
            if rc.run.status != RunStatus.RUNNING:
                full.append((rc.run, image, None, None))
            elif image == rc.saved and rc.lease_until - wall > half:
                seq_only.append(rc.run)
            else:
                full.append((rc.run, image, self.lease.until(wall), owner))
        return tx.save_held_runs(full, seq_only, owner, wall)

    def _apply(
        self, tx: Tx, rc: RunCtx | FlowCtx | IncidentCtx, tr: Transition, now: int, rows: _Rows
    ) -> None:
        run_id = rc.run.id
        if tr.lookbacks and isinstance(rc, FlowCtx) and resolve_lookbacks(tx, rc, tr):
            # The run row was saved as waiting; it runs on, still held by this worker.
            tx.save_runs([(rc.run, self.lease.until(system_now()), self.lease.owner)])
            tx.notify()
        for token in tr.tokens_insert:
            tx.insert_token(token)
            assert token.id is not None
            rc.tokens[token.id] = token
        rows.add(run_id, tr, now)
        for name, value in tr.vars_set.items():
            tx.set_var(run_id, name, self._cipher().encrypt(run_id, name, value))
        for name in tr.vars_clear:
            tx.clear_var(run_id, name)
        if tr.vars_sweep:
            tx.clear_vars(run_id)
        if tr.scope_ops and tr.scope_ops[-1][0] == "sweep":
            # The run ended: its rows go (every earlier op's with them) in the batch's one
            # statement for every run that ended in it.
            rows.scope_sweeps.append(run_id)
        elif tr.scope_ops:
            tx.apply_scope_ops(run_id, tr.scope_ops)
        for msg in tr.outbox:
            tx.add_outbox(msg.channel, msg.recipient, msg.subject, msg.body, run_id, msg.step, now)

    def _calls(self, tx: Tx, rows: _Rows, now: int) -> None:
        """Start the children the batch's call steps started (their parents' tokens parked on
        them in this commit), then cancel those whose calls timed out."""
        start_children(tx, rows.calls, now, lambda v: self.host.catalog.flow(v, tx)[1])
        faults.point("child_started")
        for child_id in rows.cancels:
            child = tx.run_for_update(child_id)
            if child is not None and child.status not in ENDED:
                cancel_run(tx, child, now, "its parent's call timed out")

    def _write_record(
        self, tx: Tx, tr: Transition, now: int
    ) -> tuple[Application, str, dict[str, Any], dict[str, Any]] | None:
        """Patch the step's changed fields onto the record as it is now; returns the
        lifecycle event to fire (app, entity, before, after), None if the record is gone."""
        write = tr.record_write
        assert write is not None
        current = tx.record(write.entity, write.id, lock=True)
        if current is None:
            return None  # deleted meanwhile; deleting it cancelled this run, nothing is lost
        changed = {k: v for k, v in write.after.items() if write.before.get(k) != v}
        merged = {**current.data, **changed}
        tx.update_record(write.entity, write.id, merged, now)
        app = self.host.catalog.application_of(write.entity, tx)
        return app, write.entity, current.data, merged


@dataclass
class _Rows:
    """Token and timer writes of a commit's transitions, gathered to be written a statement per
    kind for the whole batch (each run's tokens and timers are its own: the order between runs
    does not matter; within a run, old timers are dropped before new ones are armed)."""

    token_updates: list[TokenRow] = field(default_factory=list)
    token_deletes: list[int] = field(default_factory=list)
    timer_drops: list[int] = field(default_factory=list)
    timers: list[tuple[str, int, str, int]] = field(default_factory=list)
    waits: list[tuple[int, str, str, str, str, int]] = field(default_factory=list)
    scope_sweeps: list[str] = field(default_factory=list)  # runs whose loop rows all go
    calls: list[tuple[RunRow, ChildStart]] = field(default_factory=list)  # children to start
    cancels: list[str] = field(default_factory=list)  # children whose calls timed out

    def add(self, run_id: str, tr: Transition, now: int) -> None:
        # Called once per transition of every batch: the usual transition moves one token and
        # nothing else, so the empty lists are skipped rather than extended.
        if tr.tokens_delete:
            self.token_updates.extend(t for t in tr.tokens_update if t.id not in tr.tokens_delete)
            self.token_deletes.extend(tr.tokens_delete)
        else:
            self.token_updates.extend(tr.tokens_update)
        if tr.timers_drop:
            self.timer_drops.extend(tr.timers_drop)
        if tr.timers:
            self.timers.extend((run_id, t.id, kind, due) for t, kind, due in tr.timers if t.id)
        if tr.waits:
            self.waits.extend(
                (t.id, run_id, kind, type_, keys, now) for t, kind, type_, keys in tr.waits if t.id
            )
        if tr.calls:
            self.calls.extend((tr.run, child) for child in tr.calls)
        if tr.cancels:
            self.cancels.extend(tr.cancels)

    def write(self, tx: Tx) -> None:
        tx.update_tokens(self.token_updates)
        if self.token_deletes:
            tx.delete_tokens(self.token_deletes)
            tx.delete_waits_of_tokens(self.token_deletes)
        if self.waits:
            tx.insert_waits(self.waits)
        if self.timer_drops:
            tx.delete_timers_of_tokens(self.timer_drops)
        if self.timers:
            tx.insert_timers(self.timers)
            tx.notify()  # an idle worker may be sleeping until a later due time
        if self.scope_sweeps:
            tx.delete_scopes_of_runs(self.scope_sweeps)
