"""A flow as BPMN: its steps in sequence, containers as sub-processes, ``if`` as a gateway.

Each step's detail lines (the action, retry, lookback...) are the drawing model's (:mod:`.flow`),
written as the element's documentation. Failure routes: ``optional`` is an error boundary event
whose flow joins the next step; a ``timeout`` a timer boundary event leading to that same place,
or to an error end event when the failure is not caught; a ``recover`` an error boundary event
on its sub-process, leading to a sub-process of the recover steps; the flow's own ``recover`` an
event sub-process started by an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from procflow.expr.duration import format_duration
from procflow.graph.bpmn_model import (
    Body,
    BpmnIds,
    Builder,
    Document,
    EventDef,
    Exit,
    Loop,
    Node,
    TimerKind,
    ncname,
)
from procflow.graph.flow import flow_graph
from procflow.graph.labels import source_text
from procflow.graph.model import Cluster, walk
from procflow.graph.model import Node as Drawn
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

_Container = RepeatStep | ForEachStep | GroupStep


def flow_document(flow: Flow) -> Document:
    ids = BpmnIds(_step_ids(flow))
    doc = Document(ids.new(ncname(flow.name, "Process")), flow.name, ids)
    if flow.description:
        doc.docs = (flow.description.strip(),)
    _FlowBpmn(flow, doc).build()
    return doc


def _step_ids(flow: Flow) -> list[str]:
    found: list[str] = []

    def collect(steps: Sequence[FlowStep]) -> None:
        for step in steps:
            found.append(step.id)
            if isinstance(step, _Container):
                collect(step.steps)
            if step.mods.recover is not None:
                collect(step.mods.recover)

    collect(flow.steps)
    collect(flow.recover or ())
    return found


class _FlowBpmn(Builder):
    def __init__(self, flow: Flow, doc: Document) -> None:
        super().__init__(doc)
        self.flow = flow
        drawing = flow_graph(flow)
        self.lines = {n.id: n.lines for n in walk(drawing.items) if isinstance(n, Drawn)}
        self.labels = {c.id: c.label for c in walk(drawing.items) if isinstance(c, Cluster)}

    def build(self) -> None:
        body = self.doc.body
        trigger = self.flow.trigger
        if trigger is None:
            start = self.aux(body, "start", "startEvent", "start")
        else:
            event = EventDef("message", self.message(trigger.event))
            when = f" when {source_text(trigger.when)}" if trigger.when is not None else ""
            start = self.aux(body, "start", "startEvent", f"on {trigger.event}{when}", event=event)
        exits = self._sequence(self.flow.steps, body, [Exit(start)])
        self.join(body, exits, self.aux(body, "end", "endEvent", "end"))
        if self.flow.recover is not None:
            self._flow_recover(self.flow.recover)

    def _flow_recover(self, steps: Sequence[FlowStep]) -> None:
        """An event sub-process: BPMN's way to handle a failure anywhere in the process."""
        inner = Body()
        recover = Node(self.ids.new("recover"), "subProcess", "recover (the flow)", body=inner)
        recover.attrs["triggeredByEvent"] = "true"
        self.add(self.doc.body, recover)
        start = self.aux(inner, "recover_start", "startEvent", "failure", event=EventDef("error"))
        exits = self._sequence(steps, inner, [Exit(start)])
        self.join(inner, exits, self.aux(inner, "recover_end", "endEvent", "recovered"))

    def _sequence(self, steps: Sequence[FlowStep], body: Body, exits: list[Exit]) -> list[Exit]:
        for step in steps:
            exits = self._step(step, body, exits)
        return exits

    def _step(self, step: FlowStep, body: Body, exits: list[Exit]) -> list[Exit]:
        skipped: list[Exit] = []
        if step.mods.if_ is not None:
            condition = source_text(step.mods.if_)
            gate = self.aux(body, f"{step.id}_if", "exclusiveGateway", f"if {condition}")
            self.join(body, exits, gate)
            exits = [Exit(gate, "yes", condition)]
            skipped = [Exit(gate, "skip", default=True)]
        sid = self._place(step, body)
        self.join(body, exits, sid)
        return self._outcomes(step, sid, body) + skipped

    def _place(self, step: FlowStep, body: Body) -> str:
        """Add the step's node (a sub-process with its inner steps for a container)."""
        sid = self.ids.step(step.id)
        docs = self.lines.get(f"s_{step.id}", ())[1:]
        if step.mods.description:
            docs = (step.mods.description, *docs)
        if isinstance(step, _Container):
            return self._sub_process(sid, step, docs, body)
        tag, event = _kind(step, self)
        name = f"{step.id} (detached)" if isinstance(step, CallStep) and step.detach else step.id
        node = Node(sid, tag, name, docs, event)
        if isinstance(step, CallStep):
            node.attrs["calledElement"] = ncname(step.flow, "Process")
        return self.add(body, node)

    def _sub_process(self, sid: str, step: _Container, docs: tuple[str, ...], body: Body) -> str:
        inner = Body()
        name = self.labels.get(f"cluster_{step.id}", step.id)
        node = Node(sid, "subProcess", name, docs, body=inner, loop=_loop(step))
        self.add(body, node)
        start = self.aux(inner, f"{sid}_start", "startEvent")
        exits = self._sequence(step.steps, inner, [Exit(start)])
        self.join(inner, exits, self.aux(inner, f"{sid}_end", "endEvent"))
        return sid

    def _outcomes(self, step: FlowStep, sid: str, body: Body) -> list[Exit]:
        """Where the path goes on from the step: the step itself, and its caught failures."""
        if isinstance(step, FailStep):
            return []
        out = [Exit(sid)]
        if step.mods.recover is not None:
            caught = self.boundary(body, sid, f"{sid}_failed", EventDef("error"), "on failure")
            recovered = self._recover(sid, step.mods.recover, body)
            self.join(body, [Exit(caught)], recovered)
            out.append(Exit(recovered, "recovered"))
        elif step.mods.optional and not _is_event(step):
            name = "failed (optional)"
            out.append(Exit(self.boundary(body, sid, f"{sid}_failed", EventDef("error"), name)))
        if isinstance(step, ActionStep | CallStep) and step.mods.timeout is not None:
            out += self._timeout(step, sid, body)
        return out

    def _recover(self, sid: str, steps: Sequence[FlowStep], body: Body) -> str:
        inner = Body()
        node = Node(self.ids.new(f"{sid}_recover"), "subProcess", f"recover {sid}", body=inner)
        self.add(body, node)
        start = self.aux(inner, f"{node.id}_start", "startEvent")
        exits = self._sequence(steps, inner, [Exit(start)])
        self.join(inner, exits, self.aux(inner, f"{node.id}_end", "endEvent"))
        return node.id

    def _timeout(self, step: ActionStep | CallStep, sid: str, body: Body) -> list[Exit]:
        assert step.mods.timeout is not None
        after = format_duration(step.mods.timeout)
        per = " per attempt" if isinstance(step, ActionStep) else ""
        timer = EventDef("timer", timer="timeDuration", text=after)
        caught = self.boundary(body, sid, f"{sid}_timeout", timer, f"timeout {after}{per}")
        if step.mods.optional:
            return [Exit(caught, "timed out")]
        failed = self.aux(body, f"{sid}_timed_out", "endEvent", "failed", event=EventDef("error"))
        self.join(body, [Exit(caught)], failed)
        return []


def _is_event(step: FlowStep) -> bool:
    return isinstance(step, WaitStep | WaitForStep | FailStep)


def _kind(step: FlowStep, builder: Builder) -> tuple[str, EventDef | None]:
    """The BPMN element of a step that is not a container, and its event definition."""
    if isinstance(step, WaitStep):
        if step.for_ is not None:
            return "intermediateCatchEvent", _timer("timeDuration", source_text(step.for_))
        return "intermediateCatchEvent", _timer("timeDate", source_text(step.until))
    if isinstance(step, WaitForStep):
        return "intermediateCatchEvent", EventDef("message", builder.message(step.event))
    if isinstance(step, FailStep):
        return "endEvent", EventDef("error")
    if isinstance(step, SetStep):
        return "scriptTask", None
    if isinstance(step, CallStep):
        return "callActivity", None
    return "serviceTask", None


def _timer(kind: TimerKind, text: str) -> EventDef:
    return EventDef("timer", timer=kind, text=text)


def _loop(step: _Container) -> Loop | None:
    if isinstance(step, RepeatStep):
        return Loop("standard", source_text(step.until), step.max)
    if isinstance(step, ForEachStep):
        return Loop("multi", source_text(step.items))
    return None
