"""State shared while one process is compiled: its trigger record, vars, steps and routes."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

from procflow.model.intent.data import Catalog
from procflow.model.intent.delegate import DelegateResolver
from procflow.model.intent.expr import Record, no_trigger
from procflow.model.intent.graph import EdgeSort, StepNode
from procflow.model.ir import END, JOIN, Entity, Form, VarDecl
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, kind_name
from procflow.model.source import Pos, suggest

# The args each step kind accepts (docs/reference/intent.md, "Step kinds").
ACTIONS = ("setField", "setRelationField", "notify", "delegate")
KIND_ARGS: dict[str, tuple[str, ...]] = {
    "serviceTask": (*ACTIONS, "value", "fields", "next", "retry", "onError", "produces", "uses"),
    "script": (*ACTIONS, "value", "fields", "next"),
    "userTask": (
        "assignee",
        "form",
        "timeout",
        "expire",
        "setField",
        "setRelationField",
        "value",
        "next",
    ),
    "decision": ("if", "then", "else"),
    "wait": ("onCreate", "onUpdate", "via", "when", "next"),
    "parallel": ("branches", "next"),
    "end": (),
}
KINDS = tuple(KIND_ARGS)


@functools.cache
def misplaced_arg_hints(kind: str) -> dict[str, str]:
    """For each arg another kind accepts: the sentence saying which kinds take it."""
    hints: dict[str, str] = {}
    for arg in {a for args in KIND_ARGS.values() for a in args} - set(KIND_ARGS[kind]):
        owners = [k for k, args in KIND_ARGS.items() if arg in args and k != "script"]
        owners = owners or ["script"]
        owned = ", ".join(owners[:-1]) + (" or " if len(owners) > 1 else "") + owners[-1]
        label = "an end step" if kind == "end" else f"a {kind}"
        hints[arg] = f"declares arg [{arg}] but is {label} — {arg} is a {owned} argument"
    return hints


@dataclass
class Env:
    """What every process of the file compiles against."""

    reader: Reader
    catalog: Catalog
    forms: dict[str, Form]
    resolver: DelegateResolver


@dataclass
class Proc:
    env: Env
    name: str
    context: str
    has_trigger: bool = False  # a trigger is declared (its entity may still be unknown)
    event: str | None = None
    entity: Entity | None = None
    vars: dict[str, VarDecl] = field(default_factory=dict)
    has_vars: bool = False
    steps: dict[str, str] = field(default_factory=dict)  # declared step name → kind
    produced: set[str] = field(default_factory=set)

    @property
    def reader(self) -> Reader:
        return self.env.reader

    def record(self, action: bool = False) -> Record | None:
        """The trigger record's names (``None`` without a resolved trigger entity)."""
        if self.entity is None:
            return None
        return self.env.catalog.record(self.entity, action)

    def needs_record(self, pos: Pos, context: str, what: str) -> Entity | None:
        """The trigger entity; reports a missing trigger (an unknown entity was reported)."""
        if not self.has_trigger:
            self.reader.error(pos, context, no_trigger(what))
        return self.entity

    def writes(self, pos: Pos, context: str, what: str) -> None:
        if self.event == "onDelete":
            self.reader.error(
                pos,
                context,
                f"{what} writes the record, but the process runs onDelete: the deleted record is "
                "a read-only snapshot",
            )

    def route(self, node: YNode | None, context: str, what: str, here: str | None) -> str | None:
        """A route target: a declared step or ``end``; never the step ``here`` itself."""
        if node is None:
            return None
        problem = self._route_problem(node, what, here)
        if problem is None:
            assert isinstance(node, YScalar) and isinstance(node.value, str)
            return node.value
        self.reader.error(node.pos, context, problem)
        return None

    def _route_problem(self, node: YNode, what: str, here: str | None) -> str | None:
        if not (isinstance(node, YScalar) and isinstance(node.value, str)):
            return f"{what} must name a step or end, got {kind_name(node)}"
        target = node.value
        if target in (END, JOIN) and target not in self.steps:
            return None  # a join outside a branch is judged with the branches
        if target not in self.steps:
            hint = suggest(target, itertools.chain(self.steps, [END]))
            return f"{what} [{target}] is not a step of this process{hint}"
        if target == here:
            return f"{what} [{target}] routes the step to itself"
        return None


def key_pos(node: YMap, key: str) -> Pos:
    return node.entries[key].key_pos if key in node.entries else node.pos


def add_route(step: StepNode, sort: EdgeSort, node: YNode | None, target: str | None) -> None:
    """Record the route written at ``node`` (``None``: none is written) of ``step``.

    ``target`` is what :meth:`Proc.route` resolved, ``None`` when the route names no step: the
    route is then open (see :mod:`procflow.model.intent.graph`). A ``normal`` route replaces
    falling through to the next step either way.
    """
    if node is None:
        return
    if sort == "normal":
        step.falls_through = False
    if target is None:
        step.open_sorts.add(sort)
        return
    step.routes.append((sort, target, node.pos))
    if target not in (END, JOIN):
        step.edges.append((sort, target))
