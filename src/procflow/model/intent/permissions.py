"""The ``permissions:`` block: which roles may read and write which entity's records.

Each entry is ``{ role: Clerk, can: [Order:read, Order:write] }`` (the Intent File Specification's
form, as Eclipse Dirigible writes it). A role may appear in several entries: its grants are the
union, and a token that grants a role nothing new is a warning, not an error (the result is the
same). ``write`` is expanded here into create, update and delete, so the IR holds only the four
record actions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from procflow.model.access import ACTIONS, Permission, RecordAction
from procflow.model.intent.data import Catalog
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name
from procflow.model.source import Pos, suggest

__all__ = ["PERMISSION_KEYS", "compile_permissions"]

PERMISSION_KEYS = ("role", "can")
ROLE_NAME = re.compile(r"^[^\s,]+$")
"""A role is one word: the token table separates roles with commas, and a claim of an OpenID
Connect token names them as they are (``tenant-admins``, ``realm:x``), so anything else goes."""
TOKEN = re.compile(r"^(?P<entity>[^\s:]+):(?P<action>[^\s:]+)$")
EXAMPLE = "such as Order:read"


@dataclass(frozen=True)
class Token:
    """One ``Entity:action`` of a ``can`` list, read and checked."""

    text: str
    entity: str
    actions: tuple[RecordAction, ...]
    pos: Pos


@dataclass
class Grants:
    """What each role has been granted so far, and where first (for the did-you-repeat warning)."""

    reader: Reader
    first: dict[tuple[str, str, RecordAction], Token] = field(default_factory=dict)
    roles: dict[str, tuple[str, Pos]] = field(default_factory=dict)  # casefolded → first spelling

    def role(self, role: str, pos: Pos, context: str) -> None:
        """Note a role's entry; one that differs from an earlier role only in case is warned."""
        earlier = self.roles.setdefault(role.casefold(), (role, pos))
        if earlier[0] != role:
            self.reader.warning(
                pos,
                context,
                f"differs from role [{earlier[0]}] (line {earlier[1].line}) only in case; roles "
                "are case-sensitive, so these are two roles",
            )

    def add(self, role: str, token: Token, context: str) -> None:
        keys = [(role, token.entity, action) for action in token.actions]
        new = [key for key in keys if key not in self.first]
        if not new:
            self._redundant(role, token, self.first[keys[0]], context)
        for key in new:
            self.first[key] = token

    def _redundant(self, role: str, token: Token, first: Token, context: str) -> None:
        if first.text == token.text:
            message = (
                f"[{token.text}] is listed twice for [{role}] (first at line {first.pos.line})"
            )
        else:
            message = (
                f"[{token.text}] grants [{role}] nothing new: [{first.text}] "
                f"(line {first.pos.line}) already grants it"
            )
        self.reader.warning(token.pos, context, message)

    def permissions(self) -> tuple[Permission, ...]:
        return tuple(Permission(role, entity, action) for role, entity, action in self.first)


def compile_permissions(items: list[YNode], catalog: Catalog) -> tuple[Permission, ...]:
    """Every entry of ``permissions:``, checked; the grants of every role, in the file's order."""
    grants = Grants(catalog.reader)
    for i, item in enumerate(items):
        node = catalog.reader.map(item, f"permission #{i + 1}", "each permission")
        if node is not None:
            _entry(node, i, catalog, grants)
    return grants.permissions()


def _entry(node: YMap, index: int, catalog: Catalog, grants: Grants) -> None:
    reader = catalog.reader
    role = _role(node, f"permission #{index + 1}", reader)
    context = f"role [{role}]" if role is not None else f"permission #{index + 1}"
    reader.keys(node, PERMISSION_KEYS, context)
    if role is not None:
        grants.role(role, node.entries["role"].value.pos, context)
    can = reader.require(node, "can", context, f"a list of Entity:action, {EXAMPLE}")
    for item in _items(can, context, reader):
        token = _token(item, context, catalog)
        if token is not None and role is not None:
            grants.add(role, token, context)


def _role(node: YMap, context: str, reader: Reader) -> str | None:
    found = reader.require(node, "role", context, "the role these permissions are granted to")
    text = reader.string(found, context, "role")
    if text is None or found is None:
        return None
    if not text.strip():
        reader.error(found.pos, context, "role must not be empty")
        return None
    if not ROLE_NAME.match(text):
        reader.error(
            found.pos,
            context,
            f"role [{text}] is not a role name: a role is one word, without spaces or commas",
        )
        return None
    return text


def _items(can: YNode | None, context: str, reader: Reader) -> list[YNode]:
    if can is None:
        return []
    if isinstance(can, YSeq):
        return can.items
    if isinstance(can, YScalar) and isinstance(can.value, str):
        reader.error(can.pos, context, f"can must be a list; write [{can.value}]")
    else:
        reader.error(
            can.pos,
            context,
            f"can must be a list of Entity:action, {EXAMPLE}, got {kind_name(can)}",
        )
    return []


def _token(item: YNode, context: str, catalog: Catalog) -> Token | None:
    """One ``Entity:action``, or ``None`` when it is not one (reported)."""
    reader = catalog.reader
    if not (isinstance(item, YScalar) and isinstance(item.value, str)):
        reader.error(item.pos, context, _not_a_token(item))
        return None
    text = item.value
    match = TOKEN.match(text)
    if match is None:
        reader.error(
            item.pos, context, f"[{text}] is not Entity:action (one colon, no spaces), {EXAMPLE}"
        )
        return None
    entity, action = match["entity"], match["action"]
    known_entity = entity in catalog.declared
    if not known_entity:
        reader.error(
            item.pos,
            context,
            f"[{entity}] is not a declared entity{suggest(entity, catalog.declared)}",
        )
    actions = ACTIONS.get(action)
    if actions is None:
        at = item.pos.at(len(entity) + 1 + (1 if item.quoted else 0))
        reader.error(
            at,
            context,
            f"[{action}] is not an action ({', '.join(ACTIONS)}){suggest(action, ACTIONS)}",
        )
    if not known_entity or actions is None:
        return None
    return Token(text, entity, actions, item.pos)


def _not_a_token(item: YNode) -> str:
    """Why ``item`` is not ``Entity:action``: ``Order: read`` (a space after the colon) makes a
    YAML mapping, the likeliest slip, so it is named with its fix."""
    if isinstance(item, YMap) and len(item.entries) == 1:
        key, entry = next(iter(item.entries.items()))
        value = entry.value
        if isinstance(value, YScalar) and isinstance(value.value, str):
            return (
                f"[{key}: {value.value}] is a mapping, not Entity:action: the space after the "
                f"colon makes it one; write {key}:{value.value}"
            )
    return f"each entry of can must be Entity:action, {EXAMPLE}, got {kind_name(item)}"
