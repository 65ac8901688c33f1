"""Repeating a user call whose transaction PostgreSQL rolled back to break a deadlock."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

from procflow.errors import StoreConflict

__all__ = ["CONFLICT_TRIES", "retry_on_conflict"]

CONFLICT_TRIES = 5

_F = TypeVar("_F", bound=Callable[..., Any])


def retry_on_conflict(method: _F) -> _F:
    """Run a user call's transaction again when PostgreSQL broke a deadlock by rolling it back
    (:class:`StoreConflict`: nothing of it was committed). Such calls do all their work inside
    their transaction, so repeating them is safe; after a few tries the conflict is reported."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(CONFLICT_TRIES):
            try:
                return method(*args, **kwargs)
            except StoreConflict:
                if attempt == CONFLICT_TRIES - 1:
                    raise
                time.sleep(0.005 * 2**attempt)  # let the transaction that won finish
        raise AssertionError("unreachable")

    return call  # type: ignore[return-value]
