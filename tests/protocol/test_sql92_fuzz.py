"""SQL92 selectors against a deliberately simple reference model.

Hypothesis builds random well-typed expression trees, prints them as selector text
(random keyword case, whitespace, comments and redundant parentheses), and checks that
the compiled selector agrees with a direct recursive interpreter of the same tree. The
interpreter carries Java types explicitly (``("Integer", 5)``) and transcribes the
rules one by one; it shares no code with ``rocklet.protocol.sql92.evaluate``.
"""

from __future__ import annotations

import functools
import math
import random
import re
import struct
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.sql92 import Selector, SelectorError, compile_selector

Tree = tuple[Any, ...]
Typed = tuple[str, Any] | None  # ("Integer", 5), ("String", "x"), ... or NULL

NAMES = ["a", "b", "c", "TAGS"]
#: (literal text, Java type, value): the types RocketMQ gives these literals.
NUMBERS = [
    ("0", "Integer", 0),
    ("5", "Integer", 5),
    ("6", "Integer", 6),
    ("10L", "Integer", 10),
    ("2147483647", "Integer", 2147483647),
    ("2147483648", "Long", 2147483648),
    ("3000000000", "Long", 3000000000),
    ("9223372036854775807", "Long", 9223372036854775807),
    ("5.5", "Double", 5.5),
    ("5.", "Double", 5.0),
    (".5", "Double", 0.5),
    ("1E3", "Double", 1000.0),
    ("2.5e-1", "Double", 0.25),
    ("0.0", "Double", 0.0),
    ("6.0", "Double", 6.0),
    ("9007199254740993", "Long", 9007199254740993),  # not a double: rounds when widened
    ("9007199254740992.0", "Double", 9007199254740992.0),
]
STRINGS = ["x", "y", "it's", "5", "1.0", "true", ""]
VALUES = [
    *("0", "5", "6", "-3", "+6", "05", "2147483647", "2147483648", "3000000000"),
    *("9223372036854775807", "9223372036854775808", "9" * 25),
    *("5.5", "6.0", "1e3", "-0", "-0.0", "0x1p3", "2d", "9007199254740993", "NaN", "-NaN"),
    *(" 6", "6 ", "\t7\n", "\x006\x1f", "\u00a06", "6\u2003", "٣"),
    *("x", "y", "it's", "", "true", "TRUE", "tRuE", "false", "yes"),
    *("Infinity", "-Infinity", "inf"),
]

# --- trees ---------------------------------------------------------------------------------

props = st.sampled_from(NAMES).map(lambda n: ("prop", n))
numbers = st.sampled_from(NUMBERS).map(lambda n: ("num", *n))
strings = st.sampled_from(STRINGS).map(lambda s: ("str", s))
true_false = st.sampled_from([True, False]).map(lambda b: ("bool", b))
null = st.just(("bool", None))


def _java_less(a: Tree, b: Tree) -> bool:
    if "Double" in (a[2], b[2]):
        return float(a[3]) < float(b[3])
    return bool(a[3] < b[3])


def _between(node: Tree) -> Tree:
    # A BETWEEN with constant bounds out of order does not compile; swap them.
    _, value, low, high, negated = node
    if not negated and low[0] == high[0] == "num" and _java_less(high, low):
        low, high = high, low
    return ("between", value, low, high, negated)


def _equality_ok(node: Tree) -> bool:
    # TRUE = 1 does not compile (a boolean literal left of a number or string literal).
    return not (node[1][0] == "bool" and node[2][0] in ("num", "str"))


@functools.cache
def comparable(depth: int) -> st.SearchStrategy[Tree]:
    """Operands of >, >=, <, <=, BETWEEN: properties, numbers, negations."""
    leaves = st.one_of(props, numbers)
    if depth == 0:
        return leaves
    return st.one_of(leaves, anything(depth - 1).map(lambda x: ("neg", x)))


@functools.cache
def operand(depth: int) -> st.SearchStrategy[Tree]:
    """Operands of = and <>: anything but the NULL literal."""
    leaves = st.one_of(props, numbers, strings, true_false)
    if depth == 0:
        return leaves
    return st.one_of(leaves, comparable(depth), boolean(depth - 1).filter(lambda t: t != null_tree))


null_tree: Tree = ("bool", None)


