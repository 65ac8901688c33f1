"""Routing analysis of one process: which steps are reachable, and how.

Edges come in three sorts. ``normal`` edges are the path a token takes when nothing fails
(``next``, falling through, a decision's branches); ``timer`` edges are a user task's
``timeout``/``expire`` (no failure either); ``error`` edges are ``onError`` routes. ``{error}``
is meaningful only on a step that no failure-free path reaches, so the sorts are kept apart.

The analysis also runs when some routes are wrong (a target that names no step, a required route
left out, a step of unknown kind, a target declared twice), so those problems and the routing
problems of the rest are reported in one pass. Such a route is *open*: it contributes no edge, and
its step does not fall through either. The graph is then a part of the one the author meant, so a
path found in it exists there too ("{error} would be empty here", "[action] would be empty here",
"cleanup reached by the main flow" stay true); a claim that no path exists ("no route reaches this
step", "no onError route leads to this step") is withheld when an open route could have supplied
one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal

from procflow.model.ir import END
from procflow.model.reading.reader import Reader
from procflow.model.source import Pos

EdgeSort = Literal["normal", "timer", "error"]
ALL_SORTS: frozenset[EdgeSort] = frozenset({"normal", "timer", "error"})
NO_FAILURE: frozenset[EdgeSort] = frozenset({"normal", "timer"})


@dataclass
class StepNode:
    """What the analysis needs to know of a step; filled in while the step's args are read."""

    name: str
    kind: str
    pos: Pos
    context: str
    edges: list[tuple[EdgeSort, str]] = field(default_factory=list)  # explicit routes
    falls_through: bool = False  # continues with the next declared step when not routed
    flows_to_join: bool = False  # a branch step that would fall through: it ends its branch
    error_value: Pos | None = None  # where a ``{error}`` value is written
    action: str | None = None  # a service task's or script's action (setField, delegate, ...)
    action_read: Pos | None = None  # where a decision reads ``action`` (a user task's outcome)
    open_sorts: set[EdgeSort] = field(default_factory=set)  # sorts of routes to no known step
    # Every route as written to a known target (``end`` and ``join`` too), where it is written:
    # the fork checks judge each one (procflow.model.intent.parallel).
    routes: list[tuple[EdgeSort, str, Pos]] = field(default_factory=list)
    branches: list[tuple[str, Pos]] = field(default_factory=list)  # a parallel's, as written
    produces: tuple[str, ...] = ()  # the declared vars a delegate step sets
    uses: list[tuple[str, Pos]] = field(default_factory=list)  # ... and reads, where written

    @property
    def is_cleanup_action(self) -> bool:
        """Whether the step can be an abort cleanup: a task that writes the record, nothing else."""
        return self.action in ("setField", "setRelationField")


@dataclass
class Graph:
    steps: list[StepNode]

    def __post_init__(self) -> None:
        self.ambiguous = _rename_repeated(self.steps)
        for step in self.steps:
            # a route to a name declared twice could mean either step: it leads nowhere known
            step.open_sorts.update(sort for sort, t in step.edges if t in self.ambiguous)
            step.edges = [(sort, t) for sort, t in step.edges if t not in self.ambiguous]
        self.by_name = {s.name: s for s in self.steps}
        self.following = {a.name: b.name for a, b in zip(self.steps, self.steps[1:], strict=False)}

    def has_open_route(self, names: Iterable[str], sorts: Collection[EdgeSort] = ALL_SORTS) -> bool:
        """Whether one of the steps ``names`` has a route of one of ``sorts`` to no known step."""
        return any(self.by_name[n].open_sorts.intersection(sorts) for n in names)

    def successors(self, step: StepNode, sorts: Collection[EdgeSort]) -> Iterable[str]:
        for sort, target in step.edges:
            if sort in sorts and target in self.by_name:
                yield target
        if step.falls_through and "normal" in sorts and step.name in self.following:
            yield self.following[step.name]

    def reach(
        self, roots: Iterable[str], sorts: Collection[EdgeSort], stop: Collection[str] = ()
    ) -> dict[str, str | None]:
        """Every step reachable from ``roots`` → the step it was first reached from (for paths).

        Steps in ``stop`` are reached but not left (an abort cleanup step runs alone).
        """
        parents: dict[str, str | None] = {}
        queue: deque[str] = deque()
        for root in roots:
            if root in self.by_name and root not in parents:
                parents[root] = None
                queue.append(root)
        while queue:
            name = queue.popleft()
            if name in stop:
                continue
            for nxt in self.successors(self.by_name[name], sorts):
                if nxt not in parents:
                    parents[nxt] = name
                    queue.append(nxt)
        return parents


