"""``{field}`` / ``{relation.field}`` placeholders of the intent dialect's notify subject and body.

This is not the ``{{ }}`` language: a placeholder names a field of the trigger record or a one-hop
relation field, nothing else. Every ``{`` must start a valid placeholder, so a typo is reported
when the file is validated instead of being sent verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from procflow.errors import ExprSyntaxError
from procflow.expr.values import render_text

__all__ = ["PlaceholderRef", "Placeholders", "parse_placeholders"]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PLACEHOLDER = re.compile(rf"\{{({_IDENT}(?:\.{_IDENT})?)\}}")


@dataclass(frozen=True, slots=True)
class PlaceholderRef:
    """``path`` is ``(field,)`` or ``(relation, field)``; ``offset`` is the index of the ``{``."""

    path: tuple[str, ...]
    offset: int

    @property
    def text(self) -> str:
        return "{" + ".".join(self.path) + "}"


@dataclass(frozen=True, slots=True)
class Placeholders:
    text: str
    parts: tuple[str | PlaceholderRef, ...]

    def refs(self) -> list[PlaceholderRef]:
        return [p for p in self.parts if isinstance(p, PlaceholderRef)]

    def render(self, values: Callable[[tuple[str, ...]], Any]) -> tuple[str, list[tuple[str, ...]]]:
        """The text, and the placeholders that rendered empty (null or empty text), each once.

        A placeholder resolving to null renders as empty text here, as the intent dialect says;
        the caller records the returned names in the history entry.
        """
        out: list[str] = []
        empty: list[tuple[str, ...]] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            value = values(part.path)
            rendered = "" if value is None else render_text(value)
            if not rendered and part.path not in empty:
                empty.append(part.path)
            out.append(rendered)
        return "".join(out), empty


def _problem(text: str, start: int) -> ExprSyntaxError:
    close = text.find("}", start)
    if text.startswith("{{", start):
        return ExprSyntaxError(
            "[{{ }}] is not used in notify texts; write a placeholder such as {field} or "
            "{relation.field}",
            start,
        )
    if close < 0:
        return ExprSyntaxError("unterminated placeholder: [{] without a closing [}]", start)
    inner = text[start + 1 : close]
    if inner.count(".") > 1 and all(re.fullmatch(_IDENT, p) for p in inner.split(".")):
        return ExprSyntaxError(
            f"placeholder [{{{inner}}}] goes more than one relation deep; write {{field}} or "
            f"{{relation.field}}",
            start,
        )
    return ExprSyntaxError(
        f"invalid placeholder [{{{inner}}}]; write {{field}} or {{relation.field}}", start
    )


def parse_placeholders(text: str) -> Placeholders:
    if not isinstance(text, str):
        raise ExprSyntaxError(f"a notify text must be text, got {type(text).__name__}", 0)
    parts: list[str | PlaceholderRef] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            break
        m = _PLACEHOLDER.match(text, start)
        if m is None:
            raise _problem(text, start)
        if start > pos:
            parts.append(text[pos:start])
        parts.append(PlaceholderRef(tuple(m.group(1).split(".")), start))
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    return Placeholders(text, tuple(parts))
