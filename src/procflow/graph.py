"""Draw a definition as a Mermaid flowchart or a Graphviz digraph (``procflow graph``).

Both dialects are first turned into one small drawing model (:class:`Graph`: nodes, clusters,
edges), which two emitters print. The drawing is deterministic: nodes and clusters appear in
declaration order, edges in the order of the steps they leave.

Label conventions (also in the docs):

* intent processes: a ``start`` circle, one node per step (task/script: rectangle, user task:
  rounded, decision: diamond, wait: hexagon, end step: double circle), one shared ``end`` node.
  Solid edges are ``next`` and fall-through; decision edges say ``yes``/``no``; dotted edges are
  timers (``after P2D (task stays open)``, ``expires at validUntil``); dashed edges are failures
  (``on error (after 3 retries)``, ``on error``) and the abort route (from ``aborted: status in
  [...]``). A step's retry policy is a label line: ``retry 3 × PT30S``.
* flows: ``start`` → top-level steps in order → ``end``; ``group``/``for_each``/``repeat`` are
  clusters labelled ``<id>: <construct>``; an ``if`` is the label of the edge into the step, with a
  dotted ``skip`` edge past it; ``recover`` steps are a cluster reached by a dashed ``on failure``
  edge from their owner (the start node for the flow's own ``recover``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from procflow.errors import UsageError
from procflow.expr.duration import format_duration
from procflow.model.ir import (
    END,
    AbortOn,
    ActionStep,
    Application,
    Assignee,
    Decision,
    EndStep,
    Entity,
    FailStep,
    Flow,
    FlowStep,
    ForEachStep,
    GroupStep,
    IntentAction,
    IntentStep,
    Notify,
    Process,
    RepeatStep,
    RetryPolicy,
    ServiceTask,
    SetField,
    SetRelationField,
    SetStep,
    UserTask,
    WaitForStep,
    WaitRecord,
    WaitStep,
)
from procflow.model.source import suggest

Format = Literal["mermaid", "dot"]
Shape = Literal["start", "end", "task", "user", "decision", "wait", "abort"]
Style = Literal["solid", "dashed", "dotted"]

START_ID = "start_node"
END_ID = "end_node"
ABORT_ID = "abort_node"
MAX_LINE = 80  # label lines longer than this are cut with "…"

# --- the drawing model ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    lines: tuple[str, ...]
    shape: Shape


@dataclass(slots=True)
class Cluster:
    id: str
    label: str
    items: list[Node | Cluster] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Edge:
    src: str  # a node id or a cluster id
    dst: str
    label: str = ""
    style: Style = "solid"


@dataclass(slots=True)
class Graph:
    title: str
    items: list[Node | Cluster] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)

    def edge(self, src: str, dst: str, label: str = "", style: Style = "solid") -> None:
        e = Edge(src, dst, label, style)
        if e not in self.edges:
            self.edges.append(e)


def walk(items: Sequence[Node | Cluster]) -> Iterator[Node | Cluster]:
    """Every node and cluster, depth first, in order."""
    for item in items:
        yield item
        if isinstance(item, Cluster):
            yield from walk(item.items)


# --- public API ----------------------------------------------------------------------------


def names(defn: Application | Flow) -> tuple[str, ...]:
    """What ``--name`` can choose: the application's processes, or the flow itself."""
    if isinstance(defn, Flow):
        return (defn.name,)
    return tuple(p.name for p in defn.processes)


def select(defn: Application | Flow, name: str | None) -> Process | Flow:
    """The definition ``procflow graph PATH [--name N]`` draws."""
    if isinstance(defn, Flow):
        if name is None or name == defn.name:
            return defn
        raise UsageError(
            f"no process [{name}] in flow file {defn.file}: it holds the flow [{defn.name}]"
            f"{suggest(name, [defn.name])}"
        )
    available = ", ".join(names(defn)) or "none"
    if name is None:
        if len(defn.processes) == 1:
            return defn.processes[0]
        if not defn.processes:
            raise UsageError(f"application [{defn.name}] declares no processes to draw")
        raise UsageError(
            f"application [{defn.name}] declares several processes ({available}); "
            "choose one with --name"
        )
    for p in defn.processes:
        if p.name == name:
            return p
    raise UsageError(
        f"no process [{name}] in application [{defn.name}] (available: {available})"
        f"{suggest(name, names(defn))}"
    )


