"""Intent schedules: the ``schedules:`` block's rules and messages (``where`` with its moments,
each action, the calendar keys), and the IR it compiles into (``Application.schedules``).

Each case lists the exact set of diagnostics the file must produce (every expected substring
matches a line; every line is expected).
"""

# ruff: noqa: E501 -- the case tables quote whole messages; unbroken they can be grepped

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from diagnostic_cases import assert_exactly, case

from procflow.model.ir import Application, Notify
from procflow.model.schedule import (
    Condition,
    Generate,
    IntentSchedule,
    Missed,
    Moment,
    Overlap,
    StartProcess,
    WhereOp,
)
from procflow.model.validate import load_text

BASE = """\
name: t
entities:
  - name: Status
    function: Setting
    fields: [ { name: id, type: integer, primaryKey: true }, { name: name, type: string } ]
  - name: Ticket
    fields:
      - { name: id, type: integer, primaryKey: true, generated: true }
      - { name: title, type: string, required: true, length: 100 }
      - { name: email, type: string }
      - { name: amount, type: decimal }
      - { name: due, type: date }
      - { name: at, type: timestamp }
      - { name: ok, type: boolean }
      - { name: ref, type: uuid }
    relations:
      - { name: Status, kind: manyToOne, to: Status, function: EntityStatus, init: Open }
      - { name: parent, kind: manyToOne, to: Ticket }
      - { name: kids, kind: oneToMany, to: Ticket }
seeds:
  - { name: statuses, entity: Status, rows: [ { id: 1, name: Open }, { id: 2, name: Done } ] }
processes:
  - { name: Triggered, trigger: { onCreate: Ticket }, steps: [ { name: e, kind: end } ] }
  - { name: Chase, steps: [ { name: e, kind: end } ] }
schedules:
"""


def one(body: str, head: str = "name: s, cron: '0 0 * * *', entity: Ticket, ") -> str:
    """BASE with one schedule written on line 26."""
    return BASE + "  - { " + head + body + " }\n"


def lines(*written: str) -> str:
    """BASE with these lines under ``schedules:`` (the first is line 26)."""
    return BASE + "".join(f"  {line}\n" for line in written)


def where(*conditions: str, action: str = "notify: { to: a@b }") -> str:
    """BASE with schedule [s] whose where conditions start on line 31."""
    head = f"  - name: s\n    cron: '0 0 * * *'\n    entity: Ticket\n    {action}\n    where:\n"
    return BASE + head + "".join(f"      - {c}\n" for c in conditions)


def load(text: str, tmp_path: Path) -> tuple[Application | None, list[str]]:
    loaded = load_text(text, "t.intent", project_dir=str(tmp_path))
    app = loaded.definition
    assert app is None or isinstance(app, Application)
    return app, [d.format() for d in loaded.diagnostics]


