"""Resolving ``delegate`` names to Python code in the project directory, without importing it.

Validation must not run user code (it may have side effects, or need the worker's environment),
so the module is located by path and read with :mod:`ast`. A name counts as defined when the
module binds it at top level: a ``def``, a ``class``, an assignment, or an import that re-exports
it (``from .schema import SchemaProvisioner`` in ``custom/__init__.py`` is the usual layout).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from procflow.errors import UsageError
from procflow.model.reading.files import read_text
from procflow.model.reading.reader import IDENT
from procflow.model.source import suggest


@dataclass(frozen=True)
class Target:
    module: str
    attr: str


@dataclass
class ModuleInfo:
    file: str  # relative to the project directory, for messages
    names: dict[str, ast.stmt] = field(default_factory=dict)
    problem: str | None = None  # why the module could not be read


def split_ref(ref: str) -> Target | None:
    """``X`` → ``custom.X``; ``a.b.C`` → module ``a.b``, attribute ``C``; ``None`` if malformed."""
    parts = ref.split(".")
    if not all(IDENT.match(p) for p in parts):
        return None
    if len(parts) == 1:
        return Target("custom", ref)
    return Target(".".join(parts[:-1]), parts[-1])


class DelegateResolver:
    """Finds delegate targets under ``project_dir``; each module is read once per validation."""

    def __init__(self, project_dir: str) -> None:
        self.root = Path(project_dir)
        self.modules: dict[str, ModuleInfo] = {}

    def problem(self, target: Target) -> str | None:
        """Why ``target`` cannot be resolved (``None``: it resolves)."""
        info = self.modules.get(target.module)
        if info is None:
            info = self.modules[target.module] = self._load(target.module)
        if info.problem:
            return info.problem
        stmt = info.names.get(target.attr)
        if stmt is None:
            near = suggest(target.attr, (n for n in info.names if not n.startswith("_")))
            return f"{info.file} defines no [{target.attr}]{near}"
        if isinstance(stmt, ast.ClassDef) and not stmt.bases and not _has_method(stmt, "execute"):
            return (
                f"class [{target.attr}] in {info.file} has no execute(ctx) method; "
                "a delegate class needs one (or make the delegate a function taking ctx)"
            )
        return None

    def _load(self, module: str) -> ModuleInfo:
        rel = module.replace(".", "/")
        candidates = [f"{rel}.py", f"{rel}/__init__.py"]
        for candidate in candidates:
            path = self.root / candidate
            if path.is_file():
                return _read(path, candidate)
        looked = " and ".join(candidates)
        return ModuleInfo(
            candidates[0],
            problem=f"no module [{module}] in the project directory {self.root} "
            f"(looked for {looked})",
        )


def _read(path: Path, shown: str) -> ModuleInfo:
    try:
        tree = ast.parse(read_text(str(path)), filename=shown)
    except SyntaxError as exc:
        return ModuleInfo(shown, problem=f"{shown} cannot be parsed (line {exc.lineno}: {exc.msg})")
    except (UsageError, UnicodeDecodeError) as exc:
        return ModuleInfo(shown, problem=f"{shown} cannot be read ({exc})")
    info = ModuleInfo(shown)
    _collect(tree.body, info.names)
    return info


def _collect(body: list[ast.stmt], names: dict[str, ast.stmt]) -> None:
    """Top-level bindings, looking into module-level ``if``/``try``/``with`` blocks."""
    for stmt in body:
        for name in _bound(stmt):
            names.setdefault(name, stmt)
        if isinstance(stmt, ast.If):
            _collect(stmt.body + stmt.orelse, names)
        elif isinstance(stmt, ast.Try):
            _collect(stmt.body + stmt.orelse + stmt.finalbody, names)
            for handler in stmt.handlers:
                _collect(handler.body, names)
        elif isinstance(stmt, ast.With):
            _collect(stmt.body, names)


def _bound(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        return [stmt.target.id]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
    return []


def _has_method(cls: ast.ClassDef, name: str) -> bool:
    return any(
        isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name for s in cls.body
    )
