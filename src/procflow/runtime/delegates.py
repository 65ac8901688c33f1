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

from procflow.errors import ProcflowError


class CodeLoadError(ProcflowError):
    """The project's code could not be imported."""


def project_package(project_dir: str) -> str:
    resolved = str(Path(project_dir).resolve())
    name = "procflow_project_" + hashlib.sha1(resolved.encode()).hexdigest()[:12]
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [resolved]
        package.__package__ = name
        sys.modules[name] = package
    return name


# Test doubles installed by ``procflow.testing.fake_delegate``: (module, attr) → callable.
FAKES: dict[tuple[str, str], Any] = {}


def load_attr(project_dir: str, module: str, attr: str) -> Any:
    fake = FAKES.get((module, attr))
    if fake is not None:
        return fake
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
    if inspect.isawaitable(result):
        import asyncio

        async def wait() -> Any:
            return await result

        result = asyncio.run(wait())
    return result
