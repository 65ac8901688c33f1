"""The crash test for intent schedules: a worker killed with SIGKILL in the middle of a sweep's
batch notifies no record twice and leaves none out.

150 records match a sweep that notifies each: its slot takes two batches (100 records, then 50).
A real ``procflow worker --until-idle`` kills itself (``PROCFLOW_FAULTS``) after acting on the
120th record — the first batch committed, the second not — and a fresh worker finishes the slot.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from crash_stores import Db, jump_clock, kill_worker_at, procflow
from projects import write

from procflow.runtime.engine import Engine
from procflow.runtime.schedules.sweeps import ROWS_PER_BATCH

RECORDS = 150
APP = """\
name: sweepy
entities:
  - name: Ticket
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: contact, type: string }
schedules:
  - name: nag
    cron: "0 */5 * * * ?"
    entity: Ticket
    where: [ { field: contact, op: like, value: "%@x" } ]
    notify: { to: contact, subject: "ticket {id}" }
"""


def outbox(db: Db) -> Counter[str]:
    return Counter(str(to) for (to,) in db.query("SELECT recipient FROM outbox"))


def test_a_worker_killed_mid_sweep_notifies_each_record_once(
    tmp_path: Path, db_url: str, db_env: dict[str, str]
) -> None:
    assert ROWS_PER_BATCH < RECORDS < 2 * ROWS_PER_BATCH  # two batches, the kill in the second
    db = Db(db_url, db_env)
    engine = Engine.virtual(db_url, environ=db_env)
    try:
        engine.deploy(write(tmp_path / "app.intent", APP))
        for i in range(RECORDS):
            engine.create_record("Ticket", {"contact": f"t{i}@x"})
    finally:
        engine.close()
    jump_clock(db, 300)  # the slot at 00:05 is due, nothing has run it

    kill_worker_at(db, "after_sweep_action", ROWS_PER_BATCH + 20)
    assert sum(outbox(db).values()) == ROWS_PER_BATCH  # the first batch only

    recovery = procflow(db, "worker", "--until-idle")
    assert recovery.returncode == 0, recovery.stderr
    sent = outbox(db)
    assert set(sent) == {f"t{i}@x" for i in range(RECORDS)}
    assert set(sent.values()) == {1}
    shown = procflow(db, "schedules", "show", "sweepy/nag")
    assert "swept 2027-01-01T00:05:00Z: 150 matched: 150 done" in shown.stdout, shown.stdout
