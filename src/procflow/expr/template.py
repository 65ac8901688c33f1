"""``{{ }}`` templates and value trees (action args, ``output``) built from them.

A string that is exactly one ``{{ expr }}`` is a typed expression; any other string containing
``{{`` is a text template; a string without ``{{`` is a literal. There is no escape for a literal
``{{``: write ``{{ '{{' }}``.

Offsets in every expression of a template, and in every error raised while parsing or rendering
it, are indexes into the whole template string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from procflow.errors import ExprEvalError, ExprSyntaxError
from procflow.expr.ast import Expr, to_source
from procflow.expr.context import EvalContext
from procflow.expr.evaluator import evaluate
from procflow.expr.parser import parse_at
from procflow.expr.values import render_text

__all__ = [
    "MAX_VALUE_DEPTH",
    "Segment",
    "Template",
    "ValueTree",
    "compile_value",
    "parse_template",
    "render",
    "render_value",
    "value_exprs",
]

# Value trees come from YAML; deeper nesting is surely a mistake and would risk the stack.
MAX_VALUE_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Segment:
    """One ``{{ expr }}`` of a template; ``offset`` is where the expression text starts."""

    offset: int
    expr: Expr


@dataclass(frozen=True, slots=True)
class Template:
    text: str
    kind: Literal["literal", "single", "text"]
    parts: tuple[str | Segment, ...]

    @property
    def single(self) -> Expr | None:
        """The expression of a ``single`` template, else ``None``."""
        if self.kind != "single":
            return None
        part = self.parts[0]
        assert isinstance(part, Segment)
        return part.expr

    def exprs(self) -> list[tuple[int, Expr]]:
        return [(p.offset, p.expr) for p in self.parts if isinstance(p, Segment)]


def _first_char(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def parse_template(text: str) -> Template:
    if not isinstance(text, str):
        raise ExprSyntaxError(f"a template must be text, got {type(text).__name__}", 0)
    start = text.find("{{")
    if start < 0:
        return Template(text, "literal", (text,) if text else ())
    parts: list[str | Segment] = []
    pos = 0
    while start >= 0:
        if start > pos:
            parts.append(text[pos:start])
        expr, end = parse_at(text, start + 2, template=True)
        parts.append(Segment(_first_char(text, start + 2), expr))
        pos = end + 2
        start = text.find("{{", pos)
    if pos < len(text):
        parts.append(text[pos:])
    if len(parts) == 1 and isinstance(parts[0], Segment):
        return Template(text, "single", tuple(parts))
    return Template(text, "text", tuple(parts))


def render(template: Template, env: Mapping[str, Any], ctx: EvalContext) -> Any:
    """Literal → the text; single → the typed value (may be null); text → a string."""
    if template.kind == "literal":
        return template.text
    if template.kind == "single":
        part = template.parts[0]
        assert isinstance(part, Segment)
        return evaluate(part.expr, env, ctx)
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value = evaluate(part.expr, env, ctx)
        if value is None:
            raise ExprEvalError(
                f"[{to_source(part.expr)}] is null and cannot be rendered into text "
                f"(use | default('') to render it empty)",
                part.offset,
            )
        try:
            out.append(render_text(value))
        except ExprEvalError as exc:
            raise ExprEvalError(exc.message, part.offset) from None
    return "".join(out)


ValueTree: TypeAlias = (
    Template | bool | int | float | list["ValueTree"] | dict[Any, "ValueTree"] | None
)


def compile_value(obj: Any) -> ValueTree:
    """Turn YAML-loaded data into a tree whose strings are templates (keys are never templated)."""
    return _compile(obj, 0)


def _compile(obj: Any, depth: int) -> ValueTree:
    if depth > MAX_VALUE_DEPTH:
        raise ExprSyntaxError(f"value is nested more than {MAX_VALUE_DEPTH} levels deep", None)
    if isinstance(obj, str):
        return parse_template(obj)
    if obj is None or isinstance(obj, bool | int | float):
        return obj
    if isinstance(obj, Mapping):
        return {k: _compile(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_compile(v, depth + 1) for v in obj]
    raise ExprSyntaxError(f"unsupported value of type [{type(obj).__name__}]", None)


def render_value(tree: ValueTree, env: Mapping[str, Any], ctx: EvalContext) -> Any:
    """Render a compiled tree: mappings and lists recursively, templates rendered."""
    if isinstance(tree, Template):
        return render(tree, env, ctx)
    if isinstance(tree, dict):
        return {k: render_value(v, env, ctx) for k, v in tree.items()}
    if isinstance(tree, list):
        return [render_value(v, env, ctx) for v in tree]
    return tree


def value_exprs(tree: ValueTree) -> list[tuple[tuple[str | int, ...], int, Expr]]:
    """Every expression in a tree: (path within the value, offset in that string, expression)."""
    found: list[tuple[tuple[str | int, ...], int, Expr]] = []
    stack: list[tuple[tuple[str | int, ...], ValueTree]] = [((), tree)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, Template):
            found.extend((path, offset, expr) for offset, expr in node.exprs())
        elif isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))
    return found
