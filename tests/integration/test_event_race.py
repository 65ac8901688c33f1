"""A wait_for's event racing its timeout, with several workers and senders at once.

N runs wait on `slack.approval`, each on its own message, with a short timeout. Then, all at
once: worker threads (an ``Engine`` each) loop ``work(until_idle=True)``, sender threads accept
an event for every key, and one more thread moves the virtual clock to exactly the timeout
instant (``set_clock``), which makes every timeout timer due while events are still arriving.
Whatever the interleaving, each run must end with exactly one winner: the event (history
`event.received`, binding `received`, one delivery row, named in the sender's report) or the
timeout (history `timer.fired`, binding `timeout`, no delivery). On PostgreSQL the threads really
run side by side; on SQLite (one writer at a time) the same test runs, serialised by the store.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from procflow.runtime.clock import iso
from procflow.runtime.engine import Engine

N = 30
ROUNDS = 5
WORKERS = 3
SENDERS = 3
TIMEOUT_S = 10
JOIN_S = 60

RACE = f"""\
flow: race
inputs:
  key: {{ type: string, required: true }}
steps:
  - approval:
      wait_for: slack.approval
      match: {{ message: "{{{{ key }}}}" }}
      timeout: {TIMEOUT_S}s
  - after: {{ set: {{ status: "{{{{ approval.status }}}}" }} }}
output: "{{{{ approval.status }}}}"
"""


@pytest.fixture
def engine(tmp_path: Path, db_url: str, db_env: dict[str, str]) -> Iterator[Engine]:
    flow = tmp_path / "race.flow.yaml"
    flow.write_text(RACE)
    eng = Engine.virtual(db_url, environ=dict(db_env))
    eng.deploy(str(flow))
    try:
        yield eng
    finally:
        eng.close()


class Crew:
    """Threads that each open their own engine; the first exception of any is kept."""

    def __init__(self, db_url: str, db_env: dict[str, str]) -> None:
        self.db_url = db_url
        self.db_env = db_env
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []

    def spawn(self, name: str, body: Callable[[Engine], None]) -> threading.Thread:
        def run() -> None:
            eng = Engine(self.db_url, environ=dict(self.db_env))
            try:
                body(eng)
            except BaseException as exc:  # reported by the test, not lost in the thread
                self.errors.append(exc)
            finally:
                eng.close()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread


def history_of(run: dict[str, Any], type_: str, step: str) -> list[dict[str, Any]]:
    return [h for h in run["history"] if h["type"] == type_ and h.get("step") == step]


class Round:
    """One round: N fresh waiting runs, then workers, senders and the clock all at once."""

    def __init__(self, engine: Engine, crew: Crew, number: int, rng: random.Random) -> None:
        self.engine = engine
        self.crew = crew
        self.keys = [f"r{number}-k{i}" for i in range(N)]
        self.run_of = {key: engine.start_flow("race", {"key": key}) for key in self.keys}
        engine.work()
        self.target = engine.now() + TIMEOUT_S * 1_000_000
        self.go = threading.Barrier(SENDERS + 1)  # the senders and the clock start together
        self.stop = threading.Event()
        self.reports: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        # The clock moves once `k` events are in: timers come due while events still arrive.
        self.k = rng.randint(N // 5, 4 * N // 5)
        self.kth_sent = threading.Event()
        self.shuffled = self.keys[:]
        rng.shuffle(self.shuffled)

    def work(self, eng: Engine) -> None:
        while not self.stop.is_set():
            if not eng.work(until_idle=True):
                time.sleep(0.002)

    def sender(self, mine: list[str]) -> Callable[[Engine], None]:
        def send(eng: Engine) -> None:
            self.go.wait(timeout=JOIN_S)
            try:
                for key in mine:
                    got = eng.send_event("slack.approval", {"message": key}, f"ev-{key}")
                    with self.lock:
                        self.reports[key] = got
                        if len(self.reports) >= self.k:
                            self.kth_sent.set()
            except BaseException:
                self.kth_sent.set()  # a sender that failed must not leave the clock waiting
                raise

        return send

    def move_clock(self, eng: Engine) -> None:
        self.go.wait(timeout=JOIN_S)
        assert self.kth_sent.wait(timeout=JOIN_S)
        eng.set_clock(self.target)

    def play(self) -> None:
        for w in range(WORKERS):
            self.crew.spawn(f"worker-{w}", self.work)
        senders = [
            self.crew.spawn(f"sender-{s}", self.sender(self.shuffled[s::SENDERS]))
            for s in range(SENDERS)
        ]
        clock = self.crew.spawn("clock", self.move_clock)
        for thread in [*senders, clock]:
            thread.join(timeout=JOIN_S)
            assert not thread.is_alive(), f"{thread.name} never finished"
        self.stop.set()
        for thread in self.crew.threads:
            thread.join(timeout=JOIN_S)
            assert not thread.is_alive(), f"{thread.name} never finished"
        assert self.crew.errors == [], self.crew.errors

    def check(self) -> tuple[int, int]:
        """Exactly one winner per run, everything consistent with it; (events, timeouts)."""
        engine = self.engine
        engine.work()
        assert engine.now() == self.target
        received = timed_out = 0
        for key, run_id in self.run_of.items():
            shown = engine.show(run_id)
            got_event = history_of(shown, "event.received", "approval")
            got_timeout = history_of(shown, "timer.fired", "approval")
            report = self.reports[key]
            context = (key, shown["history"], report)
            assert shown["status"] == "completed", context
            assert shown["error"] is None, context
            assert len(got_event) + len(got_timeout) == 1, context
            assert history_of(shown, "step.failed", "approval") == [], context
            deliveries = count(engine, "deliveries WHERE run_id=?", run_id)
            assert deliveries <= 1, context
            assert report["duplicate"] is False, context
            if got_event:
                received += 1
                assert got_event[0]["event_id"] == f"ev-{key}", context
                event = {"status": "received", "event": {"message": key}}
                assert shown["bindings"]["approval"] == event, context
                assert shown["output"] == "received", context
                assert report["resumed"] == [run_id], context
                assert deliveries == 1, context
            else:
                timed_out += 1
                assert got_timeout[0]["at"] == iso(self.target), context  # at its instant
                timeout = {"status": "timeout", "event": None}
                assert shown["bindings"]["approval"] == timeout, context
                assert shown["output"] == "timeout", context
                assert report["resumed"] == [], context
                assert deliveries == 0, context
        assert count(engine, "waits") == count(engine, "timers") == 0
        return received, timed_out


def count(engine: Engine, table_where: str, *args: Any) -> int:
    return int(
        engine.store.read().c.execute(f"SELECT count(*) FROM {table_where}", args).fetchone()[0]
    )


def test_event_and_timeout_race_has_exactly_one_winner_per_run(
    engine: Engine, db_url: str, db_env: dict[str, str]
) -> None:
    rng = random.Random(5)
    began = time.monotonic()
    outcomes: list[tuple[int, int]] = []
    for number in range(ROUNDS):
        round_ = Round(engine, Crew(db_url, db_env), number, rng)
        for run_id in round_.run_of.values():
            tokens = engine.show(run_id)["tokens"]
            assert [t["waiting_for"]["kind"] for t in tokens] == ["event"], tokens
        round_.play()
        outcomes.append(round_.check())
    print(f"race outcomes per round (event won, timeout won): {outcomes}")
    # The race was really run: across the rounds, both kinds of winner occurred.
    assert sum(r for r, _ in outcomes) > 0 and sum(t for _, t in outcomes) > 0, outcomes
    assert time.monotonic() - began < 40, outcomes
