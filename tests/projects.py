"""Small projects the tests write into a temporary folder: connectors that declare events, the
flows that wait for them or are started by them, and the pieces every small intent app shares.

One place for what many test files would otherwise each write again: a new feature's tests take
a builder from here (``from projects import crm_connector, deploy_text``; ``tests/`` is on the
import path through its conftest, as for ``store_dump``) and write only what is their own.
Each builder writes files and returns where; none deploys unless its name says so.
"""

from __future__ import annotations

from pathlib import Path

from procflow.runtime.engine import Engine

# --- files and folders -------------------------------------------------------------------------


def write(path: Path, text: str) -> str:
    """``text`` at ``path`` (its folders made as needed); the path as a string, for a command."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def flow_name(text: str) -> str:
    """The name of the flow ``text``, from its first line ``flow: NAME``."""
    return text.split("\n", 1)[0].removeprefix("flow: ").strip()


def write_flow(project: Path, text: str) -> str:
    """The flow ``text`` at ``project/NAME.flow.yaml``, NAME from its first line."""
    return write(project / f"{flow_name(text)}.flow.yaml", text)


def deploy_text(engine: Engine, project: Path, text: str) -> None:
    """Deploy the flow ``text`` (its first line ``flow: NAME``) from ``project/NAME.flow.yaml``."""
    engine.deploy(write_flow(project, text))


# --- connectors ----------------------------------------------------------------------------------

EVENTS_ONLY_CODE = '"""Events only: no actions."""\n'
PING_CODE = "def ping(ctx, text=None):\n    return {}\n"


def connector(project: Path, name: str, manifest: str, code: str = EVENTS_ONLY_CODE) -> Path:
    """``project/connectors/<name>`` with its ``manifest`` and its Python ``code``."""
    folder = project / "connectors" / name
    write(folder / "manifest.yaml", manifest)
    write(folder / "__init__.py", code)
    return folder


def events_project(root: Path, name: str, manifest: str) -> Path:
    """``root/project`` whose one connector, ``name``, only declares events (no actions): what
    the tests of accepting events start from."""
    project = root / "project"
    connector(project, name, manifest)
    return project


# A stand-in CRM: one action, and two events correlated on a dotted path and on a number
# (``1 == 1.0``).
CRM_MANIFEST = """\
connector: crm
description: A stand-in CRM whose events correlate on a nested path and on a number.
actions:
  ping:
    args:
      text: { type: string }
    result: {}
events:
  deal_won:
    payload:
      deal:   { type: object, required: true }
      amount: { type: number }
      name:   { type: string }
    correlate_on: [deal.id]
  paid:
    payload:
      invoice: { type: number, required: true }
      amount:  { type: number, required: true }
      paid_by: { type: string }
    correlate_on: [invoice]
"""


def crm_connector(project: Path) -> Path:
    """The ``crm`` connector (:data:`CRM_MANIFEST`, its ``ping`` doing nothing) in ``project``."""
    connector(project, "crm", CRM_MANIFEST, PING_CODE)
    return project


# A CRM with only the ``paid`` event: what the tests of refused input send to.
PAID_MANIFEST = """\
connector: crm
description: A stand-in CRM with one event.
actions:
  ping:
    args: {}
    result: {}
events:
  paid:
    payload:
      invoice: { type: number, required: true }
      note:    { type: string }
    correlate_on: [invoice]
"""


def paid_connector(project: Path) -> Path:
    """The one-event ``crm`` connector (:data:`PAID_MANIFEST`) in ``project``."""
    connector(project, "crm", PAID_MANIFEST, "def ping(ctx):\n    return {}\n")
    return project


# One event's flow: wait an hour for the invoice's payment (``extra``: any object, unused).
PAID_WAIT = """\
flow: paid-wait
inputs:
  invoice: { type: number, required: true }
  extra: { type: object }
steps:
  - paid:
      wait_for: crm.paid
      match: { invoice: "{{ invoice }}" }
      timeout: 1h
"""


# A help desk's decisions, events only, correlated on a string key.
DESK_MANIFEST = """\
connector: desk
description: Decisions from a help desk (events only).
events:
  decided:
    payload:
      key: { type: string, required: true }
      ok: { type: boolean }
    correlate_on: [key]
"""


# --- flows ---------------------------------------------------------------------------------------

# The seed's `approval` step, verbatim (flow-waiting-and-polling.txt): wait for the Slack click
# on the message the step `ask` posted.
SEED_APPROVAL = """\
  - approval:
      wait_for: slack.approval
      match: { message: "{{ ask.ts }}" }
      timeout: 24h
