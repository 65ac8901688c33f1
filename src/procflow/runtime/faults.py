"""Fault injection at named points of the runtime, for crash tests. A no-op in production.

``PROCFLOW_FAULTS="after_delegate=2,before_commit=1"`` makes the process kill itself with
SIGKILL the 2nd time it reaches ``after_delegate``. Nothing is flushed or cleaned up: exactly
what a power cut or the OOM killer would do.
"""

from __future__ import annotations

import os
import signal

POINTS = ("before_delegate", "after_delegate", "before_commit", "after_commit")

_plan: dict[str, int] = {}
for _item in filter(None, os.environ.get("PROCFLOW_FAULTS", "").split(",")):
    _name, _, _count = _item.partition("=")
    _plan[_name.strip()] = int(_count or "1")
enabled = bool(_plan)


def point(name: str) -> None:
    """Reached a named point: die here if a fault is planned for this hit."""
    if not enabled or name not in _plan:
        return
    _plan[name] -= 1
    if _plan[name] == 0:
        os.kill(os.getpid(), signal.SIGKILL)
