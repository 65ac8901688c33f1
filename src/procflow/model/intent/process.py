"""One process: trigger, vars, steps, abortOn, and the checks that need all of them."""

from __future__ import annotations

from procflow.expr import Expr
from procflow.model.intent.expr import check_guard, parse_expr
from procflow.model.intent.graph import AbortRoute, Graph, StepNode, analyse
from procflow.model.intent.parallel import check_forks, with_members
from procflow.model.intent.proc import Env, Proc, key_pos
from procflow.model.intent.steps import compile_step
from procflow.model.intent.values import read_description
from procflow.model.intent.varflow import check_var_paths
from procflow.model.ir import END, JOIN, AbortOn, IntentStep, Process, Trigger, VarDecl
from procflow.model.reading.reader import IDENT
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq
from procflow.model.source import Pos, suggest

PROCESS_KEYS = ("name", "description", "trigger", "vars", "abortOn", "steps")
TRIGGER_KEYS = ("onCreate", "onUpdate", "onDelete", "when", "businessKey")
EVENTS = ("onCreate", "onUpdate", "onDelete")
TASK_KINDS = ("serviceTask", "script", "userTask")


def compile_process(node: YMap, index: int, env: Env) -> Process | None:
    reader = env.reader
    raw = node.get("name")
    label = raw.value if isinstance(raw, YScalar) and isinstance(raw.value, str) else None
    proc = Proc(env, label or "", f"process [{label}]" if label else f"process #{index + 1}")
    reader.keys(node, PROCESS_KEYS, proc.context)
    name = reader.ident(reader.require(node, "name", proc.context), proc.context, "process name")
    description = read_description(node, proc.context, reader)
    trigger = _trigger(node, proc)
    var_nodes = _vars(node, proc)
    items = _step_items(node, proc)
    _declare_steps(items, proc)
    steps: list[IntentStep] = []
    graph_nodes: list[StepNode] = []
    for i, item in enumerate(items):
        step, graph_node = compile_step(item, i, proc)
        graph_nodes.append(graph_node)
        if step is not None:
            steps.append(step)
    graph = Graph(graph_nodes)
    branches = check_forks(graph, reader)
    abort_on, abort_route = _abort_on(node, proc, graph)
    _check_vars(var_nodes, proc)
    clear_after = {name: var.clear_after for name, var in proc.vars.items()}
    check_var_paths(graph, branches, clear_after, reader)
    analyse(graph, abort_route, reader)
    if name is None:
        return None
    variables = tuple(proc.vars.values())
    steps = with_members(steps, branches)
    return Process(name, tuple(steps), node.pos, description, trigger, variables, abort_on)


# --- trigger ---------------------------------------------------------------------------------


def _trigger(node: YMap, proc: Proc) -> Trigger | None:
    reader = proc.reader
    context = f"{proc.context} trigger"
    tnode = reader.map(node.get("trigger"), context, "trigger")
    proc.has_trigger = "trigger" in node.entries
    if tnode is None:
        return None
    reader.keys(tnode, TRIGGER_KEYS, context)
    events = [k for k in EVENTS if k in tnode.entries]
    if not events:
        reader.error(tnode.pos, context, "needs one of onCreate, onUpdate, onDelete: <Entity>")
        return None
    for extra in events[1:]:
        reader.error(
            key_pos(tnode, extra),
            context,
            f"declares both [{events[0]}] and [{extra}]; a process starts on one event kind",
        )
    proc.event = events[0]
    entity = proc.env.catalog.entity(tnode.get(events[0]), context, events[0])
    proc.entity = entity
    guards, sources = _guards(tnode, proc, context)
    business_key = _business_key(tnode, proc, context)
    if entity is None:
        return None
    return Trigger(events[0], entity.name, tnode.pos, guards, sources, business_key)  # type: ignore[arg-type]


