"""Vars a step ``uses`` that are set on some paths to it but not all: a warning at the value.

A var is set when a step that ``produces`` it completes normally, and unset again when its
``clearAfter`` step completes normally. Whether a var *may be unset* when a step starts is a
forward analysis over the routes, one var at a time: the first step starts with it unset; a
normal route out of a step passes the state on unless the step produced the var (and it is unset
again after the clearAfter step); a ``timeout``/``expire`` or ``onError`` route passes it on as it
came in (a failed attempt's vars are not relied upon). A fork passes it into each branch; its join
has the var set if any branch set it on every path through that branch (every branch has ended
when the join goes on), so the join may be unset only when every branch may end with it unset.

Reading an unset var fails the step at run time (see ``vars``); the warning says so up front, with
one path on which it happens. Uses already judged elsewhere are left alone: a var no step produces
(a warning on the var) and one only a sibling branch produces (an error: a race). A var erased
by its clearAfter step in a sibling branch is a race too, and an error here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from procflow.model.intent.graph import EdgeSort, Graph, StepNode
from procflow.model.intent.parallel import Branch, racing_fork
from procflow.model.ir import JOIN
from procflow.model.reading.reader import Reader

__all__ = ["check_var_paths"]

SHOWN = 6  # a longer path shows its first two and last three steps (as graph.Paths does)


def check_var_paths(
    graph: Graph, owner: dict[str, Branch], clear_after: Mapping[str, str | None], reader: Reader
) -> None:
    if not graph.steps or any(s.kind == "?" for s in graph.steps):
        return  # a step of unknown kind: what it produces and where it goes are unknown
    flow = _Flow(graph, owner)
    producers: dict[str, list[str]] = {}
    for step in graph.steps:
        for var in step.produces:
            producers.setdefault(var, []).append(step.name)
    used = {var for step in graph.steps for var, _ in step.uses}
    for var in sorted(used & producers.keys()):
        cleared_by = clear_after.get(var)
        unset = _MayBeUnset(flow, var, cleared_by)
        for step in graph.steps:
            for name, pos in step.uses:
                if name != var or racing_fork(step.name, producers[var], owner) is not None:
                    continue  # a race with its producer is an error of its own
                clear_race = racing_fork(step.name, [cleared_by], owner) if cleared_by else None
                if clear_race is not None:
                    reader.error(
                        pos,
                        step.context,
                        f"uses [{var}], which clearAfter erases after [{cleared_by}] in a sibling "
                        f"branch of parallel [{clear_race}]: whether it is still set depends on "
                        "which branch runs first",
                    )
                elif step.name in unset.parents:
                    reader.warning(pos, step.context, unset.message(step.name))


@dataclass(frozen=True)
class _End:
    """Where a branch's paths end (its terminals, and routes to ``join``)."""

    branch: Branch


@dataclass(frozen=True)
class _Join:
    fork: str


Node = str | _End | _Join


class _Flow:
    """The routes a token takes, forks and joins included: each node's (sort, successor)s."""

    def __init__(self, graph: Graph, owner: dict[str, Branch]) -> None:
        self.graph = graph
        self.owner = owner
        self.ends: dict[str, list[_End]] = {}  # a fork → its branches' ends
        for branch in dict.fromkeys(owner.values()):
            self.ends.setdefault(branch.fork, []).append(_End(branch))

    def successors(self, node: Node) -> Iterator[tuple[EdgeSort, Node]]:
        if isinstance(node, _End):
            yield "normal", _Join(node.branch.fork)
        elif isinstance(node, _Join):
            yield from self._after_join(self.graph.by_name[node.fork])
        elif (step := self.graph.by_name[node]).kind == "parallel":
            for branch_end in self.ends.get(step.name, []):
                yield "normal", branch_end.branch.first
        else:
            yield from self._routes(step)

    def _routes(self, step: StepNode) -> Iterator[tuple[EdgeSort, Node]]:
        for sort in ("normal", "timer", "error"):
            for target in self.graph.successors(step, (sort,)):
                yield sort, target
        mine = self.owner.get(step.name)
        if mine is None:
            return
        for sort, target, _ in step.routes:
            if target == JOIN and JOIN not in self.graph.by_name:
                yield sort, _End(mine)
        if step.flows_to_join:
            yield "normal", _End(mine)

    def _after_join(self, fork: StepNode) -> Iterator[tuple[EdgeSort, Node]]:
        nxt = next((t for sort, t, _ in fork.routes if sort == "normal"), None)
        if nxt in self.graph.by_name:
            yield "normal", nxt
        elif (mine := self.owner.get(fork.name)) is not None and nxt in (None, JOIN):
            yield "normal", _End(mine)  # a nested fork's join goes on into the enclosing join


