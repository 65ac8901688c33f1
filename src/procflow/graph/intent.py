"""The drawing model of an intent process: one node per step, edges for every route out of it."""

from __future__ import annotations

import json

from procflow.expr.duration import format_duration
from procflow.graph.labels import retry_line, source_text
from procflow.graph.model import ABORT_ID, END_ID, START_ID, Graph, Ids, Node
from procflow.model.ir import (
    END,
    JOIN,
    AbortOn,
    Application,
    Assignee,
    Decision,
    EndStep,
    Entity,
    IntentAction,
    IntentStep,
    Notify,
    ParallelStep,
    Process,
    RetryPolicy,
    ServiceTask,
    SetField,
    SetRelationField,
    UserTask,
    WaitRecord,
)


def intent_graph(process: Process, application: Application | None = None) -> Graph:
    """The drawing of ``process``; with ``application``, seeded ids are shown by name."""
    return _IntentBuilder(process, application).build()


class _IntentBuilder:
    def __init__(self, process: Process, application: Application | None) -> None:
        self.process = process
        self.app = application
        self.g = Graph(f"process {process.name}")
        self.ids = Ids()
        self.end_used = False
        self.end_step = any(isinstance(s, EndStep) and s.name == END for s in process.steps)
        # each branch step → the fork whose join its branch flows into
        self.join_of = {
            member: fork.name
            for fork in process.steps
            if isinstance(fork, ParallelStep)
            for members in fork.members
            for member in members
        }

    def build(self) -> Graph:
        self.g.items.append(Node(START_ID, ("start",), "start"))
        if self.process.abort_on is not None:
            self.g.items.append(
                Node(ABORT_ID, (self._abort_label(self.process.abort_on),), "abort")
            )
        for step in self.process.steps:
            self.g.items.append(self._node(step))
            if isinstance(step, ParallelStep):
                join = Node(self._join_id(step.name), ("join",), "join", joins=step.name)
                self.g.items.append(join)
        first = self.process.steps[0].name if self.process.steps else END
        self.g.edge(START_ID, self._to(first), self._trigger_label())
        if self.process.abort_on is not None:
            self.g.edge(ABORT_ID, self._to(self.process.abort_on.then), "then", "dashed")
        for step in self.process.steps:
            self._routes(step)
        if self.end_used:
            self.g.items.append(Node(END_ID, ("end",), "end"))
        return self.g

    def _join_id(self, fork: str) -> str:
        return self.ids("j", fork)

    def _step_id(self, name: str) -> str:
        """The node id of the step called ``name`` (the one place a step's id is made)."""
        return self.ids("s", name)

    # nodes

    def _node(self, step: IntentStep) -> Node:
        nid = self._step_id(step.name)
        if isinstance(step, ServiceTask):
            return Node(nid, self._task_lines(step), "task")
        if isinstance(step, UserTask):
            return Node(nid, self._user_lines(step), "user")
        if isinstance(step, Decision):
            return Node(nid, (step.name, source_text(step.source)), "decision")
        if isinstance(step, WaitRecord):
            return Node(nid, self._wait_lines(step), "wait")
        if isinstance(step, ParallelStep):
            return Node(nid, (step.name, "parallel"), "fork")
        return Node(nid, (step.name,), "end")

    def _task_lines(self, step: ServiceTask) -> tuple[str, ...]:
        lines = [step.name, self._action(step.action)]
        if step.kind == "script":
            lines[0] += " (script)"
        if step.retry is not None:
            lines.append(retry_line(step.retry, format_duration))
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
            lines.append(f"when {source_text(step.when_source)}")
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

    def _to(self, route: str, at: str | None = None) -> str:
        """The node ``route`` leads to from the step ``at`` (``join``: its branch's join)."""
        if route == JOIN and at in self.join_of:
            return self._join_id(self.join_of[at])
        if route == END and not self.end_step:
            self.end_used = True
            return END_ID
        return self._step_id(route)

    def _main(self, step: IntentStep) -> str:
        return step.next or self.process.fall_through(step.name)

    def _routes(self, step: IntentStep) -> None:
        src = self._step_id(step.name)
        if isinstance(step, EndStep):
            return
        at = step.name
        if isinstance(step, Decision):
            self.g.edge(src, self._to(step.then, at), "yes")
            self.g.edge(src, self._to(step.else_ or self._main(step), at), "no")
            return
        if isinstance(step, ParallelStep):
            for first in step.branches:
                self.g.edge(src, self._to(first, at))
            src = self._join_id(step.name)  # the join goes on where the fork's next says
        self.g.edge(src, self._to(self._main(step), at))
        if isinstance(step, ServiceTask) and step.on_error is not None:
            self.g.edge(src, self._to(step.on_error, at), _on_error_label(step.retry), "dashed")
        if isinstance(step, UserTask):
            self._timers(src, step)

    def _timers(self, src: str, step: UserTask) -> None:
        if step.timeout is not None:
            label = f"after {format_duration(step.timeout.after)} (task stays open)"
            self.g.edge(src, self._to(step.timeout.then, step.name), label, "dotted")
        if step.expire is not None:
            label = f"expires at {step.expire.field}"
            self.g.edge(src, self._to(step.expire.then, step.name), label, "dotted")


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


def _on_error_label(retry: RetryPolicy | None) -> str:
    if retry is None:
        return "on error"
    retries = "1 retry" if retry.count == 1 else f"{retry.count} retries"
    return f"on error (after {retries})"
