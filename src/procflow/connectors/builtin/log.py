"""The built-in ``log`` connector: ``log.write`` appends a line to the run's history."""

from __future__ import annotations

from typing import Any

from procflow.runtime.interpret.context import StepContext


def write(ctx: StepContext, message: str) -> dict[str, Any]:
    """Writes ``message`` through the step's logger (masked when stored); returns ``{}``."""
    ctx.log.info("%s", message)
    return {}
