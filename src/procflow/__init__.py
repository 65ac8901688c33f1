"""procflow: a durable process engine for declarative YAML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from procflow.errors import NonRetryableError, ProcflowError

if TYPE_CHECKING:
    from procflow.api import Engine
    from procflow.runtime.interpret.context import KeptMessage, StepContext

__all__ = ["Engine", "KeptMessage", "NonRetryableError", "ProcflowError", "StepContext"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy: `procflow --help` and delegates importing NonRetryableError should not pay for
    # loading the engine, the store and cryptography.
    if name == "Engine":
        from procflow.api import Engine

        return Engine
    if name in ("StepContext", "KeptMessage"):
        from procflow.runtime.interpret import context

        return getattr(context, name)
    raise AttributeError(f"module 'procflow' has no attribute {name!r}")
