"""What JSON from users must be before the engine takes it: text that is valid Unicode (keys too),
numbers JSON can hold, nesting no deeper than :data:`~procflow.store.codec.MAX_JSON_DEPTH`, and
(strictly) only JSON kinds.

Every door where user JSON enters the engine asks here first — record writes, flow inputs, event
data, task data — so no face can store what a later read cannot give back. A lone surrogate
(``"\\ud800"`` in JSON text) has no UTF-8 form: stored, it would break every later listing of its
entity. ``NaN``/``Infinity`` are not JSON: stored, they would be tokens no JSON reader accepts.
A value nested deeper than the limit would be copied, encoded and walked by code that recurses
once per level: at a few hundred levels that ends a request with a RecursionError, so it is
refused here, at every door, by the same limit that JSON text on the command line and in an HTTP
body is held to (``codec.depth_problem``). A value that contains itself is nested without end,
and refused the same way.

Pure; the walk is iterative, so deep nesting costs no recursion, and a path is only spelled out
for a value that has a problem.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from procflow.store.codec import MAX_JSON_DEPTH, TOO_DEEP

__all__ = ["JsonProblem", "json_problems", "shown", "text_problem"]

_MOST = 10  # problems reported for one value: enough to fix, short enough to read

# A trail to a value: (the trail to its container, its key or index); None at the root.
_Trail = tuple["_Trail", str | int] | None


@dataclass(frozen=True)
class JsonProblem:
    """One place where a value is not user JSON: ``path`` (keys and indexes from the root, keys
    :func:`shown`) and ``problem`` (``is NaN, which is not a JSON number``)."""

    path: tuple[str | int, ...]
    problem: str

    @property
    def where(self) -> str:
        """``a.b[2]``: the path as messages show it (empty at the root)."""
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
        return out


def text_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode text (a lone surrogate), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        return f"a lone surrogate \\u{code:04x} at character {exc.start + 1}"
    return None


def shown(text: str) -> str:
    """``text`` safe to print: each lone surrogate written as its backslash-u escape."""
    if text_problem(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def json_problems(value: Any, *, strict: bool = True) -> list[JsonProblem]:
    """The places in ``value`` that are not user JSON (at most a few), in document order.

    Always: text and mapping keys must be valid Unicode, floats finite, and lists and mappings
    nested at most :data:`MAX_JSON_DEPTH` levels (``value`` itself is level 1); nesting past it
    is one problem per member of ``value`` it is in, at that member (the path down to level 65
    would be longer than the message). ``strict``: only JSON kinds (null, booleans, numbers,
    text, lists, mappings with text keys); record writes pass ``strict=False``, since Python
    callers may hand a typed field a ``date`` or a ``Decimal``.
    """
    found: list[JsonProblem] = []
    for trail, problem in _walk(value, strict):
        found.append(JsonProblem(_path(trail), problem))
        if len(found) == _MOST:
            break
    return found


def _walk(value: Any, strict: bool) -> Iterator[tuple[_Trail, str]]:
    stack: list[tuple[_Trail, Any, int]] = [(None, value, 1)]
    # The deepest level each container was walked at: one met again (shared, or containing
    # itself) is walked again only deeper, where it may pass the limit: at most once a level.
    walked: dict[int, int] = {}
    too_deep: set[_Trail] = set()  # the members of ``value`` already reported too deep
    while stack:
        trail, item, level = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                yield trail, f"is text that is not valid Unicode ({problem})"
        elif isinstance(item, float):
            if not math.isfinite(item):
                yield trail, f"is {_non_finite(item)}, which is not a JSON number"
        elif isinstance(item, Mapping | list | tuple):
            if level > MAX_JSON_DEPTH:
                member = _member(trail)
                if member not in too_deep:
                    too_deep.add(member)
                    yield member, f"is {TOO_DEEP}"
                continue
            if walked.get(id(item), 0) >= level:
                continue
            walked[id(item)] = level
            children, problems = _children(trail, item, strict)
            yield from problems
            stack.extend((t, child, level + 1) for t, child in reversed(children))
        elif strict and not (item is None or isinstance(item, bool | int)):
            yield trail, f"is a value of type {type(item).__name__}, which is not JSON"


def _member(trail: _Trail) -> _Trail:
    """The trail to the member of the walked value that ``trail`` lies in."""
    while trail is not None and trail[0] is not None:
        trail = trail[0]
    return trail


def _children(
    trail: _Trail, container: Mapping[Any, Any] | list[Any] | tuple[Any, ...], strict: bool
) -> tuple[list[tuple[_Trail, Any]], list[tuple[_Trail, str]]]:
    """The items of ``container`` to walk, and the problems of its keys."""
    if not isinstance(container, Mapping):
        return [((trail, i), item) for i, item in enumerate(container)], []
    children: list[tuple[_Trail, Any]] = []
    problems: list[tuple[_Trail, str]] = []
    for key, item in container.items():
        if isinstance(key, str):
            problem = text_problem(key)
            if problem is not None:
                problems.append(
                    ((trail, shown(key)), f"is a key that is not valid Unicode ({problem})")
                )
                continue
        elif strict:
            kind = type(key).__name__
            problems.append((trail, f"has a key of type {kind}; JSON keys are text"))
            continue
        children.append(((trail, key if isinstance(key, str) else str(key)), item))
    return children, problems


def _path(trail: _Trail) -> tuple[str | int, ...]:
    steps: list[str | int] = []
    while trail is not None:
        trail, step = trail
        steps.append(step)
    return tuple(reversed(steps))


def _non_finite(number: float) -> str:
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"
