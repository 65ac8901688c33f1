"""The drawing model of a flow: its steps in order, containers and recover blocks as clusters."""

from __future__ import annotations

from collections.abc import Sequence

from procflow.graph.labels import clean, retry_line, short_duration, source_text
from procflow.graph.model import END_ID, START_ID, Cluster, Graph, Ids, Node, Shape, Style
from procflow.model.ir import (
    ActionStep,
    CallStep,
    FailStep,
    Flow,
    FlowStep,
    ForEachStep,
    GroupStep,
    RepeatStep,
    SetStep,
    WaitForStep,
    WaitStep,
)

# A place an edge into the next step comes from: (node or cluster id, label, style).
_Source = tuple[str, str, Style]


def flow_graph(flow: Flow) -> Graph:
    """The drawing of ``flow``."""
    return _FlowBuilder(flow).build()


class _FlowBuilder:
    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.g = Graph(f"flow {flow.name}")
        self.ids = Ids()

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
        when = f" when {source_text(t.when)}" if t.when is not None else ""
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
        guard = f"if {source_text(step.mods.if_)}" if step.mods.if_ is not None else ""
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
        node = Node(self._step_id(step.id), _flow_lines(step), _flow_shape(step))
        into.append(node)
        return node.id

    def _step_id(self, step_id: str) -> str:
        """The node id of the step ``step_id`` (the one place a step's node id is made)."""
        return self.ids("s", step_id)

    def _cluster(
        self, cid: str, label: str, steps: Sequence[FlowStep], into: list[Node | Cluster]
    ) -> str:
        cluster = Cluster(cid, clean(label))
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
        return f"{step.id}: repeat every {every}, max {step.max}, until {source_text(step.until)}"
    if isinstance(step, ForEachStep):
        return f"{step.id}: for each {step.as_} in {source_text(step.items)}"
    return f"{step.id}: group"


def _flow_shape(step: FlowStep) -> Shape:
    if isinstance(step, CallStep):
        return "call"
    return "wait" if isinstance(step, WaitStep | WaitForStep) else "task"


def _flow_lines(step: FlowStep) -> tuple[str, ...]:
    lines = [step.id, _flow_action(step)]
    if isinstance(step, ActionStep | CallStep) and step.mods.retry is not None:
        lines.append(retry_line(step.mods.retry, short_duration))
    if isinstance(step, ActionStep) and step.mods.timeout is not None:
        lines.append(f"timeout {short_duration(step.mods.timeout)} per attempt")
    if isinstance(step, CallStep) and step.mods.timeout is not None:
        lines.append(f"timeout {short_duration(step.mods.timeout)}")  # the whole wait
    if isinstance(step, CallStep) and step.detach:
        lines.append("detached")
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
            return f"wait {source_text(step.for_)}"
        return f"wait until {source_text(step.until)}"
    if isinstance(step, WaitForStep):
        return f"wait for {step.event} (timeout {short_duration(step.timeout)})"
    if isinstance(step, SetStep):
        return f"set {', '.join(step.values)}"
    if isinstance(step, FailStep):
        return f"fail: {source_text(step.message)}"
    if isinstance(step, CallStep):
        return f"call → {step.flow}"
    return type(step).__name__  # containers are clusters; not reached
