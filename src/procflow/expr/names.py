"""Static name resolution: which names an expression uses, and whether they exist at that point.

Filters and functions are checked by :func:`parse`; this module checks the names the validator
knows about (inputs, earlier steps, loop names, ``run``, ``error``) and, where a shape is known
(e.g. a connector's declared result fields), the paths into them. Where the kinds of both sides
of a comparison are known (a literal, a declared input type, a declared result field), comparing
values of different kinds is reported too, and so is a filter given a kind it does not take
(:mod:`procflow.expr.kinds`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from procflow.expr.ast import Attr, Expr, Item, Literal, Name, Path, children
from procflow.expr.constants import constant_problems
from procflow.expr.functions import FUNCTIONS
from procflow.expr.kinds import NameKinds, kind_problems
from procflow.expr.parser import suggest

__all__ = [
    "ANY",
    "AnyShape",
    "KindShape",
    "ListShape",
    "ObjectShape",
    "PathRef",
    "Problem",
    "Shape",
    "StaticScope",
    "check",
    "root_paths",
]


class Shape:
    """What is known statically about a value."""

    __slots__ = ()


class AnyShape(Shape):
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ANY = AnyShape()


@dataclass(frozen=True, slots=True)
class ObjectShape(Shape):
    """A mapping with known fields; ``open`` allows fields beyond those listed."""

    fields: Mapping[str, Shape]
    open: bool = False


@dataclass(frozen=True, slots=True)
class ListShape(Shape):
    item: Shape


@dataclass(frozen=True, slots=True)
class KindShape(Shape):
    """A value of one kind (a :func:`procflow.expr.kind_of` name) or null; paths into it are not
    judged."""

    kind: str


_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StaticScope:
    """The names visible at one place.

    ``later`` maps names bound only further down to an optional hint ("it is bound by step [ask]
    further down"); ``reserved_hint`` maps names that exist elsewhere but not here (``error``
    outside ``recover``) to a hint saying where they can be used.
    """

    visible: Mapping[str, Shape]
    later: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    reserved_hint: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class PathRef:
    """A name reference with its constant path suffix (cut at the first dynamic index)."""

    root: str
    segments: tuple[str | int, ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Problem:
    offset: int
    message: str


def _walk(expr: Expr) -> Iterator[Expr]:
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def _constant_index(step: Item) -> str | int | None:
    if isinstance(step.index, Literal):
        value = step.index.value
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


def _refs(expr: Expr) -> Iterator[tuple[PathRef, tuple[int, ...]]]:
    """Each reference with the offset of each of its constant segments."""
    for node in _walk(expr):
        if isinstance(node, Name):
            # A bare name is yielded here; a name at the base of a Path is yielded with the Path.
            yield PathRef(node.name, (), node.offset), ()
        elif isinstance(node, Path) and isinstance(node.base, Name):
            segments: list[str | int] = []
            offsets: list[int] = []
            for step in node.steps:
                if isinstance(step, Attr):
                    segments.append(step.name)
                else:
                    index = _constant_index(step)
                    if index is None:
                        break
                    segments.append(index)
                offsets.append(step.offset)
            yield PathRef(node.base.name, tuple(segments), node.base.offset), tuple(offsets)


def _dedupe(expr: Expr) -> list[tuple[PathRef, tuple[int, ...]]]:
    found: dict[int, tuple[PathRef, tuple[int, ...]]] = {}
    for ref, offsets in _refs(expr):
        # The base Name of a Path is also walked on its own; keep the longer reference.
        current = found.get(ref.offset)
        if current is None or len(ref.segments) > len(current[0].segments):
            found[ref.offset] = (ref, offsets)
    return [found[k] for k in sorted(found)]


def root_paths(expr: Expr) -> list[PathRef]:
    """Every name the expression reads, in source order, with its constant path suffix."""
    return [ref for ref, _ in _dedupe(expr)]


def _show(root: str, segments: tuple[str | int, ...]) -> str:
    out = root
    for seg in segments:
        out += f"[{seg}]" if isinstance(seg, int) else f".{seg}"
    return out


def _check_shape(ref: PathRef, offsets: tuple[int, ...], shape: Shape) -> Problem | None:
    for i, seg in enumerate(ref.segments):
        prefix = _show(ref.root, ref.segments[:i])
        if isinstance(shape, ObjectShape):
            if isinstance(seg, str) and seg in shape.fields:
                shape = shape.fields[seg]
                continue
            if shape.open and isinstance(seg, str):
                return None
            if isinstance(seg, int):
                return Problem(offsets[i], f"[{prefix}] is a mapping, not a list; [{seg}] is null")
            hint = suggest(seg, shape.fields)
            return Problem(offsets[i], f"[{prefix}] has no field [{seg}]{hint}")
        if isinstance(shape, ListShape):
            if isinstance(seg, int):
                shape = shape.item
                continue
            return Problem(
                offsets[i], f"[{prefix}] is a list; it has no field [{seg}] (index it, e.g. [0])"
            )
        return None
    return None


def _shape_at(node: Name | Path, scope: StaticScope) -> Shape:
    """The shape of a visible name or of a constant path into it; ANY when unknown."""
    base, steps = (node, ()) if isinstance(node, Name) else (node.base, node.steps)
    if not isinstance(base, Name) or base.name not in scope.visible:
        return ANY
    shape = scope.visible[base.name]
    for step in steps:
        if isinstance(shape, ObjectShape) and isinstance(step, Attr):
            shape = shape.fields.get(step.name, ANY)
        elif isinstance(shape, ListShape) and isinstance(step, Item):
            shape = shape.item
        else:
            return ANY
    return shape


def _kind_in(scope: StaticScope) -> NameKinds:
    def kind(node: Name | Path) -> str | None:
        shape = _shape_at(node, scope)
        if isinstance(shape, KindShape):
            return shape.kind
        if isinstance(shape, ObjectShape):
            return "mapping"
        if isinstance(shape, ListShape):
            return "list"
        return None

    return kind


def check(expr: Expr, scope: StaticScope) -> list[Problem]:
    """Problems with the names (and known paths) ``expr`` reads, then with the comparisons and
    filters of values whose kinds are known, then with written-out durations and timestamps, each in
    source order."""
    problems = _name_problems(expr, scope)
    kinds = kind_problems(expr, _kind_in(scope)) + constant_problems(expr)
    return problems + [Problem(offset, message) for offset, message in kinds]


def _name_problems(expr: Expr, scope: StaticScope) -> list[Problem]:
    problems: list[Problem] = []
    for ref, offsets in _dedupe(expr):
        name = ref.root
        if name in scope.visible:
            problem = _check_shape(ref, offsets, scope.visible[name])
            if problem is not None:
                problems.append(problem)
        elif name in scope.later:
            hint = scope.later[name]
            problems.append(
                Problem(
                    ref.offset, f"[{name}] is not bound yet here" + (f"; {hint}" if hint else "")
                )
            )
        elif name in scope.reserved_hint:
            hint = scope.reserved_hint[name]
            problems.append(
                Problem(
                    ref.offset, f"[{name}] is not available here" + (f"; {hint}" if hint else "")
                )
            )
        else:
            hint = suggest(name, scope.visible)
            if not hint and name in FUNCTIONS:
                hint = f"; did you mean {name}()?"
            problems.append(Problem(ref.offset, f"unknown name [{name}]{hint}"))
    return problems
