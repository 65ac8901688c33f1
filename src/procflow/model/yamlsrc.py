"""Safe YAML 1.2 loading into a small node tree that remembers where every node came from.

We build the tree from ruamel.yaml's *parse events* rather than its constructors: that way tags,
anchors, aliases, extra documents and duplicate keys are seen exactly where they occur, and
scalars are resolved by the YAML 1.2 core schema alone (``on`` stays a string, ``2027-01-10``
stays a string). Nothing downstream of the validators ever looks at YAML again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import events as ev
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from procflow.model.source import Diagnostics, Pos

Scalar = str | int | float | bool | None


@dataclass(slots=True)
class YNode:
    pos: Pos


@dataclass(slots=True)
class YScalar(YNode):
    value: Scalar
    quoted: bool = False
    style: str | None = None  # ' " | > for quoted and block scalars, None for plain


@dataclass(slots=True)
class YEntry:
    key: str
    key_pos: Pos
    value: YNode


@dataclass(slots=True)
class YMap(YNode):
    entries: dict[str, YEntry] = field(default_factory=dict)

    def get(self, key: str) -> YNode | None:
        entry = self.entries.get(key)
        return entry.value if entry else None

    def keys(self) -> list[str]:
        return list(self.entries)


@dataclass(slots=True)
class YSeq(YNode):
    items: list[YNode] = field(default_factory=list)


def to_plain(node: YNode) -> Any:
    """The node's value as plain Python data (dicts, lists, scalars)."""
    if isinstance(node, YScalar):
        return node.value
    if isinstance(node, YSeq):
        return [to_plain(i) for i in node.items]
    assert isinstance(node, YMap)
    return {k: to_plain(e.value) for k, e in node.entries.items()}


def kind_name(node: YNode) -> str:
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    assert isinstance(node, YScalar)
    v = node.value
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    return "a string"


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


def resolve_plain(text: str) -> Scalar:
    if _NULL.match(text):
        return None
    if _BOOL.match(text):
        return text.lower() == "true"
    if _INT10.match(text):
        return int(text)
    if _INT8.match(text):
        return int(text[2:], 8)
    if _INT16.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return float("-inf") if text.startswith("-") else float("inf")
    if _NAN.match(text):
        return float("nan")
    return text


class _Builder:
    def __init__(self, file: str, diags: Diagnostics) -> None:
        self.file = file
        self.diags = diags

    def pos(self, event: ev.Event, path: str) -> Pos:
        mark = event.start_mark
        return Pos(self.file, mark.line + 1, mark.column + 1, path)

    def check_node_event(self, event: ev.Event, path: str) -> None:
        anchor = getattr(event, "anchor", None)
        if anchor:
            self.diags.error(
                self.pos(event, path),
                f"anchors are not allowed (&{anchor}); write the value out where it is used",
            )
        tag = getattr(event, "tag", None)
        if tag:
            tag = str(tag).replace("tag:yaml.org,2002:", "!!")
            self.diags.error(
                self.pos(event, path),
                f"type tags are not allowed ({tag}); write a plain value",
            )

    def node(self, first: ev.Event, it: Iterator[ev.Event], path: str) -> YNode:
        if isinstance(first, ev.AliasEvent):
            self.diags.error(
                self.pos(first, path),
                f"aliases are not allowed (*{first.anchor}); write the value out where it is used",
            )
            return YScalar(self.pos(first, path), None)
        self.check_node_event(first, path)
        if isinstance(first, ev.ScalarEvent):
            style = first.style or None
            quoted = style is not None and style in "'\"|>"
            scalar: Scalar = first.value if quoted else resolve_plain(first.value)
            return YScalar(self.pos(first, path), scalar, quoted, style)
        if isinstance(first, ev.SequenceStartEvent):
            seq = YSeq(self.pos(first, path))
            for event in it:
                if isinstance(event, ev.SequenceEndEvent):
                    return seq
                seq.items.append(self.node(event, it, f"{path}[{len(seq.items)}]"))
            return seq
        assert isinstance(first, ev.MappingStartEvent), first
        mapping = YMap(self.pos(first, path))
        for event in it:
            if isinstance(event, ev.MappingEndEvent):
                return mapping
            key_node = self.node(event, it, path)
            key_text = self.key_text(key_node)
            child_path = f"{path}.{key_text}" if path else key_text
            key_pos = Pos(self.file, key_node.pos.line, key_node.pos.col, child_path)
            value = self.node(next(it), it, child_path)
            if key_text in mapping.entries:
                earlier = mapping.entries[key_text].key_pos
                self.diags.error(
                    key_pos,
                    f"duplicate key [{key_text}] (first at line {earlier.line}); keep one of them",
                )
                continue
            mapping.entries[key_text] = YEntry(key_text, key_pos, value)
        return mapping

    def key_text(self, key: YNode) -> str:
        if isinstance(key, YScalar):
            return "" if key.value is None else _scalar_text(key.value)
        self.diags.error(key.pos, "a mapping key must be a plain name, not a list or mapping")
        return "?"


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load_yaml(text: str, file: str, diags: Diagnostics) -> YNode | None:
    """Parse ``text`` into a node tree, reporting every structural problem into ``diags``.

    Returns ``None`` when the text is not YAML at all (the syntax error is reported).
    """
    # typ="safe" with pure=False parses through libyaml (ruamel.yaml.clib): 15x faster than the
    # pure-Python round-trip parser. We only take its events; scalar resolution is ours (1.2 core).
    parser = YAML(typ="safe", pure=False)
    root: YNode | None = None
    documents = 0
    try:
        it = iter(parser.parse(text))
        for event in it:
            if isinstance(event, ev.DocumentStartEvent):
                documents += 1
                if documents == 2:
                    diags.error(
                        Pos(file, event.start_mark.line + 1, event.start_mark.column + 1, ""),
                        "a definition file holds one YAML document; split this into its own file",
                    )
            elif isinstance(
                event, (ev.ScalarEvent, ev.SequenceStartEvent, ev.MappingStartEvent, ev.AliasEvent)
            ):
                node = _Builder(file, diags).node(event, it, "")
                if documents <= 1:
                    root = node
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        diags.error(Pos(file, line, col, ""), f"YAML syntax error: {problem}")
        return None
    except ReaderError as exc:  # a character YAML does not allow (a control character)
        before = text[: exc.position] if isinstance(exc.position, int) else ""
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        shown = f"#x{exc.character:04x}" if isinstance(exc.character, int) else "a character"
        diags.error(
            Pos(file, line, col, ""),
            f"YAML syntax error: unacceptable character {shown}: {exc.reason}",
        )
        return None
    except YAMLError as exc:
        diags.error(Pos(file, 1, 1, ""), f"YAML syntax error: {exc}")
        return None
    if root is None:
        diags.error(Pos(file, 1, 1, ""), "the file is empty; a definition needs at least a name")
    return root
