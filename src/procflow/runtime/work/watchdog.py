"""The work loop's watchdog (``runtime/work/loop.py``): the loop's own thread, watching the driver
thread that claims, advances and commits a batch.

While attempts run it looks every :data:`SLOW_SECONDS`: runs queued behind a slow attempt go to
the slot threads, and when the driver's own call overruns its deadline (or a graceful stop's),
a new driver thread takes the batch over, the hung one left with its call. The lane's lock
decides, once, which of the two threads goes on with the batch (``runtime/work/slots.py``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from procflow.runtime.work.slots import Lane

__all__ = ["IDLE_WATCH_SECONDS", "SLOW_SECONDS", "Batch", "DriverLoop", "Hijacked", "Watchdog"]

# An attempt running longer than this has the runs queued behind it moved to another slot.
SLOW_SECONDS = 0.02
# How often an idle watchdog looks whether its driver thread has finished (it is woken sooner).
IDLE_WATCH_SECONDS = 1.0

# A lane abandoned while its attempt overran: (the lane, its run, the runs not begun, the limit).
Overran = tuple[Lane[Any, Any], Any, list[Any], float]


class Batch(Protocol):
    """What the watchdog does with a driven batch (``work._Drive``)."""

    def spread_from(self, lane: Lane[Any, Any], moment: float) -> None: ...

    def stop_deadline_passed(self, moment: float) -> bool: ...

    def take_over(self, lane: Lane[Any, Any], ctx: Any, left: list[Any], limit: float) -> None: ...


class DriverLoop(Protocol):
    """What the watchdog asks of the work loop (``work.WorkLoop``)."""

    def adopt_driver_thread(self) -> None: ...

    def drive_loop(
        self,
        until_idle: bool,
        stop: threading.Event | None,
        watchdog: Watchdog | None = None,
        resume: Any = None,
    ) -> None: ...


class Hijacked(BaseException):
    """Ends a driver thread whose attempt overran: another driver has taken its batch over.
    A BaseException, so that nothing on the way up mistakes it for a failure."""


class Watchdog:
    """Watches the attempts a driver thread makes: runs queued behind a slow one go to the
    slots, and when one overruns its deadline (or a graceful stop's), the batch goes on on a
    new driver thread, the hung one left with its call. The loop's thread only waits here, so a
    batch is claimed, advanced and committed on one thread (and mostly one core)."""

    def __init__(self, loop: DriverLoop, until_idle: bool, stop: threading.Event | None) -> None:
        self.loop = loop
        self.until_idle = until_idle
        self.stop = stop
        self.inline: tuple[Batch, Lane[Any, Any]] | None = None
        self.lanes_started = 0  # inline lanes so far: while it grows, the watchdog polls
        self.awake = False
        self.changed = threading.Event()  # the driver started work, or finished
        self.finished = False
        self.error: BaseException | None = None

    def run(self) -> None:
        self._start_driver(None, None)
        seen = -1
        while not self.finished:
            if self.inline is None and self.lanes_started == seen:
                self._doze(seen)
                continue
            # Busy: look every SLOW_SECONDS rather than at each lane, which would cost the
            # driver a thread switch per round.
            seen = self.lanes_started
            if self.changed.wait(SLOW_SECONDS):
                self.changed.clear()
            self._check(time.monotonic())

    def _doze(self, seen: int) -> None:
        """No lane started since the last look: wait to be woken by the next one."""
        self.awake = False  # from here on, the next lane wakes this thread
        if self.inline is None and self.lanes_started == seen and not self.finished:
            self.changed.wait(IDLE_WATCH_SECONDS)
        self.changed.clear()
        self.awake = True

    def running(self, drive: Batch, lane: Lane[Any, Any] | None) -> None:
        """The driver runs ``lane`` now (None: it ran it to the end)."""
        if lane is None:
            self.inline = None
            return
        self.inline = (drive, lane)
        self.lanes_started += 1
        if not self.awake:
            self.changed.set()

    def _check(self, moment: float) -> None:
        entry = self.inline
        if entry is None:
            return
        drive, lane = entry
        if lane.finished.is_set():
            return
        taken = lane.abandon_if_overran(moment)
        if taken is not None:
            self._start_driver(drive, (lane, *taken))
            return
        drive.spread_from(lane, moment)
        if drive.stop_deadline_passed(moment) and lane.abandon_in_flight():
            self._start_driver(drive, None)  # it hands the batch back

    def _start_driver(self, drive: Batch | None, overran: Overran | None) -> None:
        self.inline = None
        thread = threading.Thread(
            target=self._drive, args=(drive, overran), name="procflow-driver", daemon=True
        )
        thread.start()

    def _drive(self, drive: Batch | None, overran: Overran | None) -> None:
        try:
            self.loop.adopt_driver_thread()
            if drive is not None and overran is not None:
                drive.take_over(*overran)
            self.loop.drive_loop(self.until_idle, self.stop, self, drive)
        except Hijacked:
            return  # this thread's attempt overran; the batch went on without it
        except BaseException as exc:  # the caller's, to raise on its own thread
            self.error = exc
        self.finished = True
        self.changed.set()
