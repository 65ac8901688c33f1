"""The BPMN model both dialects are turned into before layout and printing (``--format bpmn``).

A :class:`Document` holds one process: a :class:`Body` of flow nodes and sequence flows, where a
sub-process node holds a body of its own, and boundary events sit in their host's body. Every id
is handed out by :class:`BpmnIds`: a step keeps its name as its id (it is an XML NCName, as
identifiers are), and everything else (start and end events, gateways, boundary events, flows,
messages) gets a readable id that no step name and no other element has taken.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

EventKind = Literal["message", "timer", "error", "conditional"]
TimerKind = Literal["timeDuration", "timeDate", ""]

# An XML NCName, restricted to ASCII (enough for identifiers and flow names).
_NCNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")

TASKS = frozenset(
    {"userTask", "serviceTask", "sendTask", "scriptTask", "callActivity", "subProcess"}
)
EVENTS = frozenset(
    {"startEvent", "endEvent", "intermediateCatchEvent", "boundaryEvent"}
)  # fmt: skip


def ncname(name: str, prefix: str) -> str:
    """``name`` when it is an NCName, else ``prefix`` + ``_`` + it with odd characters replaced."""
    if _NCNAME.fullmatch(name):
        return name
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"


@dataclass(frozen=True, slots=True)
class EventDef:
    """An event definition: a message's id (``ref``), or a timer's or condition's text."""

    kind: EventKind
    ref: str = ""
    timer: TimerKind = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Loop:
    """A ``repeat`` (standard loop) or a ``for_each`` (sequential multi-instance)."""

    kind: Literal["standard", "multi"]
    condition: str = ""
    maximum: int | None = None


@dataclass(slots=True)
class Node:
    id: str
    tag: str  # the BPMN element's local name: "userTask", "exclusiveGateway", ...
    name: str = ""
    docs: tuple[str, ...] = ()
    event: EventDef | None = None
    attrs: dict[str, str] = field(default_factory=dict)
    loop: Loop | None = None
    body: Body | None = None  # a sub-process's content
    default: str = ""  # a gateway's default flow

    @property
    def host(self) -> str:
        """The activity a boundary event is attached to ("" for any other node)."""
        return self.attrs.get("attachedToRef", "")


@dataclass(frozen=True, slots=True)
class SeqFlow:
    id: str
    src: str
    dst: str
    name: str = ""
    condition: str = ""


@dataclass(slots=True)
class Body:
    nodes: list[Node] = field(default_factory=list)
    flows: list[SeqFlow] = field(default_factory=list)


@dataclass(slots=True)
class Document:
    process_id: str
    name: str
    ids: BpmnIds
    body: Body = field(default_factory=Body)
    docs: tuple[str, ...] = ()
    messages: dict[str, str] = field(default_factory=dict)  # message name -> id


def walk(body: Body) -> Iterator[tuple[Body, Node]]:
    """Every node with the body it is in, depth first, in order."""
    for node in body.nodes:
        yield body, node
        if node.body is not None:
            yield from walk(node.body)


def all_flows(body: Body) -> Iterator[SeqFlow]:
    yield from body.flows
    for _, node in walk(body):
        if node.body is not None:
            yield from node.body.flows


class BpmnIds:
    """Unique NCName ids: the step names first (kept as they are), then anything else."""

    def __init__(self, steps: Iterable[str]) -> None:
        self._steps = {name: ncname(name, "step") for name in steps}
        self._used = set(self._steps.values())

    def step(self, name: str) -> str:
        return self._steps[name]

    def new(self, base: str) -> str:
        """``base`` (made an NCName), or ``base_2``, ``base_3``… when it is taken."""
        base = ncname(base, "id")
        candidate, n = base, 2
        while candidate in self._used:
            candidate, n = f"{base}_{n}", n + 1
        self._used.add(candidate)
        return candidate


@dataclass(frozen=True, slots=True)
class Exit:
    """A way out of the path so far, which the next node is joined to by one sequence flow."""

    node: str
    name: str = ""
    condition: str = ""
    default: bool = False  # the gateway's default flow


class Builder:
    """What both dialects' builders share: adding nodes and joining exits with flows."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.ids = doc.ids
        self._nodes: dict[str, Node] = {}

    def add(self, body: Body, node: Node) -> str:
        body.nodes.append(node)
        self._nodes[node.id] = node
        return node.id

    def aux(
        self,
        body: Body,
        base: str,
        tag: str,
        name: str = "",
        *,
        event: EventDef | None = None,
        attrs: dict[str, str] | None = None,
    ) -> str:
        """A node that is not a step, its id made from ``base``."""
        node = Node(self.ids.new(base), tag, name, event=event, attrs=attrs or {})
        return self.add(body, node)

    def boundary(self, body: Body, host: str, base: str, event: EventDef, name: str) -> str:
        attrs = {"attachedToRef": host}
        return self.aux(body, base, "boundaryEvent", name, event=event, attrs=attrs)

    def non_interrupting(self, node_id: str) -> None:
        self._nodes[node_id].attrs["cancelActivity"] = "false"

    def join(self, body: Body, exits: Iterable[Exit], target: str) -> None:
        for ex in exits:
            flow = SeqFlow(
                self.ids.new(f"{ex.node}_to_{target}"), ex.node, target, ex.name, ex.condition
            )
            body.flows.append(flow)
            if ex.default:
                self._nodes[ex.node].default = flow.id

    def message(self, name: str) -> str:
        """The id of the message called ``name``, declared once."""
        if name not in self.doc.messages:
            self.doc.messages[name] = self.ids.new(f"Message_{name}")
        return self.doc.messages[name]
