"""One step of a process: its kind, its args, and the routes it contributes to the graph."""

from __future__ import annotations

from typing import Literal, NamedTuple

from procflow.model.intent.actions import delegate, notify, set_field, set_relation
from procflow.model.intent.expr import duration
from procflow.model.intent.graph import ALL_SORTS, StepNode
from procflow.model.intent.parallel import parallel_step
from procflow.model.intent.proc import (
    ACTIONS,
    KIND_ARGS,
    KINDS,
    Proc,
    add_route,
    key_pos,
    misplaced_arg_hints,
)
from procflow.model.intent.tasks import decision_step, user_step, wait_step
from procflow.model.intent.values import read_description
from procflow.model.ir import END, JOIN, EndStep, IntentAction, IntentStep, RetryPolicy, ServiceTask
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.source import suggest

STEP_KEYS = ("name", "kind", "args", "description")


def compile_step(node: YMap, index: int, proc: Proc) -> tuple[IntentStep | None, StepNode]:
    reader = proc.reader
    name_node = reader.require(node, "name", f"{proc.context} step #{index + 1}")
    name = reader.ident(name_node, f"{proc.context} step #{index + 1}", "step name")
    context = f"{proc.context} step [{name}]" if name else f"{proc.context} step #{index + 1}"
    reader.keys(node, STEP_KEYS, context)
    read_description(node, context, reader)
    kind = _kind(node, context, proc)
    step = StepNode(name or f"#{index + 1}", kind or "?", node.pos, context, falls_through=True)
    if name == JOIN and name_node is not None:
        reader.error(
            name_node.pos, context, "the name [join] is reserved: it routes a branch to its join"
        )
    if name == END and kind not in (None, "end") and name_node is not None:
        reader.error(
            name_node.pos, context, "the name [end] is reserved for an end step (kind: end)"
        )
    args = reader.map(node.get("args"), context, "args") or YMap(node.pos)
    if kind is None:
        step.falls_through = False  # the step's routes are unknown
        step.open_sorts.update(ALL_SORTS)
        return None, step  # the kind's error is reported; its args cannot be judged
    reader.keys(args, KIND_ARGS[kind], context, hint=misplaced_arg_hints(kind))
    here = name
    compiled = _BY_KIND[kind](args, proc, step, here)
    return (compiled if name is not None else None), step


def _kind(node: YMap, context: str, proc: Proc) -> str | None:
    reader = proc.reader
    kind_node = reader.require(node, "kind", context, ", ".join(KINDS))
    kind = reader.string(kind_node, context, "kind")
    if kind is not None and kind not in KINDS and kind_node is not None:
        reader.error(
            kind_node.pos,
            context,
            f"kind [{kind}] is not a step kind ({', '.join(KINDS)}){suggest(kind, KINDS)}",
        )
        return None
    return kind


# --- serviceTask / script --------------------------------------------------------------------


def _service(args: YMap, proc: Proc, step: StepNode, here: str | None) -> IntentStep | None:
    action_key = _one_action(args, proc, step)
    action: IntentAction | None = None
    if action_key == "setField":
        action = set_field(args, proc, step)
    elif action_key == "setRelationField":
        action = set_relation(args, proc, step)
    elif action_key == "delegate":
        action = delegate(args, proc, step)
    elif action_key == "notify":
        action = notify(args, proc, step)
    step.action = action_key
    _stray_args(args, action_key, proc, step)
    next_node = args.get("next")
    nxt = proc.route(next_node, step.context, "next", here)
    add_route(step, "normal", next_node, nxt)
    if step.kind == "script":  # its resilience args were reported as misplaced
        extras = _Resilience(None, None, (), ())
    else:
        extras = _resilience(args, proc, step, here)
    if action is None or here is None:
        return None
    kind: Literal["serviceTask", "script"] = "script" if step.kind == "script" else "serviceTask"
    return ServiceTask(here, kind, action, step.pos, nxt, *extras)


class _Resilience(NamedTuple):
    retry: RetryPolicy | None
    on_error: str | None
    produces: tuple[str, ...]
    uses: tuple[str, ...]


def _resilience(args: YMap, proc: Proc, step: StepNode, here: str | None) -> _Resilience:
    """``retry``, ``onError``, ``produces`` and ``uses`` (the seed's step resilience)."""
    retry_node = args.get("retry")
    retry = _retry(retry_node, proc, step) if retry_node is not None else None
    on_error_node = args.get("onError")
    on_error = proc.route(on_error_node, step.context, "onError", here)
    add_route(step, "error", on_error_node, on_error)
    produces = _var_names(args, "produces", proc, step)
    uses = _var_names(args, "uses", proc, step)
    proc.produced.update(produces)
    return _Resilience(retry, on_error, produces, uses)


