"""Expressions inside a flow file: parsing at the YAML node, name checks, positions, secrets.

Private to :mod:`procflow.model.flow.compiler`. Every ``{{ }}`` is parsed where it is written so a
syntax error or an unresolved name points at the character inside the scalar, not at the step.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from procflow.config import raw
from procflow.errors import ExprSyntaxError, UsageError
from procflow.expr import (
    ANY,
    KindShape,
    ListShape,
    ObjectShape,
    Shape,
    StaticScope,
    Template,
    ValueTree,
    check,
    compile_value,
    parse_template,
)
from procflow.model.reading.files import read_text
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, YSeq, kind_name, to_plain
from procflow.model.source import Pos

ERROR_SHAPE = ObjectShape({"message": ANY, "step": ANY, "type": ANY})
# scheduled_at: the slot's nominal instant as a timestamp, null in a run no schedule started
RUN_SHAPE = ObjectShape(
    {"id": KindShape("string"), "started_at": KindShape("string"), "scheduled_at": ANY}
)
_SPAN = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_SECRET_CALL = re.compile(r"\bsecret\s*\(\s*(['\"])([^'\"]*)\1\s*\)")


@dataclass(frozen=True)
class Scope:
    """What an expression at one place may name.

    ``later`` maps ids bound further down (in this or an enclosing scope) to a hint; ``hidden``
    maps names that exist in the file but not here (inner steps, ``error`` outside ``recover``)
    to a hint saying how to reach them: "nothing silent" wants more than "unknown name" for the
    commonest mistake, reading an inner step from outside its owner.
    """

    visible: Mapping[str, Shape]
    later: Mapping[str, str] = field(default_factory=dict)
    hidden: Mapping[str, str] = field(default_factory=dict)
    loops: frozenset[str] = frozenset()

    def static(self) -> StaticScope:
        # check() consults visible, then later, then hidden: no need to filter (an O(n) copy
        # per expression made validating a 2,000-step file quadratic).
        return StaticScope(self.visible, self.later, self.hidden)


# What an expression is known to see for a value of a declared (manifest or input) type. A
# manifest's ``timestamp`` is left unknown: results are plain JSON, where it is text, but an input
# of that type is bound as a timestamp (see ``input_shape``).
_TYPE_KINDS = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "object": "mapping",
}


def shape_of_type(type_: str) -> Shape:
    """The shape of a value of a manifest schema type (a declared result field)."""
    if type_ == "array":
        return ListShape(ANY)
    kind = _TYPE_KINDS.get(type_)
    return KindShape(kind) if kind else ANY


def input_shape(type_: str | None) -> Shape:
    """The shape of an input of a declared type (None: the type is unknown); a ``timestamp``
    input is bound as a timestamp, not as its text."""
    if type_ == "timestamp":
        return KindShape("timestamp")
    return shape_of_type(type_) if type_ else ANY


def expr_pos(node: YScalar, offset: int) -> Pos:
    """The position of character ``offset`` of a scalar's text.

    Quoted one-line scalars start one column after their quote. A multi-line (block or folded)
    scalar's text does not map onto columns simply, so its problems point at the scalar.
    """
    text = node.value if isinstance(node.value, str) else ""
    if "\n" in text:
        return node.pos
    return node.pos.at(offset + (1 if node.quoted else 0))


class Exprs:
    """Parses and checks the templates of one flow file, reporting through ``reader``."""

    def __init__(self, reader: Reader) -> None:
        self.r = reader

    # --- single templates -------------------------------------------------------------------

    def template(
        self, node: YNode | None, scope: Scope | None, context: str, what: str
    ) -> Template | None:
        """A string scalar as a template, parsed and name-checked; None (reported) otherwise."""
        if node is None:
            return None
        if not (isinstance(node, YScalar) and isinstance(node.value, str)):
            self.r.error(node.pos, context, f"{what} must be a string, got {kind_name(node)}")
            return None
        return self.parse(node, scope, context, what)

    def condition(
        self, node: YNode | None, scope: Scope, context: str, what: str, *, allow_bool: bool
    ) -> Template | None:
        """A condition: exactly one ``{{ expr }}`` (or, where allowed, a YAML boolean)."""
        if node is None:
            return None
        if allow_bool and isinstance(node, YScalar) and isinstance(node.value, bool):
            return parse_template("{{ true }}" if node.value else "{{ false }}")
        return self.single(node, scope, context, what, "a condition")

    def single(
        self, node: YNode, scope: Scope, context: str, what: str, role: str
    ) -> Template | None:
        """A value that must be exactly one ``{{ expr }}`` (conditions, for_each's list)."""
        template = self.template(node, scope, context, what)
        if template is None or template.kind == "single":
            return template
        text = str(to_plain(node))
        fix = "put all of it inside one {{ }}" if "{{" in text else f'e.g. "{{{{ {text} }}}}"'
        self.r.error(
            node.pos,
            context,
            f"{what} is {role} and must be exactly one {{{{ expression }}}}; {fix}",
        )
        return None

    def parse(self, node: YScalar, scope: Scope | None, context: str, what: str) -> Template | None:
        text = node.value
        assert isinstance(text, str)
        try:
            template = parse_template(text)
        except ExprSyntaxError as exc:
            offset = exc.offset or 0
            self.r.error(expr_pos(node, offset), context, f"{what}: {exc.message}")
            return None
        if scope is not None:
            static = scope.static()
            for _, expr in template.exprs():
                # offsets are indexes into the whole template string
                for problem in check(expr, static):
                    self.r.error(
                        expr_pos(node, problem.offset), context, f"{what}: {problem.message}"
                    )
        self.secrets(node, context)
        return template

    # --- value trees (args, set, output) ----------------------------------------------------

    def value(self, node: YNode, scope: Scope, context: str, what: str) -> tuple[ValueTree, bool]:
        """Mappings and lists with templated strings; every string is parsed at its node.

        Returns the compiled value and whether it compiled: a literal ``null`` is a value too.
        """
        ok = True
        for scalar, sub in _string_scalars(node, what):
            ok = self.parse(scalar, scope, context, sub) is not None and ok
        if not ok:
            return None, False
        try:
            return compile_value(to_plain(node)), True
        except ExprSyntaxError as exc:  # already reported above; kept as a safety net
            self.r.error(node.pos, context, f"{what}: {exc.message}")
            return None, False

    # --- secrets --------------------------------------------------------------------------

    def secrets(self, node: YScalar, context: str) -> None:
        text = node.value
        assert isinstance(text, str)
        for span in _SPAN.finditer(text):
            for call in _SECRET_CALL.finditer(span.group()):
                name = call.group(2)
                if name not in os.environ and name not in self._secrets_file:
                    self.r.warning(
                        expr_pos(node, span.start() + call.start()),
                        context,
                        f"secret [{name}] is not set in this environment"
                        + (" nor in PROCFLOW_SECRETS_FILE" if self._has_secrets_file else "")
                        + "; a worker without it fails this step",
                    )

    @property
    def _has_secrets_file(self) -> bool:
        return raw("PROCFLOW_SECRETS_FILE") is not None

    @cached_property
    def _secrets_file(self) -> frozenset[str]:
        """The names defined in PROCFLOW_SECRETS_FILE (``NAME=value`` lines); values unread."""
        path = raw("PROCFLOW_SECRETS_FILE")
        if not path:
            return frozenset()
        try:
            lines = read_text(path).splitlines()
        except (UsageError, UnicodeDecodeError):
            return frozenset()
        return frozenset(
            line.split("=", 1)[0].strip()
            for line in lines
            if "=" in line and not line.lstrip().startswith("#")
        )


def _string_scalars(node: YNode, path: str) -> list[tuple[YScalar, str]]:
    """Every string scalar under ``node`` with a readable sub-path (``args.headers.X``)."""
    if isinstance(node, YScalar):
        return [(node, path)] if isinstance(node.value, str) else []
    if isinstance(node, YSeq):
        return [
            s for i, item in enumerate(node.items) for s in _string_scalars(item, f"{path}[{i}]")
        ]
    assert isinstance(node, YMap)
    return [
        s
        for key, entry in node.entries.items()
        for s in _string_scalars(entry.value, f"{path}.{key}")
    ]
