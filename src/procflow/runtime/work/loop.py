"""The work loop: claim a batch of runs with ready work, advance each by one step, commit the
outcomes together, and go on with those still ready; when nothing is due, wait.

A run that waits is released: it costs rows, never a process. Leases run on the wall clock (a
virtual clock never lets a lease expire); a heartbeat renews them while attempts run. No run can
stop the loop: an attempt that raises is that run's incident, an attempt whose call overruns its
deadline is abandoned to its thread and fails as a timeout, and the other runs go on.

Threads: a *driver* claims a batch, makes its attempts and commits them, all on one thread (a
batch handed between threads every round costs CPU in cache misses); the caller's thread is its
:class:`Watchdog` (``runtime/work/watchdog.py``). Runs queued behind a slow attempt go to the slot
threads (``runtime/work/slots.py``). When the driver's own call hangs, a new driver takes the batch
over.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from procflow.errors import StoreConflict
from procflow.runtime import faults
from procflow.runtime.clock import system_now
from procflow.runtime.runs.host import RunHost
from procflow.runtime.schedules.firing import fire_due
from procflow.runtime.transition import Transition
from procflow.runtime.work.advancing import Advancer, Ctx, Failed, Outcome
from procflow.runtime.work.commit import Committer, Step
from procflow.runtime.work.slots import Lane, Slots
from procflow.runtime.work.timers import fire_due_timers
from procflow.runtime.work.watchdog import SLOW_SECONDS, Hijacked, Watchdog
from procflow.states import RunStatus
from procflow.store.rows import RunRow, TokenRow
from procflow.store.store import Store, Tx

__all__ = ["WorkLoop"]

log = logging.getLogger("procflow.worker")

# How long the loop waits for more outcomes once the first of a round is in, so that a round's
# commits stay grouped while a slow attempt does not hold back the others' commits.
LINGER_SECONDS = 0.05
# A worker woken while work streams in (its last claim, within BUSY_SECONDS, found several
# runs) waits before it claims, so that one claim and one commit take the runs that became
# ready meanwhile: a batch of one costs a dozen statements, a batch of thirty a third of one a
# run (docs/postgresql.md, "Wake-ups"). It waits GATHER_PER_RUN_SECONDS for each run its last
# claim found, up to GATHER_MAX_SECONDS: a trickle of a few runs is hardly delayed, a stream
# soon gathers for the longest. A worker woken on a quiet system claims at once (PostgreSQL's
# commit_delay and commit_siblings make the same trade for its WAL flushes). BUSY_SECONDS is
# twice the longest gather: a claim after a gather still counts as streaming.
GATHER_PER_RUN_SECONDS = 0.01
GATHER_MAX_SECONDS = 0.15
BUSY_SECONDS = 0.3
# Back-off after an infrastructure error (the store unreachable): doubling up to the maximum.
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0


SLOTS_PER_LOOK = 100_000  # due schedule slots fired before the loop claims runs again


def gather_seconds(claimed: int) -> float:
    """How long a worker woken while work streams in waits before it claims, its last claim
    having found ``claimed`` runs."""
    return min(GATHER_MAX_SECONDS, GATHER_PER_RUN_SECONDS * claimed)


class WorkLoop:
    """One worker thread's loop over one store connection, advancing runs on its slots."""

    def __init__(
        self,
        host: RunHost,
        committer: Committer,
        *,
        url: str,
        batch: int,
        load_vars: Callable[[str], dict[str, Any]],
        is_virtual: Callable[[], bool],
        slots: int = 4,
        step_timeout: float = 300.0,
        stop_timeout: float = 30.0,
    ) -> None:
        self.host = host
        self.store = host.store
        self.committer = committer
        self.lease = committer.lease
        self.batch = batch
        self.stop_timeout = stop_timeout
        self.advancer = Advancer(
            host, url, load_vars=load_vars, step_timeout=step_timeout, owner=self.lease.owner
        )
        # An in-memory store has one connection only: its attempts run on the loop's thread.
        self.slots = None if self.store.location.in_memory else Slots(slots)
        self.is_virtual = is_virtual
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        self.transitions = 0  # committed by this loop, whichever driver thread committed them
        self.claim_was_full = False  # the last claim took a full batch: there may be more
        self.streaming_at = -BUSY_SECONDS  # monotonic time a claim last found several runs
        self.streamed = 0  # how many runs that claim found

    def adopt_driver_thread(self) -> None:
        """The calling thread drives this loop from now on (see ``Advancer.adopt_thread``)."""
        self.advancer.adopt_thread()

    def close(self) -> None:
        if self.slots is not None:
            self.slots.close()
        self.advancer.close()

    def work(self, until_idle: bool = True, stop: threading.Event | None = None) -> int:
        """Advance runs; returns the number of transitions committed.

        ``until_idle``: return once nothing is due now. Otherwise wait for the next due time or
        a wake-up, and go on until ``stop`` is set. An infrastructure error (the store does not
        answer) hands the runs back and backs off; it never ends the loop unless ``until_idle``.
        The loop runs on a driver thread this thread watches (:class:`Watchdog`); an in-memory
        store has one connection only, and its loop runs here, unwatched.
        """
        before = self.transitions
        if self.slots is None:
            self.drive_loop(until_idle, stop)
        else:
            Watchdog(self, until_idle, stop).run()
        return self.transitions - before

    def drive_loop(
        self,
        until_idle: bool,
        stop: threading.Event | None,
        watchdog: Watchdog | None = None,
        resume: _Drive | None = None,
    ) -> None:
        """The loop itself, on the driver thread: batch after batch (the first one ``resume``,
        a batch taken over from a driver whose attempt hung)."""
        backoff = BACKOFF_FIRST
        while resume is not None or stop is None or not stop.is_set():
            try:
                if resume is not None:  # even once stopped: it hands its runs back
                    drive, resume = resume, None
                    done = drive.resume()
                else:
                    done = self.work_batch(stop, watchdog)
            except Exception as exc:
                if until_idle or not self.store.unavailable(exc):
                    raise
                log.error(
                    "store error, retrying in %.1fs: %s", backoff, exc,
                    extra={"worker": self.lease.owner},
                )  # fmt: skip
                _sleep(stop, backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            backoff = BACKOFF_FIRST
            if done and (until_idle or self.claim_was_full or not self.store.notifies):
                continue
            if until_idle:
                return
            # Nothing more was claimable when this batch was claimed, and whatever has become
            # ready since sent a wake-up (starts, events, retries, hand-backs, timers armed):
            # waiting for it saves a claim that would find nothing (5 round trips).
            self.idle(stop)

    def idle(self, stop: threading.Event | None) -> None:
        """Wait until the next due time, the earliest lease expiry (a dead worker's runs are
        taken over then), a wake-up from another process, or the fallback interval."""
        wait = self.store.idle_poll_seconds  # the longest an idle worker sleeps before looking
        due, expiry = self.store.read().next_wake_times()
        if due is not None and not self.is_virtual():
            wait = min(wait, max(0.0, (due - system_now()) / 1_000_000))
        if expiry is not None:
            wait = min(wait, max(0.0, (expiry - system_now()) / 1_000_000 + 0.01))
        woken = self.store.wait_for_wakeup(wait, stop)
        if woken and time.monotonic() - self.streaming_at < BUSY_SECONDS:
            _sleep(stop, gather_seconds(self.streamed))

    def work_batch(
        self, stop: threading.Event | None = None, watchdog: Watchdog | None = None
    ) -> int:
        """Claim a batch and run it until every run in it waits or ends; returns transitions
        (and timers fired). With a ``watchdog``, attempts run on this thread while it watches;
        without one, on the slots."""
        now = self.host.now()
        wall = system_now()
        fired, claimed, tokens, records = self._claim(now, wall)
        # Were there more claimable runs (or due timers) than one batch takes?
        self.claim_was_full = len(claimed) >= self.batch or fired >= self.batch
        if not claimed:
            return fired
        if len(claimed) > 1:
            self.streaming_at, self.streamed = time.monotonic(), len(claimed)
        log.debug("claimed %d runs", len(claimed), extra={"worker": self.lease.owner})
        faults.point("after_claim")  # leases taken, nothing run: they must expire elsewhere
        held = [r.id for r in claimed]
        with self._held_lock:
            self._held.update(held)
        drive = _Drive(self, now, stop, held, watchdog)
        try:
            started = self.advancer.contexts(claimed, tokens, records, self.lease.until(wall), now)
        except BaseException:
            drive.release_held()
            raise
        return fired + drive.run(started)

    def _claim(
        self, now: int, wall: int
    ) -> tuple[int, list[RunRow], list[TokenRow], dict[tuple[str, int], dict[str, Any]]]:
        """Fire due timers, then lease up to a batch of runs with ready work: (timers fired,
        the runs, their tokens, their trigger records)."""
        until, reader = self.lease.until(wall), self.store.read()
        due = reader.next_due()  # timers and schedule slots: one probe of each index
        if due is None or due > now:
            # Nothing to fire: the claim is one statement, atomic on its own, and needs no
            # transaction around it (BEGIN and COMMIT are two round trips on PostgreSQL).
            claimed = reader.claim_runs(self.lease.owner, wall, until, self.batch)
            if not claimed:
                return 0, [], [], {}
            tokens = reader.tokens_of_runs([r.id for r in claimed])
            return 0, claimed, tokens, _records_of(reader, claimed)
        slots = self.fire_schedules(now)  # in transactions of their own, before the timers
        with self.store.tx() as tx:
            fired = slots + fire_due_timers(self.host, tx, now, wall, self.batch)
            claimed = tx.claim_runs(self.lease.owner, wall, until, self.batch)
            tokens = tx.tokens_of_runs([r.id for r in claimed])
            return fired, claimed, tokens, _records_of(tx, claimed)

    def fire_schedules(self, now: int) -> int:
        """Fire the schedule slots due by ``now`` (a group to a transaction) and tell the
        observer; returns how many slots fired (each is work done, whatever it started)."""
        # Every due slot before any run: a slot fired late is a run started late, while the
        # runs already started only wait for the slots' few transactions.
        try:
            fired = fire_due(self.host, now, SLOTS_PER_LOOK)
        except StoreConflict:  # a run committing ended a schedule's run meanwhile: look again
            log.info("firing schedule slots met a concurrent transaction; trying again")
            return 0
        observer = self.advancer.observer
        for row, outcome in fired:
            observer.slots_fired(row.flow, row.name, outcome)
        return len(fired)

    def commit(self, batch: list[Step], now: int) -> list[Step] | None:
        """Commit ``batch``; returns the steps committed (None: the store rolled the batch back
        to break a deadlock, and its runs were handed back). A transition the store refuses —
        the data, not the store failing — fails only its own run: the batch is committed again
        one run at a time, and that run gets an incident."""
        try:
            accepted = self.committer.commit_batch(batch, now)
        except StoreConflict as exc:
            # A deadlock with a concurrent record write or event: nothing committed. Hand the
            # runs back; whoever claims them repeats the attempts (at least once, as after a
            # crash).
            log.warning(
                "commit conflicted, %d runs handed back: %s", len(batch), exc,
                extra={"worker": self.lease.owner},
            )  # fmt: skip
            self.hand_back([ctx.run.id for ctx, _ in batch])
            return None
        except Exception as exc:
            if self.store.unavailable(exc):
                raise
            log.error(
                "a batch commit failed (%s); committing its runs one by one", exc,
                extra={"worker": self.lease.owner},
            )  # fmt: skip
            return self._commit_each(batch, now)
        if len(accepted) == len(batch):  # the usual case: every lease still held
            return batch
        for ctx, _ in batch:
            if ctx.run.id not in accepted:
                log.warning(
                    "lease lost; the run's step was not committed by this worker",
                    extra={
                        "run_id": ctx.run.id,
                        "definition": ctx.run.name,
                        "worker": self.lease.owner,
                    },
                )
        return [(ctx, tr) for ctx, tr in batch if ctx.run.id in accepted]

    def _commit_each(self, batch: list[Step], now: int) -> list[Step]:
        done: list[Step] = []
        for step in batch:
            try:
                committed = self.committer.commit_batch([step], now)
            except StoreConflict:
                self.hand_back([step[0].run.id])
                continue
            except Exception as exc:
                if self.store.unavailable(exc):
                    raise
                touched = next((t.id for t in step[1].tokens_update), None)
                step = self.advancer.settle(step[0], Failed(exc, touched), now)
                committed = self.committer.commit_batch([step], now)
            if step[0].run.id in committed:
                done.append(step)
        return done

    def hand_back(self, run_ids: list[str]) -> None:
        """Release leases now so another worker need not wait for them to expire."""
        if run_ids:
            with self.store.tx() as tx:
                tx.release_leases(self.lease.owner, run_ids)
                tx.notify()  # they are ready: whoever is idle, this worker included, claims them

    def heartbeat(self, stop: threading.Event, url: str) -> threading.Thread:
        """Renew the leases of runs this worker holds while attempts run."""
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

    def release(self, run_ids: list[str]) -> None:
        """The loop is done with ``run_ids`` (their batch is over, or an attempt abandoned):
        renew their leases no more."""
        with self._held_lock:
            self._held.difference_update(run_ids)


class _Drive:
    """One claimed batch, advanced until every run in it waits, ends, or is handed back.

    Its state lives here rather than on a thread's stack, so that a new driver thread can take
    it over from one whose attempt hung (:meth:`take_over`, :meth:`resume`)."""

    def __init__(
        self,
        loop: WorkLoop,
        now: int,
        stop: threading.Event | None,
        held: list[str],
        watchdog: Watchdog | None,
    ) -> None:
        self.loop = loop
        self.now = now
        self.virtual = loop.is_virtual()
        self.stop = stop
        self.held = held  # the runs claimed: their leases are renewed until the batch is over
        self.watchdog = watchdog
        self.stop_by: float | None = None  # when a graceful stop stops waiting for attempts
        self.lanes: list[Lane[Ctx, Outcome]] = []
        self.lanes_lock = threading.RLock()  # the watchdog adds lanes while the driver runs one
        self.outcomes: list[tuple[Ctx, Outcome]] = []  # in, not yet committed
        self.replayed: list[tuple[Ctx, Outcome]] = []
        self.count = 0

    def run(self, started: list[tuple[Ctx, Outcome | None]]) -> int:
        self.outcomes = [(ctx, outcome) for ctx, outcome in started if outcome is not None]
        return self._rounds([ctx for ctx, outcome in started if outcome is None])

    def resume(self) -> int:
        """Go on with the batch on this (new) driver thread."""
        return self._rounds([])

    def _rounds(self, ready: list[Ctx]) -> int:
        try:
            while True:
                step_now = self._step_now()
                if self._stop_requested():  # attempts in flight may finish; none starts
                    self.loop.hand_back([ctx.run.id for ctx in ready])
                elif ready:
                    self._dispatch(ready, step_now, inline=self.watchdog is not None)
                if not self.lanes and not self.outcomes and not self.replayed:
                    break
                outcomes, self.outcomes = self.outcomes + self._collect(step_now), []
                ready = self._commit(outcomes, step_now)
                if self.stop_by is not None and time.monotonic() >= self.stop_by:
                    self._hand_back_all(ready)
                    break
        except Hijacked:
            raise  # the batch is another driver's now: it releases the runs
        except BaseException:
            self.release_held()
            raise
        self.release_held()
        return self.count

    def release_held(self) -> None:
        self.loop.release(self.held)

    def _step_now(self) -> int:
        """The engine time a step is made at: the batch's on a virtual clock, else now."""
        return self.now if self.virtual else system_now()

    def _stop_requested(self) -> bool:
        if self.stop is None or not self.stop.is_set():
            return False
        if self.stop_by is None:
            self.stop_by = time.monotonic() + self.loop.stop_timeout
        return True

    def stop_deadline_passed(self, moment: float) -> bool:
        return self._stop_requested() and self.stop_by is not None and moment >= self.stop_by

    def _dispatch(self, ready: list[Ctx], now: int, inline: bool = False) -> None:
        """One lane for ``ready``: attempts are mostly CPU work, which threads do not speed up,
        so one lane takes them all while they are quick — on this thread under the watchdog
        (``inline``), else on a slot; a slow attempt has the rest of its lane moved to another
        slot (:meth:`spread_from`)."""
        advancer = self.loop.advancer
        lane: Lane[Ctx, Outcome] = Lane(
            deque(ready), advancer.attempt_for_batch(now), advancer.step_timeout
        )
        with self.lanes_lock:
            self.lanes.append(lane)
        if self.loop.slots is None:
            lane.run()  # in memory: on this thread
        elif inline and self.watchdog is not None:
            self.watchdog.running(self, lane)
            lane.run()
            if lane.abandoned:  # overran, or a graceful stop ran out: the batch went on
                raise Hijacked
            self.watchdog.running(self, None)
        else:
            self.loop.slots.start(lane)

    def spread_from(self, lane: Lane[Ctx, Outcome], moment: float) -> None:
        """Runs waiting in ``lane`` behind a slow attempt go to another slot (under the lanes'
        lock: the driver must never see the lane finished without the one they went to)."""
        with self.lanes_lock:
            behind = lane.take_unbegun(SLOW_SECONDS, moment)
            if behind:
                self._dispatch(behind, self._step_now())

    def _collect(self, now: int) -> list[tuple[Ctx, Outcome]]:
        """Outcomes that are in: wait for every lane, or a little longer once the first is in,
        or until an attempt overruns its deadline (it is then replayed without its call)."""
        first_in: float | None = None
        while self.lanes and not all(lane.finished.is_set() for lane in self._lanes()):
            moment = time.monotonic()
            if self._abandon_overruns(moment, now):
                break
            for lane in self._lanes():
                self.spread_from(lane, moment)
            if first_in is None and any(lane.done for lane in self._lanes()):
                first_in = moment
            if first_in is not None and moment - first_in >= LINGER_SECONDS:
                break
            if self._stop_requested() and self.stop_by is not None and moment >= self.stop_by:
                break
            waiting = next((ln for ln in self._lanes() if not ln.finished.is_set()), None)
            if waiting is None:  # the last one finished since the loop's check
                break
            waiting.finished.wait(0.01 if first_in is not None else SLOW_SECONDS)
        out, self.replayed = self.replayed, []
        with self.lanes_lock:
            for lane in self.lanes:
                out.extend(lane.results())
            self.lanes = [lane for lane in self.lanes if not lane.finished.is_set()]
        return out

    def _lanes(self) -> list[Lane[Ctx, Outcome]]:
        with self.lanes_lock:
            return list(self.lanes)

    def _abandon_overruns(self, moment: float, now: int) -> bool:
        """Give up on attempts past their deadline; True when one was."""
        abandoned = False
        for lane in self._lanes():
            taken = lane.abandon_if_overran(moment)
            if taken is None:
                continue
            abandoned = True
            if self.loop.slots is not None:
                self.loop.slots.replace()
            self.take_over(lane, *taken)
        return abandoned

    def take_over(self, lane: Lane[Ctx, Outcome], ctx: Ctx, left: list[Ctx], limit: float) -> None:
        """``lane`` was abandoned while ``ctx``'s attempt overran ``limit``: keep what it
        finished, replay that attempt as a timeout, and give the runs it had not begun to a slot."""
        with self.lanes_lock:
            self.lanes.remove(lane)
        self.replayed.extend(lane.results())  # what the lane finished before it hung
        self.loop.release([ctx.run.id])
        now = self._step_now()
        self.replayed.append(self.loop.advancer.replay(ctx, now, limit))
        if left:
            self._dispatch(left, now)

    def _commit(self, outcomes: list[tuple[Ctx, Outcome]], now: int) -> list[Ctx]:
        if not outcomes:
            return []
        advancer = self.loop.advancer
        settle = advancer.settle
        batch: list[Step] = [
            (ctx, outcome) if type(outcome) is Transition else settle(ctx, outcome, now)
            for ctx, outcome in outcomes
        ]
        committed = self.loop.commit(batch, now)
        if committed is None:  # rolled back and handed back: this batch is over
            self._hand_back_all([])
            return []
        self.count += len(committed)
        self.loop.transitions += len(committed)
        advancer.observer.committed(committed)  # metrics: runs that finished
        return [ctx for ctx, _ in committed if ctx.run.status == RunStatus.RUNNING]

    def _hand_back_all(self, ready: list[Ctx]) -> None:
        """Every run this batch still holds: at the end of a graceful stop, or after a
        rolled-back commit. An attempt still running is abandoned; its outcome is dropped."""
        ids = [ctx.run.id for ctx in ready]
        with self.lanes_lock:
            lanes, self.lanes = self.lanes, []
        for lane in lanes:
            with lane.lock:
                lane.abandoned = True
                ids.extend(ctx.run.id for ctx, _ in lane.done)
                ids.extend(ctx.run.id for ctx in lane.todo)
                lane.todo.clear()
                if lane.current is not None:
                    ids.append(lane.current.run.id)
        self.loop.hand_back(list(dict.fromkeys(ids)))


def _sleep(stop: threading.Event | None, seconds: float) -> None:
    if stop is not None:
        stop.wait(seconds)
    else:
        time.sleep(seconds)


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
