"""Did-you-mean hints, with the work each one (and all of one validation) may do bounded.

A hint compares the unknown name with every candidate: a case-insensitive match first (the
likeliest typo in YAML keys), then :func:`difflib.get_close_matches`, which costs from 3 µs to
40 µs per candidate (long, similar names are the slow ones). A file with thousands of unknown
names against thousands of declared ones would spend minutes on hints alone, so:

- one hint looks at the first :data:`MAX_CANDIDATES` candidates only (a typo among a longer list
  of names gets no hint);
- inside :func:`hint_budget` (one validation of a file), all hints together look at
  :data:`VALIDATION_BUDGET` candidates at most; later problems are reported without a hint.

Candidates are taken lazily: a caller passes a generator or a view rather than building a list
per problem, so a spent budget costs nothing.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["MAX_CANDIDATES", "VALIDATION_BUDGET", "Match", "close_match", "hint_budget"]

MAX_CANDIDATES = 1_000
VALIDATION_BUDGET = 50_000


@dataclass(frozen=True)
class Match:
    """The closest candidate; ``case_only`` when it differs from the name only in case."""

    name: str
    case_only: bool


@dataclass
class _Budget:
    left: int


_budget: ContextVar[_Budget | None] = ContextVar("procflow_hint_budget", default=None)


@contextmanager
def hint_budget(candidates: int = VALIDATION_BUDGET) -> Iterator[None]:
    """Every hint made inside shares one allowance of ``candidates`` looked at."""
    token = _budget.set(_Budget(candidates))
    try:
        yield
    finally:
        _budget.reset(token)


def close_match(name: str, candidates: Iterable[str]) -> Match | None:
    """The candidate ``name`` most likely misspells, or None (also when the budget is spent)."""
    budget = _budget.get()
    allowance = MAX_CANDIDATES if budget is None else min(MAX_CANDIDATES, budget.left)
    if allowance <= 0:
        return None
    options = sorted(set(itertools.islice(candidates, allowance)))
    if budget is not None:
        budget.left -= len(options)
    folded = name.lower()
    for option in options:
        if option != name and option.lower() == folded:
            return Match(option, True)
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return Match(close[0], False) if close else None
