"""``procflow worker``: a process that advances runs until stopped (SIGTERM/SIGINT)."""

from __future__ import annotations

import gc
import logging
import signal
import threading
from types import FrameType

from procflow.model.validate import import_compilers
from procflow.runtime.engine import Engine
from procflow.runtime.schedules.slots import warm_calendars
from procflow.runtime.work.observe import Observer
from procflow.runtime.work.run_logs import with_run_logs

log = logging.getLogger("procflow.worker")


def tune_gc() -> None:
    """A worker process allocates many short-lived containers per step and keeps few: freeze
    what is loaded by now (modules, the engine) out of the collector's scans, and collect the
    young generation less often. The compilers are imported first: the engine imports them only
    when it compiles a stored version, inside the first batch, and left out of the freeze their
    objects made every full collection a tenth of the worker's CPU dearer."""
    import_compilers()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def warm_up(engine: Engine) -> None:
    """What a due slot would load on its first firing, loaded on start when the store has an
    armed schedule (before :func:`tune_gc`, so that it is frozen with the rest)."""
    if engine.store.read().next_schedule_due() is not None:
        warm_calendars()


def run_worker(
    db_url: str,
    project_dir: str | None,
    worker_id: str | None,
    *,
    until_idle: bool,
    concurrency: int = 1,
    slots: int | None = None,
    step_timeout: str | None = None,
    stop_timeout: str | None = None,
    observer: Observer | None = None,
) -> int:
    """Work with ``concurrency`` threads (each its own connection and worker id); ``observer``
    (metrics) is told of every attempt of every thread, and each is logged (``run_logs``)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Set from another thread: the handler runs on the main thread, which may be inside
        # ``stop.wait()`` holding the event's (non-reentrant) lock, and ``set()`` here would
        # wait for it forever. Finish the attempt in flight, hand the rest back, exit.
        threading.Thread(target=stop.set, name="procflow-stop", daemon=True).start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    totals: list[int] = []
    try:
        engines = [
            Engine(
                db_url,
                project_dir=project_dir,
                worker_id=_thread_id(worker_id, i) if concurrency > 1 else worker_id,
                slots=slots,
                step_timeout=step_timeout,
                stop_timeout=stop_timeout,
            )
            for i in range(concurrency)
        ]
        # One process, one set of counters (metrics) for all its loops; and the run logs.
        for e in engines:
            e.loop.advancer.observer = with_run_logs(observer, e.lease_owner)
        beats = [e.heartbeat(stop) for e in engines]
        warm_up(engines[0])
        tune_gc()
        for e in engines:
            log.info("worker started", extra={"worker": e.lease_owner})

        def loop(engine: Engine) -> None:
            totals.append(engine.work(until_idle=until_idle, stop=stop))

        threads = [threading.Thread(target=loop, args=(e,)) for e in engines[1:]]
        for t in threads:
            t.start()
        loop(engines[0])
        for t in threads:
            t.join()
        stop.set()
        for b in beats:
            b.join(timeout=1)
        for e in engines:
            e.close()
        log.info(
            "worker stopped after %d transitions", sum(totals),
            extra={"worker": engines[0].worker_id},
        )  # fmt: skip
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return sum(totals)


def _thread_id(worker_id: str | None, i: int) -> str:
    """``NAME/i`` for thread i of a ``--concurrency N`` worker (default NAME: host:pid)."""
    import os
    import socket

    return f"{worker_id or f'{socket.gethostname()}:{os.getpid()}'}/{i}"
