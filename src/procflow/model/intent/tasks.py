"""User tasks, waits and decisions: where a run parks for a person or a record, or branches."""

from __future__ import annotations

from typing import Literal

from procflow.expr import Expr, root_paths
from procflow.model.intent.actions import set_field, set_relation
from procflow.model.intent.expr import (
    ACTION,
    Record,
    at,
    boolean_problem,
    check_kinds,
    check_names,
    duration,
    no_trigger,
    parse_expr,
)
from procflow.model.intent.graph import StepNode
from procflow.model.intent.proc import Proc, add_route, key_pos
from procflow.model.intent.values import TEXT_TYPES, a_type
from procflow.model.ir import (
    Assignee,
    Decision,
    Entity,
    IntentStep,
    SetField,
    SetRelationField,
    TaskExpire,
    TaskTimeout,
    UserTask,
    WaitRecord,
)
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.source import listing, suggest

# --- userTask --------------------------------------------------------------------------------


def user_step(args: YMap, proc: Proc, step: StepNode, here: str | None) -> IntentStep | None:
    reader, context = proc.reader, step.context
    assignee = _assignee(
        reader.require(args, "assignee", context, "a role, personal or {path, fallback}"),
        proc,
        step,
    )
    form = _form(args, proc, step)
    timeout = _timeout(args, proc, step, here)
    expire = _expire(args, proc, step, here)
    on_complete = _on_complete(args, proc, step)
    next_node = args.get("next")
    nxt = proc.route(next_node, context, "next", here)
    add_route(step, "normal", next_node, nxt)
    if assignee is None or here is None:
        return None
    return UserTask(here, assignee, step.pos, form, timeout, expire, on_complete, nxt)


def _on_complete(args: YMap, proc: Proc, step: StepNode) -> SetField | SetRelationField | None:
    """The one write applied when the task is completed (besides its form's fields)."""
    both = "setField" in args.entries and "setRelationField" in args.entries
    if both:
        proc.reader.error(
            key_pos(args, "setRelationField"),
            step.context,
            "declares both [setField] and [setRelationField]; a userTask sets at most one",
        )
    if "setField" in args.entries:
        return set_field(args, proc, step)
    if "setRelationField" in args.entries:
        return set_relation(args, proc, step)
    if "value" in args.entries:
        proc.reader.error(
            key_pos(args, "value"), step.context, "value belongs to setField or setRelationField"
        )
    return None


def _assignee(node: YNode | None, proc: Proc, step: StepNode) -> Assignee | None:
    reader, context = proc.reader, step.context
    if node is None:
        return None
    if isinstance(node, YScalar) and isinstance(node.value, str) and node.value.strip():
        if node.value == "personal":
            return Assignee("personal")
        return Assignee("role", role=node.value)
    if not isinstance(node, YMap):
        reader.error(
            node.pos,
            context,
            "assignee must be a role name, personal or { path, fallback }, "
            f"got {kind_name(node)}",
        )
        return None
    reader.keys(node, ("path", "fallback"), context)
    path = reader.string(
        reader.require(node, "path", context, "relation.field holding a user name"),
        context,
        "assignee path",
    )
    fallback = reader.string(
        reader.require(node, "fallback", context, "the role assigned when the path is empty"),
        context,
        "assignee fallback",
    )
    if path is None or fallback is None:
        return None
    _check_user_path(node.entries["path"].value, path, proc, step)
    return Assignee("path", role=fallback, path=tuple(path.split(".")))


def _check_user_path(node: YNode, path: str, proc: Proc, step: StepNode) -> None:
    """``relation.relation.field``: to-one relations walked from the trigger record to text."""
    entity = proc.needs_record(node.pos, step.context, f"assignee path [{path}]")
    *hops, last = path.split(".")
    for hop in hops:
        if entity is None:
            return
        rel = entity.relation(hop)
        if rel is None or not rel.to_one:
            to_one = (r.name for r in entity.relations if r.to_one)
            problem = f"[{hop}] is not a to-one relation of [{entity.name}]{suggest(hop, to_one)}"
            proc.reader.error(node.pos, step.context, f"assignee path [{path}]: {problem}")
            return
        entity = proc.env.catalog.entities.get(rel.to)
    if entity is None:
        return
    f = entity.field(last)
    if f is None:
        names = (x.name for x in entity.fields)
        problem = f"[{last}] is not a field of [{entity.name}]{suggest(last, names)}"
    elif f.type not in TEXT_TYPES:
        problem = f"[{last}] is {a_type(f.type)} field of [{entity.name}]; a user name is text"
    else:
        return
    proc.reader.error(node.pos, step.context, f"assignee path [{path}]: {problem}")