@functools.cache
def anything(depth: int) -> st.SearchStrategy[Tree]:
    return st.one_of(operand(depth), null)


ORDERINGS = st.sampled_from([">", ">=", "<", "<="])
# Literals whose mixes show Java's widening (a Long past 2**53 rounds as a double).
widening = st.sampled_from(
    [
        n
        for n in NUMBERS
        if n[0] in ("5", "5.5", "2147483648", "9007199254740993", "9007199254740992.0")
    ]
).map(lambda n: ("num", *n))
# A property against a literal (or another property) is where the type rules bite, so
# such relations are also leaves of their own.
relations = st.one_of(
    st.tuples(st.sampled_from(["eq", "ne"]), props, st.one_of(numbers, strings, true_false, props)),
    st.tuples(st.sampled_from(["eq", "ne"]), st.one_of(numbers, strings), props),
    st.tuples(st.just("cmp"), props, st.one_of(numbers, props), ORDERINGS),
    st.tuples(st.just("cmp"), numbers, props, ORDERINGS),
    st.tuples(st.sampled_from(["eq", "ne"]), widening, widening),
    st.tuples(st.just("cmp"), widening, widening, ORDERINGS),
)


@functools.cache
def boolean(depth: int) -> st.SearchStrategy[Tree]:
    """Boolean expressions, and bare properties (cast where a boolean is needed)."""
    leaves = st.one_of(props, true_false, null, relations)
    if depth == 0:
        return leaves
    sub, ops = boolean(depth - 1), operand(depth - 1)
    cmp = comparable(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(["and", "or"]), sub, sub),
        st.tuples(st.just("not"), sub),
        st.tuples(st.sampled_from(["eq", "ne"]), ops, ops).filter(_equality_ok),
        st.tuples(st.just("isnull"), anything(depth - 1), st.booleans()),
        st.tuples(st.just("cmp"), cmp, cmp, ORDERINGS),
        st.tuples(st.just("between"), cmp, cmp, cmp, st.booleans()).map(_between),
        st.tuples(
            st.just("in"),
            st.sampled_from(NAMES),
            st.lists(st.sampled_from(STRINGS), min_size=1, max_size=3),
            st.booleans(),
        ),
    )


# --- printing ------------------------------------------------------------------------------

SEPARATORS = [" ", "  ", "\t", "\n", "\r\n", "\f", " /* c */ ", "/**/", " -- note\n", " --\r"]
LEVEL = {"or": 1, "and": 2, "eq": 3, "ne": 3, "isnull": 3, "cmp": 4, "between": 4, "in": 4}
LEVEL |= {"neg": 5, "not": 5}


def render(tree: Tree, rnd: random.Random) -> str:
    """Print a tree, parenthesising only where precedence needs it (and at random)."""

    def sep() -> str:
        return rnd.choice(SEPARATORS)

    def kw(word: str) -> str:
        return "".join(c.upper() if rnd.random() < 0.5 else c.lower() for c in word)

    def sub(node: Tree, min_level: int) -> str:
        text = show(node)
        if LEVEL.get(node[0], 6) < min_level or rnd.random() < 0.1:
            return f"({sep()}{text}{sep()})"
        return text

    def quote(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    def show(node: Tree) -> str:
        s = sep
        match node:
            case ("prop", name):
                return str(name)
            case ("num", text, _, _):
                return str(text)
            case ("str", value):
                return quote(value)
            case ("bool", value):
                return kw({True: "true", False: "false", None: "null"}[value])
            case ("neg", x):
                return f"-{s()}{sub(x, 5)}"
            case ("not", x):
                return f"{kw('not')}{s()}{sub(x, 5)}"
            case ("and" | "or", left, right):
                level = LEVEL[node[0]]
                return f"{sub(left, level)}{s()}{kw(node[0])}{s()}{sub(right, level + 1)}"
            case ("eq" | "ne", left, right):
                op = "=" if node[0] == "eq" else "<>"
                return f"{sub(left, 3)}{s()}{op}{s()}{sub(right, 4)}"
            case ("isnull", x, negated):
                middle = f"{s()}{kw('not')}" if negated else ""
                return f"{sub(x, 3)}{s()}{kw('is')}{middle}{s()}{kw('null')}"
            case ("cmp", left, right, op):
                return f"{sub(left, 4)}{s()}{op}{s()}{sub(right, 5)}"
            case ("between", x, low, high, negated):
                nt = f"{kw('not')}{s()}" if negated else ""
                bounds = f"{sub(low, 5)}{s()}{kw('and')}{s()}{sub(high, 5)}"
                return f"{sub(x, 4)}{s()}{nt}{kw('between')}{s()}{bounds}"
            case ("in", name, values, negated):
                nt = f"{kw('not')}{s()}" if negated else ""
                items = f"{s()},{s()}".join(quote(v) for v in values)
                return f"{sub(('prop', name), 4)}{s()}{nt}{kw('in')}{s()}({s()}{items}{s()})"
        raise AssertionError(node)

    text = show(tree)
    return text + (" -- the end" if rnd.random() < 0.2 else "")


# --- the reference model -------------------------------------------------------------------


class JavaError(Exception):
    """Java would throw here."""


def ref_integral(text: str, bits: int) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise JavaError(text)
    value = int(text)
    if not -(2 ** (bits - 1)) <= value <= 2 ** (bits - 1) - 1:
        raise JavaError(text)
    return value


def ref_double(text: str) -> float:
    t = text.strip("".join(chr(i) for i in range(33)))
    if t.lstrip("+-") == "NaN" and len(t) <= 4:
        return math.nan
    if t in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if t[0] == "-" else math.inf
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?", t):
        return float(t.rstrip("fFdD"))
    if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]*\.?[0-9a-fA-F]*[pP][+-]?[0-9]+[fFdD]?", t):
        return float.fromhex(t.rstrip("fFdD"))
    raise JavaError(text)


