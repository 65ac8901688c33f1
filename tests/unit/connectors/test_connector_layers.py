"""The connector floors: the model knows manifests, the runtime calls actions, the built-ins are
plugins on the public step context. Checked on the source, every import counted (inside
functions and under ``TYPE_CHECKING`` too)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

import procflow

SRC = Path(procflow.__file__).parent
# What a built-in connector may import from procflow: what a project's own connector can use.
PUBLIC_FOR_PLUGINS = {"procflow.errors", "procflow.runtime.interpret.context"}
CONNECTOR_MODULES = (
    "procflow.model.connectors.manifest",
    "procflow.model.connectors.registry",
    "procflow.runtime.interpret.actions",
    "procflow.runtime.interpret.flow_action",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in SRC.rglob("*.py")}


@cache
def imports_of(name: str) -> frozenset[str]:
    """The procflow modules ``name`` imports (``from a import b`` counts ``a.b`` if a module)."""
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(m for m in found if m in modules() and m != "procflow")


def test_builtin_connectors_import_only_the_public_context_and_errors() -> None:
    plugins = [m for m in modules() if m.startswith("procflow.connectors.builtin.")]
    assert {"procflow.connectors.builtin.email", "procflow.connectors.builtin.http"} <= set(plugins)
    for plugin in plugins:
        assert imports_of(plugin) <= PUBLIC_FOR_PLUGINS, plugin


@pytest.mark.parametrize("floor", ["procflow.model.", "procflow.runtime."])
def test_model_and_runtime_never_import_the_connectors_package(floor: str) -> None:
    for name in modules():
        if name.startswith(floor):
            used = {m for m in imports_of(name) if m.startswith("procflow.connectors")}
            assert not used, name


def test_the_model_does_not_import_the_runtime() -> None:
    for name in ("procflow.model.connectors.manifest", "procflow.model.connectors.registry"):
        assert not any(m.startswith("procflow.runtime") for m in imports_of(name)), name


@pytest.mark.parametrize("start", CONNECTOR_MODULES)
def test_no_import_cycle_through_the_connector_modules(start: str) -> None:
    path: list[str] = []

    def visit(name: str, seen: set[str]) -> None:
        for target in sorted(imports_of(name)):
            if target == start:
                pytest.fail("import cycle: " + " -> ".join([start, *path, name, target]))
            if target not in seen:
                seen.add(target)
                path.append(target)
                visit(target, seen)
                path.pop()

    visit(start, set())
