"""The shape of src/procflow, read from its source with ``ast`` (nothing of procflow is imported).

- no import cycle among its modules, counting imports inside functions and under
  ``if TYPE_CHECKING:`` (each is a dependency a reader and a refactoring must follow);
- layers point one way: ``errors``/``states``/``config``/``cursors``/``calendar`` <- ``expr`` <-
  ``store`` <- ``model`` <- ``runtime`` <- the faces (``cli``, ``server``, ``testing``, ``api``);
- inside ``runtime`` and ``model``, rooms point one way too (``ROOMS``): a module imports only
  from its own room and the rooms listed before it, and every subpackage is one of the rooms;
- no package folder of more than 20 modules, and each subpackage says in its docstring what it
  holds and what it may import;
- no module over 600 lines;
- every public exception class lives in ``procflow/errors.py``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "procflow"
MAX_LINES = 600

BASE = (
    "procflow.errors", "procflow.states", "procflow.config", "procflow.cursors",
    "procflow.calendar",
)  # fmt: skip
FACES = ("procflow.cli", "procflow.server", "procflow.testing", "procflow.api")
# (layer, the modules it may not import); a module belongs to a layer named by it or a prefix.
FORBIDDEN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("procflow.store", ("procflow.model", "procflow.runtime", *FACES)),
    ("procflow.model", ("procflow.runtime", *FACES, "procflow.store")),
    ("procflow.runtime", FACES),
)

# The rooms of the two large packages, lowest first (each package's __init__ draws them).
ROOMS: dict[str, tuple[str, ...]] = {
    "procflow.model": (
        "source", "values", "reading", "access", "notify", "schedule", "connector_ir",
        "parallel_ir", "ir", "connectors", "intent",
        "flow", "validate",
    ),
    "procflow.runtime": (
        "clock", "transition", "faults", "data", "interpret", "definitions", "runs", "waits",
        "operations", "schedules", "work", "engine", "commands",
    ),
}  # fmt: skip
MAX_MODULES = 20


@dataclass(frozen=True)
class Import:
    """One procflow module importing another, where it says so."""

    source: str
    target: str
    file: Path
    line: int

    def where(self) -> str:
        return f"{self.file.relative_to(SRC.parent)}:{self.line}"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def absolute_base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module an ``from X import ...`` names, relative forms resolved against ``module``."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def imported_modules(module: str, path: Path, node: ast.AST) -> Iterator[str]:
    """The modules one Import/ImportFrom node depends on: ``from a.b import c`` is ``a.b.c``
    when that is a module, else ``a.b``."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = absolute_base(module, path, node)
        for alias in node.names:
            child = f"{base}.{alias.name}"
            yield child if child in modules() else base


