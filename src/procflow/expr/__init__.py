"""The ``{{ }}`` expression language: parse once, evaluate many (docs/reference/expressions.md).

Also home to the things both dialects share around it: durations, ``{field}`` placeholders of
the intent dialect's notify texts, and static name checks for validators.
"""

from __future__ import annotations

from procflow.expr.ast import Expr, to_source
from procflow.expr.context import EvalContext
from procflow.expr.duration import format_duration, parse_duration
from procflow.expr.evaluate import evaluate, evaluate_condition
from procflow.expr.filters import FILTERS, FilterSpec
from procflow.expr.functions import FUNCTIONS
from procflow.expr.lexer import MAX_LENGTH
from procflow.expr.names import (
    ANY,
    KindShape,
    ListShape,
    ObjectShape,
    PathRef,
    Problem,
    Shape,
    StaticScope,
    check,
    root_paths,
)
from procflow.expr.parser import MAX_DEPTH, parse
from procflow.expr.placeholders import PlaceholderRef, Placeholders, parse_placeholders
from procflow.expr.template import (
    Segment,
    Template,
    ValueTree,
    compile_value,
    parse_template,
    render,
    render_value,
    value_exprs,
)
from procflow.expr.values import (
    format_timestamp,
    json_equal,
    kind_of,
    parse_timestamp,
    render_text,
)

__all__ = [
    "ANY",
    "FILTERS",
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "EvalContext",
    "Expr",
    "FilterSpec",
    "KindShape",
    "ListShape",
    "ObjectShape",
    "PathRef",
    "PlaceholderRef",
    "Placeholders",
    "Problem",
    "Segment",
    "Shape",
    "StaticScope",
    "Template",
    "ValueTree",
    "check",
    "compile_value",
    "evaluate",
    "evaluate_condition",
    "format_duration",
    "format_timestamp",
    "json_equal",
    "kind_of",
    "parse",
    "parse_duration",
    "parse_placeholders",
    "parse_template",
    "parse_timestamp",
    "render",
    "render_text",
    "render_value",
    "root_paths",
    "to_source",
    "value_exprs",
]
