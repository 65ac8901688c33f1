"""Print the drawing model as a Graphviz digraph, and turn DOT into SVG with Graphviz."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from procflow.errors import UsageError
from procflow.graph.labels import clean
from procflow.graph.model import Cluster, Edge, Graph, Node, Shape, walk

_SHAPES: dict[Shape, str] = {
    "start": "shape=circle",
    "end": "shape=doublecircle",
    "task": "shape=box",
    "user": 'shape=box, style="rounded"',
    "decision": "shape=diamond",
    "wait": "shape=hexagon",
    "abort": "shape=octagon",
    "call": "shape=box, peripheries=2",  # a double box: the step runs another flow
    "fork": "shape=trapezium",  # a parallel gateway that splits: wider below
    "join": "shape=invtrapezium",  # and the one that joins: wider above
}


def to_dot(graph: Graph) -> str:
    """DOT text: clusters are ``subgraph cluster_…`` blocks, edges to them clipped at the box."""
    out = [
        f"digraph {_quote(graph.title)} {{",
        '  graph [rankdir=TB, compound=true, fontname="Helvetica"];',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    out += _items(graph.items, "  ")
    ends = _cluster_ends(graph)
    out += [_edge(e, ends) for e in graph.edges]
    out.append("}")
    return "\n".join(out) + "\n"


def to_svg(dot_text: str) -> str:
    """Run Graphviz's ``dot -Tsvg``; a missing ``dot`` is a usage error that says what to do."""
    return run_dot(dot_text, "svg", "svg")


def run_dot(dot_text: str, output: str, fmt: str) -> str:
    """Graphviz's ``dot -T<output>`` on ``dot_text``, for ``--format <fmt>``."""
    exe = shutil.which("dot")
    if exe is None:
        raise UsageError(
            f"--format {fmt} needs Graphviz's `dot` on PATH; install Graphviz, "
            "or use --format dot or --format mermaid"
        )
    done = subprocess.run(
        [exe, f"-T{output}"], input=dot_text, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise UsageError(f"dot failed: {done.stderr.strip()}")
    return done.stdout


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(lines: Sequence[str]) -> str:
    escaped = [_quote(clean(line))[1:-1] for line in lines]
    return '"' + "\\n".join(escaped) + '"'


def _node_attrs(node: Node) -> str:
    """A node's DOT attributes: the one place to add more (an SVG ``id``/``class``, say)."""
    return f"{_SHAPES[node.shape]}, label={_label(node.lines)}"


def _items(items: Sequence[Node | Cluster], indent: str) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, Node):
            out.append(f"{indent}{_quote(item.id)} [{_node_attrs(item)}];")
            continue
        out.append(f"{indent}subgraph {_quote(item.id)} {{")
        out.append(f'{indent}  label={_label([item.label])}; style="rounded";')
        out += _items(item.items, indent + "  ")
        out.append(f"{indent}}}")
    return out


def _cluster_ends(graph: Graph) -> dict[str, tuple[str, str]]:
    """Each cluster's first and last node: DOT edges attach to nodes, clipped by lhead/ltail."""
    ends: dict[str, tuple[str, str]] = {}
    for item in walk(graph.items):
        if isinstance(item, Cluster):
            nodes = [n.id for n in walk(item.items) if isinstance(n, Node)]
            ends[item.id] = (nodes[0], nodes[-1])
    return ends


def _edge(edge: Edge, ends: dict[str, tuple[str, str]]) -> str:
    attrs: list[str] = []
    src, dst = edge.src, edge.dst
    if src in ends:
        src = ends[src][1]
        attrs.append(f"ltail={_quote(edge.src)}")
    if dst in ends:
        dst = ends[dst][0]
        attrs.append(f"lhead={_quote(edge.dst)}")
    if edge.label:
        attrs.append(f"label={_label([edge.label])}")
    if edge.style != "solid":
        attrs.append(f"style={edge.style}")
    suffix = f" [{', '.join(attrs)}]" if attrs else ""
    return f"  {_quote(src)} -> {_quote(dst)}{suffix};"