def imports() -> list[Import]:
    """Every import of one procflow module by another, wherever it is written in the file."""
    found: list[Import] = []
    for module, path in modules().items():
        for node in ast.walk(tree(path)):
            for target in imported_modules(module, path, node):
                if target in modules():
                    found.append(Import(module, target, path, getattr(node, "lineno", 0)))
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph`` (iterative: the import graph may be deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def shortest_path(graph: dict[str, set[str]], start: str, goal: str, within: set[str]) -> list[str]:
    """The shortest path from ``start`` to ``goal`` through ``within`` (breadth first)."""
    came_from: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier and goal not in came_from:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & within):
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    path: list[str] = []
    step: str | None = goal
    while step is not None:
        path.append(step)
        step = came_from[step]
    return path[::-1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """For every import edge that lies on a cycle, the shortest cycle through it (each cycle
    once, starting at its smallest module): together they show every import to untangle."""
    found: dict[tuple[str, ...], list[str]] = {}
    for component in strongly_connected(graph):
        members = set(component)
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        for source in component:
            for target in sorted(graph[source] & members):
                loop = [source, *shortest_path(graph, target, source, members)]
                ring = loop[:-1]
                turn = ring.index(min(ring))
                canonical = tuple(ring[turn:] + ring[:turn])
                found.setdefault(canonical, [*canonical, canonical[0]])
    return [found[key] for key in sorted(found)]


def test_no_import_cycle_among_procflow_modules() -> None:
    edges = imports()
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    where: dict[tuple[str, str], set[str]] = {}
    for edge in edges:
        graph[edge.source].add(edge.target)
        where.setdefault((edge.source, edge.target), set()).add(edge.where())
    loops = cycles(graph)
    report = []
    for loop in loops:
        report.append(" -> ".join(loop))
        for source, target in itertools.pairwise(loop):
            report.append(f"    {source} -> {target}: {', '.join(sorted(where[(source, target)]))}")
    assert not loops, f"{len(loops)} import cycles:\n" + "\n".join(report)


def layer_violation(edge: Import) -> str | None:
    """Why ``edge`` points the wrong way between layers, or None."""
    source, target = edge.source, edge.target
    if source == "procflow.errors":
        return "procflow.errors imports nothing of procflow"
    if source in BASE:
        return None if target in BASE else f"{source} imports only {', '.join(BASE)}"
    if in_layer(source, "procflow.expr"):
        if target in BASE or in_layer(target, "procflow.expr"):
            return None
        return f"procflow.expr imports only itself and {', '.join(BASE)}"
    for layer, forbidden in FORBIDDEN:
        if in_layer(source, layer):
            for banned in forbidden:
                if in_layer(target, banned):
                    return f"{layer} may not import {banned}"
    return None


def test_layers_point_one_way() -> None:
    broken: list[str] = []
    for edge in imports():
        why = layer_violation(edge)
        line = f"{edge.where()}: {edge.source} imports {edge.target} ({why})"
        if why is not None and line not in broken:  # `from m import a, b` is one import of m
            broken.append(line)
    assert not broken, f"{len(broken)} imports against the layers:\n" + "\n".join(broken)


def room_of(module: str) -> tuple[str, int] | None:
    """The package of ``ROOMS`` ``module`` is in, and the rank of its room; None outside them (or
    for the package itself)."""
    for package, rooms in ROOMS.items():
        if in_layer(module, package) and module != package:
            room = module[len(package) + 1 :].split(".")[0]
            return package, rooms.index(room) if room in rooms else -1
    return None


def test_every_module_of_runtime_and_model_is_in_a_room() -> None:
    stray = [m for m in modules() if (found := room_of(m)) is not None and found[1] < 0]
    assert not stray, "modules in no room of ROOMS (add the room in its order):\n" + "\n".join(
        stray
    )


def test_rooms_point_one_way() -> None:
    broken: list[str] = []
    for edge in imports():
        source, target = room_of(edge.source), room_of(edge.target)
        if source is None or target is None or source[0] != target[0]:
            continue
        if target[1] > source[1]:
            package, rooms = source[0], ROOMS[source[0]]
            order = f"{package}.{rooms[source[1]]} comes before {package}.{rooms[target[1]]}"
            line = f"{edge.where()}: {edge.source} imports {edge.target} ({order})"
            if line not in broken:
                broken.append(line)
    assert not broken, f"{len(broken)} imports against the rooms:\n" + "\n".join(broken)


def test_no_package_folder_holds_more_than_20_modules() -> None:
    folders: dict[Path, int] = {}
    for path in modules().values():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = [f"{d.relative_to(SRC.parent)}: {n}" for d, n in folders.items() if n > MAX_MODULES]
    assert not crowded, "split these folders into subpackages by concern:\n" + "\n".join(crowded)


def test_every_subpackage_says_what_it_holds_and_may_import() -> None:
    silent = []
    for module, path in modules().items():
        if path.name == "__init__.py" and module.count(".") >= 2:
            doc = ast.get_docstring(tree(path)) or ""
            if "import" not in doc:
                silent.append(str(path.relative_to(SRC.parent)))
    assert not silent, (
        "subpackages whose docstring does not say what they may import:\n" + "\n".join(silent)
    )


def test_no_module_is_over_600_lines() -> None:
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in modules().items()}
    big = [
        f"{p.relative_to(SRC.parent)}: {sizes[m]} lines"
        for m, p in modules().items()
        if sizes[m] > MAX_LINES
    ]
    assert not big, f"{len(big)} modules over {MAX_LINES} lines:\n" + "\n".join(big)