def _rename_repeated(steps: list[StepNode]) -> set[str]:
    """Names declared twice (reported elsewhere); a later step of such a name becomes
    ``name#position`` so each step stays a node of its own. Returns the repeated names."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for index, step in enumerate(steps):
        if step.name in seen:
            repeated.add(step.name)
            step.name = f"{step.name}#{index + 1}"
        seen.add(step.name)
    return repeated


class Paths:
    """``start → a → name`` for the steps :meth:`Graph.reach` found (long paths keep both ends).

    Each step's depth and its first step after the start are worked out once, on the first
    message, so a message costs the same however long its path: a process of 20,000 chained
    steps may report a problem on each of them."""

    SHOWN = 6  # a longer path shows its first two and last three steps

    def __init__(self, parents: dict[str, str | None]) -> None:
        self.parents = parents
        self.depth: dict[str, int] = {}
        self.first: dict[str, str] = {}  # a step → the step after the start on its path

    def _index(self) -> None:
        for name, parent in self.parents.items():  # a parent is always reached before its child
            if parent is None:
                self.depth[name] = 0
                continue
            self.depth[name] = self.depth[parent] + 1
            self.first[name] = name if self.depth[parent] == 0 else self.first[parent]

    def to(self, name: str) -> str:
        if not self.depth:
            self._index()
        chain = [name]
        while len(chain) < self.SHOWN and (parent := self.parents.get(chain[-1])) is not None:
            chain.append(parent)
        if self.depth[name] >= self.SHOWN:
            first = self.first[name]
            chain = [*chain[:3], "…", first, str(self.parents[first])]
        chain.reverse()
        return " → ".join(chain)


def path_to(parents: dict[str, str | None], name: str) -> str:
    """One path of ``parents`` shown (see :class:`Paths` to show several)."""
    return Paths(parents).to(name)


@dataclass(frozen=True)
class AbortRoute:
    then: str | None  # None: the route names no step (or is missing): the cleanup is unknown
    pos: Pos
    context: str


def analyse(graph: Graph, abort: AbortRoute | None, reader: Reader) -> None:
    """Report unreachable steps, misplaced ``{error}`` values and a reachable abort cleanup step."""
    if not graph.steps:
        return
    start = graph.steps[0].name
    main = graph.reach([start], ALL_SORTS)
    then = abort.then if abort else None
    cleanup = then if then not in (None, END, *graph.ambiguous) else None
    if abort is not None and cleanup is not None and cleanup in main:
        reader.error(
            abort.pos,
            abort.context,
            f"step [{cleanup}] is also reached by the main flow ({path_to(main, cleanup)}); "
            "a cleanup step must run only when the run is aborted",
        )
    reached = graph.reach([start, *([cleanup] if cleanup else [])], ALL_SORTS, stop={cleanup or ""})
    cleanup_unknown = abort is not None and then != END and cleanup is None
    if not cleanup_unknown and not graph.has_open_route(set(reached) - {cleanup}):
        for step in graph.steps:
            if step.name not in reached:
                reader.warning(
                    step.pos, step.context, "no route reaches this step, so it never runs"
                )
    _check_error_values(graph, start, cleanup, reader)
    _check_action_reads(graph, start, reader)


def _check_error_values(graph: Graph, start: str, cleanup: str | None, reader: Reader) -> None:
    users = [s for s in graph.steps if s.error_value is not None]
    if not users:
        return
    # Steps a token reaches without any failure on the way: {error} would be empty there.
    calm = graph.reach([start, *([cleanup] if cleanup else [])], NO_FAILURE, stop={cleanup or ""})
    targets = [t for s in graph.steps for sort, t in s.edges if sort == "error"]
    after_failure = graph.reach(targets, ALL_SORTS)
    # an onError route to no known step, or any open route after a failure, may lead here
    everywhere = [s.name for s in graph.steps]
    failure_paths_known = not (
        graph.has_open_route(everywhere, ["error"]) or graph.has_open_route(after_failure)
    )
    calm_paths = Paths(calm)
    for step in users:
        assert step.error_value is not None
        if step.name in calm:
            how = (
                "it is the abort cleanup step"
                if step.name == cleanup
                else f"it is reached without a failure: {calm_paths.to(step.name)}"
            )
            reader.error(
                step.error_value,
                step.context,
                f"{{error}} would be empty here: {how}; use {{error}} only on steps that every "
                "path reaches through an onError route",
            )
        elif step.name not in after_failure and failure_paths_known:
            reader.error(
                step.error_value,
                step.context,
                "{error} is set only by a failure, but no onError route leads to this step",
            )


def _check_action_reads(graph: Graph, start: str, reader: Reader) -> None:
    """A decision reading ``action`` must come after a completed user task on every path.

    ``action`` is the action that completed the most recent user task on the path; on a path
    without one it would be silently null. A user task's ``next`` (or falling through) is taken on
    completion; its ``timeout``/``expire`` routes are not, so they carry no action of that task.
    """
    users = [s for s in graph.steps if s.action_read is not None]
    if not users:
        return
    parents: dict[str, str | None] = {start: None}
    queue: deque[str] = deque([start])
    while queue:
        step = graph.by_name[queue.popleft()]
        sorts: Collection[EdgeSort] = frozenset({"timer"}) if step.kind == "userTask" else ALL_SORTS
        for nxt in graph.successors(step, sorts):
            if nxt not in parents:
                parents[nxt] = step.name
                queue.append(nxt)
    paths = Paths(parents)
    for step in users:
        assert step.action_read is not None
        if step.name in parents:
            reader.error(
                step.action_read,
                step.context,
                "[action] would be empty here: no userTask is completed before this step on the "
                f"path {paths.to(step.name)}; action is the action that completed the "
                "most recent userTask",
            )
