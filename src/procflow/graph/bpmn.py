"""BPMN 2.0 XML of a process or flow, with its diagram (BPMNDI): ``procflow graph --format bpmn``
and the API's ``diagram.bpmn``.

:mod:`.bpmn_intent` and :mod:`.bpmn_flow` turn a definition into the BPMN model of
:mod:`.bpmn_model`; :mod:`.bpmn_layout` has Graphviz lay it out; this module prints it. The file
is one process (its id the definition's name), every step an element whose id is the step's
name, and validates against the OMG BPMN 2.0 schema; elements appear in the order the schema
asks for (documentation, incoming, outgoing, loop, content or event definition).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from procflow import __version__
from procflow.graph.bpmn_flow import flow_document
from procflow.graph.bpmn_intent import intent_document
from procflow.graph.bpmn_layout import Bounds, Layout, layout
from procflow.graph.bpmn_model import Body, Document, EventDef, Loop, Node, SeqFlow, walk
from procflow.model.ir import Application, Flow, Process

__all__ = ["BPMN_NS", "document", "to_bpmn"]

BPMN_NS = "http://www.omg.org/spec/BPMN/20100524/MODEL"
_NS = {
    "bpmn": BPMN_NS,
    "bpmndi": "http://www.omg.org/spec/BPMN/20100524/DI",
    "dc": "http://www.omg.org/spec/DD/20100524/DC",
    "di": "http://www.omg.org/spec/DD/20100524/DI",
    "xsi": "http://www.w3.org/2001/XMLSchema-instance",
}
for _prefix, _uri in _NS.items():
    ET.register_namespace(_prefix, _uri)
TARGET_NS = "urn:procflow:bpmn"


def _q(prefix: str, local: str) -> str:
    return f"{{{_NS[prefix]}}}{local}"


def document(definition: Process | Flow, application: Application | None = None) -> Document:
    """The BPMN model of a process (``application`` resolves seeded names) or a flow."""
    if isinstance(definition, Flow):
        return flow_document(definition)
    return intent_document(definition, application)


def to_bpmn(definition: Process | Flow, application: Application | None = None) -> str:
    """The BPMN 2.0 XML of ``definition``, laid out by Graphviz (which must be installed)."""
    doc = document(definition, application)
    root = ET.Element(
        _q("bpmn", "definitions"),
        {
            "id": doc.ids.new("Definitions"),
            "name": doc.name,
            "targetNamespace": TARGET_NS,
            "exporter": "procflow",
            "exporterVersion": __version__,
        },
    )
    for name, mid in doc.messages.items():
        ET.SubElement(root, _q("bpmn", "message"), {"id": mid, "name": name})
    process = ET.SubElement(
        root,
        _q("bpmn", "process"),
        {"id": doc.process_id, "name": doc.name, "isExecutable": "false"},
    )
    _docs(process, doc.docs)
    _body(process, doc.body)
    _diagram(root, doc, layout(doc))
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _docs(parent: ET.Element, lines: tuple[str, ...]) -> None:
    if lines:
        ET.SubElement(parent, _q("bpmn", "documentation")).text = "\n".join(lines)


def _body(parent: ET.Element, body: Body) -> None:
    incoming: dict[str, list[str]] = {}
    outgoing: dict[str, list[str]] = {}
    for flow in body.flows:
        outgoing.setdefault(flow.src, []).append(flow.id)
        incoming.setdefault(flow.dst, []).append(flow.id)
    for node in body.nodes:
        _node(parent, node, incoming.get(node.id, []), outgoing.get(node.id, []))
    for flow in body.flows:
        _flow(parent, flow)


def _node(parent: ET.Element, node: Node, incoming: list[str], outgoing: list[str]) -> None:
    attrs = {"id": node.id}
    if node.name:
        attrs["name"] = node.name
    attrs.update(node.attrs)
    if node.default:
        attrs["default"] = node.default
    el = ET.SubElement(parent, _q("bpmn", node.tag), attrs)
    _docs(el, node.docs)
    for fid in incoming:
        ET.SubElement(el, _q("bpmn", "incoming")).text = fid
    for fid in outgoing:
        ET.SubElement(el, _q("bpmn", "outgoing")).text = fid
    if node.loop is not None:
        _loop(el, node.loop)
    if node.event is not None:
        _event(el, node.event)
    if node.body is not None:
        _body(el, node.body)


def _expression(parent: ET.Element, tag: str, text: str) -> None:
    expr = ET.SubElement(parent, _q("bpmn", tag), {_q("xsi", "type"): "bpmn:tFormalExpression"})
    expr.text = text


def _loop(el: ET.Element, loop: Loop) -> None:
    if loop.kind == "multi":
        multi = ET.SubElement(
            el, _q("bpmn", "multiInstanceLoopCharacteristics"), {"isSequential": "true"}
        )
        _docs(multi, (f"for each item of {loop.condition}",))
        return
    attrs = {"testBefore": "false"}
    if loop.maximum is not None:
        attrs["loopMaximum"] = str(loop.maximum)
    standard = ET.SubElement(el, _q("bpmn", "standardLoopCharacteristics"), attrs)
    _expression(standard, "loopCondition", loop.condition)


def _event(el: ET.Element, event: EventDef) -> None:
    if event.kind == "message":
        ET.SubElement(el, _q("bpmn", "messageEventDefinition"), {"messageRef": event.ref})
    elif event.kind == "error":
        ET.SubElement(el, _q("bpmn", "errorEventDefinition"))
    elif event.kind == "timer":
        timer = ET.SubElement(el, _q("bpmn", "timerEventDefinition"))
        _expression(timer, event.timer, event.text)
    else:
        conditional = ET.SubElement(el, _q("bpmn", "conditionalEventDefinition"))
        _expression(conditional, "condition", event.text)


def _flow(parent: ET.Element, flow: SeqFlow) -> None:
    attrs = {"id": flow.id, "sourceRef": flow.src, "targetRef": flow.dst}
    if flow.name:
        attrs["name"] = flow.name
    el = ET.SubElement(parent, _q("bpmn", "sequenceFlow"), attrs)
    if flow.condition:
        _expression(el, "conditionExpression", flow.condition)


def _diagram(root: ET.Element, doc: Document, placed: Layout) -> None:
    diagram = ET.SubElement(root, _q("bpmndi", "BPMNDiagram"), {"id": doc.ids.new("Diagram")})
    plane = ET.SubElement(
        diagram,
        _q("bpmndi", "BPMNPlane"),
        {"id": doc.ids.new("Plane"), "bpmnElement": doc.process_id},
    )
    for _, node in walk(doc.body):
        attrs = {"id": doc.ids.new(f"{node.id}_di"), "bpmnElement": node.id}
        if node.body is not None:
            attrs["isExpanded"] = "true"
        if node.tag == "exclusiveGateway":
            attrs["isMarkerVisible"] = "true"
        shape = ET.SubElement(plane, _q("bpmndi", "BPMNShape"), attrs)
        _bounds(shape, placed.shapes[node.id])
        if node.id in placed.labels:
            _bounds(ET.SubElement(shape, _q("bpmndi", "BPMNLabel")), placed.labels[node.id])
    for fid, points in placed.waypoints.items():
        attrs = {"id": doc.ids.new(f"{fid}_di"), "bpmnElement": fid}
        edge = ET.SubElement(plane, _q("bpmndi", "BPMNEdge"), attrs)
        for x, y in points:
            ET.SubElement(edge, _q("di", "waypoint"), {"x": _num(x), "y": _num(y)})
        if fid in placed.labels:
            _bounds(ET.SubElement(edge, _q("bpmndi", "BPMNLabel")), placed.labels[fid])


def _bounds(parent: ET.Element, box: Bounds) -> None:
    ET.SubElement(
        parent,
        _q("dc", "Bounds"),
        {"x": _num(box.x), "y": _num(box.y), "width": _num(box.width), "height": _num(box.height)},
    )


def _num(value: float) -> str:
    rounded = round(value, 1)
    return str(int(rounded)) if rounded == int(rounded) else str(rounded)
