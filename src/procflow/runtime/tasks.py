"""Intent user tasks: creating, listing, completing and withdrawing them, and their timers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from procflow.store.rows import RunRow, TimerRow, TokenRow
from procflow.store.store import Tx

if TYPE_CHECKING:
    from procflow.runtime.engine import Engine


def fire_task_timer(
    engine: Engine, tx: Tx, timer: TimerRow, run: RunRow, token: TokenRow, now: int
) -> None:
    """A user task's ``timeout`` (kind ``task_timeout``: a second token starts at ``then``,
    the task stays open) or ``expire`` (kind ``task_expire``: the task is withdrawn and the
    token continues at ``then``)."""
    raise NotImplementedError(f"timer kind [{timer.kind}]")  # issue 5/5: being built
