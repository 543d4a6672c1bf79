"""Evaluating SQL92 selectors the way RocketMQ's Java code does.

Run-time values are ``None`` (SQL NULL), ``bool`` (Java Boolean), ``str`` (String),
``int`` (Java Integer or Long) and ``float`` (Double). Integer and Long convert
strings differently, so they must stay apart; rather than tagging every number at
run time, :func:`compile_tree` works out each node's :class:`Kind` once: a property
is always a string (or NULL), a boolean expression a Boolean, and a number can only
come from a literal or the negation of one.

The tree becomes nested closures, one per node, so that evaluating a selector costs a
few function calls and no tree walking. Anything Java would throw at run time (a
string that does not parse as the number it is compared with, for instance) raises
:class:`EvaluationError` here; the caller treats the message as not matched.
"""

from __future__ import annotations

import enum
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from rocklet.protocol.sql92 import parser as tree
from rocklet.protocol.sql92.lexer import SelectorError

__all__ = ["EvaluationError", "Kind", "Program", "comparator", "compile_tree", "double_compare"]
__all__ += ["java_boolean", "java_double", "java_int", "java_long", "java_negate"]

#: A compiled selector: property map in, TRUE/FALSE/NULL out (or EvaluationError).
Program = Callable[[Mapping[str, str]], Any]
_Compare = Callable[[Any, Any], int]


class EvaluationError(Exception):
    """What Java would throw while evaluating; the selector's result is then unknown."""


class Kind(enum.Enum):
    """The Java type a node's non-NULL values have, known at compile time."""

    STRING = "String"
    BOOLEAN = "Boolean"
    INTEGER = "Integer"
    LONG = "Long"
    DOUBLE = "Double"
    NULL = "null"  # always NULL (the NULL literal, or minus applied to a non-number)


_KINDS: Final = {kind.value: kind for kind in Kind}  # a Constant's java_type to its kind
_BITS: Final = {Kind.INTEGER: 32, Kind.LONG: 64}

# -- Java's conversions ----------------------------------------------------------------


def java_int(text: str) -> int:
    """Java's ``Integer.parseInt``: optional sign, decimal digits, 32-bit range."""
    return _java_integral(text, 32)


def java_long(text: str) -> int:
    """Java's ``Long.parseLong``: optional sign, decimal digits, 64-bit range."""
    return _java_integral(text, 64)


def _java_integral(text: str, bits: int) -> int:
    # str.isdecimal() is exactly Unicode category Nd, the digits Java's Character.digit
    # accepts; unlike int() alone it refuses whitespace, underscores and "" outright.
    if not (text.isdecimal() or (text[:1] in ("+", "-") and text[1:].isdecimal())):
        raise EvaluationError(f"not a Java {bits}-bit integer: {text!r}")
    try:
        value = int(text)
    except ValueError:  # more digits than int() converts by default (leading zeros count)
        value = _many_digits(text)
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise EvaluationError(f"{text!r} is out of range of a Java {bits}-bit integer")
    return value


def _many_digits(text: str) -> int:
    value = 0
    for ch in text.lstrip("+-"):
        value = value * 10 + unicodedata.decimal(ch)
        if value >> 64:  # beyond every Java range already; stop before it grows huge
            break
    return -value if text.startswith("-") else value


# String.trim() removes every character up to U+0020, not just whitespace.
_TRIM: Final = "".join(map(chr, range(0x21)))
# Double.valueOf's grammar. Digits are ASCII only, unlike float()'s, and Python-only
# spellings (inf, nan, 1_000) are refused.
_DOUBLE: Final = re.compile(
    r"""(?P<sign>[+-]?)(?:
        (?P<special>NaN|Infinity)
      | (?P<decimal>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?
      | 0[xX](?P<hex>[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP](?P<exp>[+-]?[0-9]+)[fFdD]?
    )""",
    re.VERBOSE,
)


def java_double(text: str) -> float:
    """Java's ``Double.valueOf``; overflow gives an infinity, not an error."""
    match = _DOUBLE.fullmatch(text.strip(_TRIM))
    if match is None:
        raise EvaluationError(f"not a Java double: {text!r}")
    sign, special, decimal, hexdigits, exponent = match.groups()
    if special is not None:
        return math.nan if special == "NaN" else -math.inf if sign == "-" else math.inf
    if decimal is not None:
        return float(sign + decimal)  # both round correctly, so the values agree
    try:
        return float.fromhex(f"{sign}0x{hexdigits}p{exponent}")
    except OverflowError:
        return -math.inf if sign == "-" else math.inf


