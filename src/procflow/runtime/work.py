"""The work loop: claim a batch of runs with ready work, advance each by one step, commit the
batch's transitions together, and repeat for those still ready; when nothing is due, wait.

A run that waits is released: it costs rows, never a process. Leases run on the wall clock (a
virtual clock never lets a lease expire); a heartbeat renews them while long attempts run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from procflow.errors import StoreConflict
from procflow.model.ir import Application
from procflow.runtime import faults
from procflow.runtime.clock import system_now
from procflow.runtime.commit import Committer, Step
from procflow.runtime.flow import FlowCtx, advance_flow
from procflow.runtime.host import RunHost
from procflow.runtime.intent import RunCtx, advance
from procflow.runtime.timers import fire_due_timers
from procflow.states import RunStatus, TokenState
from procflow.store.rows import RunRow, TokenRow
from procflow.store.store import Store, Tx, run_image

__all__ = ["WorkLoop"]

log = logging.getLogger("procflow.worker")


class WorkLoop:
    """One worker thread's loop over one store connection."""

    def __init__(
        self,
        host: RunHost,
        committer: Committer,
        *,
        batch: int,
        load_vars: Callable[[str], dict[str, Any]],
        is_virtual: Callable[[], bool],
    ) -> None:
        self.host = host
        self.store = host.store
        self.committer = committer
        self.lease = committer.lease
        self.batch = batch
        self._load_vars = load_vars
        self._is_virtual = is_virtual
        self._held: set[str] = set()
        self._held_lock = threading.Lock()

    def work(self, until_idle: bool = True, stop: threading.Event | None = None) -> int:
        """Advance runs; returns the number of transitions committed.

        ``until_idle``: return once nothing is due now. Otherwise wait for the next due time or
        a wake-up, and go on until ``stop`` is set.
        """
        total = 0
        while stop is None or not stop.is_set():
            done = self.work_batch(stop)
            total += done
            if done:
                continue
            if until_idle:
                return total
            self.idle(stop)
        return total

    def idle(self, stop: threading.Event | None) -> None:
        """Wait until the next due time, the earliest lease expiry (a dead worker's runs are
        taken over then), a wake-up from another process, or the fallback interval."""
        reader = self.store.read()
        wait = self.store.idle_poll_seconds  # the longest an idle worker sleeps before looking
        due = reader.next_due()
        if due is not None and not self._is_virtual():
            wait = min(wait, max(0.0, (due - system_now()) / 1_000_000))
        expiry = reader.next_lease_expiry()
        if expiry is not None:
            wait = min(wait, max(0.0, (expiry - system_now()) / 1_000_000 + 0.01))
        self.store.wait_for_wakeup(wait, stop)

    def work_batch(self, stop: threading.Event | None = None) -> int:
        """Claim a batch and run it until every run in it waits or ends; returns transitions."""
        virtual = self._is_virtual()
        now = self.host.now()
        wall = system_now()
        with self.store.tx() as tx:
            fired = fire_due_timers(self.host, tx, now, wall, self.batch)
            claimed = tx.claim_runs(self.lease.owner, wall, self.lease.until(wall), self.batch)
            tokens = tx.tokens_of_runs([r.id for r in claimed])
            records = _records_of(tx, claimed)
        if not claimed:
            return fired
        log.debug("claimed %d runs", len(claimed), extra={"worker": self.lease.owner})
        faults.point("after_claim")  # leases taken, nothing run: they must expire elsewhere
        with self._held_lock:
            self._held.update(r.id for r in claimed)
        try:
            active = self._contexts(claimed, tokens, records, wall)
            return fired + self._run(active, now, virtual, stop)
        finally:
            with self._held_lock:
                self._held.difference_update(r.id for r in claimed)

    def _run(
        self, active: list[RunCtx | FlowCtx], now: int, virtual: bool, stop: threading.Event | None
    ) -> int:
        count = 0
        while active:
            if stop is not None and stop.is_set():
                self.hand_back([rc.run.id for rc in active])
                break
            step_now = now if virtual else system_now()
            batch = [(rc, _advance(rc, token, step_now)) for rc, token in _ready(active)]
            try:
                accepted = self.committer.commit_batch(batch, step_now)
            except StoreConflict as exc:
                # A deadlock with a concurrent record write or event: nothing committed. Hand
                # the runs back; whoever claims them repeats the attempts (at least once, as
                # after a crash).
                log.warning("commit conflicted, %d runs handed back: %s", len(active), exc)
                self.hand_back([rc.run.id for rc in active])
                break
            self._log_lost(batch, accepted)
            count += len(accepted)
            active = [
                rc
                for rc, _ in batch
                if rc.run.id in accepted and rc.run.status == RunStatus.RUNNING
            ]
        return count

    def _log_lost(self, batch: list[Step], accepted: set[str]) -> None:
        for rc, _ in batch:
            if rc.run.id not in accepted:
                log.warning(
                    "lease lost; the run's step was not committed by this worker",
                    extra={"run_id": rc.run.id, "worker": self.lease.owner},
                )

    def _contexts(
        self,
        claimed: list[RunRow],
        tokens: list[TokenRow],
        records: dict[tuple[str, int], dict[str, Any]],
        wall: int,
    ) -> list[RunCtx | FlowCtx]:
        by_run: dict[str, dict[int, TokenRow]] = {r.id: {} for r in claimed}
        for t in tokens:
            assert t.id is not None
            by_run[t.run_id][t.id] = t
        active = [self._run_ctx(run, by_run[run.id], records) for run in claimed]
        for rc in active:
            rc.saved, rc.lease_until = run_image(rc.run), self.lease.until(wall)
        return active

    def _run_ctx(
        self, run: RunRow, tokens: dict[int, TokenRow], records: dict[tuple[str, int], Any]
    ) -> RunCtx | FlowCtx:
        catalog = self.host.catalog
        if run.dialect == "flow":
            compiled, flow = catalog.flow(run.version_id)
            assert compiled.index is not None
            return FlowCtx(
                run=run, tokens=tokens, flow=flow, index=compiled.index,
                project_dir=compiled.project_dir, environ=self.host.environ,
                load_scopes=lambda path: self.store.read().scopes(run.id, path),
            )  # fmt: skip
        compiled, process = catalog.process(run.version_id, run.name)
        app = compiled.definition
        assert isinstance(app, Application)
        record = None
        if run.record_entity is not None and run.record_id is not None:
            snapshot = run.state.get("snapshot")
            row = records.get((run.record_entity, run.record_id))
            record = snapshot if snapshot is not None else row
        return RunCtx(
            run=run, tokens=tokens, app=app, process=process, project_dir=compiled.project_dir,
            record=record,
            load_vars=lambda: self._load_vars(run.id), load_related=self._load_related,
            environ=self.host.environ,
        )  # fmt: skip

    def _load_related(self, entity: str, id_: int) -> dict[str, Any] | None:
        row = self.store.read().record(entity, id_)
        return None if row is None else row.data

    def hand_back(self, run_ids: list[str]) -> None:
        """Release leases now so another worker need not wait for them to expire."""
        with self.store.tx() as tx:
            tx.release_leases(self.lease.owner, run_ids)

    def heartbeat(self, stop: threading.Event, url: str) -> threading.Thread:
        """Renew the leases of runs this worker holds while long attempts run."""
        thread = threading.Thread(
            target=self._beat, args=(stop, url), name="procflow-heartbeat", daemon=True
        )
        thread.start()
        return thread

    def _beat(self, stop: threading.Event, url: str) -> None:
        store: Store | None = None
        try:
            while not stop.wait(self.lease.length / 3_000_000):
                with self._held_lock:
                    held = list(self._held)
                if not held:
                    continue
                try:
                    store = store or Store(url)
                    with store.tx() as tx:
                        tx.renew_leases(self.lease.owner, held, self.lease.until(system_now()))
                except Exception as exc:  # a missed beat is made up by the next: keep beating
                    log.warning(
                        "heartbeat failed to renew %d leases: %s", len(held), exc,
                        extra={"worker": self.lease.owner},
                    )  # fmt: skip
                    if store is not None:
                        with contextlib.suppress(Exception):
                            store.close()
                    store = None
        finally:
            if store is not None:
                store.close()


def _ready(active: list[RunCtx | FlowCtx]) -> list[tuple[RunCtx | FlowCtx, TokenRow]]:
    out = []
    for rc in active:
        token = next((t for t in rc.tokens.values() if t.state == TokenState.READY), None)
        if token is not None:
            out.append((rc, token))
    return out


def _advance(rc: RunCtx | FlowCtx, token: TokenRow, now: int) -> Any:
    if isinstance(rc, FlowCtx):
        return advance_flow(rc, token, now)
    return advance(rc, token, now)


def _records_of(tx: Tx, runs: list[RunRow]) -> dict[tuple[str, int], dict[str, Any]]:
    """The trigger records of ``runs`` (those not run on a snapshot), one query per entity."""
    wanted: dict[str, list[int]] = {}
    for run in runs:
        entity, id_ = run.record_entity, run.record_id
        if entity is not None and id_ is not None and run.state.get("snapshot") is None:
            wanted.setdefault(entity, []).append(id_)
    return {
        (entity, id_): row.data
        for entity, ids in wanted.items()
        for id_, row in tx.records_by_id(entity, ids).items()
    }
