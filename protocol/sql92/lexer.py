"""Tokens of RocketMQ 4.9's SQL92 message selectors.

The token rules are those of RocketMQ's ``SelectorParser.jj``: keywords are
case-insensitive and, as in any JavaCC lexer, the longest match wins (``ANDY`` is an
identifier, ``5.`` a float). Whitespace and comments are skipped.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, NamedTuple

__all__ = ["KEYWORDS", "SelectorError", "Token", "tokenize"]

_LONG_MAX: Final = (1 << 63) - 1

#: Reserved words; any spelling of their case is the keyword.
KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})

_WHITESPACE: Final = frozenset(" \t\n\r\f")
_ID_START: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$")
_ID_PART: Final = _ID_START | frozenset("0123456789")
_DIGITS: Final = frozenset("0123456789")
# Two-character operators first: longest match wins over "<" and ">".
_OPERATORS: Final = ("<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-")

# Numbers are the one place where a regular expression is clearer than a scanning
# loop. Both literal forms are tried and the longer match taken, as JavaCC does.
# As in RocketMQ, the long suffix belongs to the non-zero form only ("0L" is "0", "L").
_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT: Final = re.compile(
    r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"  # 5.  5.5  .5  5.5e10
    r"|[0-9]+[eE][+-]?[0-9]+"  # 5e10
)


class SelectorError(ValueError):
    """A selector that does not compile (lexical, syntax or type-check error).

    Attributes:
        position: Offset in the expression where the problem was found, if known.
    """

    def __init__(self, reason: str, position: int | None = None) -> None:
        message = reason if position is None else f"{reason} (at position {position})"
        super().__init__(message)
        self.position = position


class Token(NamedTuple):
    """One token of a selector.

    Attributes:
        kind: A keyword in upper case (``"AND"``), an operator (``">="``), or one of
            ``"IDENT"``, ``"DECIMAL"``, ``"FLOAT"``, ``"STRING"`` and ``"EOF"``.
        text: The source text.
        pos: Offset of the token's first character.
        end: Offset just past its last character.
        value: A literal's value: ``str`` (quotes removed), ``int`` or ``float``.
    """

    kind: str
    text: str
    pos: int
    end: int
    value: Any = None


def tokenize(expression: str) -> list[Token]:
    """Split a selector into tokens, ending with an ``EOF`` token.

    Args:
        expression: The selector text.

    Returns:
        The tokens in order; the last one has kind ``"EOF"``.

    Raises:
        SelectorError: On a character no token can start with, or on an unterminated
            string literal or block comment.
    """
    tokens: list[Token] = []
    i, n = 0, len(expression)
    while i < n:
        ch = expression[i]
        if ch in _WHITESPACE:
            i += 1
        elif expression.startswith("--", i):
            # A line comment runs to the line's end. RocketMQ's grammar wants the line
            # break; we also accept the end of the text.
            while i < n and expression[i] not in "\r\n":
                i += 1
        elif expression.startswith("/*", i):
            close = expression.find("*/", i + 2)
            if close < 0:
                raise SelectorError("unterminated comment", i)
            i = close + 2
        elif ch == "'":
            tokens.append(_string(expression, i))
            i = tokens[-1].end
        elif ch in _ID_START:
            start = i
            while i < n and expression[i] in _ID_PART:
                i += 1
            word = expression[start:i]
            kind = word.upper() if word.upper() in KEYWORDS else "IDENT"
            tokens.append(Token(kind, word, start, i))
        elif ch in _DIGITS or (ch == "." and i + 1 < n and expression[i + 1] in _DIGITS):
            tokens.append(_number(expression, i))
            i = tokens[-1].end
        else:
            for op in _OPERATORS:
                if expression.startswith(op, i):
                    tokens.append(Token(op, op, i, i + len(op)))
                    i += len(op)
                    break
            else:
                raise SelectorError(f"unexpected character {ch!r}", i)
    tokens.append(Token("EOF", "", n, n))
    return tokens


def _string(expression: str, start: int) -> Token:
    """Scan the string literal opening at ``start``."""
    parts: list[str] = []
    i = start + 1
    while True:
        quote = expression.find("'", i)
        if quote < 0:
            raise SelectorError("unterminated string literal", start)
        parts.append(expression[i:quote])
        if expression.startswith("''", quote):
            # A doubled quote stands for one quote inside the literal.
            parts.append("'")
            i = quote + 2
        else:
            end = quote + 1
            return Token("STRING", expression[start:end], start, end, "".join(parts))


def _number(expression: str, start: int) -> Token:
    """Scan the numeric literal at ``start`` and work out its value."""
    decimal = _DECIMAL.match(expression, start)
    real = _FLOAT.match(expression, start)
    # The two forms never match the same length: a float needs "." or an exponent.
    dec_end = decimal.end() if decimal else start
    end = real.end() if real else start
    text = expression[start:end]
    if end > dec_end:
        value = float(text)  # the same correctly rounded double as Java's
        if math.isinf(value):
            raise SelectorError(f"{text} is greater than 1.7976931348623157E308", start)
        # RocketMQ also refuses values below Double.MIN_VALUE, which wrongly takes 0.0
        # with them; we accept 0.0 (and literals that round to it).
        return Token("FLOAT", text, start, end, value)
    text = expression[start:dec_end]
    digits = text.rstrip("lL")
    # No leading zeros, so more than 19 digits is too many (and too many for int()).
    if len(digits) > 19 or int(digits) > _LONG_MAX:
        raise SelectorError(f"{text[:30]} does not fit a Java long", start)
    return Token("DECIMAL", text, start, dec_end, int(digits))
