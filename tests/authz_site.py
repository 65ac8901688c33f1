"""What the authorization tests of every face share: five users, one of each standing, a project
with something for every action to act on, and which role each action needs.

- Users (``TOKENS``): ``vic`` signed in with no role, ``cleo`` with the application role
  ``Clerk`` only, ``otto`` an operator, ``dee`` a deployer, ``ada`` an administrator.
- The project: the ``orders`` application (``Order`` records guarded by its ``permissions:``
  block and stamped by a process each creates, ``Note`` records named by no permission, a
  process started by hand for a note), the
  flows ``hold`` (waits a day: a run to cancel), ``boom`` (fails: a run to retry) and ``tick``
  (scheduled every hour: a schedule to trigger, pause, resume and backfill), and the ``crm``
  connector whose ``paid`` event ``hold`` waits for.
- ``NEEDS``: the lowest role each action of the role table needs; ``allowed(user, action)``.
"""

from __future__ import annotations

from pathlib import Path

from projects import paid_connector, write

from procflow.runtime.engine import Engine

USERS = {"vic": "", "cleo": "Clerk", "otto": "operator", "dee": "deployer", "ada": "admin"}
RANKS = {"": 0, "Clerk": 0, "operator": 1, "deployer": 2, "admin": 3}
TOKENS = ";".join(f"{user}-{'k' * 24}={user}:{role}" for user, role in USERS.items())


def token(user: str) -> str:
    return f"{user}-{'k' * 24}"


NEEDS = {
    "start": "operator",
    "send_event": "operator",
    "cancel": "operator",
    "retry": "operator",
    "deploy": "deployer",
    "enable": "deployer",
    "purge": "deployer",
    "trigger_schedule": "operator",
    "pause_schedule": "deployer",
    "resume_schedule": "deployer",
    "backfill_schedule": "deployer",
}


def allowed(user: str, action: str) -> bool:
    """Whether the role table lets ``user`` do ``action`` (a key of :data:`NEEDS`)."""
    return RANKS[USERS[user]] >= RANKS[NEEDS[action]]


def refusal(user: str, action: str, what: str) -> str:
    """The message refusing ``user`` the role-table ``action`` (``what``: its wording)."""
    role = USERS[user]
    having = f"[{user}] has [{role}]" if role else f"[{user}] has no role"
    return (
        f"user [{user}] may not {what}: that needs the role [{NEEDS[action]}] "
        f"(or one above it); {having}"
    )


APP = """\
name: orders
entities:
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
  - name: Note
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: text, type: string, required: true, length: 100 }
permissions:
  - { role: Clerk, can: [Order:read, Order:create] }
  - role: auditor
    can:
      - Order:read
processes:
  - name: Stamp
    trigger: { onCreate: Order }
    steps:
      - { name: stamp, kind: serviceTask, args: { setField: title, value: stamped, next: end } }
  - name: Remind
    steps:
      - { name: remind, kind: userTask, args: { assignee: personal } }
"""

HOLD = """\
flow: hold
steps:
  - paid:
      wait_for: crm.paid
      match: { invoice: 1 }
      timeout: 1d
"""

BOOM = """\
flow: boom
steps:
  - stop: { fail: "it fails" }
"""

TICK = """\
flow: tick
trigger:
  schedule: { every: 1h, overlap: allow }
steps:
  - hold: { wait: { for: 1d } }
"""

# A window of the past that holds five of tick's slots (the virtual clock starts at its end).
BACKFILL_WINDOW = ("2026-12-31T20:00:00Z", "2027-01-01T00:00:00Z")


def write_project(root: Path) -> Path:
    """The project folder: the application, the flows and the ``crm`` connector."""
    project = paid_connector(root / "project")
    write(project / "orders.intent", APP)
    write(project / "hold.flow.yaml", HOLD)
    write(project / "boom.flow.yaml", BOOM)
    write(project / "tick.flow.yaml", TICK)
    return project


def deploy_all(engine: Engine, project: Path) -> None:
    """Deploy the project as the administrator (no ``user``)."""
    for name in ("orders.intent", "hold.flow.yaml", "boom.flow.yaml", "tick.flow.yaml"):
        engine.deploy(str(project / name))


def waiting_run(engine: Engine) -> str:
    """A run of ``hold``, waiting: something to cancel."""
    run_id = engine.start_flow("hold", {})
    engine.work()
    return run_id


def failed_run(engine: Engine) -> str:
    """A run of ``boom``, failed: something to retry."""
    run_id = engine.start_flow("boom", {})
    engine.work()
    assert engine.show(run_id)["status"] == "failed"
    return run_id