def bits(x: float) -> int:
    """Java's Double.doubleToLongBits (one NaN)."""
    return 0x7FF8000000000000 if math.isnan(x) else struct.unpack(">q", struct.pack(">d", x))[0]


def double_cmp(a: float, b: float) -> int:
    if a < b:
        return -1
    if a > b:
        return 1
    return (bits(a) > bits(b)) - (bits(a) < bits(b))


def sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def java_compare(left: tuple[str, Any], right: tuple[str, Any]) -> int:
    (lt, lv), (rt, rv) = left, right
    if lt == rt:
        return double_cmp(lv, rv) if lt == "Double" else sign(lv, rv)
    if lt == "Boolean":
        if rt == "String":
            raise JavaError("ClassCastException")
        return -1
    if lt == "Integer":
        if rt == "Long":
            return sign(lv, rv)
        if rt == "Double":
            return double_cmp(float(lv), rv)
        if rt == "String":
            return sign(lv, ref_integral(rv, 32))
        return -1
    if lt == "Long":
        if rt == "Integer":
            return sign(lv, rv)
        if rt == "Double":
            return double_cmp(float(lv), rv)
        if rt == "String":
            return sign(lv, ref_integral(rv, 64))
        return -1
    if lt == "Double":
        if rt in ("Integer", "Long"):
            return double_cmp(lv, float(rv))
        if rt == "String":
            return double_cmp(lv, ref_double(rv))
        return -1
    # lt == "String"
    if rt == "Boolean":
        return sign(lv.lower() == "true", rv)
    if rt == "Integer":
        return sign(ref_integral(lv, 32), rv)
    if rt == "Long":
        return sign(ref_integral(lv, 64), rv)
    return double_cmp(ref_double(lv), rv)


def java_equals(left: tuple[str, Any], right: tuple[str, Any]) -> bool:
    if left[0] != right[0]:
        return False
    if left[0] == "Double":
        return bits(left[1]) == bits(right[1])
    return bool(left[1] == right[1])