class _MayBeUnset:
    """The nodes where ``var`` may be unset when a token arrives → the node it came from."""

    def __init__(self, flow: _Flow, var: str, clear_after: str | None) -> None:
        self.flow, self.var, self.clear_after = flow, var, clear_after
        self.parents: dict[Node, Node | None] = {}
        self._queue: deque[Node] = deque()
        self._reach = _reach(flow) if clear_after in flow.graph.by_name else {}
        self._summaries: dict[Node, tuple[int, tuple[str, ...], bool]] = {}
        self._arrive(flow.graph.steps[0].name, None)
        if clear_after in self._reach:
            self._leave(clear_after)  # it unsets the var whatever it arrived with
        while self._queue:
            self._leave(self._queue.popleft())

    def _arrive(self, node: Node, came_from: Node | None) -> None:
        if node in self.parents:
            return
        ends = self.flow.ends[node.fork] if isinstance(node, _Join) else []
        if not all(e in self.parents for e in ends):
            return  # another branch may still set it before the join goes on
        self.parents[node] = came_from
        self._queue.append(node)
        if isinstance(node, _End):
            self._arrive(_Join(node.branch.fork), self._telling_end(node.branch.fork))

    def _telling_end(self, fork: str) -> _End:
        """The branch to show a path through its join by: one that sets the var on some path
        (every branch ends with it unset on some path, or the join would not be reached)."""
        ends = self.flow.ends[fork]
        producing = [e for e in ends if any(self.var in s.produces for s in self._steps_of(e))]
        return (producing or ends)[0]

    def _steps_of(self, end: _End) -> list[StepNode]:
        by_name = self.flow.graph.by_name
        return [by_name[n] for n, b in self.flow.owner.items() if b == end.branch]

    def _leave(self, node: Node) -> None:
        arrived_unset = node in self.parents
        step = self.flow.graph.by_name.get(node) if isinstance(node, str) else None
        clears = step is not None and step.name == self.clear_after
        produces = step is not None and self.var in step.produces
        for sort, target in self.flow.successors(node):
            if sort == "normal":
                passes_unset = clears or (arrived_unset and not produces)
            else:  # timer and onError routes: the step did not complete
                passes_unset = arrived_unset
            if passes_unset:
                self._arrive(target, node)

    def message(self, user: str) -> str:
        depth, head, _ = self._summary(user)
        tail = self._last(user, SHOWN if depth <= SHOWN else 3)
        path = " → ".join(tail if depth <= SHOWN else [*head, "…", *tail])
        parent = self._came_from(user)
        cleared = parent is not None and self._summary(parent)[2]
        how = f": clearAfter erases it after [{self.clear_after}]" if cleared else ""
        return (
            f"uses [{self.var}], which is not set on every path to this step (not on "
            f"{path}{how}); reading it unset fails the step"
        )

    def _came_from(self, node: Node) -> Node | None:
        """Back along the path: where the var may be unset, the node that passed it on; before
        the clearAfter step, any way there."""
        return self.parents[node] if node in self.parents else self._reach.get(node)

    def _last(self, node: Node, count: int) -> list[str]:
        labels: list[str] = []
        seen: set[Node] = set()
        current: Node | None = node
        while current is not None and current not in seen and len(labels) < count:
            seen.add(current)
            if (label := _label(current)) is not None:
                labels.append(label)
            current = self._came_from(current)
        return labels[::-1]

    def _summary(self, node: Node) -> tuple[int, tuple[str, ...], bool]:
        """How many steps the path to ``node`` shows, its first two, and whether the clearAfter
        step is on it; worked out once per node, so each message costs the same however long
        its path (a process of 20,000 chained steps may warn on each)."""
        walked: list[Node] = []
        current: Node | None = node
        while current is not None and current not in self._summaries and current not in walked:
            walked.append(current)
            current = self._came_from(current)
        known = self._summaries.get(current) if current is not None else None
        depth, head, cleared = known or (0, (), False)
        for one in reversed(walked):
            if (label := _label(one)) is not None:
                depth, head = depth + 1, head if len(head) == 2 else (*head, label)
            cleared = cleared or one == self.clear_after
            self._summaries[one] = (depth, head, cleared)
        return self._summaries[node]


def _label(node: Node) -> str | None:
    """How a node shows in a path: a step by its name, a join as ``join``, a branch's end not."""
    if isinstance(node, str):
        return node
    return JOIN if isinstance(node, _Join) else None


def _reach(flow: _Flow) -> dict[Node, Node | None]:
    """Every node a token reaches from the first step → the node it first came from."""
    start = flow.graph.steps[0].name
    parents: dict[Node, Node | None] = {start: None}
    queue: deque[Node] = deque([start])
    while queue:
        node = queue.popleft()
        for _, target in flow.successors(node):
            if isinstance(target, _Join) and not all(e in parents for e in flow.ends[target.fork]):
                continue  # the last branch to end brings the join
            if target not in parents:
                parents[target] = node
                queue.append(target)
    return parents
