"""Scheduled starts in a flow file: ``trigger: { schedule: {...} }`` and each ``- schedule:`` of a
``trigger:`` list, compiled to :class:`procflow.model.schedule.Schedule`.

Private to :mod:`procflow.model.flow.compiler` (the rules: docs/reference/flow.md, "Scheduled
starts"). When a slot falls is :mod:`procflow.calendar`'s to say, so every ``cron``, ``every``,
``timezone``, ``start``/``end`` and ``at`` is checked by building its calendar: the file is refused
with the calendar's own words, at the key they are about.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from procflow.calendar import calendar_of, zone_problem
from procflow.errors import CalendarError, ExprEvalError
from procflow.expr.values import parse_timestamp
from procflow.model.flow.core import StepCore
from procflow.model.ir import InputDecl
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.schedule import Missed, Overlap, Schedule
from procflow.model.source import Pos, suggest

SCHEDULE_KEYS = (
    "name", "cron", "every", "at", "timezone", "jitter", "overlap", "missed", "grace", "start",
    "end",
)  # fmt: skip
KINDS = ("cron", "every", "at")
OVERLAPS = tuple(o.value for o in Overlap)
MISSED = tuple(m.value for m in Missed)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


@dataclass
class _Fields:
    """A schedule's values as read so far; ``ok`` turns False at the first bad one."""

    ok: bool = True
    cron: str | None = None
    every: timedelta | None = None
    at: int | None = None
    timezone: str = "UTC"
    jitter: timedelta = timedelta(0)
    overlap: Overlap = Overlap.SKIP
    missed: Missed = Missed.LATEST
    grace: timedelta = timedelta(minutes=1)
    start: int | None = None
    end: int | None = None


