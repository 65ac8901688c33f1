"""Source positions and diagnostics: where a problem is, and how it is reported."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from procflow.expr.hints import Match, close_match

Severity = Literal["error", "warning"]


class Pos(NamedTuple):
    """A place in a definition file: 1-based line and column, plus the node path.

    A named tuple rather than a frozen dataclass: every YAML node gets one, and a tuple is built
    several times faster (it counts in a file of 100,000 nodes)."""

    file: str
    line: int
    col: int
    path: str

    def at(self, offset: int) -> Pos:
        """The position ``offset`` characters further on the same line (inside a scalar)."""
        return Pos(self.file, self.line, self.col + offset, self.path)


UNKNOWN_POS = Pos("<unknown>", 0, 0, "")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    message: str
    pos: Pos

    def format(self, display_file: str | None = None) -> str:
        p = self.pos
        where = f"{display_file or p.file}:{p.line}:{p.col}"
        suffix = f" ({p.path})" if p.path else ""
        return f"{where}: {self.severity}: {self.message}{suffix}"

    def as_json(self, display_file: str | None = None) -> dict[str, object]:
        p = self.pos
        return {
            "file": display_file or p.file,
            "line": p.line,
            "col": p.col,
            "severity": self.severity,
            "message": self.message,
            "path": p.path,
        }

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (
            self.pos.file,
            self.pos.line,
            self.pos.col,
            0 if self.severity == "error" else 1,
            self.message,
        )


@dataclass
class Diagnostics:
    """Collects every problem of a file, so all of them are reported in one pass."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, pos: Pos, message: str) -> None:
        self.items.append(Diagnostic("error", message, pos))

    def warning(self, pos: Pos, message: str) -> None:
        self.items.append(Diagnostic("warning", message, pos))

    def extend(self, other: Iterable[Diagnostic]) -> None:
        self.items.extend(other)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)

    def sorted(self) -> list[Diagnostic]:
        unique = {(d.severity, d.message, d.pos): d for d in self.items}
        return sorted(unique.values(), key=Diagnostic.sort_key)


def suggest(name: str, candidates: Iterable[str]) -> str:
    """A did-you-mean clause (with a leading space) or an empty string.

    A name that differs only in case says so, because that is the likeliest typo in YAML keys.
    The work is bounded (:mod:`procflow.expr.hints`): pass a generator or a view of the names,
    not a list built for the call.
    """
    return did_you_mean(close_match(name, candidates))


def did_you_mean(match: Match | None) -> str:
    """The clause of :func:`suggest` for a match found already."""
    if match is None:
        return ""
    if match.case_only:
        return f"; did you mean [{match.name}]? (names are case-sensitive)"
    return f"; did you mean [{match.name}]?"


def listing(names: Collection[str], limit: int = 10) -> str:
    """``a, b, c`` for a message, the first ``limit`` names and then how many more: a message
    must not grow with a list of 50,000 names."""
    shown = list(itertools.islice(names, limit))
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")