def _form(args: YMap, proc: Proc, step: StepNode) -> str | None:
    reader, context = proc.reader, step.context
    node = args.get("form")
    name = reader.string(node, context, "form")
    if name is None or node is None:
        return None
    form = proc.env.forms.get(name)
    if form is None:
        reader.error(
            node.pos,
            context,
            f"form [{name}] is not declared under forms:{suggest(name, proc.env.forms)}",
        )
        return None
    entity = proc.needs_record(node.pos, context, f"form [{name}]")
    if entity is not None and form.for_entity != entity.name:
        reader.error(
            node.pos,
            context,
            f"form [{name}] is for [{form.for_entity}]; the record is [{entity.name}]",
        )
    if form.fields:
        proc.writes(node.pos, context, f"form [{name}]")
    return name


def _timeout(args: YMap, proc: Proc, step: StepNode, here: str | None) -> TaskTimeout | None:
    reader, context = proc.reader, step.context
    node = reader.map(args.get("timeout"), context, "timeout")
    if node is None:
        return None
    reader.keys(node, ("after", "then"), context)
    after_node = reader.require(node, "after", context, "an ISO-8601 duration such as P2D")
    after = None
    if isinstance(after_node, YScalar):
        after = duration(after_node, context, "timeout after", reader)
    elif after_node is not None:
        reader.error(
            after_node.pos,
            context,
            f"timeout after must be an ISO-8601 duration, got {kind_name(after_node)}",
        )
    then_node = reader.require(node, "then", context, "the step started when it elapses")
    then = proc.route(then_node, context, "timeout then", here)
    add_route(step, "timer", then_node or node, then)  # a missing then leads nowhere known
    return TaskTimeout(after, then) if after is not None and then is not None else None


def _expire(args: YMap, proc: Proc, step: StepNode, here: str | None) -> TaskExpire | None:
    reader, context = proc.reader, step.context
    node = reader.map(args.get("expire"), context, "expire")
    if node is None:
        return None
    reader.keys(node, ("until", "then"), context)
    until_node = reader.require(node, "until", context, "a date or timestamp field")
    until = reader.string(until_node, context, "expire until")
    if until is not None and until_node is not None:
        entity = proc.needs_record(until_node.pos, context, f"expire until [{until}]")
        f = entity.field(until) if entity is not None else None
        if entity is not None and (f is None or f.type not in ("date", "timestamp")):
            dated = (x.name for x in entity.fields if x.type in ("date", "timestamp"))
            why = f"is {a_type(f.type)} field" if f else f"is not a field of [{entity.name}]"
            reader.error(
                until_node.pos,
                context,
                f"expire until [{until}] {why}; it must name a date or timestamp field"
                + suggest(until, dated),
            )
    then_node = reader.require(node, "then", context, "the step taken when the task expires")
    then = proc.route(then_node, context, "expire then", here)
    add_route(step, "timer", then_node or node, then)  # a missing then leads nowhere known
    return TaskExpire(until, then) if until is not None and then is not None else None


# --- wait ------------------------------------------------------------------------------------


def wait_step(args: YMap, proc: Proc, step: StepNode, here: str | None) -> IntentStep | None:
    reader, context = proc.reader, step.context
    events = [k for k in ("onCreate", "onUpdate") if k in args.entries]
    if not events:
        reader.error(
            args.pos, context, "a wait needs onCreate or onUpdate: <Entity> (the event it awaits)"
        )
    for extra in events[1:]:
        reader.error(
            key_pos(args, extra),
            context,
            f"declares both [{events[0]}] and [{extra}]; a wait waits for one event kind",
        )
    entity = proc.env.catalog.entity(args.get(events[0]), context, events[0]) if events else None
    if not proc.has_trigger:
        reader.error(
            key_pos(args, events[0]) if events else args.pos,
            context,
            "a wait needs the process to have a trigger: it waits for records about the "
            "trigger record",
        )
    via = _via(args, entity, proc, step)
    when_expr, when_text = _wait_when(args, entity, proc, step)
    next_node = args.get("next")
    nxt = proc.route(next_node, context, "next", here)
    add_route(step, "normal", next_node, nxt)
    if entity is None or here is None or not events:
        return None
    event: Literal["onCreate", "onUpdate"] = "onCreate" if events[0] == "onCreate" else "onUpdate"
    return WaitRecord(here, event, entity.name, step.pos, via, when_expr, when_text, nxt)