class ScheduleCompiler:
    """Compiles the schedules of one flow's trigger, checking names across them."""

    def __init__(self, reader: Reader, steps: StepCore, flow_name: str | None) -> None:
        self.r = reader
        self.steps = steps  # for its duration reading, shared with retry, timeout, wait
        self.flow_name = flow_name
        self.names: dict[str, Pos] = {}

    def lone(self, node: YNode) -> Schedule | None:
        """``trigger: { schedule: {...} }``: named after the flow, so it takes no ``name``."""
        ctx = "trigger schedule"
        body = self.r.map(node, ctx, "schedule")
        if body is None:
            return None
        self.r.keys(
            body,
            [k for k in SCHEDULE_KEYS if k != "name"],
            ctx,
            hint={
                "name": f"a lone schedule is named after the flow ([{self.flow_name or ''}]); "
                "[name] is for each schedule of a trigger list"
            },
        )
        return self.schedule(body, self.flow_name, ctx)

    def named(self, node: YNode) -> Schedule | None:
        """``- schedule: { name: ..., ... }`` in a trigger list."""
        body = self.r.map(node, "trigger schedule", "schedule")
        if body is None:
            return None
        name = self.name(body)
        ctx = f"schedule [{name}]" if name else "trigger schedule"
        self.r.keys(body, SCHEDULE_KEYS, ctx)
        return self.schedule(body, name, ctx)

    def name(self, body: YMap) -> str | None:
        node = self.r.require(
            body, "name", "trigger schedule", "each schedule of a trigger list is named"
        )
        name = self.r.ident(node, "trigger schedule", "the schedule name")
        if name is None or node is None:
            return None
        first = self.names.setdefault(name, node.pos)
        if first is not node.pos:  # reported; the flow is refused, so the name may stay
            self.r.error(
                node.pos,
                f"schedule [{name}]",
                f"the name [{name}] is used twice (first at line {first.line}); schedule names "
                "are unique in a flow",
            )
        return name

    # --- one schedule -----------------------------------------------------------------------

    def schedule(self, body: YMap, name: str | None, ctx: str) -> Schedule | None:
        f = _Fields()
        self.kind(body, ctx, f)
        f.timezone = self.zone(body.get("timezone"), ctx, f) or "UTC"
        f.cron = self.cron(body.get("cron"), ctx, f)
        f.every = self.every(body.get("every"), ctx, f)
        f.at = self.instant(body.get("at"), ctx, "at", f)
        f.start = self.instant(body.get("start"), ctx, "start", f)
        f.end = self.instant(body.get("end"), ctx, "end", f)
        f.jitter = self.duration(body, "jitter", ctx, f) or f.jitter
        f.grace = self.duration(body, "grace", ctx, f) or f.grace
        f.overlap = Overlap(self.choice(body.get("overlap"), ctx, "overlap", OVERLAPS, f) or "skip")
        f.missed = Missed(self.choice(body.get("missed"), ctx, "missed", MISSED, f) or "latest")
        if f.ok:
            self.together(body, ctx, f)
        if not f.ok or name is None:
            return None
        return Schedule(
            name, body.pos, f.cron, f.every, f.at, f.timezone, f.jitter, f.overlap, f.missed,
            f.grace, f.start, f.end,
        )  # fmt: skip

    def kind(self, body: YMap, ctx: str, f: _Fields) -> None:
        kinds = [k for k in KINDS if k in body.entries]
        if not kinds:
            self.fail(
                f, body.pos, ctx, "needs exactly one of [cron], [every] or [at] (when it starts)"
            )
        for extra in kinds[1:]:
            self.fail(
                f,
                body.entries[extra].key_pos,
                ctx,
                f"has both [{kinds[0]}] and [{extra}]; give exactly one of cron, every, at",
            )
        if kinds and kinds[0] != "cron" and "timezone" in body.entries:
            self.r.warning(
                body.entries["timezone"].key_pos,
                ctx,
                f"timezone does not apply to [{kinds[0]}], which counts exact elapsed time"
                if kinds[0] == "every"
                else "timezone does not apply to [at], which names one instant",
            )

    def zone(self, node: YNode | None, ctx: str, f: _Fields) -> str | None:
        name = self.literal(node, ctx, "timezone", "an IANA time zone name (Europe/Berlin)", f)
        if name is None or node is None:
            return None
        problem = zone_problem(name)
        if problem:
            self.fail(f, node.pos, ctx, f"timezone: {problem}")
            return None
        return name

    def cron(self, node: YNode | None, ctx: str, f: _Fields) -> str | None:
        text = self.literal(node, ctx, "cron", 'five fields, e.g. "0 6 * * MON-FRI"', f)
        if text is None or node is None:
            return None
        try:
            calendar_of(cron=text)
        except CalendarError as exc:
            self.fail(f, node.pos, ctx, str(exc))
            return None
        return text

    def every(self, node: YNode | None, ctx: str, f: _Fields) -> timedelta | None:
        value = None if node is None else self.a_duration(node, ctx, "every", f)
        if value is None or node is None:
            return None
        try:
            calendar_of(every_micros=value // _MICRO)
        except CalendarError as exc:
            self.fail(f, node.pos, ctx, str(exc))
            return None
        return value

    def instant(self, node: YNode | None, ctx: str, key: str, f: _Fields) -> int | None:
        hint = "an ISO-8601 timestamp with a zone, e.g. 2027-01-01T06:00:00Z"
        text = self.literal(node, ctx, key, hint, f)
        if text is None or node is None:
            return None
        try:
            moment = parse_timestamp(text)
        except ExprEvalError as exc:
            self.fail(f, node.pos, ctx, f"{key}: {exc.message}")
            return None
        return (moment - _EPOCH) // _MICRO

    def duration(self, body: YMap, key: str, ctx: str, f: _Fields) -> timedelta | None:
        node = body.get(key)
        return None if node is None else self.a_duration(node, ctx, key, f)

    def a_duration(self, node: YNode, ctx: str, key: str, f: _Fields) -> timedelta | None:
        if isinstance(node, YScalar) and isinstance(node.value, str) and "{{" in node.value:
            self.literal(node, ctx, key, "a duration", f)  # says why it must be literal
            return None
        value = self.steps.duration(node, ctx, key)
        if value is None:
            f.ok = False
        return value

    def choice(
        self, node: YNode | None, ctx: str, key: str, values: tuple[str, ...], f: _Fields
    ) -> str | None:
        text = self.literal(node, ctx, key, " | ".join(values), f)
        if text is None or node is None:
            return None
        if text not in values:
            self.fail(
                f,
                node.pos,
                ctx,
                f"{key} [{text}] is not one of {', '.join(values)}{suggest(text, values)}",
            )
            return None
        return text

    def together(self, body: YMap, ctx: str, f: _Fields) -> None:
        """What only the whole spec shows (``end`` before ``start``, ``at`` outside them),
        reported at the key the calendar names."""
        try:
            calendar_of(
                cron=f.cron,
                every_micros=None if f.every is None else f.every // _MICRO,
                at=f.at,
                timezone=f.timezone,
                start=f.start,
                end=f.end,
            )
        except CalendarError as exc:
            entry = body.entries.get(exc.key or "")
            self.fail(f, entry.value.pos if entry else body.pos, ctx, str(exc))

    # --- helpers ----------------------------------------------------------------------------

    def literal(self, node: YNode | None, ctx: str, key: str, what: str, f: _Fields) -> str | None:
        """A plain string: a schedule is fixed when the flow is deployed, so no ``{{ }}``."""
        if node is None:
            return None
        if not (isinstance(node, YScalar) and isinstance(node.value, str)):
            self.fail(f, node.pos, ctx, f"{key} must be {what}, got {kind_name(node)}")
            return None
        if "{{" in node.value:
            self.fail(
                f,
                node.pos,
                ctx,
                f"{key} must be a literal, not an expression: a schedule is fixed when the flow "
                "is deployed",
            )
            return None
        return node.value

    def fail(self, f: _Fields, pos: Pos, ctx: str, message: str) -> None:
        f.ok = False
        self.r.error(pos, ctx, message)


def check_inputs(reader: Reader, inputs: Mapping[str, InputDecl], schedule: str | None) -> None:
    """A scheduled run starts with no inputs: each one needs a default. ``schedule``: the name
    of the flow's first schedule (None when it has none yet: a bad flow name)."""
    who = f"schedule [{schedule}]" if schedule else "the flow's schedule"
    for decl in inputs.values():
        if decl.has_default:
            continue
        ctx = f"input [{decl.name}]"
        if decl.required:
            reader.error(
                decl.pos,
                ctx,
                f"is required, but {who} starts runs without inputs; drop [required] and give "
                "it a default",
            )
        else:
            reader.error(decl.pos, ctx, f"needs a default: {who} starts runs without inputs")
