"""Tokens of the expression language, produced on demand.

Lexing is lazy so that a template's expression can be read up to its closing ``}}`` without ever
looking at the literal text that follows (which may hold an unbalanced quote).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from procflow.errors import DurationError, ExprSyntaxError
from procflow.expr.duration import parse_short_duration

__all__ = ["KEYWORDS", "MAX_LENGTH", "Lexer", "Token"]

MAX_LENGTH = 4000
KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})

_TWO_CHAR = frozenset({"==", "!=", "<=", ">="})
_ONE_CHAR = frozenset("()[]{},:.|<>+-*/%")
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "/": "/",
}
_WHITESPACE = " \t\r\n"
_DIGITS = "0123456789"
_IDENT_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_IDENT_CHARS = _IDENT_START + _DIGITS
_HEX = "0123456789abcdefABCDEF"


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # num dur str name kw op eof
    text: str
    value: int | float | str | timedelta | None
    offset: int
    end: int

    def describe(self) -> str:
        return "end of expression" if self.kind == "eof" else f"[{self.text}]"


class Lexer:
    """Reads tokens from ``text`` starting at ``pos``; refuses to read past ``pos + MAX_LENGTH``."""

    def __init__(self, text: str, pos: int = 0) -> None:
        self.text = text
        self.pos = pos
        self.start = pos
        self.limit = pos + MAX_LENGTH

    def _fail(self, message: str, offset: int) -> ExprSyntaxError:
        return ExprSyntaxError(message, offset)

    def next(self) -> Token:
        text, n = self.text, len(self.text)
        pos = self.pos
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            self.pos = pos
            return Token("eof", "", None, pos, pos)
        if pos >= self.limit:
            raise self._fail(f"expression is longer than {MAX_LENGTH} characters", self.start)
        ch = text[pos]
        if ch in _DIGITS:
            tok = self._number(pos)
        elif ch in _IDENT_START:
            end = pos + 1
            while end < n and text[end] in _IDENT_CHARS:
                end += 1
            word = text[pos:end]
            tok = Token("kw" if word in KEYWORDS else "name", word, word, pos, end)
        elif ch in "'\"":
            tok = self._string(pos)
        elif text[pos : pos + 2] in _TWO_CHAR:
            tok = Token("op", text[pos : pos + 2], None, pos, pos + 2)
        elif ch in _ONE_CHAR:
            tok = Token("op", ch, None, pos, pos + 1)
        elif ch == "=":
            raise self._fail("unexpected [=]; write == to compare", pos)
        elif ch == "!":
            raise self._fail("unexpected [!]; write != to compare, or not to negate", pos)
        elif ch == "&":
            raise self._fail("unexpected [&]; write and", pos)
        else:
            raise self._fail(f"unexpected character [{ch}]", pos)
        if tok.end > self.limit:
            raise self._fail(f"expression is longer than {MAX_LENGTH} characters", self.start)
        self.pos = tok.end
        return tok

    def _number(self, pos: int) -> Token:
        text, n = self.text, len(self.text)
        end = pos
        while end < n and text[end] in _DIGITS:
            end += 1
        is_float = False
        if end + 1 < n and text[end] == "." and text[end + 1] in _DIGITS:
            is_float = True
            end += 1
            while end < n and text[end] in _DIGITS:
                end += 1
        if end < n and text[end] in "eE":
            exp = end + 1
            if exp < n and text[exp] in "+-":
                exp += 1
            if exp < n and text[exp] in _DIGITS:
                is_float = True
                end = exp
                while end < n and text[end] in _DIGITS:
                    end += 1
        if end < n and text[end] in _IDENT_CHARS:
            # A number glued to letters is a duration literal (1h30m) or a mistake.
            word_end = end
            while word_end < n and text[word_end] in _IDENT_CHARS:
                word_end += 1
            word = text[pos:word_end]
            if is_float:
                raise self._fail(
                    f"invalid number [{word}]; durations take whole numbers (e.g. 1h30m)", pos
                )
            try:
                value = parse_short_duration(word)
            except DurationError as exc:
                raise self._fail(f"invalid number or duration: {exc}", pos) from None
            return Token("dur", word, value, pos, word_end)
        raw = text[pos:end]
        if is_float:
            number = float(raw)
            if number == float("inf"):
                raise self._fail(f"number [{raw}] is too large", pos)
            return Token("num", raw, number, pos, end)
        if len(raw) > 19 or int(raw) >= 2**63:
            raise self._fail(f"integer [{raw}] is too large (the limit is 2**63 - 1)", pos)
        return Token("num", raw, int(raw), pos, end)

    def _string(self, pos: int) -> Token:
        text, n = self.text, len(self.text)
        quote = text[pos]
        out: list[str] = []
        i = pos + 1
        while True:
            if i >= n or i >= self.limit:
                raise self._fail("unterminated string", pos)
            ch = text[i]
            if ch == quote:
                return Token("str", text[pos : i + 1], "".join(out), pos, i + 1)
            if ch == "\\":
                if i + 1 >= n:
                    raise self._fail("unterminated string", pos)
                esc = text[i + 1]
                if esc in _ESCAPES:
                    out.append(_ESCAPES[esc])
                    i += 2
                    continue
                if esc == "u":
                    digits = text[i + 2 : i + 6]
                    if len(digits) == 4 and all(c in _HEX for c in digits):
                        code = int(digits, 16)
                        if 0xD800 <= code <= 0xDFFF:
                            # Lone surrogates cannot be encoded as UTF-8 when the text is stored.
                            raise self._fail("invalid escape: surrogate code point", i)
                        out.append(chr(code))
                        i += 6
                        continue
                    raise self._fail("invalid escape: \\u needs 4 hex digits", i)
                raise self._fail(f"invalid escape [\\{esc}] in string", i)
            out.append(ch)
            i += 1
