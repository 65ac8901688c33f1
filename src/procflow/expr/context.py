"""What an evaluation may ask of its host: the clock and, where allowed, secrets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

__all__ = ["EvalContext"]


@dataclass(frozen=True, slots=True)
class EvalContext:
    """``now`` backs ``now()``; ``secret`` backs ``secret(name)`` (``None``: not available here).

    Exceptions raised by these callbacks pass through evaluation unchanged, so a host can fail
    an attempt with its own error (e.g. a missing secret).
    """

    now: Callable[[], datetime]
    secret: Callable[[str], str] | None = None
