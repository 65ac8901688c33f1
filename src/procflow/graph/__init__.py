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
  edge from their owner (the start node for the flow's own ``recover``); a ``call`` step is a
  subroutine box (Mermaid ``[[ ]]``, DOT ``peripheries=2``) labelled ``call → <flow>``.

The package: :mod:`.model` (the drawing model and its ids), :mod:`.intent` and :mod:`.flow` (one
builder per dialect), :mod:`.mermaid` and :mod:`.dot` (the emitters; ``dot`` also runs Graphviz
for SVG), :mod:`.labels` (label text both sides share), and :mod:`.bpmn` (BPMN 2.0 XML with its
diagram, laid out by Graphviz: its own model, built from the IR with the drawing model's text).
This module chooses and dispatches.
"""

from __future__ import annotations

from procflow.errors import UsageError
from procflow.graph.bpmn import to_bpmn
from procflow.graph.dot import to_dot, to_svg
from procflow.graph.flow import flow_graph
from procflow.graph.intent import intent_graph
from procflow.graph.labels import short_duration
from procflow.graph.mermaid import to_mermaid
from procflow.graph.model import Cluster, Edge, Format, Graph, Node, walk
from procflow.model.ir import Application, Flow, Process
from procflow.model.source import suggest

__all__ = [
    "FORMATS",
    "Cluster",
    "Edge",
    "Format",
    "Graph",
    "Node",
    "build",
    "draw",
    "names",
    "render",
    "select",
    "short_duration",
    "to_bpmn",
    "to_dot",
    "to_mermaid",
    "to_svg",
    "walk",
]


FORMATS = ("mermaid", "dot", "svg", "bpmn")  # what ``procflow graph --format`` takes


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
        return flow_graph(definition)
    return intent_graph(definition, application)


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
    """What ``procflow graph`` prints and the API's ``diagram.bpmn`` serves: select, render, and
    for ``svg`` and ``bpmn`` run Graphviz."""
    chosen = select(defn, name)
    app = defn if isinstance(defn, Application) else None
    if fmt == "svg":
        return to_svg(render(chosen, "dot", application=app))
    if fmt == "bpmn":
        return to_bpmn(chosen, app)
    if fmt in ("mermaid", "dot"):
        return render(chosen, "mermaid" if fmt == "mermaid" else "dot", application=app)
    raise UsageError(f"unknown graph format [{fmt}]{suggest(fmt, list(FORMATS))}")
