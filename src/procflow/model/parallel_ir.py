"""The intent ``parallel`` step (Dirigible's fork and join) in the IR (re-exported by
:mod:`procflow.model.ir`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from procflow.model.source import Pos

JOIN = "join"  # the route literal that ends a branch: its token arrives at the fork's join


@dataclass(frozen=True, slots=True)
class ParallelStep:
    """Puts a token on each branch's first step; once every branch's token has arrived at the
    join, one token goes on at ``next`` (``None``: a nested fork, which joins into its
    enclosing join)."""

    name: str
    branches: tuple[str, ...]  # each branch's first step
    pos: Pos
    next: str | None = None
    # Every branch's steps (its first step and its chain), as validation found them: a step of
    # a branch that no route leaves flows into the join.
    members: tuple[tuple[str, ...], ...] = ()
    kind: Literal["parallel"] = "parallel"
