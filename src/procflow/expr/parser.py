"""Precedence-climbing parser for the expression grammar (docs/reference/expressions.md).

Binding, loosest first: ``or``, ``and``, ``not``, comparisons (not chainable), ``+ -``, ``* / %``,
unary ``-``, filters ``| name(args)``, paths ``.name [index]`` and calls.

Two bounds keep every input safe: each nested sub-expression the parser descends into counts
towards ``MAX_DEPTH`` (so parsing itself never recurses deeply), and the finished tree's height is
checked too (so walks over it never do).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from procflow.errors import ExprSyntaxError
from procflow.expr.ast import (
    Attr,
    BoolOp,
    Call,
    Chain,
    Compare,
    Expr,
    FilterCall,
    Item,
    ListLit,
    Literal,
    MapLit,
    Name,
    Path,
    PathStep,
    Pipe,
    Unary,
    children,
)
from procflow.expr.filters import FILTERS
from procflow.expr.functions import FUNCTIONS, arity_text
from procflow.expr.hints import close_match
from procflow.expr.lexer import MAX_LENGTH, Lexer, Token

__all__ = ["MAX_DEPTH", "parse", "parse_at", "suggest"]

MAX_DEPTH = 64

_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_NEG = 1, 2, 3, 4, 5, 6, 7
_BINARY = {
    "or": _P_OR,
    "and": _P_AND,
    "==": _P_CMP,
    "!=": _P_CMP,
    "<": _P_CMP,
    "<=": _P_CMP,
    ">": _P_CMP,
    ">=": _P_CMP,
    "in": _P_CMP,
    "+": _P_ADD,
    "-": _P_ADD,
    "*": _P_MUL,
    "/": _P_MUL,
    "%": _P_MUL,
}


def suggest(name: str, candidates: Iterable[str]) -> str:
    """``; did you mean [x]?`` when a candidate is close, else the empty string (the work is
    bounded: :mod:`procflow.expr.hints`)."""
    match = close_match(name, candidates)
    return f"; did you mean [{match.name}]?" if match else ""


class _Parser:
    def __init__(self, text: str, pos: int) -> None:
        self.lexer = Lexer(text, pos)
        self.tok = self.lexer.next()
        self.ahead: Token | None = None
        self.depth = 0

    # --- token helpers ---------------------------------------------------------------------

    def advance(self) -> Token:
        tok = self.tok
        if self.ahead is not None:
            self.tok, self.ahead = self.ahead, None
        else:
            self.tok = self.lexer.next()
        return tok

    def peek(self) -> Token:
        if self.ahead is None:
            self.ahead = self.lexer.next()
        return self.ahead

    def at(self, kind: str, text: str | None = None) -> bool:
        return self.tok.kind == kind and (text is None or self.tok.text == text)

    def at_op(self, text: str) -> bool:
        return self.tok.kind == "op" and self.tok.text == text

    def expect_op(self, text: str, opener: Token | None = None) -> Token:
        if not self.at_op(text):
            where = f" to close [{opener.text}] at {opener.offset}" if opener else ""
            raise ExprSyntaxError(
                f"expected [{text}]{where}, found {self.tok.describe()}", self.tok.offset
            )
        return self.advance()

    def unexpected(self) -> ExprSyntaxError:
        if self.tok.kind == "eof":
            return ExprSyntaxError("expected a value, found end of expression", self.tok.offset)
        return ExprSyntaxError(f"expected a value, found {self.tok.describe()}", self.tok.offset)

    # --- grammar ---------------------------------------------------------------------------

    def expr(self, min_prec: int) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprSyntaxError(
                f"expression is nested too deeply (more than {MAX_DEPTH} levels)", self.tok.offset
            )
        left = self.prefix(min_prec)
        while True:
            op, prec = self.binary_op()
            if op is None or prec < min_prec:
                break
            if prec == _P_CMP:
                op_tok = self.advance()
                if op == "not in":
                    self.advance()
                right = self.expr(_P_CMP + 1)
                left = Compare(left.offset, op, op_tok.offset, left, right)
                if self.binary_op()[1] == _P_CMP:
                    raise ExprSyntaxError(
                        "comparisons cannot be chained; combine them with and", self.tok.offset
                    )
            elif prec in (_P_OR, _P_AND):
                operands = [left]
                while self.at("kw", op):
                    self.advance()
                    operands.append(self.expr(prec + 1))
                left = BoolOp(left.offset, op, tuple(operands))
            else:
                rest: list[tuple[str, int, Expr]] = []
                while self.binary_op()[1] == prec:
                    op_tok = self.advance()
                    rest.append((op_tok.text, op_tok.offset, self.expr(prec + 1)))
                left = Chain(left.offset, left, tuple(rest))
        self.depth -= 1
        return left

    def binary_op(self) -> tuple[str | None, int]:
        tok = self.tok
        if tok.kind == "op" and tok.text in _BINARY:
            return tok.text, _BINARY[tok.text]
        if tok.kind == "kw":
            if tok.text in ("and", "or", "in"):
                return tok.text, _BINARY[tok.text]
            if tok.text == "not" and self.peek().kind == "kw" and self.peek().text == "in":
                return "not in", _P_CMP
        return None, 0

    def prefix(self, min_prec: int) -> Expr:
        tok = self.tok
        if tok.kind == "kw" and tok.text == "not":
            if min_prec > _P_NOT:
                raise ExprSyntaxError("[not] needs parentheses here, e.g. a == (not b)", tok.offset)
            self.advance()
            return Unary(tok.offset, "not", self.expr(_P_NOT))
        if tok.kind == "op" and tok.text == "-":
            self.advance()
            operand = self.expr(_P_NEG)
            # Folding keeps a[-1] a constant index for static path checks.
            value = operand.value if isinstance(operand, Literal) else None
            if isinstance(value, int | float | timedelta) and not isinstance(value, bool):
                return Literal(tok.offset, -value)
            return Unary(tok.offset, "-", operand)
        return self.postfix()

    def postfix(self) -> Expr:
        node = self.primary()
        steps: list[PathStep] = []
        while True:
            if self.at_op("."):
                self.advance()
                if self.tok.kind not in ("name", "kw"):
                    raise ExprSyntaxError(
                        f"expected a field name after [.], found {self.tok.describe()}",
                        self.tok.offset,
                    )
                name_tok = self.advance()
                steps.append(Attr(name_tok.offset, name_tok.text))
            elif self.at_op("["):
                opener = self.advance()
                index = self.expr(0)
                self.expect_op("]", opener)
                steps.append(Item(opener.offset, index))
            else:
                break
        if steps:
            node = Path(node.offset, node, tuple(steps))
        filters: list[FilterCall] = []
        while self.at_op("|"):
            self.advance()
            filters.append(self.filter_call())
        if filters:
            node = Pipe(node.offset, node, tuple(filters))
            if self.at_op(".") or self.at_op("["):
                raise ExprSyntaxError(
                    "a path cannot follow a filter; use parentheses, e.g. (items | last).name",
                    self.tok.offset,
                )
        return node

    def filter_call(self) -> FilterCall:
        tok = self.tok
        if tok.kind not in ("name", "kw"):
            raise ExprSyntaxError(
                f"expected a filter name after [|], found {tok.describe()}", tok.offset
            )
        self.advance()
        spec = FILTERS.get(tok.text)
        if spec is None:
            hint = suggest(tok.text, FILTERS) or f"; the filters are {', '.join(sorted(FILTERS))}"
            raise ExprSyntaxError(f"unknown filter [{tok.text}]{hint}", tok.offset)
        args = self.arguments() if self.at_op("(") else ()
        if not spec.min_args <= len(args) <= spec.max_args:
            raise ExprSyntaxError(
                f"filter [{tok.text}] takes {arity_text(spec.min_args, spec.max_args)}, "
                f"got {len(args)}",
                tok.offset,
            )
        return FilterCall(tok.offset, tok.text, args)

    def arguments(self) -> tuple[Expr, ...]:
        opener = self.expect_op("(")
        return tuple(self.sequence(opener, ")"))

    def sequence(self, opener: Token, close: str) -> list[Expr]:
        items: list[Expr] = []
        while not self.at_op(close):
            items.append(self.expr(0))
            if not self.at_op(","):
                break
            self.advance()
        self.expect_op(close, opener)
        return items

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind in ("num", "dur", "str"):
            self.advance()
            return Literal(tok.offset, tok.value)
        if tok.kind == "kw" and tok.text in ("true", "false", "null"):
            self.advance()
            return Literal(tok.offset, {"true": True, "false": False, "null": None}[tok.text])
        if tok.kind == "name":
            self.advance()
            if self.at_op("("):
                return self.call(tok)
            return Name(tok.offset, tok.text)
        if tok.kind == "op":
            if tok.text == "(":
                self.advance()
                inner = self.expr(0)
                self.expect_op(")", tok)
                return inner
            if tok.text == "[":
                self.advance()
                return ListLit(tok.offset, tuple(self.sequence(tok, "]")))
            if tok.text == "{":
                self.advance()
                return self.mapping(tok)
        raise self.unexpected()

    def call(self, name_tok: Token) -> Expr:
        spec = FUNCTIONS.get(name_tok.text)
        if spec is None:
            hint = (
                f"; [{name_tok.text}] is a filter, write value | {name_tok.text}"
                if name_tok.text in FILTERS
                else suggest(name_tok.text, FUNCTIONS)
            )
            raise ExprSyntaxError(f"unknown function [{name_tok.text}]{hint}", name_tok.offset)
        args = self.arguments()
        if not spec.min_args <= len(args) <= spec.max_args:
            raise ExprSyntaxError(
                f"function [{name_tok.text}] takes {arity_text(spec.min_args, spec.max_args)}, "
                f"got {len(args)}",
                name_tok.offset,
            )
        return Call(name_tok.offset, name_tok.text, args)

    def mapping(self, opener: Token) -> Expr:
        entries: list[tuple[str, Expr]] = []
        seen: set[str] = set()
        while not self.at_op("}"):
            key_tok = self.tok
            if key_tok.kind == "str" and isinstance(key_tok.value, str):
                key = key_tok.value
            elif key_tok.kind in ("name", "kw"):
                key = key_tok.text
            else:
                raise ExprSyntaxError(
                    f"expected a mapping key (a string or a name), found {key_tok.describe()}",
                    key_tok.offset,
                )
            if key in seen:
                raise ExprSyntaxError(f"duplicate key [{key}] in mapping", key_tok.offset)
            seen.add(key)
            self.advance()
            self.expect_op(":")
            entries.append((key, self.expr(0)))
            if not self.at_op(","):
                break
            self.advance()
        self.expect_op("}", opener)
        return MapLit(opener.offset, tuple(entries))


def _check_height(root: Expr) -> None:
    stack = [(root, 1)]
    while stack:
        node, height = stack.pop()
        if height > MAX_DEPTH:
            raise ExprSyntaxError(
                f"expression is nested too deeply (more than {MAX_DEPTH} levels)", node.offset
            )
        stack.extend((child, height + 1) for child in children(node))


def parse_at(text: str, pos: int, *, template: bool) -> tuple[Expr, int]:
    """Parse one expression starting at ``pos``; offsets in the tree are indexes into ``text``.

    With ``template`` the expression must be followed by ``}}`` and the index of that ``}}`` is
    returned; otherwise it must reach the end of ``text`` and ``len(text)`` is returned.
    """
    parser = _Parser(text, pos)
    if template and parser.at_op("}") and text.startswith("}}", parser.tok.offset):
        raise ExprSyntaxError("empty expression between [{{ }}]", parser.tok.offset)
    if parser.at("eof") and not template:
        raise ExprSyntaxError("empty expression", parser.tok.offset)
    expr = parser.expr(0)
    tok = parser.tok
    if template:
        if tok.kind == "op" and tok.text == "}" and text.startswith("}}", tok.offset):
            end = tok.offset
        elif tok.kind == "eof" or "}}" not in text[tok.offset :]:
            raise ExprSyntaxError("unterminated [{{]: missing [}}]", pos - 2)
        else:
            raise ExprSyntaxError(f"expected [}}}}], found {tok.describe()}", tok.offset)
    else:
        if tok.kind != "eof":
            raise ExprSyntaxError(
                f"unexpected {tok.describe()} after the end of the expression", tok.offset
            )
        end = len(text)
    # Every level of the tree consumes at least one character, so a span no longer than
    # MAX_DEPTH cannot be too tall: skip the walk for the (common) short expression.
    if end - pos > MAX_DEPTH:
        _check_height(expr)
    return expr, end


def parse(text: str) -> Expr:
    """Parse an expression written without ``{{ }}`` (e.g. an intent decision's ``if``)."""
    if not isinstance(text, str):
        raise ExprSyntaxError(f"an expression must be text, got {type(text).__name__}", 0)
    if len(text) > MAX_LENGTH:
        raise ExprSyntaxError(f"expression is longer than {MAX_LENGTH} characters", 0)
    stripped = text.lstrip()
    if stripped.startswith("{{"):
        raise ExprSyntaxError(
            "write the expression without [{{ }}] here, e.g. total > 0", len(text) - len(stripped)
        )
    return parse_at(text, 0, template=False)[0]
