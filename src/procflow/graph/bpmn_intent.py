"""An intent process as BPMN: one flow node per step, a flow for every route out of it.

The text (trigger, abort condition, each step's detail lines) is the drawing model's
(:mod:`.intent`), so seeded ids read as names here as they do on the SVG.
"""

from __future__ import annotations

from procflow.expr.duration import format_duration
from procflow.graph.bpmn_model import Body, BpmnIds, Builder, Document, EventDef, Exit, Node, ncname
from procflow.graph.intent import intent_graph
from procflow.graph.labels import source_text
from procflow.graph.model import ABORT_ID, START_ID, Graph
from procflow.graph.model import Node as Drawn
from procflow.model.ir import (
    END,
    JOIN,
    Application,
    Decision,
    EndStep,
    IntentStep,
    Notify,
    ParallelStep,
    Process,
    ServiceTask,
    UserTask,
    WaitRecord,
)


def intent_document(process: Process, application: Application | None = None) -> Document:
    ids = BpmnIds(s.name for s in process.steps)
    doc = Document(ids.new(ncname(process.name, "Process")), process.name, ids)
    if process.description:
        doc.docs = (process.description.strip(),)
    _IntentBpmn(process, doc, intent_graph(process, application)).build()
    return doc


class _IntentBpmn(Builder):
    def __init__(self, process: Process, doc: Document, drawing: Graph) -> None:
        super().__init__(doc)
        self.process = process
        self.body: Body = doc.body
        self.lines = {n.id: n.lines for n in drawing.items if isinstance(n, Drawn)}
        self.trigger = next((e.label for e in drawing.edges if e.src == START_ID), "")
        self.end_step = any(isinstance(s, EndStep) and s.name == END for s in process.steps)
        self.end_id = ""
        # A fork's join gateway, and the innermost fork each branch step belongs to: a route to
        # `join` (written, or a branch's last step) goes to that fork's join.
        self.joins: dict[str, str] = {}
        self.fork_of: dict[str, str] = {}
        # A branch's first step → the exclusive gateway merging its routes into the join: a
        # parallel join waits for a token on every incoming flow, so a branch with several ways
        # into it (a decision's arms, say) must merge them first, or BPMN engines would wait
        # forever. A branch with one way in flows into the join directly.
        self.branch_of: dict[str, str] = {}
        self.merges: dict[str, str] = {}
        for fork in process.steps:
            if isinstance(fork, ParallelStep):
                for first, members in zip(fork.branches, fork.members, strict=True):
                    self.fork_of.update(dict.fromkeys(members, fork.name))
                    self.branch_of.update(dict.fromkeys(members, first))

    def build(self) -> None:
        start = self.aux(self.body, "start", "startEvent", self.trigger)
        for step in self.process.steps:
            self.add(self.body, self._node(step))
            if isinstance(step, ParallelStep):
                name = f"{step.name}: join"
                self.joins[step.name] = self.aux(
                    self.body, f"{step.name}_join", "parallelGateway", name
                )
        self._merge_branch_ends()
        first = self.process.steps[0].name if self.process.steps else END
        self.join(self.body, [Exit(start)], self._to(first))
        if self.process.abort_on is not None:
            self._abort(self.process.abort_on.then)
        for step in self.process.steps:
            self._routes(step)

    def _abort(self, then: str) -> None:
        label = self.lines[ABORT_ID][0]
        condition = EventDef("conditional", text=label.removeprefix("aborted: "))
        abort = self.aux(self.body, "aborted", "startEvent", label, event=condition)
        self.join(self.body, [Exit(abort, "then")], self._to(then))

    def _node(self, step: IntentStep) -> Node:
        sid = self.ids.step(step.name)
        docs = self.lines[f"s_{step.name}"][1:]
        if isinstance(step, ServiceTask):
            tag = "sendTask" if isinstance(step.action, Notify) else "serviceTask"
            return Node(sid, tag, step.name, docs)
        if isinstance(step, UserTask):
            return Node(sid, "userTask", step.name, docs)
        if isinstance(step, Decision):
            return Node(sid, "exclusiveGateway", step.name, docs)
        if isinstance(step, ParallelStep):
            return Node(sid, "parallelGateway", step.name, docs)
        if isinstance(step, WaitRecord):
            message = self.message(f"{step.event} {step.entity}")
            return Node(
                sid, "intermediateCatchEvent", step.name, docs, EventDef("message", message)
            )
        return Node(sid, "endEvent", step.name)

    def _merge_branch_ends(self) -> None:
        ways_in: dict[str, int] = {}
        for step in self.process.steps:
            if step.name in self.branch_of:
                count = sum(1 for route in self._routes_of(step) if route == JOIN)
                first = self.branch_of[step.name]
                ways_in[first] = ways_in.get(first, 0) + count
        for first, count in ways_in.items():
            if count > 1:
                merge = self.aux(self.body, f"{first}_merge", "exclusiveGateway")
                self.join(self.body, [Exit(merge)], self.joins[self.fork_of[first]])
                self.merges[first] = merge

    def _routes_of(self, step: IntentStep) -> list[str]:
        """Where each of ``step``'s routes goes, as written (``join`` included)."""
        if isinstance(step, EndStep):
            return []
        if isinstance(step, ParallelStep):
            return [step.next or JOIN]
        if isinstance(step, Decision):
            return [step.then, step.else_ or self._main(step)]
        out = [self._main(step)]
        if isinstance(step, ServiceTask) and step.on_error is not None:
            out.append(step.on_error)
        if isinstance(step, UserTask):
            out += [t.then for t in (step.timeout, step.expire) if t is not None]
        return out

    def _to(self, route: str, step: str = "") -> str:
        if route == JOIN:
            first = self.branch_of[step]
            return self.merges.get(first) or self.joins[self.fork_of[step]]
        if route == END and not self.end_step:
            if not self.end_id:
                self.end_id = self.aux(self.body, "end", "endEvent", "end")
            return self.end_id
        return self.ids.step(route)

    def _main(self, step: IntentStep) -> str:
        return step.next or self.process.fall_through(step.name)

    def _routes(self, step: IntentStep) -> None:
        sid, name = self.ids.step(step.name), step.name
        if isinstance(step, EndStep):
            return
        if isinstance(step, ParallelStep):
            self._fork(sid, step)
            return
        if isinstance(step, Decision):
            yes = Exit(sid, "yes", source_text(step.source))
            self.join(self.body, [yes], self._to(step.then, name))
            no = Exit(sid, "no", default=True)
            self.join(self.body, [no], self._to(step.else_ or self._main(step), name))
            return
        self.join(self.body, [Exit(sid)], self._to(self._main(step), name))
        if isinstance(step, ServiceTask) and step.on_error is not None:
            self._on_error(sid, step)
        if isinstance(step, UserTask):
            self._timers(sid, step)

    def _fork(self, sid: str, fork: ParallelStep) -> None:
        """A fork's flows to each branch, and its join's on to ``next`` (a nested fork's join:
        on to the join of the fork whose branch it is in)."""
        for branch in fork.branches:
            self.join(self.body, [Exit(sid)], self._to(branch, fork.name))
        after = self._to(fork.next, fork.name) if fork.next else self._to(JOIN, fork.name)
        self.join(self.body, [Exit(self.joins[fork.name])], after)

    def _on_error(self, sid: str, step: ServiceTask) -> None:
        assert step.on_error is not None
        retries = "" if step.retry is None else f" (after {_retries(step.retry.count)})"
        caught = self.boundary(
            self.body, sid, f"{sid}_error", EventDef("error"), f"on error{retries}"
        )
        self.join(self.body, [Exit(caught)], self._to(step.on_error, step.name))

    def _timers(self, sid: str, step: UserTask) -> None:
        if step.timeout is not None:
            after = format_duration(step.timeout.after)
            timer = EventDef("timer", timer="timeDuration", text=after)
            name = f"after {after} (task stays open)"
            caught = self.boundary(self.body, sid, f"{sid}_timeout", timer, name)
            self.non_interrupting(caught)
            self.join(self.body, [Exit(caught)], self._to(step.timeout.then, step.name))
        if step.expire is not None:
            timer = EventDef("timer", timer="timeDate", text=step.expire.field)
            name = f"expires at {step.expire.field}"
            caught = self.boundary(self.body, sid, f"{sid}_expire", timer, name)
            self.join(self.body, [Exit(caught)], self._to(step.expire.then, step.name))


def _retries(count: int) -> str:
    return "1 retry" if count == 1 else f"{count} retries"
