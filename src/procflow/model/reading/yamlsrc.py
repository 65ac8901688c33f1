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
from procflow.model.values import kind_of_plain

Scalar = str | int | float | bool | None

MAX_DEPTH = 64
"""How deep mappings and lists may nest in a definition file. Building the tree (and compiling
it) descends once per level, so a file nested a thousand deep would exhaust Python's stack; real
definitions nest a dozen levels at most."""


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
    return kind_of_plain(node.value)


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_LITERALS: dict[str, Scalar] = {
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys(("true", "True", "TRUE"), True),
    **dict.fromkeys(("false", "False", "FALSE"), False),
}
_NUMBER_START = frozenset("0123456789+-.")  # every other plain scalar is a string
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


def resolve_plain(text: str) -> Scalar:
    if text in _LITERALS:
        return _LITERALS[text]
    if text[0] not in _NUMBER_START:  # most scalars are names: skip the number patterns
        return text
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
    """Events → nodes. It runs once per event of every file, so it reads the events' slots
    directly and builds one position per node (a 50,000-field entity is 350,000 events)."""

    def __init__(self, file: str, diags: Diagnostics) -> None:
        self.file = file
        self.diags = diags
        self.depth = 0  # mappings and lists open around the node being built
        self.too_deep_reported = False

    def pos(self, event: ev.Event, path: str) -> Pos:
        mark = event.start_mark
        return Pos(self.file, mark.line + 1, mark.column + 1, path)

    def check_node_event(self, event: ev.Event, pos: Pos) -> None:
        anchor = getattr(event, "anchor", None)
        if anchor:
            self.diags.error(
                pos, f"anchors are not allowed (&{anchor}); write the value out where it is used"
            )
        tag = getattr(event, "tag", None)
        if tag:
            tag = str(tag).replace("tag:yaml.org,2002:", "!!")
            self.diags.error(pos, f"type tags are not allowed ({tag}); write a plain value")

    def node(self, first: ev.Event, it: Iterator[ev.Event], path: str) -> YNode:
        if isinstance(first, ev.AliasEvent):
            self.diags.error(
                self.pos(first, path),
                f"aliases are not allowed (*{first.anchor}); write the value out where it is used",
            )
            return YScalar(self.pos(first, path), None)
        mark = first.start_mark
        pos = Pos(self.file, mark.line + 1, mark.column + 1, path)
        if getattr(first, "anchor", None) or getattr(first, "ctag", None):
            self.check_node_event(first, pos)
        if isinstance(first, ev.ScalarEvent):
            return self.scalar(first, pos)
        if self.depth >= MAX_DEPTH:
            return self.too_deep(pos, it)
        self.depth += 1
        try:
            if isinstance(first, ev.SequenceStartEvent):
                return self.sequence(pos, it, path)
            assert isinstance(first, ev.MappingStartEvent), first
            return self.mapping(pos, it, path)
        finally:
            self.depth -= 1

    def too_deep(self, pos: Pos, it: Iterator[ev.Event]) -> YScalar:
        """A mapping or list past :data:`MAX_DEPTH`: reported (once per file) and skipped, by
        counting events rather than descending, so no nesting can exhaust Python's stack."""
        if not self.too_deep_reported:
            self.too_deep_reported = True
            self.diags.error(
                pos,
                f"nested too deeply: more than {MAX_DEPTH} levels of mappings and lists; "
                "flatten this part of the definition",
            )
        open_ = 1
        for event in it:
            if isinstance(event, ev.SequenceStartEvent | ev.MappingStartEvent):
                open_ += 1
            elif isinstance(event, ev.SequenceEndEvent | ev.MappingEndEvent):
                open_ -= 1
                if open_ == 0:
                    break
        return YScalar(pos, None)

    def scalar(self, event: ev.ScalarEvent, pos: Pos) -> YScalar:
        style = event.style or None
        quoted = style is not None and style in "'\"|>"
        value: Scalar = event.value if quoted else resolve_plain(event.value)
        return YScalar(pos, value, quoted, style)

    def plain_scalar(self, event: ev.ScalarEvent, path: str) -> YScalar:
        """A scalar value without an anchor: most of a file, so it skips :meth:`node`."""
        mark = event.start_mark
        pos = Pos(self.file, mark.line + 1, mark.column + 1, path)
        if event.ctag:
            self.check_node_event(event, pos)
        return self.scalar(event, pos)

    def sequence(self, pos: Pos, it: Iterator[ev.Event], path: str) -> YSeq:
        seq = YSeq(pos)
        items = seq.items
        for event in it:
            if isinstance(event, ev.SequenceEndEvent):
                break
            items.append(self.node(event, it, f"{path}[{len(items)}]"))
        return seq

    def mapping(self, pos: Pos, it: Iterator[ev.Event], path: str) -> YMap:
        mapping = YMap(pos)
        entries = mapping.entries
        for event in it:
            if isinstance(event, ev.MappingEndEvent):
                break
            key_text, key_pos = self.key(event, it, path)
            value_event = next(it)
            value = (
                self.plain_scalar(value_event, key_pos.path)
                if type(value_event) is ev.ScalarEvent and not value_event.anchor
                else self.node(value_event, it, key_pos.path)
            )
            earlier = entries.get(key_text)
            if earlier is not None:
                self.diags.error(
                    key_pos,
                    f"duplicate key [{key_text}] (first at line {earlier.key_pos.line}); "
                    "keep one of them",
                )
                continue
            entries[key_text] = YEntry(key_text, key_pos, value)
        return mapping

    def key(self, event: ev.Event, it: Iterator[ev.Event], path: str) -> tuple[str, Pos]:
        """A mapping key's text and its position, whose path names the entry."""
        mark = event.start_mark
        if isinstance(event, ev.ScalarEvent) and not event.anchor and not event.ctag:
            # the common case, without building a node for the key
            style = event.style or None
            value = event.value if style and style in "'\"|>" else resolve_plain(event.value)
            text = value if type(value) is str else "" if value is None else _scalar_text(value)
        else:
            key = self.node(event, it, path)
            if isinstance(key, YScalar):
                text = "" if key.value is None else _scalar_text(key.value)
            else:
                self.diags.error(
                    key.pos, "a mapping key must be a plain name, not a list or mapping"
                )
                text = "?"
        child_path = f"{path}.{text}" if path else text
        return text, Pos(self.file, mark.line + 1, mark.column + 1, child_path)


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(slots=True)
class Reading:
    """One parser's reading of a text: the tree (``None`` when the text is not YAML or empty),
    every problem found on the way (a syntax error last), and whether the syntax error was
    libyaml refusing a ``:`` that YAML 1.2 allows."""

    root: YNode | None
    diags: Diagnostics
    flow_colon: bool = False


