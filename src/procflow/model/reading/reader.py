"""Typed accessors over the YAML node tree that report problems instead of raising.

Both dialect compilers use these so every message has the same shape:
``<context>: <what is wrong>`` at the node's position, where ``context`` names the process and step
(``process [P] step [s]``) or the flow step (``step [ask]``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name, to_plain
from procflow.model.source import Diagnostics, Pos, suggest

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def join(context: str, message: str) -> str:
    return f"{context}: {message}" if context else message


class Reader:
    def __init__(self, diags: Diagnostics) -> None:
        self.diags = diags

    # --- reporting ------------------------------------------------------------------------

    def error(self, pos: Pos, context: str, message: str) -> None:
        self.diags.error(pos, join(context, message))

    def warning(self, pos: Pos, context: str, message: str) -> None:
        self.diags.warning(pos, join(context, message))

    # --- structure ------------------------------------------------------------------------

    def keys(
        self,
        node: YMap,
        allowed: Collection[str],
        context: str,
        *,
        not_run: Collection[str] = (),
        hint: dict[str, str] | None = None,
    ) -> None:
        """Report every key of ``node`` that is not ``allowed``.

        Keys in ``not_run`` (known to the wider specification, ignored by procflow) are warnings.
        ``hint`` maps a misplaced key to a sentence explaining where it belongs.
        """
        for key, entry in node.entries.items():
            if key in allowed:
                continue
            if key in not_run:
                self.warning(
                    entry.key_pos, context, f"key [{key}] is not run by procflow (ignored)"
                )
            elif hint and key in hint:
                self.error(entry.key_pos, context, hint[key])
            else:
                self.error(entry.key_pos, context, f"unknown key [{key}]{suggest(key, allowed)}")

    def map(self, node: YNode | None, context: str, what: str) -> YMap | None:
        if node is None:
            return None
        if isinstance(node, YMap):
            return node
        self.error(node.pos, context, f"{what} must be a mapping, got {kind_name(node)}")
        return None

    def seq(self, node: YNode | None, context: str, what: str) -> list[YNode]:
        """A list's items; a missing (or null) value is an empty list."""
        if node is None or (isinstance(node, YScalar) and node.value is None):
            return []
        if isinstance(node, YSeq):
            return node.items
        self.error(node.pos, context, f"{what} must be a list, got {kind_name(node)}")
        return []

    def require(self, node: YMap, key: str, context: str, what: str | None = None) -> YNode | None:
        value = node.get(key)
        if value is None:
            self.error(
                node.pos, context, f"missing required key [{key}]" + (f" ({what})" if what else "")
            )
        return value

    # --- scalars --------------------------------------------------------------------------

    def string(self, node: YNode | None, context: str, what: str) -> str | None:
        if node is None:
            return None
        if isinstance(node, YScalar) and isinstance(node.value, str):
            return node.value
        self.error(node.pos, context, f"{what} must be a string, got {kind_name(node)}")
        return None

    def ident(self, node: YNode | None, context: str, what: str) -> str | None:
        text = self.string(node, context, what)
        if text is None or node is None:
            return None
        if not IDENT.match(text):
            self.error(
                node.pos,
                context,
                f"{what} [{text}] is not an identifier (letters, digits and _, not starting "
                "with a digit)",
            )
            return None
        return text

    def integer(self, node: YNode | None, context: str, what: str) -> int | None:
        if node is None:
            return None
        if (
            isinstance(node, YScalar)
            and isinstance(node.value, int)
            and not isinstance(node.value, bool)
        ):
            return node.value
        self.error(node.pos, context, f"{what} must be an integer, got {kind_name(node)}")
        return None

    def boolean(self, node: YNode | None, context: str, what: str) -> bool | None:
        if node is None:
            return None
        if isinstance(node, YScalar) and isinstance(node.value, bool):
            return node.value
        self.error(node.pos, context, f"{what} must be true or false, got {kind_name(node)}")
        return None

    def scalar(self, node: YNode | None, context: str, what: str) -> Any:
        if node is None:
            return None
        if isinstance(node, YScalar):
            return node.value
        self.error(node.pos, context, f"{what} must be a single value, got {kind_name(node)}")
        return None

    def strings(self, node: YNode | None, context: str, what: str) -> list[tuple[str, Pos]]:
        """A list of strings (a single string is accepted as a one-item list)."""
        if node is None:
            return []
        if isinstance(node, YScalar) and isinstance(node.value, str):
            return [(node.value, node.pos)]
        out = []
        for item in self.seq(node, context, what):
            text = self.string(item, context, f"each entry of {what}")
            if text is not None:
                out.append((text, item.pos))
        return out

    @staticmethod
    def plain(node: YNode | None) -> Any:
        return None if node is None else to_plain(node)