def _wait_when(
    args: YMap, entity: Entity | None, proc: Proc, step: StepNode
) -> tuple[Expr | None, str | None]:
    """The guard over the event record: its fields and one-hop relation fields."""
    node = args.get("when")
    text = proc.reader.string(node, step.context, "when")
    if text is None or not isinstance(node, YScalar):
        return None, None
    expr = parse_expr(node, text, step.context, "when", proc.reader)
    if expr is not None and entity is not None:
        check_condition(expr, node, proc.env.catalog.record(entity), proc, step.context, "when")
    return expr, text


def _vias(entity: Entity, trigger: Entity) -> list[str]:
    """The to-one relations of ``entity`` to ``trigger``: only worked out for a message."""
    return [r.name for r in entity.relations if r.to_one and r.to == trigger.name]


def _via(args: YMap, entity: Entity | None, proc: Proc, step: StepNode) -> str | None:
    """The event entity's to-one relation to the trigger entity (needless for the same entity)."""
    reader, context = proc.reader, step.context
    node = args.get("via")
    via = reader.string(node, context, "via")
    trigger = proc.entity
    if entity is None or trigger is None:
        return via
    if via is None or node is None:
        if node is None and entity.name != trigger.name:
            candidates = _vias(entity, trigger)
            example = f" (e.g. via: {candidates[0]})" if candidates else ""
            reader.error(
                key_pos(args, "onCreate" if "onCreate" in args.entries else "onUpdate"),
                context,
                f"a wait for [{entity.name}] needs via: the to-one relation of [{entity.name}] "
                f"to the trigger record's [{trigger.name}]{example}",
            )
        return None
    rel = entity.relation(via)
    if rel is None or not rel.to_one or rel.to != trigger.name:
        candidates = _vias(entity, trigger)
        listed = f" (candidates: {listing(candidates) or 'none'})"
        reader.error(
            node.pos,
            context,
            f"via [{via}] is not a to-one relation of [{entity.name}] to [{trigger.name}]"
            + (suggest(via, candidates) or listed),
        )
        return None
    return via


# --- decision (conditions are shared with wait) ------------------------------------------------


def decision_step(args: YMap, proc: Proc, step: StepNode, here: str | None) -> IntentStep | None:
    reader, context = proc.reader, step.context
    if_node = reader.require(args, "if", context, "a condition")
    text = reader.string(if_node, context, "if")
    expr = None
    if text is not None and isinstance(if_node, YScalar):
        expr = parse_expr(if_node, text, context, "if", reader)
        if expr is not None:
            record = proc.record(action=True)
            check_condition(expr, if_node, record, proc, context, "if")
            if record is None or record.entity.field(ACTION) is None:
                reads = [r for r in root_paths(expr) if r.root == ACTION]
                if reads:
                    step.action_read = at(if_node, reads[0].offset)
    then_node = reader.require(args, "then", context, "the step taken when true")
    then = proc.route(then_node, context, "then", here)
    else_node = args.get("else")
    else_ = proc.route(else_node, context, "else", here)
    add_route(step, "normal", then_node or args, then)  # a missing then leads nowhere known
    add_route(step, "normal", else_node, else_)
    # Without else, false falls through to the next step; then is a branch, not a ``next``.
    step.falls_through = "else" not in args.entries
    if expr is None or then is None or here is None or text is None:
        return None
    return Decision(here, expr, text, then, step.pos, else_)


def check_condition(
    expr: Expr, node: YScalar, record: Record | None, proc: Proc, context: str, what: str
) -> None:
    """Names resolve against ``record``; the expression must visibly be a condition."""
    if record is None:
        if not proc.has_trigger:
            for ref in root_paths(expr):
                if ref.root != ACTION:
                    where = at(node, ref.offset)
                    proc.reader.error(where, context, no_trigger(f"{what} [{ref.root}]"))
        return
    if check_names(expr, node, record, context, proc.reader):
        problem = boolean_problem(expr, record)
        if problem:
            proc.reader.error(node.pos, context, f"{what} [{node.value}] {problem}")
        check_kinds(expr, node, record, context, what, proc.reader)