_FLOW_COLON = "found unexpected ':'"  # libyaml's words for the 1.1 rule (see load_yaml)
_READER_REASONS = {"special characters are not allowed": "control characters are not allowed"}
"""The pure parser's words for a character YAML refuses → libyaml's, so a file says the same
whichever parser read it."""


def load_yaml(text: str, file: str, diags: Diagnostics) -> YNode | None:
    """Parse ``text`` into a node tree, reporting every structural problem into ``diags``.

    Returns ``None`` when the text is not YAML at all (the syntax error is reported).
    """
    reading = read_yaml(text, file, pure=False)
    if reading.flow_colon:
        # libyaml keeps a YAML 1.1 rule: a ':' inside a plain scalar of a flow collection
        # (``can: [Member:read]``, as Eclipse Dirigible writes permissions) is refused, where YAML
        # 1.2 reads it as part of the scalar. Only such files are read again, by ruamel's
        # pure-Python parser, which follows 1.2; every other file keeps libyaml's speed.
        reading = read_yaml(text, file, pure=True)
    diags.extend(reading.diags.items)
    return reading.root


def read_yaml(text: str, file: str, *, pure: bool) -> Reading:
    """Read ``text`` with libyaml (``pure=False``) or ruamel's pure-Python parser. Both yield
    the same events with the same marks, and one builder applies every rule to them."""
    # typ="safe" with pure=False parses through libyaml (ruamel.yaml.clib): 15x faster than the
    # pure-Python parser. We only take its events; scalar resolution is ours (1.2 core).
    parser = YAML(typ="safe", pure=pure)
    diags = Diagnostics()
    try:
        root = _document(iter(parser.parse(text)), file, diags)
    except YAMLError as exc:
        pos, problem = _syntax_error(exc, text, file)
        diags.error(pos, f"YAML syntax error: {problem}")
        return Reading(None, diags, flow_colon=not pure and problem == _FLOW_COLON)
    if root is None:
        diags.error(Pos(file, 1, 1, ""), "the file is empty; a definition needs at least a name")
    return Reading(root, diags)


def _document(it: Iterator[ev.Event], file: str, diags: Diagnostics) -> YNode | None:
    """The first document's tree; a second document is reported."""
    root: YNode | None = None
    documents = 0
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
    return root


def _syntax_error(exc: YAMLError, text: str, file: str) -> tuple[Pos, str]:
    """Where the parser gave up, and why."""
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return Pos(file, line, col, ""), exc.problem or exc.context or "invalid YAML"
    if isinstance(exc, ReaderError):  # a character YAML does not allow (a control character)
        before = text[: exc.position] if isinstance(exc.position, int) else ""
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        shown = f"#x{exc.character:04x}" if isinstance(exc.character, int) else "a character"
        reason = _READER_REASONS.get(exc.reason, exc.reason)
        return Pos(file, line, col, ""), f"unacceptable character {shown}: {reason}"
    return Pos(file, 1, 1, ""), str(exc)
