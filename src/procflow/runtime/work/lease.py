"""A worker's lease on the runs it claims: who holds them and for how long.

Apart from the committer so that an engine names its lease without importing the work loop.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lease"]


@dataclass(frozen=True)
class Lease:
    """Whose runs these are and for how long a claim or a commit holds them (microseconds)."""

    owner: str
    length: int

    def until(self, wall: int) -> int:
        return wall + self.length
