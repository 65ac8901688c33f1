"""The drawing model both emitters print: nodes, clusters and the edges between them.

Every node id is handed out by :class:`Ids`, so an emitter can rely on ids being unique and
syntax-safe in both Mermaid and DOT without quoting rules of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

Format = Literal["mermaid", "dot"]
Shape = Literal[
    "start", "end", "task", "user", "decision", "wait", "abort", "call", "fork", "join"
]  # fmt: skip
Style = Literal["solid", "dashed", "dotted"]

START_ID = "start_node"
END_ID = "end_node"
ABORT_ID = "abort_node"


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    lines: tuple[str, ...]
    shape: Shape
    joins: str = ""  # a join gateway: the fork step it joins (a run's page marks it by that)


@dataclass(slots=True)
class Cluster:
    id: str
    label: str
    items: list[Node | Cluster] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Edge:
    src: str  # a node id or a cluster id
    dst: str
    label: str = ""
    style: Style = "solid"


@dataclass(slots=True)
class Graph:
    title: str
    items: list[Node | Cluster] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)

    def edge(self, src: str, dst: str, label: str = "", style: Style = "solid") -> None:
        e = Edge(src, dst, label, style)
        if e not in self.edges:
            self.edges.append(e)


def walk(items: Sequence[Node | Cluster]) -> Iterator[Node | Cluster]:
    """Every node and cluster, depth first, in order."""
    for item in items:
        yield item
        if isinstance(item, Cluster):
            yield from walk(item.items)


class Ids:
    """Stable, syntax-safe node ids: ``<prefix>_<name>`` with anything odd replaced."""

    def __init__(self) -> None:
        self._given: dict[tuple[str, str], str] = {}
        self._used: set[str] = {START_ID, END_ID, ABORT_ID}

    def __call__(self, prefix: str, name: str) -> str:
        key = (prefix, name)
        if key not in self._given:
            base = f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
            candidate, n = base, 2
            while candidate in self._used:
                candidate, n = f"{base}_{n}", n + 1
            self._used.add(candidate)
            self._given[key] = candidate
        return self._given[key]