def java_boolean(text: str) -> bool:
    """Java's ``Boolean.valueOf(String)``: true for any case of "true"; never fails."""
    return text.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """Java's ``Double.compare``: -0.0 < 0.0, and NaN equals itself and tops the order."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b:
        if a != 0.0:
            return 0
        a_sign, b_sign = math.copysign(1.0, a), math.copysign(1.0, b)
        return (a_sign > b_sign) - (a_sign < b_sign)
    return (a != a) - (b != b)  # at least one NaN (NaN != NaN)


def java_negate(value: Any, kind: Kind) -> Any:
    """Negate a number the way Java does, wrapping around on int/long overflow."""
    if kind is Kind.DOUBLE:
        return -value
    half = 1 << (_BITS[kind] - 1)
    return (-value + half) % (2 * half) - half


# -- Java's compare (ComparisonExpression with string conversion on) -------------------


def _sign(a: Any, b: Any) -> int:
    greater: bool = a > b
    less: bool = a < b
    return greater - less


def _less(a: Any, b: Any) -> int:
    # Java gives up on a pair it cannot convert and reports "less": = is false.
    return -1


def _boolean_vs_string(a: Any, b: Any) -> int:
    # RocketMQ casts the Boolean to String here and throws ClassCastException.
    raise EvaluationError("a Boolean cannot be compared with a String")


_NUMBERS: Final = (Kind.INTEGER, Kind.LONG, Kind.DOUBLE)
_FROM_STRING: Final[dict[Kind, Callable[[str], Any]]] = {
    Kind.BOOLEAN: java_boolean,
    Kind.INTEGER: java_int,
    Kind.LONG: java_long,
    Kind.DOUBLE: java_double,
}


def comparator(left: Kind, right: Kind) -> _Compare:
    """Return Java's three-way compare for non-NULL values of these two kinds.

    The function returned gives <0, 0 or >0 and raises :class:`EvaluationError` where
    Java throws. A pair Java cannot relate compares as "less" (-1).
    """
    if left is right:
        return double_compare if left is Kind.DOUBLE else _sign
    if left in _NUMBERS and right in _NUMBERS:
        if Kind.DOUBLE in (left, right):  # an Integer or Long widens to double
            return lambda a, b: double_compare(float(a), float(b))
        return _sign
    if left is Kind.BOOLEAN and right is Kind.STRING:
        return _boolean_vs_string
    # A string meets a Boolean or a number: it is parsed as one (which may throw).
    other = right if left is Kind.STRING else left
    if Kind.STRING not in (left, right) or other not in _FROM_STRING:
        return _less
    convert = _FROM_STRING[other]
    base = double_compare if other is Kind.DOUBLE else _sign
    if left is Kind.STRING:
        return lambda a, b: base(convert(a), b)
    return lambda a, b: base(a, convert(b))


# -- compiling -------------------------------------------------------------------------


class _Code(NamedTuple):
    run: Program
    kind: Kind


def compile_tree(node: tree.Node) -> Program:
    """Turn a parsed selector into a function of a property map.

    The function returns True, False or None (NULL) and raises
    :class:`EvaluationError` where Java would throw (and other exceptions for maps
    that are not ``str`` to ``str``).

    Raises:
        SelectorError: If the tree is nested too deeply.
    """
    return _compile(node, 1).run


def _constant(value: Any, kind: Kind) -> _Code:
    return _Code(lambda p: value, kind)


def _compile(node: tree.Node, depth: int) -> _Code:
    if depth > tree.MAX_DEPTH:
        raise SelectorError("expression nested too deeply", node.span[0])
    depth += 1
    if isinstance(node, tree.Property):
        name = node.name
        return _Code(lambda p: p.get(name), Kind.STRING)
    if isinstance(node, tree.Constant):
        return _constant(node.value, _KINDS[node.java_type])
    if isinstance(node, tree.BooleanConstant):
        return _constant(node.value, Kind.NULL if node.value is None else Kind.BOOLEAN)
    if isinstance(node, tree.Negate):
        return _negate(node, depth)
    if isinstance(node, tree.Not):
        f = _compile(node.operand, depth).run
        return _Code(lambda p: None if (v := f(p)) is None else not v, Kind.BOOLEAN)
    if isinstance(node, tree.BooleanCast):  # a string casts to FALSE
        f = _compile(node.operand, depth).run
        return _Code(lambda p: None if (v := f(p)) is None else v is True, Kind.BOOLEAN)
    if isinstance(node, tree.And | tree.Or):
        return _logic(isinstance(node, tree.Or), [_compile(n, depth).run for n in node.operands])
    if isinstance(node, tree.In):
        name, values, negated = node.operand.name, frozenset(node.values), node.negated
        return _Code(
            lambda p: None if (v := p.get(name)) is None else (v in values) is not negated,
            Kind.BOOLEAN,
        )
    left, right = _compile(node.left, depth), _compile(node.right, depth)
    if isinstance(node, tree.Equal):
        return _equal(node, left, right)
    return _ordering(node.op, left, right)


def _negate(node: tree.Negate, depth: int) -> _Code:
    inner: tree.Node = node
    count = 0
    while isinstance(inner, tree.Negate):
        inner, count = inner.operand, count + 1
    if isinstance(inner, tree.Constant) and inner.java_type != "String":
        # Numbers come only from literals, so minus on them is folded here.
        kind, value = _KINDS[inner.java_type], inner.value
        for _ in range(count):
            value = java_negate(value, kind)
        return _constant(value, kind)
    f = _compile(node.operand, depth).run

    def negate(p: Mapping[str, str]) -> Any:
        f(p)  # evaluated only for its errors: minus of anything but a number is NULL
        return None

    return _Code(negate, Kind.NULL)


def _logic(stop: bool, operands: list[Program]) -> _Code:
    # AND (stop=False) ends at the first FALSE, OR (stop=True) at the first TRUE;
    # otherwise any NULL operand makes the result NULL. This equals RocketMQ's
    # evaluation of the left-nested binary chain it builds.
    def run(p: Mapping[str, str]) -> Any:
        unknown = False
        for operand in operands:
            value = operand(p)
            if value is stop:
                return stop
            unknown = unknown or value is None
        return None if unknown else not stop

    return _Code(run, Kind.BOOLEAN)


def _equal(node: tree.Equal, left: _Code, right: _Code) -> _Code:
    lf, rf = left.run, right.run
    if isinstance(node.right, tree.BooleanConstant) and node.right.value is None:
        # IS NULL (the parser refuses NULL in "="): TRUE or FALSE, never NULL.
        return _Code(lambda p: lf(p) is None, Kind.BOOLEAN)
    # Java tries equals() first, then compare(). For one type they agree, so == will
    # do; different types are never equals() but may compare as 0. Doubles are
    # equals() only bit for bit, which is exactly Double.compare() == 0.
    same = left.kind is right.kind and left.kind is not Kind.DOUBLE
    compare = comparator(left.kind, right.kind)

    def run(p: Mapping[str, str]) -> Any:
        a = lf(p)
        b = rf(p)  # always evaluated, so its errors count even when a is NULL
        if a is None:
            return True if b is None else None
        if b is None:
            return None  # RocketMQ says FALSE here; we keep NULL symmetric
        return a == b if same else compare(a, b) == 0

    return _Code(run, Kind.BOOLEAN)


def _as_doubles(a: str, b: str) -> int:
    return double_compare(java_double(a), java_double(b))


_TESTS: Final = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _ordering(op: str, left: _Code, right: _Code) -> _Code:
    test, lf, rf = _TESTS[op], left.run, right.run
    both_strings = left.kind is Kind.STRING and right.kind is Kind.STRING
    # Two strings are ordered as doubles (RocketMQ's one extra conversion).
    compare = _as_doubles if both_strings else comparator(left.kind, right.kind)

    def run(p: Mapping[str, str]) -> Any:
        a = lf(p)
        if a is None:
            return None  # the right side is not evaluated (nor are its errors)
        b = rf(p)
        if b is None:
            return None
        return test(compare(a, b), 0)

    return _Code(run, Kind.BOOLEAN)
