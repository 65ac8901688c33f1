"""procflow: a durable process engine for declarative YAML."""

from __future__ import annotations

from procflow.errors import NonRetryableError, ProcflowError

__all__ = ["NonRetryableError", "ProcflowError"]
__version__ = "0.1.0"
