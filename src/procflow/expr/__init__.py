"""The ``{{ }}`` expression language: parse once, evaluate many (docs/reference/expressions.md).

Also home to the things both dialects share around it: durations, ``{field}`` placeholders of
the intent dialect's notify texts, and static name checks for validators.

Each name below is imported from its module when first asked for (``procflow.expr.X``): importing
the package, or one small part of it (``hints``, ``duration``), does not parse the grammar, and a
command that never evaluates an expression never imports the evaluator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from procflow.expr.ast import Expr, to_source
    from procflow.expr.context import EvalContext
    from procflow.expr.duration import format_duration, parse_duration
    from procflow.expr.evaluator import evaluate, evaluate_condition
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

# Where each public name lives. No module is named like a name it exports: the import system binds
# a loaded submodule to the package's attribute, which would shadow the name.
_HOME = {
    "Expr": "ast",
    "to_source": "ast",
    "EvalContext": "context",
    "format_duration": "duration",
    "parse_duration": "duration",
    "evaluate": "evaluator",
    "evaluate_condition": "evaluator",
    "FILTERS": "filters",
    "FilterSpec": "filters",
    "FUNCTIONS": "functions",
    "MAX_LENGTH": "lexer",
    "ANY": "names",
    "KindShape": "names",
    "ListShape": "names",
    "ObjectShape": "names",
    "PathRef": "names",
    "Problem": "names",
    "Shape": "names",
    "StaticScope": "names",
    "check": "names",
    "root_paths": "names",
    "MAX_DEPTH": "parser",
    "parse": "parser",
    "PlaceholderRef": "placeholders",
    "Placeholders": "placeholders",
    "parse_placeholders": "placeholders",
    "Segment": "template",
    "Template": "template",
    "ValueTree": "template",
    "compile_value": "template",
    "parse_template": "template",
    "render": "template",
    "render_value": "template",
    "value_exprs": "template",
    "format_timestamp": "values",
    "json_equal": "values",
    "kind_of": "values",
    "parse_timestamp": "values",
    "render_text": "values",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # asked once
    return value
