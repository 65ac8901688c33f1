"""The ``parallel`` step (Dirigible's fork and join): its args, and the checks on its branches.

A branch is a chain: its first step and every step reachable from it by the steps' own routes
(``next``, ``then``/``else``, ``timeout.then``, ``expire.then``, ``onError``); a nested fork's
branches are its own, its ``next`` goes on in the enclosing branch. Inside a branch nothing falls
through by position: a step no route leaves is the branch's terminal and flows into the join, as
the literal ``join`` does. The checks run once every step is read (:func:`check_forks`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

from procflow.model.intent.graph import Graph, StepNode
from procflow.model.intent.proc import Proc, add_route
from procflow.model.ir import END, JOIN, IntentStep, ParallelStep
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap
from procflow.model.source import Pos, suggest


def parallel_step(args: YMap, proc: Proc, step: StepNode, here: str | None) -> IntentStep | None:
    reader, context = proc.reader, step.context
    node = reader.require(args, "branches", context, "a list of at least two steps")
    written = reader.strings(node, context, "branches")
    for text, pos in written:
        problem = _branch_problem(text, here, step.branches, proc)
        if problem is None:
            step.branches.append((text, pos))
        else:
            reader.error(pos, context, problem)
    if node is not None and len(written) < 2:
        reader.error(
            node.pos,
            context,
            f"branches names {len(written)} step{'' if len(written) == 1 else 's'}; a parallel "
            "runs at least two branches",
        )
    step.edges.extend(("normal", name) for name, _ in step.branches)
    next_node = args.get("next")
    nxt = proc.route(next_node, context, "next", here)
    add_route(step, "normal", next_node, nxt)
    step.falls_through = False  # its join goes on at next, or into the enclosing join
    complete = len(written) >= 2 and len(step.branches) == len(written)
    if here is None or not complete:
        return None
    return ParallelStep(here, tuple(name for name, _ in step.branches), step.pos, nxt)


def _branch_problem(
    name: str, here: str | None, seen: list[tuple[str, Pos]], proc: Proc
) -> str | None:
    if name in (END, JOIN) and name not in proc.steps:
        return f"branch [{name}] names no step; a branch starts at a declared step"
    if name not in proc.steps:
        return f"branch [{name}] is not a step of this process{suggest(name, proc.steps)}"
    if name == here:
        return f"branch [{name}] is the parallel step itself"
    if any(name == other for other, _ in seen):
        return f"branch [{name}] is listed twice"
    return None


# --- the branches' checks ----------------------------------------------------------------------


@dataclass(frozen=True)
class Branch:
    fork: str
    first: str
    members: frozenset[str]  # the chain, without the steps of nested forks' branches

    @property
    def label(self) -> str:
        return f"branch [{self.first}] of parallel [{self.fork}]"


def check_forks(graph: Graph, reader: Reader) -> dict[str, Branch]:
    """Report every breach of the branch rules; returns each branch step → its branch (a step
    found in two branches keeps the first)."""
    forks = [s for s in graph.steps if s.kind == "parallel"]
    branches = [
        Branch(fork.name, first, _chain(graph, first, _fork_next(fork)))
        for fork in forks
        for first, _ in fork.branches
        if first in graph.by_name
    ]
    owner, contested = _owners(branches, graph, reader)
    for step in graph.steps:
        if step.name in owner:
            step.flows_to_join = step.falls_through
            step.falls_through = False  # a branch's terminal flows into the join
    for fork in forks:
        _check_next(fork, owner, reader)
    for step in graph.steps:
        _check_routes(step, owner.get(step.name), owner, graph, reader, contested)
    _check_entries(graph, owner, reader)
    _check_sibling_vars(graph, owner, reader)
    return owner


def _chain(graph: Graph, first: str, after_join: str | None) -> frozenset[str]:
    """``first`` and the steps its routes reach (a nested fork's branches not followed, nor
    its fork's ``next``: a route there is an error of its own)."""
    seen = {first}
    queue = deque([first])
    while queue:
        step = graph.by_name[queue.popleft()]
        for _, target, _ in step.routes:
            if target in graph.by_name and target not in seen and target != after_join:
                seen.add(target)
                queue.append(target)
    return frozenset(seen)


def _owners(
    branches: list[Branch], graph: Graph, reader: Reader
) -> tuple[dict[str, Branch], set[str]]:
    """Each branch step → its branch, and the steps found in two branches (reported here)."""
    owner: dict[str, Branch] = {}
    contested: set[str] = set()
    for branch in branches:
        for name in sorted(branch.members, key=lambda n: graph.by_name[n].pos[1:3]):
            first = owner.setdefault(name, branch)
            if first is not branch:
                contested.add(name)
                step = graph.by_name[name]
                reader.error(
                    step.pos,
                    step.context,
                    f"is in {first.label} and in {branch.label}; a step belongs to one branch only",
                )
    return owner, contested


def _check_next(fork: StepNode, owner: dict[str, Branch], reader: Reader) -> None:
    has_next = any(sort == "normal" for sort, _, _ in fork.routes) or fork.open_sorts
    if fork.name not in owner and not has_next:
        reader.error(
            fork.pos,
            fork.context,
            "a top-level parallel needs [next]: the step (or end) its join goes on at",
        )


def _check_routes(
    step: StepNode,
    mine: Branch | None,
    owner: dict[str, Branch],
    graph: Graph,
    reader: Reader,
    contested: set[str],
) -> None:
    for _, target, pos in step.routes:
        if target in contested:
            continue  # the step in two branches is the error already reported
        problem = _route_problem(step, target, mine, owner, graph)
        if problem is not None:
            reader.error(pos, step.context, problem)


def _route_problem(
    step: StepNode, target: str, mine: Branch | None, owner: dict[str, Branch], graph: Graph
) -> str | None:
    if target == JOIN and JOIN not in graph.by_name:
        if mine is None:
            return "routes to [join] outside a branch; join ends a branch of a parallel"
        return None
    if mine is not None and target == END and END not in graph.by_name:
        return (
            f"routes to [end] inside {mine.label}; the join would wait forever: route to "
            "[join] to end the branch"
        )
    theirs = owner.get(target)
    if theirs is not None and theirs is not mine:
        return f"routes into {theirs.label}; only its parallel starts a branch"
    if mine is not None:
        fork_next = _fork_next(graph.by_name[mine.fork])
        if target == fork_next:
            return (
                f"routes to [{target}], where parallel [{mine.fork}] goes on after its join; "
                "route to [join] to end the branch"
            )
    return None


def _fork_next(fork: StepNode) -> str | None:
    return next((t for sort, t, _ in fork.routes if sort == "normal"), None)


def _check_entries(graph: Graph, owner: dict[str, Branch], reader: Reader) -> None:
    """A step outside a branch falling through into one, or the process starting in one."""
    if graph.steps and graph.steps[0].name in owner:
        first = graph.steps[0]
        reader.error(
            first.pos,
            first.context,
            f"the process starts in {owner[first.name].label}; only its parallel starts a branch",
        )
    for step in graph.steps:
        following = graph.following.get(step.name)
        if step.falls_through and following in owner and step.name not in owner:
            reader.error(
                step.pos,
                step.context,
                f"falls through into {owner[following].label}; only its parallel starts a "
                "branch: give this step a next",
            )


def _check_sibling_vars(graph: Graph, owner: dict[str, Branch], reader: Reader) -> None:
    """A step that ``uses`` a var which only steps of a sibling branch produce: whether it is
    set when the step runs depends on which branch runs first."""
    producers: dict[str, list[str]] = {}
    for step in graph.steps:
        for var in step.produces:
            producers.setdefault(var, []).append(step.name)
    for step in graph.steps:
        for var, pos in step.uses:
            made_by = producers.get(var, [])
            fork = racing_fork(step.name, made_by, owner)
            if fork is not None:
                reader.error(
                    pos,
                    step.context,
                    f"uses [{var}], which only a sibling branch of parallel [{fork}] produces "
                    f"({', '.join(made_by)}): whether it is set depends on which branch runs first",
                )


def racing_fork(user: str, producers: list[str], owner: dict[str, Branch]) -> str | None:
    """The innermost fork in whose other branches every producer lies, if any."""
    if not producers:
        return None
    for branch in _enclosing(user, owner):
        if all(
            any(b.fork == branch.fork and b.first != branch.first for b in _enclosing(p, owner))
            for p in producers
        ):
            return branch.fork
    return None


def _enclosing(name: str, owner: dict[str, Branch]) -> list[Branch]:
    """The branches ``name`` is inside, innermost first (a nested fork's step is inside the
    branch of its fork too)."""
    out: list[Branch] = []
    while (branch := owner.get(name)) is not None and branch not in out:
        out.append(branch)
        name = branch.fork
    return out


def with_members(steps: Iterable[IntentStep], owner: dict[str, Branch]) -> list[IntentStep]:
    """The steps, each fork with its branches' members (the runtime's join routing)."""
    out: list[IntentStep] = []
    for step in steps:
        if isinstance(step, ParallelStep):
            members = tuple(
                tuple(
                    sorted(n for n, b in owner.items() if b.fork == step.name and b.first == first)
                )
                for first in step.branches
            )
            step = replace(step, members=members)
        out.append(step)
    return out