# --- exceptions --------------------------------------------------------------------------------


@cache
def imported_names(module: str, path: Path) -> dict[str, str]:
    """Local name -> dotted origin, for every name ``module`` imports (at any depth)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                names[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = absolute_base(module, path, node)
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        outer = dotted(node.value)
        return None if outer is None else f"{outer}.{node.attr}"
    return None


@cache
def classes() -> dict[str, tuple[ast.ClassDef, str, Path]]:
    """Every class in src/procflow, by dotted name (module.Class, nested classes included)."""
    found: dict[str, tuple[ast.ClassDef, str, Path]] = {}
    for module, path in modules().items():
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ClassDef):
                found[f"{module}.{node.name}"] = (node, module, path)
    return found


def resolve(module: str, path: Path, name: str) -> str:
    """The dotted origin of ``name`` as written in ``module`` (a builtin stays bare)."""
    head, _, rest = name.partition(".")
    origin = imported_names(module, path).get(head)
    if origin is None:
        if f"{module}.{head}" in classes():
            origin = f"{module}.{head}"
        else:
            return name
    return f"{origin}.{rest}" if rest else origin


@cache
def is_foreign_exception(dotted_name: str) -> bool:
    """Whether a class outside procflow (a builtin, or one of a dependency) is an Exception."""
    if "." not in dotted_name:
        found = getattr(builtins, dotted_name, None)
        return isinstance(found, type) and issubclass(found, Exception)
    module, _, attr = dotted_name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return False
    return isinstance(found, type) and issubclass(found, Exception)


def defining(name: str, seen: frozenset[str] = frozenset()) -> str:
    """Where a procflow name is defined, following re-exports (``procflow.store.X`` imported
    there from ``procflow.errors`` is ``procflow.errors.X``)."""
    module, _, attr = name.rpartition(".")
    if name in classes() or module not in modules() or name in seen:
        return name
    origin = imported_names(module, modules()[module]).get(attr)
    return name if origin is None else defining(origin, seen | {name})


def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
    known = classes()
    name = defining(name)
    if name not in known:
        if name.startswith("procflow.") or name == "procflow":
            return False
        return is_foreign_exception(name)
    if name in seen:
        return False
    node, module, path = known[name]
    for base in node.bases:
        written = dotted(base)
        if written is not None and is_exception(resolve(module, path, written), seen | {name}):
            return True
    return False


def test_every_public_exception_is_defined_in_errors() -> None:
    stray = [
        f"{path.relative_to(SRC.parent)}:{node.lineno}: {node.name}"
        for name, (node, module, path) in sorted(
            classes().items(), key=lambda item: (str(item[1][2]), item[1][0].lineno)
        )
        if module != "procflow.errors" and not node.name.startswith("_") and is_exception(name)
    ]
    assert not stray, f"{len(stray)} public exceptions outside procflow/errors.py:\n" + "\n".join(
        stray
    )


def test_only_the_config_module_reads_procflow_settings() -> None:
    """A ``PROCFLOW_*`` variable is read through ``procflow.config`` alone: a ``.get("PROCFLOW_…")``
    or ``[...]`` on a mapping anywhere else would be a second reader with its own rules."""
    stray = []
    for module, path in modules().items():
        if module == "procflow.config":
            continue
        for node in ast.walk(tree(path)):
            key = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("get", "getenv", "pop") and node.args:
                    key = node.args[0]
            elif isinstance(node, ast.Subscript):
                declared = isinstance(node.value, ast.Name) and node.value.id == "SETTINGS"
                key = None if declared else node.slice  # the declaration, not a read
            if isinstance(key, ast.Constant) and str(key.value).startswith("PROCFLOW_"):
                stray.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: {key.value}")
    assert not stray, "PROCFLOW_* read outside procflow.config:\n" + "\n".join(stray)