def _guards(tnode: YMap, proc: Proc, context: str) -> tuple[tuple[Expr, ...], tuple[str, ...]]:
    reader = proc.reader
    node = tnode.get("when")
    items: list[YNode] = node.items if isinstance(node, YSeq) else [node] if node else []
    exprs: list[Expr] = []
    sources: list[str] = []
    for item in items:
        text = reader.string(item, context, "when")
        if text is None or not isinstance(item, YScalar):
            continue
        expr = parse_expr(item, text, context, "when", reader)
        if expr is None:
            continue
        if proc.entity is not None:
            check_guard(expr, item, text, proc.entity, context, reader)
        exprs.append(expr)
        sources.append(text)
    return tuple(exprs), tuple(sources)


def _business_key(tnode: YMap, proc: Proc, context: str) -> str | None:
    node = tnode.get("businessKey")
    key = proc.reader.string(node, context, "businessKey")
    entity = proc.entity
    if key is None or node is None or entity is None:
        return key
    if entity.field(key) is None:
        names = (f.name for f in entity.fields)
        proc.reader.error(
            node.pos,
            context,
            f"businessKey [{key}] is not a field of [{entity.name}]{suggest(key, names)}",
        )
        return None
    return key


# --- vars ------------------------------------------------------------------------------------


def _vars(node: YMap, proc: Proc) -> dict[str, YMap]:
    """Declare the vars (before steps read produces/uses); returns each var's node."""
    reader = proc.reader
    context = f"{proc.context} vars"
    proc.has_vars = "vars" in node.entries
    nodes: dict[str, YMap] = {}
    for item in reader.seq(node.get("vars"), context, "vars"):
        vnode = reader.map(item, context, "each var ({ name, clearAfter })")
        if vnode is None:
            continue
        reader.keys(vnode, ("name", "clearAfter"), context)
        name_node = vnode.get("name")
        if name_node is None:
            reader.error(vnode.pos, context, "a var needs a name: { name: dbPassword }")
            continue
        name = reader.ident(name_node, context, "var name")
        if name is None:
            continue
        if name in proc.vars:
            first = proc.vars[name].pos.line
            reader.error(
                name_node.pos, context, f"var [{name}] is declared twice (first at line {first})"
            )
            continue
        clear = reader.string(vnode.get("clearAfter"), context, "clearAfter")
        proc.vars[name] = VarDecl(name, name_node.pos, clear)
        nodes[name] = vnode
    return nodes


def _check_vars(nodes: dict[str, YMap], proc: Proc) -> None:
    for name, vnode in nodes.items():
        context = f"{proc.context} var [{name}]"
        clear_node = vnode.get("clearAfter")
        target = proc.vars[name].clear_after
        if target is not None and clear_node is not None:
            _clear_after(target, clear_node.pos, context, proc)
        if name not in proc.produced:
            proc.reader.warning(
                proc.vars[name].pos,
                context,
                "no step produces this var (list it under a delegate step's produces:), so every "
                "read of it fails",
            )


def _clear_after(target: str, pos: Pos, context: str, proc: Proc) -> None:
    reader = proc.reader
    kind = proc.steps.get(target)
    if target == END and kind is None:
        reader.error(
            pos,
            context,
            "clearAfter [end] names no step; name the serviceTask, script or userTask after which "
            "the var is erased (every var is erased when the run ends anyway)",
        )
    elif kind is None:
        reader.error(
            pos,
            context,
            f"clearAfter [{target}] is not a step of this process{suggest(target, proc.steps)}",
        )
    elif kind not in TASK_KINDS:
        reader.error(
            pos,
            context,
            f"clearAfter [{target}] names {'an' if kind == 'end' else 'a'} {kind} step, which "
            "never completes work; name a "
            "serviceTask, script or userTask",
        )


# --- steps -----------------------------------------------------------------------------------


