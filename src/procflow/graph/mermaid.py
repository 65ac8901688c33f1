"""Print the drawing model as a Mermaid flowchart."""

from __future__ import annotations

from collections.abc import Sequence

from procflow.graph.labels import clean
from procflow.graph.model import Cluster, Edge, Graph, Node, Shape, Style

_ESCAPES = {
    "#": "#35;",
    "&": "#38;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    "`": "#96;",
}
_SHAPES: dict[Shape, tuple[str, str]] = {
    "start": ("((", "))"),
    "end": ("(((", ")))"),
    "task": ("[", "]"),
    "user": ("(", ")"),
    "decision": ("{", "}"),
    "wait": ("{{", "}}"),
    "abort": ("([", "])"),
    "call": ("[[", "]]"),  # a subroutine box: the step runs another flow
    "fork": ("[/", "\\]"),  # a parallel gateway that splits: wider below
    "join": ("[\\", "/]"),  # and the one that joins: wider above
}
_ARROWS: dict[Style, str] = {"solid": "-->", "dashed": "-.->", "dotted": "-.->"}


def to_mermaid(graph: Graph) -> str:
    """Mermaid ``flowchart TD`` text; dotted edges get a ``linkStyle`` (Mermaid has one dash)."""
    out = ["flowchart TD", f"  %% {clean(graph.title)}"]
    out += _items(graph.items, "  ")
    out += [_edge(e) for e in graph.edges]
    dotted = [str(i) for i, e in enumerate(graph.edges) if e.style == "dotted"]
    if dotted:
        out.append(f"  linkStyle {','.join(dotted)} stroke-dasharray: 2 4")
    return "\n".join(out) + "\n"


def _text(text: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in text)


def _label(lines: Sequence[str]) -> str:
    return '"' + "<br/>".join(_text(clean(line)) for line in lines) + '"'


def _items(items: Sequence[Node | Cluster], indent: str) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, Node):
            left, right = _SHAPES[item.shape]
            out.append(f"{indent}{item.id}{left}{_label(item.lines)}{right}")
            continue
        out.append(f"{indent}subgraph {item.id}[{_label([item.label])}]")
        out.append(f"{indent}  direction TB")
        out += _items(item.items, indent + "  ")
        out.append(f"{indent}end")
    return out


def _edge(edge: Edge) -> str:
    arrow = _ARROWS[edge.style]
    label = f"|{_label([edge.label])}|" if edge.label else ""
    return f"  {edge.src} {arrow}{label} {edge.dst}"