def build(definition: Process | Flow, application: Application | None = None) -> Graph:
    """The drawing model of a process (``application`` resolves seeded names) or a flow."""
    if isinstance(definition, Flow):
        return _FlowBuilder(definition).build()
    return _IntentBuilder(definition, application).build()


def render(
    definition: Process | Flow, fmt: Format, *, application: Application | None = None
) -> str:
    """Mermaid or DOT text for ``definition``."""
    graph = build(definition, application)
    if fmt == "mermaid":
        return to_mermaid(graph)
    if fmt == "dot":
        return to_dot(graph)
    raise UsageError(f"unknown graph format [{fmt}]; use mermaid, dot or svg")


def draw(defn: Application | Flow, name: str | None, fmt: str) -> str:
    """What ``procflow graph`` prints: select, render, and for ``svg`` run Graphviz."""
    chosen = select(defn, name)
    app = defn if isinstance(defn, Application) else None
    if fmt == "svg":
        return to_svg(render(chosen, "dot", application=app))
    if fmt in ("mermaid", "dot"):
        return render(chosen, "mermaid" if fmt == "mermaid" else "dot", application=app)
    raise UsageError(f"unknown graph format [{fmt}]{suggest(fmt, ['mermaid', 'dot', 'svg'])}")


def to_svg(dot_text: str) -> str:
    """Run Graphviz's ``dot -Tsvg``; a missing ``dot`` is a usage error that says what to do."""
    exe = shutil.which("dot")
    if exe is None:
        raise UsageError(
            "--format svg needs Graphviz's `dot` on PATH; install Graphviz, "
            "or use --format dot or --format mermaid"
        )
    done = subprocess.run(
        [exe, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise UsageError(f"dot failed: {done.stderr.strip()}")
    return done.stdout


# --- text helpers --------------------------------------------------------------------------


def _clean(text: str) -> str:
    """One line, whitespace collapsed, cut at MAX_LINE characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE else flat[: MAX_LINE - 1] + "…"


def _source(value: object) -> str:
    """The source text of a template (``{{ }}`` around a whole expression dropped)."""
    text = value if isinstance(value, str) else getattr(value, "text", None)
    text = text.strip() if isinstance(text, str) else str(value)
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return text[2:-2].strip()
    return text


def short_duration(td: timedelta) -> str:
    """The flow dialect's short form: ``30s``, ``1h30m``, ``24h``, ``2d`` (days from two up)."""
    total_ms = round(td.total_seconds() * 1000)
    days, rest = divmod(total_ms, 86_400_000) if total_ms >= 2 * 86_400_000 else (0, total_ms)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, ms = divmod(rest, 1000)
    parts = ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s"), (ms, "ms"))
    return "".join(f"{v}{u}" for v, u in parts if v) or "0s"


class _Ids:
    """Stable, syntax-safe node ids: ``<prefix>_<name>`` with anything odd replaced."""

    def __init__(self) -> None:
        self._given: dict[tuple[str, str], str] = {}
        self._used: set[str] = {START_ID, END_ID, ABORT_ID}

    def __call__(self, prefix: str, name: str) -> str:
        key = (prefix, name)
        if key not in self._given:
            base = f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
            candidate, n = base, 2
            while candidate in self._used:
                candidate, n = f"{base}_{n}", n + 1
            self._used.add(candidate)
            self._given[key] = candidate
        return self._given[key]


# --- intent processes ----------------------------------------------------------------------


class _IntentBuilder:
    def __init__(self, process: Process, application: Application | None) -> None:
        self.process = process
        self.app = application
        self.g = Graph(f"process {process.name}")
        self.ids = _Ids()
        self.end_used = False
        self.end_step = any(isinstance(s, EndStep) and s.name == END for s in process.steps)

    def build(self) -> Graph:
        self.g.items.append(Node(START_ID, ("start",), "start"))
        if self.process.abort_on is not None:
            self.g.items.append(
                Node(ABORT_ID, (self._abort_label(self.process.abort_on),), "abort")
            )
        self.g.items.extend(self._node(s) for s in self.process.steps)
        first = self.process.steps[0].name if self.process.steps else END
        self.g.edge(START_ID, self._to(first), self._trigger_label())
        if self.process.abort_on is not None:
            self.g.edge(ABORT_ID, self._to(self.process.abort_on.then), "then", "dashed")
        for step in self.process.steps:
            self._routes(step)
        if self.end_used:
            self.g.items.append(Node(END_ID, ("end",), "end"))
        return self.g

    # nodes

    def _node(self, step: IntentStep) -> Node:
        nid = self.ids("s", step.name)
        if isinstance(step, ServiceTask):
            return Node(nid, self._task_lines(step), "task")
        if isinstance(step, UserTask):
            return Node(nid, self._user_lines(step), "user")
        if isinstance(step, Decision):
            return Node(nid, (step.name, _source(step.source)), "decision")
        if isinstance(step, WaitRecord):
            return Node(nid, self._wait_lines(step), "wait")
        return Node(nid, (step.name,), "end")

    def _task_lines(self, step: ServiceTask) -> tuple[str, ...]:
        lines = [step.name, self._action(step.action)]
        if step.kind == "script":
            lines[0] += " (script)"
        if step.retry is not None:
            lines.append(_retry_line(step.retry, format_duration))
        return tuple(lines)

    def _user_lines(self, step: UserTask) -> tuple[str, ...]:
        lines = [step.name, _assignee(step.assignee)]
        if step.form:
            lines.append(f"form {step.form}")
        if step.on_complete is not None:
            lines.append(f"on complete: {self._action(step.on_complete)}")
        return tuple(lines)

    def _wait_lines(self, step: WaitRecord) -> tuple[str, ...]:
        via = f" via {step.via}" if step.via else ""
        lines = [step.name, f"wait for {step.event} {step.entity}{via}"]
        if step.when_source:
            lines.append(f"when {_source(step.when_source)}")
        return tuple(lines)

    def _action(self, action: IntentAction) -> str:
        if isinstance(action, SetField):
            value = "{error}" if action.is_error else _literal(action.value)
            return f"set {action.field} = {value}"
        if isinstance(action, SetRelationField):
            return f"set {action.relation} = {self._seeded(action.relation, action.value)}"
        if isinstance(action, Notify):
            return f"notify {action.to.address or '.'.join(action.to.path)}"
        return f"delegate {action.ref}"

    def _trigger_label(self) -> str:
        t = self.process.trigger
        if t is None:
            return ""
        when = f" when {' and '.join(t.when_source)}" if t.when_source else ""
        return f"{t.event} {t.entity}{when}"

    def _abort_label(self, abort: AbortOn) -> str:
        relation = self._status_relation()
        shown = [self._seeded(relation, s) if relation else str(s) for s in abort.statuses]
        return f"aborted: status in [{', '.join(shown)}]"

    # seeded names (only with the application at hand)

    def _status_relation(self) -> str | None:
        entity = self._trigger_entity()
        status = entity.status_relation if entity is not None else None
        return status.name if status is not None else None

    def _trigger_entity(self) -> Entity | None:
        if self.app is None or self.process.trigger is None:
            return None
        return self.app.entity(self.process.trigger.entity)

    def _seeded(self, relation: str, seed_id: int) -> str:
        entity = self._trigger_entity()
        rel = entity.relation(relation) if entity is not None else None
        if rel is None or self.app is None:
            return str(seed_id)
        for seed in self.app.seeds:
            for row in seed.rows if seed.entity == rel.to else ():
                if row.get("id") == seed_id and isinstance(row.get("name"), str):
                    return f"{row['name']}({seed_id})"
        return str(seed_id)

    # edges

    def _to(self, route: str) -> str:
        if route == END and not self.end_step:
            self.end_used = True
            return END_ID
        return self.ids("s", route)

    def _main(self, step: IntentStep) -> str:
        return step.next or self.process.fall_through(step.name)

    def _routes(self, step: IntentStep) -> None:
        src = self.ids("s", step.name)
        if isinstance(step, EndStep):
            return
        if isinstance(step, Decision):
            self.g.edge(src, self._to(step.then), "yes")
            self.g.edge(src, self._to(step.else_ or self._main(step)), "no")
            return
        self.g.edge(src, self._to(self._main(step)))
        if isinstance(step, ServiceTask) and step.on_error is not None:
            self.g.edge(src, self._to(step.on_error), _on_error_label(step.retry), "dashed")
        if isinstance(step, UserTask):
            self._timers(src, step)

    def _timers(self, src: str, step: UserTask) -> None:
        if step.timeout is not None:
            label = f"after {format_duration(step.timeout.after)} (task stays open)"
            self.g.edge(src, self._to(step.timeout.then), label, "dotted")
        if step.expire is not None:
            label = f"expires at {step.expire.field}"
            self.g.edge(src, self._to(step.expire.then), label, "dotted")


def _literal(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return json.dumps(value, default=str)


def _assignee(a: Assignee) -> str:
    if a.kind == "personal":
        return "assignee: personal (owner)"
    if a.kind == "path":
        return f"assignee: {'.'.join(a.path)} (fallback {a.role})"
    return f"assignee: {a.role}"


def _retry_line(retry: RetryPolicy, fmt: Callable[[timedelta], str]) -> str:
    return f"retry {retry.count} × {fmt(retry.every)}"


def _on_error_label(retry: RetryPolicy | None) -> str:
    if retry is None:
        return "on error"
    retries = "1 retry" if retry.count == 1 else f"{retry.count} retries"
    return f"on error (after {retries})"


# --- flows -----------------------------------------------------------------------------------

# A place an edge into the next step comes from: (node or cluster id, label, style).
_Source = tuple[str, str, Style]


class _FlowBuilder:
    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.g = Graph(f"flow {flow.name}")
        self.ids = _Ids()

    def build(self) -> Graph:
        self.g.items.append(Node(START_ID, ("start",), "start"))
        entry: list[_Source] = [(START_ID, self._trigger(), "solid")]
        exits = self._sequence(self.flow.steps, self.g.items, entry)
        if self.flow.recover is not None:
            rid = self._recover("flow", self.flow.recover, self.g.items)
            self.g.edge(START_ID, rid, "on failure", "dashed")
            exits.append((rid, "recovered", "solid"))
        for src, label, style in exits:
            self.g.edge(src, END_ID, label, style)
        self.g.items.append(Node(END_ID, ("end",), "end"))
        return self.g

    def _trigger(self) -> str:
        t = self.flow.trigger
        if t is None:
            return ""
        when = f" when {_source(t.when)}" if t.when is not None else ""
        return f"on {t.event} as {t.as_}{when}"

    def _sequence(
        self, steps: Sequence[FlowStep], into: list[Node | Cluster], sources: list[_Source]
    ) -> list[_Source]:
        for step in steps:
            sources = self._step(step, into, sources)
        return sources

    def _step(
        self, step: FlowStep, into: list[Node | Cluster], sources: list[_Source]
    ) -> list[_Source]:
        target = self._place(step, into)
        guard = f"if {_source(step.mods.if_)}" if step.mods.if_ is not None else ""
        for src, label, style in sources:
            self.g.edge(src, target, " · ".join(x for x in (label, guard) if x), style)
        out: list[_Source] = [(target, "", "solid")]
        if guard:
            out += [(src, "skip", "dotted") for src, _, _ in sources]
        if step.mods.recover is not None:
            rid = self._recover(step.id, step.mods.recover, into)
            self.g.edge(target, rid, "on failure", "dashed")
            out.append((rid, "recovered", "solid"))
        return out

    def _place(self, step: FlowStep, into: list[Node | Cluster]) -> str:
        """Add the step's node (or cluster, with its inner steps) and return its id."""
        if isinstance(step, RepeatStep | ForEachStep | GroupStep):
            return self._cluster(self.ids("cluster", step.id), _construct(step), step.steps, into)
        node = Node(self.ids("s", step.id), _flow_lines(step), _flow_shape(step))
        into.append(node)
        return node.id

    def _cluster(
        self, cid: str, label: str, steps: Sequence[FlowStep], into: list[Node | Cluster]
    ) -> str:
        cluster = Cluster(cid, _clean(label))
        into.append(cluster)
        self._sequence(steps, cluster.items, [])
        if not steps:
            cluster.items.append(Node(self.ids("empty", cid), ("(no steps)",), "task"))
        return cid

    def _recover(self, owner: str, steps: Sequence[FlowStep], into: list[Node | Cluster]) -> str:
        return self._cluster(self.ids("cluster_recover", owner), f"recover {owner}", steps, into)


def _construct(step: RepeatStep | ForEachStep | GroupStep) -> str:
    if isinstance(step, RepeatStep):
        every = short_duration(step.every)
        return f"{step.id}: repeat every {every}, max {step.max}, until {_source(step.until)}"
    if isinstance(step, ForEachStep):
        return f"{step.id}: for each {step.as_} in {_source(step.items)}"
    return f"{step.id}: group"


def _flow_shape(step: FlowStep) -> Shape:
    return "wait" if isinstance(step, WaitStep | WaitForStep) else "task"


def _flow_lines(step: FlowStep) -> tuple[str, ...]:
    lines = [step.id, _flow_action(step)]
    if isinstance(step, ActionStep) and step.mods.retry is not None:
        lines.append(_retry_line(step.mods.retry, short_duration))
    if isinstance(step, ActionStep) and step.mods.timeout is not None:
        lines.append(f"timeout {short_duration(step.mods.timeout)} per attempt")
    if isinstance(step, WaitForStep) and step.lookback is not None:
        lines.append(f"lookback {short_duration(step.lookback)}")
    if step.mods.optional:
        lines.append("optional")
    return tuple(lines)


def _flow_action(step: FlowStep) -> str:
    if isinstance(step, ActionStep):
        return f"{step.connector}.{step.action}"
    if isinstance(step, WaitStep):
        if step.for_ is not None:
            return f"wait {_source(step.for_)}"
        return f"wait until {_source(step.until)}"
    if isinstance(step, WaitForStep):
        return f"wait for {step.event} (timeout {short_duration(step.timeout)})"
    if isinstance(step, SetStep):
        return f"set {', '.join(step.values)}"
    if isinstance(step, FailStep):
        return f"fail: {_source(step.message)}"
    return type(step).__name__  # containers are clusters; not reached


# --- Mermaid -------------------------------------------------------------------------------

_MERMAID_ESCAPES = {
    "#": "#35;",
    "&": "#38;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    "`": "#96;",
}
_MERMAID_SHAPES: dict[Shape, tuple[str, str]] = {
    "start": ("((", "))"),
    "end": ("(((", ")))"),
    "task": ("[", "]"),
    "user": ("(", ")"),
    "decision": ("{", "}"),
    "wait": ("{{", "}}"),
    "abort": ("([", "])"),
}
_MERMAID_ARROWS: dict[Style, str] = {"solid": "-->", "dashed": "-.->", "dotted": "-.->"}


def _mermaid_text(text: str) -> str:
    return "".join(_MERMAID_ESCAPES.get(c, c) for c in text)


def _mermaid_label(lines: Sequence[str]) -> str:
    return '"' + "<br/>".join(_mermaid_text(_clean(line)) for line in lines) + '"'


def to_mermaid(graph: Graph) -> str:
    out = ["flowchart TD", f"  %% {_clean(graph.title)}"]
    out += _mermaid_items(graph.items, "  ")
    out += [_mermaid_edge(e) for e in graph.edges]
    dotted = [str(i) for i, e in enumerate(graph.edges) if e.style == "dotted"]
    if dotted:
        out.append(f"  linkStyle {','.join(dotted)} stroke-dasharray: 2 4")
    return "\n".join(out) + "\n"


def _mermaid_items(items: Sequence[Node | Cluster], indent: str) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, Node):
            left, right = _MERMAID_SHAPES[item.shape]
            out.append(f"{indent}{item.id}{left}{_mermaid_label(item.lines)}{right}")
            continue
        out.append(f"{indent}subgraph {item.id}[{_mermaid_label([item.label])}]")
        out.append(f"{indent}  direction TB")
        out += _mermaid_items(item.items, indent + "  ")
        out.append(f"{indent}end")
    return out


def _mermaid_edge(edge: Edge) -> str:
    arrow = _MERMAID_ARROWS[edge.style]
    label = f"|{_mermaid_label([edge.label])}|" if edge.label else ""
    return f"  {edge.src} {arrow}{label} {edge.dst}"


# --- Graphviz DOT --------------------------------------------------------------------------

_DOT_SHAPES: dict[Shape, str] = {
    "start": "shape=circle",
    "end": "shape=doublecircle",
    "task": "shape=box",
    "user": 'shape=box, style="rounded"',
    "decision": "shape=diamond",
    "wait": "shape=hexagon",
    "abort": "shape=octagon",
}


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_label(lines: Sequence[str]) -> str:
    escaped = [_dot_quote(_clean(line))[1:-1] for line in lines]
    return '"' + "\\n".join(escaped) + '"'


def to_dot(graph: Graph) -> str:
    out = [
        f"digraph {_dot_quote(graph.title)} {{",
        '  graph [rankdir=TB, compound=true, fontname="Helvetica"];',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    out += _dot_items(graph.items, "  ")
    ends = _cluster_ends(graph)
    out += [_dot_edge(e, ends) for e in graph.edges]
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_items(items: Sequence[Node | Cluster], indent: str) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, Node):
            attrs = f"{_DOT_SHAPES[item.shape]}, label={_dot_label(item.lines)}"
            out.append(f"{indent}{_dot_quote(item.id)} [{attrs}];")
            continue
        out.append(f"{indent}subgraph {_dot_quote(item.id)} {{")
        out.append(f'{indent}  label={_dot_label([item.label])}; style="rounded";')
        out += _dot_items(item.items, indent + "  ")
        out.append(f"{indent}}}")
    return out


def _cluster_ends(graph: Graph) -> dict[str, tuple[str, str]]:
    """Each cluster's first and last node: DOT edges attach to nodes, clipped by lhead/ltail."""
    ends: dict[str, tuple[str, str]] = {}
    for item in walk(graph.items):
        if isinstance(item, Cluster):
            nodes = [n.id for n in walk(item.items) if isinstance(n, Node)]
            ends[item.id] = (nodes[0], nodes[-1])
    return ends


def _dot_edge(edge: Edge, ends: dict[str, tuple[str, str]]) -> str:
    attrs: list[str] = []
    src, dst = edge.src, edge.dst
    if src in ends:
        src = ends[src][1]
        attrs.append(f"ltail={_dot_quote(edge.src)}")
    if dst in ends:
        dst = ends[dst][0]
        attrs.append(f"lhead={_dot_quote(edge.dst)}")
    if edge.label:
        attrs.append(f"label={_dot_label([edge.label])}")
    if edge.style != "solid":
        attrs.append(f"style={edge.style}")
    suffix = f" [{', '.join(attrs)}]" if attrs else ""
    return f"  {_dot_quote(src)} -> {_dot_quote(dst)}{suffix};"
