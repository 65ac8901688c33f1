"""Loading project code (delegates, connectors) under a per-project module namespace.

Each project directory gets its own synthetic package, ``procflow_project_<hash>``, whose
``__path__`` is the directory; ``custom`` there is imported as ``procflow_project_<hash>.custom``,
so two projects' ``custom`` packages never collide and nothing is added to ``sys.path``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

from procflow.errors import CodeLoadError

_PACKAGES: dict[str, str] = {}  # project_dir as given → package name (resolving costs stats)
_ATTRS: dict[tuple[str, str, str], Any] = {}  # (project_dir, module, attr) → loaded object


def project_package(project_dir: str) -> str:
    known = _PACKAGES.get(project_dir)
    if known is not None and known in sys.modules:
        return known
    resolved = str(Path(project_dir).resolve())
    name = "procflow_project_" + hashlib.sha1(resolved.encode()).hexdigest()[:12]
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [resolved]
        package.__package__ = name
        sys.modules[name] = package
    _PACKAGES[project_dir] = name
    return name


# Test doubles installed by ``procflow.testing.fake_delegate``: (module, attr) → callable.
FAKES: dict[tuple[str, str], Any] = {}


def load_attr(project_dir: str, module: str, attr: str) -> Any:
    fake = FAKES.get((module, attr))
    if fake is not None:
        return fake
    key = (project_dir, module, attr)
    hit = _ATTRS.get(key)
    if hit is not None:  # an imported module stays imported: resolve and import once per process
        return hit
    hit = _ATTRS[key] = _import_attr(project_dir, module, attr)
    return hit


def _import_attr(project_dir: str, module: str, attr: str) -> Any:
    package = project_package(project_dir)
    try:
        mod = importlib.import_module(f"{package}.{module}")
    except Exception as exc:  # user code: any import-time error is reported, not raised raw
        raise CodeLoadError(
            f"cannot import [{module}] from {project_dir}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise CodeLoadError(f"[{module}] in {project_dir} has no [{attr}]") from None


def call_delegate(target: Any, ctx: Any, fields: dict[str, Any]) -> Any:
    """A class gets a new instance per attempt with ``fields`` set as attributes."""
    if inspect.isclass(target):
        instance: Any = target()
        for key, value in fields.items():
            setattr(instance, key, value)
        result = instance.execute(ctx)
    else:
        result = target(ctx)
    if result is not None and inspect.isawaitable(result):  # most delegates return nothing
        import asyncio

        async def wait() -> Any:
            return await result

        result = asyncio.run(wait())
    return result


def escaped(exc: SystemExit | KeyboardInterrupt) -> str:
    """The step failure for project code that raised ``SystemExit`` or ``KeyboardInterrupt``:
    caught like any error, so one step can never stop the worker that runs every run."""
    detail = f"({exc})" if str(exc) else ""
    return f"the step's code raised {type(exc).__name__}{detail}; a step cannot stop its worker"
