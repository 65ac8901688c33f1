"""A definition's diagram as SVG (the API's ``diagram.svg``, and inline on the web UI's pages),
each step a ``<g class="step" data-step="NAME">`` and each join gateway of an intent fork a
``<g class="join" data-join="FORK">``, and a run's positions on it (``is-done``, ``is-active``,
``is-failed``).

Graphviz's ``dot`` draws the DOT text of :mod:`procflow.graph`; in its SVG each node is a
``<g class="node">`` whose ``<title>`` is the node's DOT id. The drawing model says which node
is which step (and which fork a join joins), so the SVG is rewritten with ``xml.etree`` (never by
pasting text) to mark those nodes. A definition's version never changes once deployed, so the
marked SVG is kept per (name, version) in a small LRU cache; a run's classes are then one
substitution per marked node.
"""

from __future__ import annotations

import html
import re
import shutil
import threading
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Mapping

from procflow import graph
from procflow.model.ir import Application, Flow

__all__ = [
    "NO_DOT",
    "DiagramCache",
    "join_classes",
    "join_nodes",
    "mark_run",
    "marked_svg",
    "step_classes",
    "step_nodes",
]

NO_DOT = "Diagrams need Graphviz (dot), which is not installed on the server."
_SVG_NS = "http://www.w3.org/2000/svg"
_XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", _SVG_NS)
ET.register_namespace("xlink", _XLINK_NS)
_MARKED_GROUP = re.compile(r'class="node (step|join)" data-\1="([^"]*)"')
_CACHED = 64  # definition versions kept drawn


def step_nodes(drawing: graph.Graph) -> dict[str, str]:
    """Node id -> step name, for the nodes of ``drawing`` that are steps. A step's node id is
    ``s_`` + its name with odd characters replaced (``graph.model.Ids``), and its first label
    line is the name (an intent script adds `` (script)``)."""
    found: dict[str, str] = {}
    for item in graph.walk(drawing.items):
        if not isinstance(item, graph.Node) or not item.id.startswith("s_") or not item.lines:
            continue
        name = item.lines[0].removesuffix(" (script)")
        safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
        rest = item.id[2:]
        if rest == safe or re.fullmatch(re.escape(safe) + r"_\d+", rest):
            found[item.id] = name
    return found


def join_nodes(drawing: graph.Graph) -> dict[str, str]:
    """Node id -> the fork step it joins, for the join gateways of ``drawing``."""
    return {
        n.id: n.joins for n in graph.walk(drawing.items) if isinstance(n, graph.Node) and n.joins
    }


def marked_svg(definition: Application | Flow, name: str) -> str:
    """The SVG of the process or flow ``name`` of ``definition``, its step nodes marked."""
    chosen = graph.select(definition, name)
    drawing = graph.build(chosen, definition if isinstance(definition, Application) else None)
    svg = graph.to_svg(graph.to_dot(drawing))
    return _mark_nodes(svg, {"step": step_nodes(drawing), "join": join_nodes(drawing)})


def _mark_nodes(svg: str, marks: Mapping[str, Mapping[str, str]]) -> str:
    """``svg`` with each node group named in ``marks`` (kind -> node id -> name) classed
    ``node KIND`` with ``data-KIND="NAME"``."""
    root = ET.fromstring(svg)
    for group in root.iter(f"{{{_SVG_NS}}}g"):
        title = group.findtext(f"{{{_SVG_NS}}}title")
        if group.get("class") != "node" or title is None:
            continue
        for kind, names in marks.items():
            if title in names:
                group.set("class", f"node {kind}")
                group.set(f"data-{kind}", names[title])
    root.set("role", "img")
    root.set("aria-label", f"Diagram of {root.findtext(f'{{{_SVG_NS}}}title') or 'the definition'}")
    # As wide as Graphviz drew it at most, narrower on a small screen (the height follows).
    natural = root.attrib.pop("width", None)
    root.attrib.pop("height", None)
    root.set("width", "100%")
    if natural and re.fullmatch(r"[0-9.]+pt", natural):
        root.set("style", f"max-width: {natural}")
    return ET.tostring(root, encoding="unicode")


def step_classes(tokens: list[Mapping[str, object]], outcomes: Mapping[str, str]) -> dict[str, str]:
    """Each step's one state class on a run's diagram: ``is-failed`` (a failed token there, or
    its last outcome a failure), ``is-active`` (a token there now), ``is-done`` (completed or
    recovered, or a fork whose token waits at its join: it has split); a step neither reached nor
    skipped has none."""
    classes: dict[str, str] = {}
    for step, outcome in outcomes.items():
        if outcome == "step.failed":
            classes[step] = "is-failed"
        elif outcome in ("step.completed", "step.recovered"):
            classes[step] = "is-done"
    at_tokens: dict[str, str] = {}
    for token in tokens:
        step = str(token.get("step"))
        state = _token_state(token)
        if _RANK[state] > _RANK.get(at_tokens.get(step, ""), -1):
            at_tokens[step] = state
    return classes | at_tokens


_RANK = {"is-done": 0, "is-active": 1, "is-failed": 2}  # several tokens at a step: the highest


def _token_state(token: Mapping[str, object]) -> str:
    if token.get("state") == "failed":
        return "is-failed"
    return "is-done" if _waits_at_join(token) else "is-active"


def _waits_at_join(token: Mapping[str, object]) -> bool:
    """A fork's own token once it has split: it waits at the fork's join for the branches."""
    waiting = token.get("waiting_for")
    is_join = isinstance(waiting, Mapping) and waiting.get("kind") == "join"
    return is_join and token.get("state") != "failed"


def join_classes(tokens: list[Mapping[str, object]], outcomes: Mapping[str, str]) -> dict[str, str]:
    """Each join gateway's state class by its fork's name: ``is-active`` while the fork's token
    waits there for branches, ``is-done`` once the join went on (the fork's ``step.completed``
    is its join going on). Other steps' names are in it too, and match no join."""
    joins = {step: "is-done" for step, outcome in outcomes.items() if outcome == "step.completed"}
    for token in tokens:
        if _waits_at_join(token):
            joins[str(token.get("step"))] = "is-active"
    return joins


def mark_run(svg: str, classes: Mapping[str, str], joins: Mapping[str, str] | None = None) -> str:
    """``svg`` with each step group's state class added (``classes``, by step), and each join
    gateway's (``joins``, by the fork's name)."""
    by_kind = {"step": classes, "join": joins or {}}

    def add(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        state = by_kind[kind].get(html.unescape(name))
        extra = f" {state}" if state else ""
        return f'class="node {kind}{extra}" data-{kind}="{name}"'

    return _MARKED_GROUP.sub(add, svg)


class DiagramCache:
    """Marked SVGs by (definition, version): an LRU, shared by the server's threads."""

    def __init__(self, size: int = _CACHED) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def can_draw() -> bool:
        return shutil.which("dot") is not None

    def get(self, name: str, version: int, definition: Application | Flow) -> str:
        key = (name, version)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        svg = marked_svg(definition, name)  # outside the lock: dot takes a while
        with self._lock:
            self._items[key] = svg
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return svg