CASES = [
    case(
        "notify-ok",
        one("notify: { to: email, subject: 'Ticket {id}', body: '{title} {Status.name}' }"),
    ),
    case(
        "spring-cron",
        one(
            "notify: { to: a@b }",
            head="name: s, cron: '0 */5 * * * ?', timezone: Europe/Berlin, entity: Ticket, ",
        ),
    ),
    case(
        "not-a-list",
        BASE.replace("schedules:\n", "schedules: { name: s }\n"),
        "t.intent:25:12: error: file: schedules must be a list, got a mapping (schedules)",
    ),
    case(
        "entry-not-map",
        lines("- s"),
        "t.intent:26:5: error: schedule #1: each schedule must be a mapping, got a string (schedules[0])",
    ),
    case(
        "unknown-key",
        one("notify: { to: a@b }, cronn: x"),
        "t.intent:26:72: error: schedule [s]: unknown key [cronn]; did you mean [cron]? (schedules[0].cronn)",
    ),
    case(
        "model-warns",
        one("notify: { to: a@b }, model: Ticket"),
        "t.intent:26:72: warning: schedule [s]: key [model] is not run by procflow (ignored) (schedules[0].model)",
    ),
    case(
        "missing-keys",
        lines("- { where: [] }"),
        't.intent:26:5: error: schedule #1: missing required key [cron] (Spring\'s six fields, e.g. "0 */5 * * * ?") (schedules[0])',
        "t.intent:26:5: error: schedule #1: missing required key [entity] (the entity whose records it sweeps) (schedules[0])",
        "t.intent:26:5: error: schedule #1: missing required key [name] (schedules[0])",
        "t.intent:26:5: error: schedule #1: needs exactly one action: notify, generate or start (schedules[0])",
    ),
    case(
        "name-not-ident",
        one("notify: { to: a@b }", head="name: 2nd, cron: '0 0 * * *', entity: Ticket, "),
        "t.intent:26:13: error: schedule [2nd]: schedule name [2nd] is not an identifier (letters, digits and _, not starting with a digit) (schedules[0].name)",
    ),
    case(
        "dup-name",
        lines(
            "- { name: s, cron: '0 0 * * *', entity: Ticket, notify: { to: a@b } }",
            "- { name: s, cron: '0 1 * * *', entity: Ticket, notify: { to: a@b } }",
        ),
        "t.intent:27:13: error: schedule [s]: declared twice (first at line 26) (schedules[1].name)",
    ),
    case(
        "cron-fields",
        one("notify: { to: a@b }", head="name: s, cron: '0 0 * * * * *', entity: Ticket, "),
        "t.intent:26:22: error: schedule [s]: cron [0 0 * * * * *] has 7 fields; a Spring cron has 6 (second minute hour day-of-month month day-of-week) or 5 (without the second) (schedules[0].cron)",
    ),
    case(
        "cron-bad-field",
        one("notify: { to: a@b }", head="name: s, cron: '0 0 25 * * ?', entity: Ticket, "),
        "t.intent:26:22: error: schedule [s]: cron [0 0 25 * * ?]: bad hour field [25] (hour: 0-23) (schedules[0].cron)",
    ),
    case(
        "cron-question-mark-in-minutes",
        one("notify: { to: a@b }", head="name: s, cron: '0 ? * * * *', entity: Ticket, "),
        "t.intent:26:22: error: schedule [s]: cron [0 ? * * * *]: [?] is allowed alone in day-of-month or day-of-week only, not in the minute field [?] (schedules[0].cron)",
    ),
    case(
        "cron-not-text",
        one("notify: { to: a@b }", head="name: s, cron: 5, entity: Ticket, "),
        "t.intent:26:22: error: schedule [s]: cron must be a string, got an integer (schedules[0].cron)",
    ),
    case(
        "timezone",
        one("notify: { to: a@b }, timezone: Europe/Berlinn"),
        "t.intent:26:82: error: schedule [s]: timezone: [Europe/Berlinn] is not an IANA time zone; did you mean [Europe/Berlin]? (schedules[0].timezone)",
    ),
    case(
        "entity-unknown",
        one("notify: { to: a@b }", head="name: s, cron: '0 0 * * *', entity: Tiket, "),
        "t.intent:26:43: error: schedule [s]: entity [Tiket] is not a declared entity; did you mean [Ticket]? (schedules[0].entity)",
    ),
    case(
        "no-action",
        one("where: []"),
        "t.intent:26:5: error: schedule [s]: needs exactly one action: notify, generate or start (schedules[0])",
    ),
    case(
        "two-actions",
        one("notify: { to: a@b }, start: Chase, generate: { to: Ticket }"),
        "t.intent:26:72: error: schedule [s]: has both [notify] and [start]; give exactly one of notify, generate, start (schedules[0].start)",
        "t.intent:26:86: error: schedule [s]: has both [notify] and [generate]; give exactly one of notify, generate, start (schedules[0].generate)",
    ),
    case(
        "overlap-missed-grace",
        one("start: Chase, overlap: sometimes, missed: al, grace: 1m"),
        "t.intent:26:74: error: schedule [s]: overlap [sometimes] is not one of skip, allow, buffer_one, cancel_previous (schedules[0].overlap)",
        "t.intent:26:93: error: schedule [s]: missed [al] is not one of latest, all, none; did you mean [all]? (schedules[0].missed)",
        "t.intent:26:104: error: schedule [s]: grace [1m] is not an ISO-8601 duration; write PT1M (schedules[0].grace)",
    ),
    case(
        "grace-zero",
        one("start: Chase, grace: PT0S"),
        "t.intent:26:72: error: schedule [s]: grace [PT0S] must be longer than zero (schedules[0].grace)",
    ),
    case(
        "grace-not-text",
        one("start: Chase, grace: 5"),
        "t.intent:26:72: error: schedule [s]: grace must be a string, got an integer (schedules[0].grace)",
    ),
    case(
        "overlap-buffer-one",
        one("start: Chase, overlap: buffer_one"),
        "t.intent:26:74: error: schedule [s]: overlap [buffer_one] waits for one run to end, but a sweep starts a run per record; use skip, allow or cancel_previous (schedules[0].overlap)",
    ),
    case(
        "overlap-on-notify",
        one("notify: { to: a@b }, overlap: allow"),
        "t.intent:26:72: warning: schedule [s]: overlap applies to a start action (a record's open run of the process); this schedule starts no runs, so it is ignored (schedules[0].overlap)",
    ),
    case(
        "start-unknown",
        one("start: Chse"),
        "t.intent:26:58: error: schedule [s]: start [Chse] is not a process of this file; did you mean [Chase]? (schedules[0].start)",
    ),
    case(
        "start-triggered",
        one("start: Triggered"),
        "t.intent:26:58: error: schedule [s]: start [Triggered]: the process has a trigger (onCreate: Ticket); a schedule starts a process without one (schedules[0].start)",
    ),
    case(
        "notify-problems",
        one("notify: { to: emial, subject: '{titel}', bcc: x }"),
        "t.intent:26:65: error: schedule [s]: notify to is neither an address (with @) nor a text field: [emial] is not a field or relation of [Ticket]; did you mean [email]? (schedules[0].notify.to)",
        "t.intent:26:82: error: schedule [s]: notify subject: [titel] is not a field or relation of [Ticket]; did you mean [title]? (schedules[0].notify.subject)",
        "t.intent:26:92: error: schedule [s]: unknown key [bcc] (schedules[0].notify.bcc)",
    ),
    case(
        "notify-to-not-text",
        one("notify: { to: amount }"),
        "t.intent:26:65: error: schedule [s]: notify to is neither an address (with @) nor a text field: [amount] is a decimal field; an address is text (schedules[0].notify.to)",
    ),
    case(
        "where-ok",
        where(
            "{ field: Status, op: eq, value: Open }",
            "{ field: Status, op: ne, value: 2 }",
            "{ field: changedAt, op: lt, value: 'CURRENT_TIMESTAMP-PT30M' }",
            "{ field: createdAt, op: ge, value: NOW }",
            "{ field: due, op: le, value: 'CURRENT_DATE+P7D' }",
            "{ field: due, op: gt, value: '2027-01-10' }",
            "{ field: at, op: lt, value: 'NOW - P1DT2H' }",
            "{ field: at, op: gt, value: '2027-01-10T09:30:00+01:00' }",
            "{ field: title, op: like, value: 'A%' }",
            "{ field: amount, op: ge, value: 10.5 }",
            "{ field: ok, op: eq, value: true }",
            "{ field: ref, op: ne, value: null }",
            "{ field: parent, op: eq, value: 3 }",
            "{ field: email, op: eq, value: null }",
        ),
    ),
    case(
        "where-not-list",
        where().replace("    where:\n", "    where: { field: title }\n"),
        "t.intent:30:12: error: schedule [s]: where must be a list, got a mapping (schedules[0].where)",
    ),
    case(
        "where-entry-not-map",
        where("title"),
        "t.intent:31:9: error: schedule [s]: each where condition must be a mapping, got a string (schedules[0].where[0])",
    ),
    case(
        "where-keys",
        where("{ fild: title, op: eq }"),
        "t.intent:31:9: error: schedule [s]: missing required key [field] (a field or relation of [Ticket]) (schedules[0].where[0])",
        "t.intent:31:9: error: schedule [s]: missing required key [value] (what the field is compared with) (schedules[0].where[0])",
        "t.intent:31:11: error: schedule [s]: unknown key [fild]; did you mean [field]? (schedules[0].where[0].fild)",
    ),
    case(
        "where-field-unknown",
        where("{ field: chngedAt, op: eq, value: 1 }", "{ field: nothing, op: eq, value: 1 }"),
        "t.intent:31:18: error: schedule [s]: where field [chngedAt] is not a field of [Ticket]; did you mean [changedAt]? (schedules[0].where[0].field)",
        "t.intent:32:18: error: schedule [s]: where field [nothing] is not a field of [Ticket] (schedules[0].where[1].field)",
    ),
    case(
        "where-field-to-many",
        where("{ field: kids, op: eq, value: 1 }"),
        "t.intent:31:18: error: schedule [s]: where field [kids] is a oneToMany relation, which stores nothing to compare (schedules[0].where[0].field)",
    ),
    case(
        "where-field-not-text",
        where("{ field: 3, op: eq, value: 1 }"),
        "t.intent:31:18: error: schedule [s]: where field must be a string, got an integer (schedules[0].where[0].field)",
    ),
    case(
        "where-op-unknown",
        where("{ field: title, op: equals, value: x }", "{ field: title, op: LT, value: x }"),
        "t.intent:31:29: error: schedule [s]: op [equals] is not one of eq, ne, gt, ge, lt, le, like (schedules[0].where[0].op)",
        "t.intent:32:29: error: schedule [s]: op [LT] is not one of eq, ne, gt, ge, lt, le, like; did you mean [lt]? (names are case-sensitive) (schedules[0].where[1].op)",
    ),
    case(
        "where-like-not-text",
        where("{ field: amount, op: like, value: '1%' }"),
        "t.intent:31:30: error: schedule [s]: op [like] matches text, but [amount] is a decimal field (schedules[0].where[0].op)",
    ),
    case(
        "where-order-unordered",
        where(
            "{ field: ok, op: gt, value: true }",
            "{ field: Status, op: lt, value: Open }",
            "{ field: ref, op: ge, value: x }",
        ),
        "t.intent:31:26: error: schedule [s]: op [gt] orders values, but [ok] is a boolean field: compare it with eq or ne (schedules[0].where[0].op)",
        "t.intent:32:30: error: schedule [s]: op [lt] orders values, but [Status] is a status relation: compare it with eq or ne (schedules[0].where[1].op)",
        "t.intent:33:27: error: schedule [s]: op [ge] orders values, but [ref] is an uuid field: compare it with eq or ne (schedules[0].where[2].op)",
    ),
    case(
        "where-null-ordered",
        where("{ field: amount, op: gt, value: null }"),
        "t.intent:31:41: error: schedule [s]: value null compares with eq or ne only (is null, is not null) (schedules[0].where[0].value)",
    ),
    case(
        "where-value-not-scalar",
        where("{ field: title, op: eq, value: [a] }"),
        "t.intent:31:40: error: schedule [s]: value must be a single value, got a list (schedules[0].where[0].value)",
    ),
    case(
        "where-literal-types",
        where(
            "{ field: amount, op: eq, value: ten }",
            "{ field: due, op: eq, value: '2027-13-01' }",
            "{ field: at, op: eq, value: '2027-01-10T09:30:00' }",
            "{ field: ok, op: eq, value: 1 }",
        ),
        "t.intent:31:41: error: schedule [s]: value for [amount] must be a number, got the text [ten] (schedules[0].where[0].value)",
        "t.intent:32:38: error: schedule [s]: value for [due] must be a date written YYYY-MM-DD, got the text [2027-13-01] (schedules[0].where[1].value)",
        "t.intent:33:37: error: schedule [s]: value for [at] [2027-01-10T09:30:00] needs a zone: add Z or an offset such as +01:00 (schedules[0].where[2].value)",
        "t.intent:34:37: error: schedule [s]: value for [ok] must be true or false, got the integer [1] (schedules[0].where[3].value)",
    ),
    case(
        "where-relation-values",
        where("{ field: Status, op: eq, value: Opne }", "{ field: parent, op: eq, value: abc }"),
        "t.intent:31:41: error: schedule [s]: value [Opne] is not a seeded value of [Status]; did you mean [Open]? (schedules[0].where[0].value)",
        "t.intent:32:41: error: schedule [s]: value for [parent] must be the id of a [Ticket] record (an integer) (schedules[0].where[1].value)",
    ),
    case(
        "moment-on-non-temporal",
        where(
            "{ field: title, op: eq, value: NOW }", "{ field: amount, op: lt, value: CURRENT_DATE }"
        ),
        "t.intent:31:40: error: schedule [s]: [NOW] is a moment, but [title] is a string field: moments compare with date and timestamp fields (schedules[0].where[0].value)",
        "t.intent:32:41: error: schedule [s]: [CURRENT_DATE] is a moment, but [amount] is a decimal field: moments compare with date and timestamp fields (schedules[0].where[1].value)",
    ),
    case(
        "date-token-on-timestamp",
        where(
            "{ field: at, op: lt, value: CURRENT_DATE }",
            "{ field: changedAt, op: lt, value: 'CURRENT_DATE-P1D' }",
        ),
        "t.intent:31:37: error: schedule [s]: [at] is a timestamp field: compare it with CURRENT_TIMESTAMP or NOW, not CURRENT_DATE (schedules[0].where[0].value)",
        "t.intent:32:44: error: schedule [s]: [changedAt] is the record's last-write instant: compare it with CURRENT_TIMESTAMP or NOW, not CURRENT_DATE (schedules[0].where[1].value)",
    ),
    case(
        "timestamp-token-on-date",
        where(
            "{ field: due, op: lt, value: NOW }",
            "{ field: due, op: lt, value: 'CURRENT_TIMESTAMP+P1D' }",
        ),
        "t.intent:31:38: error: schedule [s]: [due] is a date field: compare it with CURRENT_DATE, not NOW (schedules[0].where[0].value)",
        "t.intent:32:38: error: schedule [s]: [due] is a date field: compare it with CURRENT_DATE, not CURRENT_TIMESTAMP (schedules[0].where[1].value)",
    ),
    case(
        "time-offset-on-date",
        where(
            "{ field: due, op: lt, value: 'CURRENT_DATE-PT12H' }",
            "{ field: due, op: lt, value: 'CURRENT_DATE+P1DT1H' }",
        ),
        "t.intent:31:51: error: schedule [s]: a date moves by whole days, months or years; [-PT12H] has a time part (schedules[0].where[0].value)",
        "t.intent:32:51: error: schedule [s]: a date moves by whole days, months or years; [+P1DT1H] has a time part (schedules[0].where[1].value)",
    ),
    case(
        "two-offsets",
        where("{ field: at, op: lt, value: 'NOW-PT1H+PT5M' }"),
        "t.intent:31:46: error: schedule [s]: a moment takes at most one offset; [+PT5M] is a second one (schedules[0].where[0].value)",
    ),
    case(
        "offset-not-iso",
        where(
            "{ field: at, op: lt, value: 'CURRENT_TIMESTAMP-30M' }",
            "{ field: at, op: lt, value: 'NOW-PT' }",
            "{ field: at, op: lt, value: 'NOW-PT0.5H' }",
        ),
        "t.intent:31:55: error: schedule [s]: [-30M] is not an ISO-8601 offset; write a signed duration such as -PT30M (30 minutes) or +P7D (7 days) (schedules[0].where[0].value)",
        "t.intent:32:41: error: schedule [s]: [-PT] is not an ISO-8601 offset; write a signed duration such as -PT30M (30 minutes) or +P7D (7 days) (schedules[0].where[1].value)",
        "t.intent:33:41: error: schedule [s]: [-PT0.5H] is not an ISO-8601 offset; write a signed duration such as -PT30M (30 minutes) or +P7D (7 days) (schedules[0].where[2].value)",
    ),
    case(
        "offset-without-sign",
        where("{ field: at, op: lt, value: 'CURRENT_TIMESTAMP PT30M' }"),
        "t.intent:31:56: error: schedule [s]: after CURRENT_TIMESTAMP comes a signed ISO-8601 offset (-PT30M, +P7D), not [PT30M] (schedules[0].where[0].value)",
    ),
    case(
        "offset-too-long",
        where("{ field: due, op: lt, value: 'CURRENT_DATE-P101Y' }"),
        "t.intent:31:51: error: schedule [s]: offset [-P101Y] is longer than 100 years (schedules[0].where[0].value)",
    ),
    case(
        "unknown-moment",
        where("{ field: at, op: lt, value: CURRENT_TIME }", "{ field: due, op: lt, value: TODAY }"),
        "t.intent:31:37: error: schedule [s]: [CURRENT_TIME] is not a moment; did you mean [CURRENT_TIMESTAMP]? (schedules[0].where[0].value)",
        "t.intent:32:38: error: schedule [s]: [TODAY] is not a moment; [due] compares with CURRENT_DATE (schedules[0].where[1].value)",
    ),
    case(
        "generate-ok",
        one(
            "generate: { to: Ticket, map: { title: title, email: email, parent: id, Status: Status, amount: id }, defaults: { due: now, at: now, ok: true } }"
        ),
    ),
    case(
        "generate-not-map",
        one("generate: Ticket"),
        "t.intent:26:61: error: schedule [s]: generate must be a mapping, got a string (schedules[0].generate)",
    ),
    case(
        "generate-keys",
        one("generate: { to: Ticket, map: { title: title }, children: [x], mapping: {} }"),
        "t.intent:26:98: warning: schedule [s]: key [children] is not run by procflow (ignored) (schedules[0].generate.children)",
        "t.intent:26:113: error: schedule [s]: unknown key [mapping]; did you mean [map]? (schedules[0].generate.mapping)",
    ),
    case(
        "generate-to-unknown",
        one("generate: { to: Tiket, map: { title: title } }"),
        "t.intent:26:67: error: schedule [s]: generate to [Tiket] is not a declared entity; did you mean [Ticket]? (schedules[0].generate.to)",
    ),
    case(
        "generate-map-not-map",
        one("generate: { to: Ticket, map: [title] }"),
        "t.intent:26:80: error: schedule [s]: map must be a mapping, got a list (schedules[0].generate.map)",
    ),
    case(
        "generate-map-names",
        one("generate: { to: Ticket, map: { titel: title, email: emial, kids: id, title: 4 } }"),
        "t.intent:26:82: error: schedule [s]: map target [titel] is not a field of [Ticket]; did you mean [title]? (schedules[0].generate.map.titel)",
        "t.intent:26:103: error: schedule [s]: map source [emial] is not a field of [Ticket]; did you mean [email]? (schedules[0].generate.map.email)",
        "t.intent:26:110: error: schedule [s]: map target [kids] is a oneToMany relation, which stores nothing (schedules[0].generate.map.kids)",
        "t.intent:26:127: error: schedule [s]: map source for [title] must be a string, got an integer (schedules[0].generate.map.title)",
    ),
    case(
        "generate-map-types",
        one("generate: { to: Ticket, map: { title: amount, due: at, parent: title, ok: Status } }"),
        "t.intent:26:89: error: schedule [s]: map [title: amount]: [amount] is a decimal field and [title] a string field; they do not hold the same values (schedules[0].generate.map.title)",
        "t.intent:26:102: error: schedule [s]: map [due: at]: [at] is a timestamp field and [due] a date field; they do not hold the same values (schedules[0].generate.map.due)",
        "t.intent:26:114: error: schedule [s]: map [parent: title]: [title] is a string field and [parent] a relation to [Ticket]; they do not hold the same values (schedules[0].generate.map.parent)",
        "t.intent:26:125: error: schedule [s]: map [ok: Status]: [Status] is a relation to [Status] and [ok] a boolean field; they do not hold the same values (schedules[0].generate.map.ok)",
    ),
    case(
        "generate-defaults",
        one(
            "generate: { to: Ticket, map: { title: title }, defaults: { title: x, ok: now, due: '2027-13-01', Status: Shut, parent: x, nope: 1, kids: 1, email: [x] } }"
        ),
        "t.intent:26:110: error: schedule [s]: [title] is both mapped and defaulted; give it one value (schedules[0].generate.defaults.title)",
        "t.intent:26:124: error: schedule [s]: default now fills a date or timestamp field; [ok] is a boolean field (schedules[0].generate.defaults.ok)",
        "t.intent:26:134: error: schedule [s]: default for [due] must be a date written YYYY-MM-DD, got the text [2027-13-01] (schedules[0].generate.defaults.due)",
        "t.intent:26:156: error: schedule [s]: default for [Status] [Shut] is not a seeded value of [Status] (seeded names: Open, Done) (schedules[0].generate.defaults.Status)",
        "t.intent:26:170: error: schedule [s]: default for [parent] must be the id of a [Ticket] record (schedules[0].generate.defaults.parent)",
        "t.intent:26:173: error: schedule [s]: default [nope] is not a field of [Ticket] (schedules[0].generate.defaults.nope)",
        "t.intent:26:182: error: schedule [s]: default [kids] is a oneToMany relation, which stores nothing (schedules[0].generate.defaults.kids)",
        "t.intent:26:198: error: schedule [s]: default for [email] must be a single value, got a list (schedules[0].generate.defaults.email)",
    ),
    case(
        "generate-required",
        one("generate: { to: Ticket, defaults: { email: x } }"),
        "t.intent:26:67: error: schedule [s]: generate to [Ticket] leaves [title] empty, but it is required: map it or give it a default (schedules[0].generate.to)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_schedule_rules(tmp_path: Path, text: str, expected: list[str]) -> None:
    _, found = load(text, tmp_path)
    assert_exactly(found, expected)


# --- what they compile into ----------------------------------------------------------------


def test_a_sweep_compiles_with_its_calendar_and_action(tmp_path: Path) -> None:
    text = one(
        "start: Chase, overlap: allow, missed: all, grace: PT5M",
        head="name: s, cron: '0 */5 * * * ?', timezone: Europe/Berlin, entity: Ticket, ",
    )
    app, found = load(text, tmp_path)
    assert app is not None and not found
    (schedule,) = app.schedules
    assert isinstance(schedule, IntentSchedule)
    assert (schedule.name, schedule.cron, schedule.timezone, schedule.entity) == (
        "s", "0 */5 * * * ?", "Europe/Berlin", "Ticket",
    )  # fmt: skip
    assert (schedule.overlap, schedule.missed, schedule.grace) == (
        Overlap.ALLOW, Missed.ALL, timedelta(minutes=5),
    )  # fmt: skip
    spec = schedule.spec("t")
    assert (spec["kind"], spec["app"], spec["spring"], spec["grace"]) == (
        "intent",
        "t",
        True,
        300 * 10**6,
    )
    assert spec["action"] == {"start": "Chase"}


def test_notify_compiles_as_a_process_steps_notify(tmp_path: Path) -> None:
    app, found = load(one("notify: { to: email, subject: 'Ticket {id}' }"), tmp_path)
    assert app is not None and not found
    action = app.schedules[0].action
    assert isinstance(action, Notify) and action.to.path == ("email",)
    assert app.schedules[0].spec("t")["action"] == {
        "notify": {"to": "email", "subject": "Ticket {id}", "body": ""}
    }


def test_defaults_when_only_the_required_keys_are_given(tmp_path: Path) -> None:
    app, found = load(one("start: Chase"), tmp_path)
    assert app is not None and not found
    (schedule,) = app.schedules
    assert (schedule.timezone, schedule.overlap, schedule.missed, schedule.grace) == (
        "UTC", Overlap.SKIP, Missed.LATEST, timedelta(minutes=1),
    )  # fmt: skip
    assert schedule.action == StartProcess("Chase") and schedule.where == ()


def test_where_compiles_values_in_the_fields_terms(tmp_path: Path) -> None:
    text = where(
        "{ field: Status, op: eq, value: Done }",
        "{ field: changedAt, op: lt, value: 'CURRENT_TIMESTAMP-PT30M' }",
        "{ field: due, op: le, value: 'CURRENT_DATE+P1Y2M3W4D' }",
        "{ field: at, op: gt, value: 'NOW - P1DT2H3M4S' }",
        "{ field: email, op: eq, value: null }",
        "{ field: title, op: like, value: 'NOW%' }",
    )
    app, found = load(text, tmp_path)
    assert app is not None and not found
    status, changed, due, at, email, title = app.schedules[0].where
    assert (status.value, status.compare, status.column) == (2, "relation", None)
    assert (changed.compare, changed.column) == ("timestamp", "updated_at")
    assert changed.value == Moment("CURRENT_TIMESTAMP-PT30M", False, -1, micros=30 * 60 * 10**6)
    assert due.value == Moment("CURRENT_DATE+P1Y2M3W4D", True, 1, months=14, days=25)
    assert at.value == Moment("NOW - P1DT2H3M4S", False, -1, days=1, micros=7384 * 10**6)
    assert email == Condition("email", WhereOp.EQ, None, "text", email.pos)
    assert (title.op, title.value) == (WhereOp.LIKE, "NOW%")  # like takes text, not a moment


def test_a_declared_field_named_changed_at_is_that_field(tmp_path: Path) -> None:
    text = where("{ field: changedAt, op: eq, value: x }").replace(
        "      - { name: ref, type: uuid }\n",
        "      - { name: ref, type: uuid }\n      - { name: changedAt, type: string }\n",
    )
    app, found = load(text, tmp_path)
    assert app is not None and not found
    (condition,) = app.schedules[0].where
    assert (condition.compare, condition.column, condition.value) == ("text", None, "x")


def test_generate_compiles_map_and_defaults(tmp_path: Path) -> None:
    text = one(
        "generate: { to: Ticket, map: { title: title, parent: id }, "
        "defaults: { due: now, at: now, Status: Done, amount: 2.5 } }"
    )
    app, found = load(text, tmp_path)
    assert app is not None and not found
    action = app.schedules[0].action
    assert isinstance(action, Generate)
    assert action.map == (("title", "title"), ("parent", "id"))
    assert dict(action.defaults) == {
        "due": Moment("now", True), "at": Moment("now", False), "Status": 2, "amount": 2.5,
    }  # fmt: skip


def test_a_file_without_schedules_has_none(tmp_path: Path) -> None:
    app, found = load(BASE.replace("schedules:\n", ""), tmp_path)
    assert app is not None and not found and app.schedules == ()
