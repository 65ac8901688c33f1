"""Where each BPMN element is drawn: Graphviz lays the process out, as it does for the SVG.

The process becomes a DOT digraph with the SVG's settings (top to bottom, compound edges): each
flow node a node of BPMN's usual size, each sub-process a cluster, each sequence flow an edge
(from a boundary event: from its host). ``dot -Tjson`` gives the positions, the clusters' boxes
and each edge's polyline and label position, turned into diagram coordinates (y grows downward
in BPMN DI). A boundary event sits where its flow leaves the host's border.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from procflow.graph.bpmn_model import EVENTS, TASKS, Body, Document, Node, all_flows, walk
from procflow.graph.dot import run_dot

Point = tuple[float, float]

MARGIN = 40.0  # around the drawing
EVENT = 36.0  # an event's diameter
_SIZES = {"task": (100.0, 80.0), "event": (EVENT, EVENT), "gateway": (50.0, 50.0)}
_SHAPES = {"task": "box", "event": "circle", "gateway": "diamond"}
_CHAR = 6.0  # a label's width per character, roughly, at bpmn-js's 11px
LABEL_WIDTH = 90.0  # bpmn-js wraps an event's or a gateway's name at this width


@dataclass(frozen=True, slots=True)
class Bounds:
    x: float
    y: float
    width: float
    height: float

    @property
    def centre(self) -> Point:
        return (self.x + self.width / 2, self.y + self.height / 2)


@dataclass(slots=True)
class Layout:
    shapes: dict[str, Bounds] = field(default_factory=dict)
    waypoints: dict[str, list[Point]] = field(default_factory=dict)
    labels: dict[str, Bounds] = field(default_factory=dict)


def layout(doc: Document) -> Layout:
    """Every node's bounds and every flow's waypoints (and its label's bounds, when named)."""
    drawn = json.loads(run_dot(to_layout_dot(doc), "json", "bpmn"))
    placed = _Reader(drawn)
    out = Layout()
    boundaries: list[Node] = []
    for _, node in walk(doc.body):
        if node.tag == "boundaryEvent":
            boundaries.append(node)
        elif node.body is not None:
            out.shapes[node.id] = placed.cluster(f"cluster_{node.id}")
        else:
            out.shapes[node.id] = placed.node(node.id)
    for flow in all_flows(doc.body):
        points, label = placed.edge(flow.id)
        out.waypoints[flow.id] = points
        if flow.name and label is not None:
            width = max(20.0, _CHAR * len(flow.name))
            out.labels[flow.id] = Bounds(label[0] - width / 2, label[1] - 7, width, 14)
    on_border = {n.id for n in boundaries}
    # Where the other flows leave their nodes: a boundary event there would seem their source.
    taken = [out.waypoints[f.id][0] for f in all_flows(doc.body) if f.src not in on_border]
    for node in boundaries:
        taken.append(_attach(node, doc, out, taken))
    for _, node in walk(doc.body):
        if node.name and kind(node) != "task":
            out.labels[node.id] = _beside(out.shapes[node.id], node.name)
    return out


def _beside(shape: Bounds, name: str) -> Bounds:
    """An event's or gateway's name to the right of it: below it, bpmn-js's default, is where
    a top-to-bottom drawing's flows run."""
    width = min(LABEL_WIDTH, len(name) * _CHAR + 6)
    lines = max(1, -(-len(name) * _CHAR // LABEL_WIDTH))
    height = 14.0 * lines
    return Bounds(shape.x + shape.width + 4, shape.y + shape.height / 2 - 7, width, height)


def kind(node: Node) -> str:
    if node.tag in TASKS:
        return "task"
    return "event" if node.tag in EVENTS else "gateway"


def to_layout_dot(doc: Document) -> str:
    """The DOT text Graphviz lays the process out from."""
    out = [
        f"digraph {_q(doc.process_id)} {{",
        "  graph [rankdir=TB, compound=true, splines=polyline, nodesep=0.6, ranksep=0.6,"
        ' fontname="Helvetica", fontsize=11];',
        '  node [label="", fixedsize=true];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    out += _items(doc.body, "  ")
    nodes = {n.id: n for _, n in walk(doc.body)}
    for flow in all_flows(doc.body):
        out.append(_edge(flow.id, flow.name, nodes[flow.src], nodes[flow.dst], nodes))
    out.append("}")
    return "\n".join(out) + "\n"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _items(body: Body, indent: str) -> list[str]:
    out: list[str] = []
    for node in body.nodes:
        if node.tag == "boundaryEvent":
            continue
        if node.body is not None:
            out.append(f"{indent}subgraph {_q('cluster_' + node.id)} {{")
            out.append(f"{indent}  label={_q(node.name)}; margin=16;")
            out += _items(node.body, indent + "  ")
            out.append(f"{indent}}}")
            continue
        width, height = _SIZES[kind(node)]
        out.append(
            f"{indent}{_q(node.id)} [shape={_SHAPES[kind(node)]}, "
            f"width={width / 72:.4f}, height={height / 72:.4f}];"
        )
    return out


def _edge(fid: str, name: str, src: Node, dst: Node, nodes: dict[str, Node]) -> str:
    """A DOT edge for a flow: a boundary event's flow leaves its host; a sub-process is entered
    at its first inner node and left from its last, the edge clipped at its box."""
    attrs = [f"id={_q(fid)}"]
    if src.tag == "boundaryEvent":
        src = nodes[src.host]
    tail, head = src.id, dst.id
    if src.body is not None:
        tail = _inner(src.body, last=True)
        attrs.append(f"ltail={_q('cluster_' + src.id)}")
    if dst.body is not None:
        head = _inner(dst.body, last=False)
        attrs.append(f"lhead={_q('cluster_' + dst.id)}")
    if name:
        attrs.append(f"label={_q(name)}")
    return f"  {_q(tail)} -> {_q(head)} [{', '.join(attrs)}];"


def _inner(body: Body, *, last: bool) -> str:
    placed = [n for n in body.nodes if n.tag != "boundaryEvent"]
    node = placed[-1] if last else placed[0]
    return _inner(node.body, last=last) if node.body is not None else node.id


class _Reader:
    """``dot -Tjson`` output, in BPMN DI coordinates."""

    def __init__(self, drawn: dict[str, Any]) -> None:
        left, _, _, top = (float(v) for v in str(drawn["bb"]).split(","))
        self._left, self._top = left, top
        self._objects = {str(o["name"]): o for o in drawn.get("objects", [])}
        self._edges = {str(e.get("id")): e for e in drawn.get("edges", [])}

    def point(self, text: str) -> Point:
        x, y = (float(v) for v in text.split(",")[-2:])
        return (round(x - self._left + MARGIN, 1), round(self._top - y + MARGIN, 1))

    def node(self, name: str) -> Bounds:
        obj = self._objects[name]
        cx, cy = self.point(str(obj["pos"]))
        width, height = float(obj["width"]) * 72, float(obj["height"]) * 72
        return Bounds(round(cx - width / 2, 1), round(cy - height / 2, 1), width, height)

    def cluster(self, name: str) -> Bounds:
        x0, y0, x1, y1 = (float(v) for v in str(self._objects[name]["bb"]).split(","))
        (left, top), (right, bottom) = self.point(f"{x0},{y1}"), self.point(f"{x1},{y0}")
        return Bounds(left, top, round(right - left, 1), round(bottom - top, 1))

    def edge(self, fid: str) -> tuple[list[Point], Point | None]:
        """The edge's polyline (every third spline point, which a polyline's are, then the
        arrow's tip) and its label's centre."""
        drawn = self._edges[fid]
        start: list[Point] = []
        tip: list[Point] = []
        spline: list[Point] = []
        for token in str(drawn["pos"]).split():
            if token.startswith("s,"):
                start.append(self.point(token))
            elif token.startswith("e,"):
                tip.append(self.point(token))
            else:
                spline.append(self.point(token))
        points = start + spline[::3] + tip
        deduped = [p for i, p in enumerate(points) if i == 0 or p != points[i - 1]]
        label = self.point(str(drawn["lp"])) if "lp" in drawn else None
        return deduped, label


def _attach(node: Node, doc: Document, out: Layout, taken: list[Point]) -> Point:
    """Place a boundary event on its host's border where its flow leaves, or the nearest place
    on the border clear of what is ``taken``; its flow then starts at the event's edge."""
    host = out.shapes[node.host]
    flow = next((f for f in all_flows(doc.body) if f.src == node.id), None)
    leaving = out.waypoints[flow.id][0] if flow is not None else (host.x + host.width, host.y)

    def cost(spot: tuple[Point, Point]) -> tuple[bool, float]:
        (x, y), _ = spot
        blocked = any(_near((x, y), other) for other in taken)
        return blocked, (x - leaving[0]) ** 2 + (y - leaving[1]) ** 2

    centre, normal = min(_border(host), key=cost)
    half = EVENT / 2
    out.shapes[node.id] = Bounds(centre[0] - half, centre[1] - half, EVENT, EVENT)
    if flow is not None:
        first = (centre[0] + normal[0] * half, centre[1] + normal[1] * half)
        out.waypoints[flow.id][0] = first
    return centre


def _border(box: Bounds, step: float = 4.0) -> Iterator[tuple[Point, Point]]:
    """Points all round ``box``'s border, each with the outward normal there."""
    right, bottom = box.x + box.width, box.y + box.height
    for i in range(int(box.width // step) + 1):
        x = round(box.x + i * step, 1)
        yield (x, box.y), (0.0, -1.0)
        yield (x, bottom), (0.0, 1.0)
    for j in range(int(box.height // step) + 1):
        y = round(box.y + j * step, 1)
        yield (box.x, y), (-1.0, 0.0)
        yield (right, y), (1.0, 0.0)


def _near(a: Point, b: Point) -> bool:
    return abs(a[0] - b[0]) < EVENT and abs(a[1] - b[1]) < EVENT
