"""The ``schedules:`` block: sweeps that, at each slot of a cron, act on the records that match.

Each entry is the Intent File Specification's ``{ name, cron, entity, where, <action> }`` with
exactly one action — ``notify`` (the process step's block, compiled by the same code),
``generate`` (one new record per matching row) or procflow's ``start`` (a run of a trigger-less
process per row) — and procflow's ``timezone``, ``overlap``, ``missed`` and ``grace``. The cron is
Spring's six fields (seconds first, ``?`` allowed) or cron's five, checked by building its
calendar, so a bad one is refused with :mod:`procflow.calendar`'s own words. ``where`` is
:mod:`procflow.model.intent.sweep_where`'s. ``model:`` and ``generate.children`` are warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from procflow.calendar import calendar_of, zone_problem
from procflow.errors import CalendarError
from procflow.model.intent.actions import notify
from procflow.model.intent.expr import duration
from procflow.model.intent.graph import StepNode
from procflow.model.intent.proc import Env, Proc
from procflow.model.intent.sweep_generate import compile_generate
from procflow.model.intent.sweep_where import compile_where
from procflow.model.ir import Entity, Process
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar
from procflow.model.schedule import (
    IntentSchedule,
    Missed,
    Overlap,
    StartProcess,
    SweepAction,
)
from procflow.model.source import Pos, suggest

__all__ = ["SCHEDULE_KEYS", "compile_schedules"]

ACTIONS = ("notify", "generate", "start")
SCHEDULE_KEYS = (
    "name", "cron", "timezone", "entity", "where", *ACTIONS, "overlap", "missed", "grace",
)  # fmt: skip
SCHEDULE_NOT_RUN = ("model",)
OVERLAPS = tuple(o.value for o in Overlap)
MISSED = tuple(m.value for m in Missed)


def compile_schedules(
    items: list[YNode], env: Env, processes: Mapping[str, Process | None]
) -> tuple[IntentSchedule, ...]:
    """Every entry of ``schedules:``, checked. ``processes``: the file's processes by name (None
    for one declared with problems of its own)."""
    out: list[IntentSchedule] = []
    first: dict[str, Pos] = {}
    for i, item in enumerate(items):
        node = env.reader.map(item, f"schedule #{i + 1}", "each schedule")
        if node is None:
            continue
        schedule = _schedule(node, i, env, processes)
        name = node.get("name")
        if isinstance(name, YScalar) and isinstance(name.value, str):
            earlier = first.setdefault(name.value, node.pos)
            if earlier is not node.pos:
                env.reader.error(
                    name.pos,
                    f"schedule [{name.value}]",
                    f"declared twice (first at line {earlier.line})",
                )
                continue
        if schedule is not None:
            out.append(schedule)
    return tuple(out)


def _schedule(
    node: YMap, index: int, env: Env, processes: Mapping[str, Process | None]
) -> IntentSchedule | None:
    reader = env.reader
    raw = node.get("name")
    label = raw.value if isinstance(raw, YScalar) and isinstance(raw.value, str) else None
    context = f"schedule [{label}]" if label else f"schedule #{index + 1}"
    reader.keys(node, SCHEDULE_KEYS, context, not_run=SCHEDULE_NOT_RUN)
    name = reader.ident(reader.require(node, "name", context), context, "schedule name")
    cron = _cron(node, context, env)
    timezone = _timezone(node.get("timezone"), context, env)
    what = "the entity whose records it sweeps"
    entity = env.catalog.entity(reader.require(node, "entity", context, what), context, "entity")
    where = compile_where(node.get("where"), entity, context, env.catalog)
    action = _action(node, context, env, entity, processes)
    overlap = _choice(node.get("overlap"), context, "overlap", OVERLAPS, env)
    missed = Missed(_choice(node.get("missed"), context, "missed", MISSED, env) or "latest")
    grace = _grace(node.get("grace"), context, env)
    if overlap is not None:
        _check_overlap(node, action, Overlap(overlap), context, env)
    if name is None or cron is None or entity is None or action is None:
        return None
    return IntentSchedule(
        name, node.pos, cron, entity.name, action, where, timezone or "UTC",
        Overlap(overlap or "skip"), missed, grace or timedelta(minutes=1),
    )  # fmt: skip


def _cron(node: YMap, context: str, env: Env) -> str | None:
    found = env.reader.require(node, "cron", context, 'Spring\'s six fields, e.g. "0 */5 * * * ?"')
    text = env.reader.string(found, context, "cron")
    if text is None or found is None:
        return None
    try:
        calendar_of(cron=text, spring=True)
    except CalendarError as exc:
        env.reader.error(found.pos, context, str(exc))
        return None
    return text


def _timezone(node: YNode | None, context: str, env: Env) -> str | None:
    name = env.reader.string(node, context, "timezone")
    if name is None or node is None:
        return None
    problem = zone_problem(name)
    if problem:
        env.reader.error(node.pos, context, f"timezone: {problem}")
        return None
    return name


def _choice(
    node: YNode | None, context: str, key: str, values: tuple[str, ...], env: Env
) -> str | None:
    text = env.reader.string(node, context, key)
    if text is None or node is None:
        return None
    if text not in values:
        env.reader.error(
            node.pos,
            context,
            f"{key} [{text}] is not one of {', '.join(values)}{suggest(text, values)}",
        )
        return None
    return text


def _grace(node: YNode | None, context: str, env: Env) -> timedelta | None:
    if node is None:
        return None
    if not isinstance(node, YScalar) or not isinstance(node.value, str):
        env.reader.string(node, context, "grace")  # says what it must be
        return None
    return duration(node, context, "grace", env.reader)


# --- the action --------------------------------------------------------------------------------


def _action(
    node: YMap,
    context: str,
    env: Env,
    entity: Entity | None,
    processes: Mapping[str, Process | None],
) -> SweepAction | None:
    kinds = [k for k in ACTIONS if k in node.entries]
    if not kinds:
        env.reader.error(node.pos, context, "needs exactly one action: notify, generate or start")
        return None
    for extra in kinds[1:]:
        env.reader.error(
            node.entries[extra].key_pos,
            context,
            f"has both [{kinds[0]}] and [{extra}]; give exactly one of notify, generate, start",
        )
    kind = kinds[0]
    if kind == "notify":
        proc = Proc(env, context, context, has_trigger=True, entity=entity)
        return notify(node, proc, StepNode(context, "schedule", node.pos, context))
    if kind == "generate":
        return compile_generate(node.entries["generate"].value, entity, context, env.catalog)
    return _start(node.entries["start"].value, context, env, processes)


def _start(
    node: YNode, context: str, env: Env, processes: Mapping[str, Process | None]
) -> StartProcess | None:
    name = env.reader.string(node, context, "start")
    if name is None:
        return None
    if name not in processes:
        env.reader.error(
            node.pos,
            context,
            f"start [{name}] is not a process of this file{suggest(name, processes)}",
        )
        return None
    process = processes[name]
    if process is not None and process.trigger is not None:
        env.reader.error(
            node.pos,
            context,
            f"start [{name}]: the process has a trigger ({process.trigger.event}: "
            f"{process.trigger.entity}); a schedule starts a process without one",
        )
        return None
    return StartProcess(name)


def _check_overlap(
    node: YMap, action: SweepAction | None, overlap: Overlap, context: str, env: Env
) -> None:
    """``overlap`` is about the runs a ``start`` sweep started, one record at a time."""
    entry = node.entries["overlap"]
    if action is None:
        return
    if not isinstance(action, StartProcess):
        env.reader.warning(
            entry.key_pos,
            context,
            "overlap applies to a start action (a record's open run of the process); this "
            "schedule starts no runs, so it is ignored",
        )
    elif overlap is Overlap.BUFFER_ONE:
        env.reader.error(
            entry.value.pos,
            context,
            "overlap [buffer_one] waits for one run to end, but a sweep starts a run per "
            "record; use skip, allow or cancel_previous",
        )