"""

# The start of the deal approval atop docs/reference/flow.md: post the question on Slack, then
# the seed's approval step; a test appends the steps after it and the output.
DEAL_APPROVAL_START = (
    """\
flow: deal-approval
inputs:
  deal: { type: object, required: true }
steps:
  - ask:
      slack.post: { channel: "#sales-ops", text: "Approve {{ deal.name }}?" }
      retry: { count: 3, every: 30s }
"""
    + SEED_APPROVAL
)

# Started by a won deal over 10,000 (a trigger with a condition), on the crm connector.
BIG_DEALS = """\
flow: big-deals
trigger: { event: crm.deal_won, as: won, when: "{{ won.amount > 10000 }}" }
inputs:
  won: { type: object, required: true }
steps:
  - note: { log.write: { message: "won {{ won.name }}" } }
output: "{{ won }}"
"""


# --- intent apps ---------------------------------------------------------------------------------

# An app with every kind of input to refuse: records with text, a decimal and a relation, a
# review form, a triggered process and one started by hand, and an entity no process runs for.
PROVISIONING_APP = """\
name: provisioning
entities:
  - name: Status
    function: Setting
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, required: true, length: 50 }
  - name: Customer
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: name, type: string, length: 50 }
  - name: Tenant
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 200 }
      - { name: amount, type: decimal }
      - { name: note, type: string, length: 50 }
      - { name: failureMessage, type: string, length: 500 }
    relations:
      - { name: Progress, kind: manyToOne, to: Status, function: EntityStatus, init: Requested }
      - { name: customer, kind: manyToOne, to: Customer }
  - name: Order
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, length: 50 }
forms:
  - { name: Review, forEntity: Tenant, fields: [amount, note], actions: [approve, reject] }
seeds:
  - name: statuses
    entity: Status
    rows: [ { id: 1, name: Requested }, { id: 2, name: Done }, { id: 3, name: Failed } ]
processes:
  - name: Provision
    trigger: { onCreate: Tenant }
    steps:
      - { name: review, kind: userTask, args: { assignee: manager, form: Review } }
      - { name: finish, kind: serviceTask, args: { setRelationField: Progress, value: Done } }
  - name: Archive
    steps:
      - name: tell
        kind: serviceTask
        args: { notify: { to: records@example.com, subject: archived, body: "an archive" } }
"""


# --- JSON nested deep --------------------------------------------------------------------------

# Past the limit (64: procflow.store.codec.MAX_JSON_DEPTH), and where a value once broke each
# face: a RecursionError in copying an input from 491 levels, in encoding event data from ~982,
# in Python's JSON parser from about 1,000; 5,000 is far past them all.
TOO_DEEP_LEVELS = (65, 491, 1_000, 5_000)


def nested_json(levels: int, leaf: str = '"leaf"') -> str:
    """JSON text of a value nested ``levels`` levels deep (objects and arrays in turn, the
    outermost an object), around the JSON text ``leaf``; written as text, as json.dumps would
    recurse once per level."""
    opens = "".join('{"d":' if i % 2 == 0 else "[" for i in range(levels))
    closes = "".join("}" if i % 2 == 0 else "]" for i in reversed(range(levels)))
    return opens + leaf + closes


def nested_value(levels: int, leaf: object = "leaf") -> object:
    """The value :func:`nested_json` writes, built without recursion."""
    value = leaf
    for i in reversed(range(levels)):
        value = {"d": value} if i % 2 == 0 else [value]
    return value


# --- scheduled flows -----------------------------------------------------------------------------

# Two named schedules of one flow (an hourly and a Berlin evening one), and a lone 15-minute one
# that skips a slot while its hour-long run is open: what the schedule faces' tests list, show,
# pause, trigger and backfill.
NIGHTLY = """\
flow: nightly
trigger:
  - schedule: { name: early, every: 1h }
  - schedule: { name: late, cron: "0 18 * * *", timezone: Europe/Berlin }
steps:
  - hold: { wait: { for: 90m } }
"""

TICK = """\
flow: tick
trigger:
  schedule: { every: 15m, overlap: skip }
steps:
  - hold: { wait: { for: 1h } }
"""


# --- flow control (tests/acceptance/test_cli_flow_control.py, tests/server/...) -----------------

QUEUED = """\
flow: queued
concurrency: { limit: 1 }
steps:
  - nap: { wait: { for: 1h } }
"""
"""A flow one run at a time: the second start queues."""

THROTTLED = """\
flow: post
steps:
  - tell: { log.write: { message: hi }, throttle: { limit: 1, per: 1m } }
"""
"""A flow whose step starts once a minute: the second run's attempt waits."""