def _step_items(node: YMap, proc: Proc) -> list[YMap]:
    reader = proc.reader
    steps_node = reader.require(node, "steps", proc.context, "a non-empty list")
    items = reader.seq(steps_node, proc.context, "steps")
    empty = isinstance(steps_node, YSeq) or (
        isinstance(steps_node, YScalar) and steps_node.value is None
    )
    if steps_node is not None and not items and empty:
        reader.error(
            steps_node.pos, proc.context, "steps is empty; a process needs at least one step"
        )
    return [m for item in items if (m := reader.map(item, proc.context, "each step")) is not None]


def _declare_steps(items: list[YMap], proc: Proc) -> None:
    """Pass 1 over the steps: their names (so routes may point forward) and kinds."""
    first: dict[str, int] = {}
    for item in items:
        name_node = item.get("name")
        kind_node = item.get("kind")
        if not isinstance(name_node, YScalar) or not isinstance(name_node.value, str):
            continue
        name = name_node.value
        if not IDENT.match(name):
            continue
        if name in first:
            proc.reader.error(
                name_node.pos,
                f"{proc.context} step [{name}]",
                f"step name [{name}] is used twice (first at line {first[name]})",
            )
            continue  # routes to [name] are ambiguous: the graph treats them as open
        first[name] = name_node.pos.line
        kind = kind_node.value if isinstance(kind_node, YScalar) else None
        proc.steps[name] = kind if isinstance(kind, str) else "?"


# --- abortOn ---------------------------------------------------------------------------------


def _abort_on(node: YMap, proc: Proc, graph: Graph) -> tuple[AbortOn | None, AbortRoute | None]:
    reader = proc.reader
    context = f"{proc.context} abortOn"
    anode = reader.map(node.get("abortOn"), context, "abortOn")
    if anode is None:
        return None, None
    reader.keys(anode, ("status", "then"), context)
    statuses = _abort_statuses(anode, proc, context)
    then_node = reader.require(anode, "then", context, "the cleanup step, or end")
    then = proc.route(then_node, context, "then", None)
    if then == JOIN and then not in proc.steps and then_node is not None:
        reader.error(
            then_node.pos, context, "then [join] names no step; name the cleanup step, or end"
        )
        then = None
    if then is not None and then != END:
        _check_cleanup(graph.by_name.get(then), then_node, context, proc)
    if proc.event == "onDelete":
        reader.error(
            key_pos(node, "abortOn"),
            context,
            "never fires: an onDelete process runs after the record is gone, so its status "
            "cannot change",
        )
    # a then that names no step (or none) still makes an abort route, to an unknown cleanup
    route = AbortRoute(then, (then_node or anode).pos, context)
    if then is None or statuses is None:
        return None, route
    return AbortOn(tuple(statuses), then, anode.pos), route


def _abort_statuses(anode: YMap, proc: Proc, context: str) -> list[int] | None:
    reader = proc.reader
    status_node = reader.require(anode, "status", context, "a status id or name, or a list")
    if status_node is None:
        return None
    entity = proc.needs_record(status_node.pos, context, "status")
    if entity is None:
        return None
    rel = entity.status_relation
    if rel is None:
        reader.error(
            status_node.pos,
            context,
            f"[{entity.name}] has no status relation (a to-one relation with function: "
            "EntityStatus to a setting entity), so no status can abort the run",
        )
        return None
    items = status_node.items if isinstance(status_node, YSeq) else [status_node]
    if not items:
        reader.error(status_node.pos, context, "status lists no statuses")
        return None
    resolved = [proc.env.catalog.resolve(rel.to, item, context, "status") for item in items]
    ids = [r for r in resolved if r is not None]
    return ids if len(ids) == len(resolved) else None


def _check_cleanup(
    step: StepNode | None, then_node: YNode | None, context: str, proc: Proc
) -> None:
    if step is None or then_node is None or step.is_cleanup_action:
        return
    what = f"a {step.kind} with {step.action}" if step.action else f"a {step.kind}"
    proc.reader.error(
        then_node.pos,
        context,
        f"then [{step.name}] is {what}; the cleanup that runs alone after an abort must be a "
        "setField or setRelationField serviceTask",
    )
