"""A definition's diagram as SVG (the API's ``diagram.svg``, and inline on the web UI's pages),
each step a ``<g class="step" data-step="NAME">``, and a run's positions on it (``is-done``,
``is-active``, ``is-failed``).

Graphviz's ``dot`` draws the DOT text of :mod:`procflow.graph`; in its SVG each node is a
``<g class="node">`` whose ``<title>`` is the node's DOT id. The drawing model says which node
is which step, so the SVG is rewritten with ``xml.etree`` (never by pasting text) to mark each
step node. A definition's version never changes once deployed, so the marked SVG is kept per
(name, version) in a small LRU cache; a run's classes are then one substitution per step.
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
_STEP_GROUP = re.compile(r'class="node step" data-step="([^"]*)"')
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


def marked_svg(definition: Application | Flow, name: str) -> str:
    """The SVG of the process or flow ``name`` of ``definition``, its step nodes marked."""
    chosen = graph.select(definition, name)
    drawing = graph.build(chosen, definition if isinstance(definition, Application) else None)
    svg = graph.to_svg(graph.to_dot(drawing))
    return _mark_steps(svg, step_nodes(drawing))


def _mark_steps(svg: str, steps: Mapping[str, str]) -> str:
    root = ET.fromstring(svg)
    for group in root.iter(f"{{{_SVG_NS}}}g"):
        title = group.findtext(f"{{{_SVG_NS}}}title")
        if group.get("class") != "node" or title is None or title not in steps:
            continue
        group.set("class", "node step")
        group.set("data-step", steps[title])
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
    recovered); a step neither reached nor skipped has none."""
    classes: dict[str, str] = {}
    for step, outcome in outcomes.items():
        if outcome == "step.failed":
            classes[step] = "is-failed"
        elif outcome in ("step.completed", "step.recovered"):
            classes[step] = "is-done"
    at_tokens: dict[str, str] = {}
    for token in tokens:
        step = str(token.get("step"))
        if token.get("state") == "failed":
            at_tokens[step] = "is-failed"
        else:
            at_tokens.setdefault(step, "is-active")
    return classes | at_tokens


def mark_run(svg: str, classes: Mapping[str, str]) -> str:
    """``svg`` with each step group's state class added."""

    def add(match: re.Match[str]) -> str:
        state = classes.get(html.unescape(match.group(1)))
        extra = f" {state}" if state else ""
        return f'class="node step{extra}" data-step="{match.group(1)}"'

    return _STEP_GROUP.sub(add, svg)


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