def wrap(value: int, width: int) -> int:
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def reference(tree: Tree, properties: dict[str, str]) -> bool | None:
    """The selector's result: True, False, or None for NULL and for Java errors."""

    def boolean(b: bool | None) -> Typed:
        return None if b is None else ("Boolean", b)

    def truth(node: Tree) -> bool | None:
        # A boolean operand; a bare property is cast (a string casts to FALSE).
        value = ev(node)
        if value is None:
            return None
        return value[1] if value[0] == "Boolean" else False

    def ordered(op: str, left: Tree, right: Tree) -> bool | None:
        lv = ev(left)
        if lv is None:
            return None
        rv = ev(right)
        if rv is None:
            return None
        if lv[0] == rv[0] == "String":
            c = double_cmp(ref_double(lv[1]), ref_double(rv[1]))
        else:
            c = java_compare(lv, rv)
        return {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[op]

    def both(a: bool | None, b_thunk: Callable[[], bool | None], stop: bool) -> bool | None:
        # AND (stop=False) and OR (stop=True), evaluated left to right.
        if a is stop:
            return stop
        b = b_thunk()
        if b is stop:
            return stop
        if a is None or b is None:
            return None
        return not stop

    def ev(node: Tree) -> Typed:
        kind = node[0]
        if kind == "prop":
            value = properties.get(node[1])
            return None if value is None else ("String", value)
        if kind == "num":
            return (node[2], node[3])
        if kind == "str":
            return ("String", node[1])
        if kind == "bool":
            return boolean(node[1])
        if kind == "neg":
            number = ev(node[1])
            if number is None or number[0] not in ("Integer", "Long", "Double"):
                return None
            if number[0] == "Double":
                return ("Double", -number[1])
            return (number[0], wrap(-number[1], 32 if number[0] == "Integer" else 64))
        if kind == "not":
            t = truth(node[1])
            return boolean(None if t is None else not t)
        if kind in ("and", "or"):
            stop = kind == "or"
            return boolean(both(truth(node[1]), lambda: truth(node[2]), stop))
        if kind in ("eq", "ne"):
            lv, rv = ev(node[1]), ev(node[2])
            if lv is None and rv is None:
                result: bool | None = True
            elif lv is None or rv is None:
                result = None
            else:
                result = java_equals(lv, rv) or java_compare(lv, rv) == 0
            if kind == "ne" and result is not None:
                result = not result
            return boolean(result)
        if kind == "isnull":
            return boolean((ev(node[1]) is None) != node[2])
        if kind == "cmp":
            return boolean(ordered(node[3], node[1], node[2]))
        if kind == "between":
            _, x, low, high, negated = node
            if negated:
                return boolean(both(ordered("<", x, low), lambda: ordered(">", x, high), True))
            return boolean(both(ordered(">=", x, low), lambda: ordered("<=", x, high), False))
        if kind == "in":
            value = properties.get(node[1])
            return boolean(None if value is None else (value in node[2]) != node[3])
        raise AssertionError(node)

    try:
        return truth(tree)
    except JavaError:
        return None


# --- properties ----------------------------------------------------------------------------

# Each name is missing about half the time, so that NULLs and values both come up.
property_maps = st.fixed_dictionaries(
    {name: st.one_of(st.none(), st.sampled_from(VALUES)) for name in NAMES}
).map(lambda m: {k: v for k, v in m.items() if v is not None})


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    tree=boolean(3),
    rnd=st.randoms(use_true_random=False),
    maps=st.lists(property_maps, min_size=4, max_size=8),
)
def test_selector_agrees_with_the_reference(
    tree: Tree, rnd: random.Random, maps: list[dict[str, str]]
) -> None:
    text = render(tree, rnd)
    selector = compile_selector(text)  # well-typed trees always compile
    for properties in maps:
        expected = reference(tree, properties)
        assert selector.evaluate(properties) is expected, (text, properties)
        assert selector.matches(properties) is (expected is True), (text, properties)


TOKENS = [
    *("a", "b", "TAGS", "1", "2147483648", "1.5", "'x'", "'1'", "TRUE", "FALSE", "NULL"),
    *("AND", "OR", "NOT", "IS", "IN", "BETWEEN", "=", "<>", ">", ">=", "<", "<="),
    *("(", ")", "(", ")", ",", "+", "-", "--", "/*", "*/", "'", ".", "!", "1e400"),
    "1" + "0" * 5000,  # too long for a Java long (and for int() without care)
]
soup = st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    text=st.one_of(st.text(max_size=40), soup),
    properties=st.one_of(
        st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES)),
        st.dictionaries(st.text(max_size=4), st.text(max_size=8)),
    ),
)
def test_only_selector_errors_and_matches_never_raises(
    text: str, properties: dict[str, str]
) -> None:
    try:
        selector = Selector(text)
    except SelectorError:
        return
    assert selector.matches(properties) in (True, False)
    assert selector.evaluate(properties) in (True, False, None)