def _one_action(args: YMap, proc: Proc, step: StepNode) -> str | None:
    present = [k for k in ACTIONS if k in args.entries]
    if not present:
        proc.reader.error(
            args.pos,
            step.context,
            f"a {step.kind} needs exactly one action: setField+value, setRelationField+value, "
            "notify or delegate",
        )
        return None
    for extra in present[1:]:
        if "notify" in present:
            other = extra if extra != "notify" else present[0]
            message = f"a notify step carries no other action; move [{other}] to a step of its own"
        else:
            message = (
                f"declares both [{present[0]}] and [{extra}]; a {step.kind} has exactly one action"
            )
        proc.reader.error(args.entries[extra].key_pos, step.context, message)
    return present[0]


def _stray_args(args: YMap, action: str | None, proc: Proc, step: StepNode) -> None:
    """Args that only make sense with an action this step does not have."""
    reader = proc.reader
    if action is None:
        return
    if "value" in args.entries and action not in ("setField", "setRelationField"):
        reader.error(
            key_pos(args, "value"), step.context, "value belongs to setField or setRelationField"
        )
    if "fields" in args.entries and action != "delegate":
        reader.error(key_pos(args, "fields"), step.context, "fields belongs to a delegate")
    for key in ("retry", "onError"):
        if key in args.entries and action not in ("delegate", "notify"):
            reader.error(
                key_pos(args, key),
                step.context,
                f"{key} applies only to a serviceTask whose action is delegate or notify; "
                f"[{action}] does not fail",
            )
    for key in ("produces", "uses"):
        if key in args.entries and action != "delegate":
            reader.error(
                key_pos(args, key),
                step.context,
                f"{key} applies only to a delegate serviceTask; [{action}] exchanges no vars",
            )


def _retry(node: YNode, proc: Proc, step: StepNode) -> RetryPolicy | None:
    reader, context = proc.reader, step.context
    if not isinstance(node, YMap):
        shown = kind_name(node)
        reader.error(node.pos, context, f"retry must be a mapping {{ count, every }}, got {shown}")
        return None
    reader.keys(node, ("count", "every"), context)
    count = _count(node, proc, step)
    every_node = node.get("every")
    every = None
    if every_node is None:
        reader.error(node.pos, context, "retry needs [every]: an ISO-8601 duration such as PT30S")
    elif not isinstance(every_node, YScalar):
        reader.error(
            every_node.pos,
            context,
            f"retry every must be an ISO-8601 duration, got {kind_name(every_node)}",
        )
    else:
        every = duration(every_node, context, "retry every", reader)
    if count is None or every is None:
        return None
    return RetryPolicy(count, every, node.pos)


def _count(node: YMap, proc: Proc, step: StepNode) -> int | None:
    count_node = node.get("count")
    if count_node is None:
        proc.reader.error(
            node.pos, step.context, "retry needs [count]: the further attempts, an integer >= 1"
        )
        return None
    if not isinstance(count_node, YScalar):
        shown = kind_name(count_node)
    elif isinstance(count_node.value, int) and not isinstance(count_node.value, bool):
        if count_node.value >= 1:
            return count_node.value
        shown = str(count_node.value)
    else:
        shown = _scalar_text(count_node)
    quoted = " (it is quoted text)" if _is_text(count_node) else ""
    proc.reader.error(
        count_node.pos, step.context, f"retry count [{shown}] must be an integer >= 1{quoted}"
    )
    return None


def _var_names(args: YMap, key: str, proc: Proc, step: StepNode) -> tuple[str, ...]:
    reader = proc.reader
    names: list[str] = []
    for text, pos in reader.strings(args.get(key), step.context, key):
        if not proc.has_vars:
            reader.error(
                pos,
                step.context,
                f"{key} [{text}] names a var, but the process declares no vars; declare it "
                f"under vars: [ {{ name: {text} }} ]",
            )
        elif text not in proc.vars:
            reader.error(
                pos, step.context, f"{key} [{text}] is not a declared var{suggest(text, proc.vars)}"
            )
        else:
            names.append(text)
            if key == "uses":
                step.uses.append((text, pos))
    if key == "produces":
        step.produces = tuple(names)
    return tuple(names)


def _scalar_text(node: YScalar) -> str:
    value = node.value
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _is_text(node: YNode) -> bool:
    return isinstance(node, YScalar) and isinstance(node.value, str)


# --- end -------------------------------------------------------------------------------------


def _end(args: YMap, proc: Proc, step: StepNode, here: str | None) -> IntentStep | None:
    step.falls_through = False
    return EndStep(here, step.pos) if here is not None else None


_BY_KIND = {
    "serviceTask": _service,
    "script": _service,
    "userTask": user_step,
    "decision": decision_step,
    "wait": wait_step,
    "parallel": parallel_step,
    "end": _end,
}
