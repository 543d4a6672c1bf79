"""SQL92 selectors: lexing, parsing with RocketMQ's checks, and Java-typed evaluation."""

from __future__ import annotations

import math

import pytest

import rocklet.protocol.sql92 as sql92
from rocklet.protocol.sql92 import (
    SQL92,
    TAG,
    Selector,
    SelectorError,
    compile_selector,
    is_tag_type,
)
from rocklet.protocol.sql92.evaluate import (
    EvaluationError,
    Kind,
    double_compare,
    java_boolean,
    java_double,
    java_int,
    java_long,
    java_negate,
)
from rocklet.protocol.sql92.lexer import tokenize
from rocklet.protocol.sql92.parser import (
    And,
    BooleanCast,
    BooleanConstant,
    Compare,
    Constant,
    Equal,
    In,
    Negate,
    Not,
    Or,
    Property,
    parse,
)

# --- public API ------------------------------------------------------------------------


def test_public_names() -> None:
    assert sorted(sql92.__all__) == sorted(
        ["SQL92", "TAG", "Selector", "SelectorError", "compile_selector", "is_tag_type"]
    )
    assert (SQL92, TAG) == ("SQL92", "TAG")
    assert issubclass(SelectorError, ValueError)


@pytest.mark.parametrize(
    ("expression_type", "expected"),
    [(None, True), ("", True), ("TAG", True), ("tag", False), (" TAG", False), ("SQL92", False)],
)
def test_is_tag_type(expression_type: str | None, expected: bool) -> None:
    assert is_tag_type(expression_type) is expected


def test_compile_selector_caches_successes_only() -> None:
    assert compile_selector("a = 1") is compile_selector("a = 1")
    for _ in range(2):  # a failure is raised again, not remembered as a value
        with pytest.raises(SelectorError):
            compile_selector("a = ")


def test_selector_is_a_value() -> None:
    selector = Selector("a > 1")
    assert selector == compile_selector("a > 1")
    assert hash(selector) == hash(Selector("a > 1"))
    assert selector.expression == "a > 1"
    assert "a > 1" in repr(selector)
    with pytest.raises(SelectorError):
        Selector("a >")


@pytest.mark.parametrize("properties", [{"a": 6}, {"a": None}, {"a": ["x"]}, {"TAGS": {}}, None])
def test_odd_property_maps_never_raise(properties: object) -> None:
    for text in ("a > 5", "a = 'x'", "TAGS IN ('x')", "a > b", "a IS NULL"):
        selector = compile_selector(text)
        assert selector.matches(properties) in (True, False)  # type: ignore[arg-type]
        assert selector.evaluate(properties) in (True, False, None)  # type: ignore[arg-type]


def test_error_names_the_position() -> None:
    with pytest.raises(SelectorError) as caught:
        compile_selector("a = 1 AND b != 2")
    assert caught.value.position == 12
    assert "position 12" in str(caught.value)
    assert "'!'" in str(caught.value)


# --- lexer -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("ANDY AND andy", ["IDENT", "AND", "IDENT"]),
        ("INx in IN nulls NuLl", ["IDENT", "IN", "IN", "IDENT", "NULL"]),
        ("not Between oR iS tRUE false", ["NOT", "BETWEEN", "OR", "IS", "TRUE", "FALSE"]),
        ("$a _b a1$_", ["IDENT", "IDENT", "IDENT"]),
        ("5. .5 1E3 5.e2 1.5e-3 10L 10l", ["FLOAT"] * 5 + ["DECIMAL"] * 2),
        ("007", ["DECIMAL"] * 3),
        ("0L", ["DECIMAL", "IDENT"]),
        ("5e", ["DECIMAL", "IDENT"]),
        ("1.5e+", ["FLOAT", "IDENT", "+"]),
        ("1.2.3", ["FLOAT", "FLOAT"]),
        ("<> <= >= < > = ( ) , + -", ["<>", "<=", ">=", "<", ">", "=", "(", ")", ",", "+", "-"]),
        ("a<>b", ["IDENT", "<>", "IDENT"]),
        ("a--comment\nb", ["IDENT", "IDENT"]),
        ("a -- comment\rb", ["IDENT", "IDENT"]),
        ("a /* x * / y */ b", ["IDENT", "IDENT"]),
        ("a/**/b", ["IDENT", "IDENT"]),
        ("- -1", ["-", "-", "DECIMAL"]),
        (" \t\n\r\f", []),
        ("a -- no line break at the end", ["IDENT"]),
    ],
)
def test_token_kinds(text: str, kinds: list[str]) -> None:
    tokens = tokenize(text)
    assert [t.kind for t in tokens] == [*kinds, "EOF"]


def test_token_texts_and_positions() -> None:
    tokens = tokenize("ab = 'it''s'\n AND x")
    assert [(t.text, t.pos, t.end) for t in tokens] == [
        ("ab", 0, 2),
        ("=", 3, 4),
        ("'it''s'", 5, 12),
        ("AND", 14, 17),
        ("x", 18, 19),
        ("", 19, 19),
    ]
    assert tokenize("'a\nb'''")[0].value == "a\nb'"
    assert tokenize("''")[0].value == ""


# --- parser: trees -----------------------------------------------------------------------

A, B = Property("a"), Property("b")


def _int(value: int) -> Constant:
    return Constant(value, "Integer")


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a", BooleanCast(A)),
        ("(a)", BooleanCast(A)),
        ("a <> 1", Not(Equal(A, _int(1)))),
        ("a IS NULL", Equal(A, BooleanConstant(None))),
        ("a IS NOT NULL", Not(Equal(A, BooleanConstant(None)))),
        ("a BETWEEN 1 AND 2", And((Compare(">=", A, _int(1)), Compare("<=", A, _int(2))))),
        ("a NOT BETWEEN 1 AND 2", Or((Compare("<", A, _int(1)), Compare(">", A, _int(2))))),
        ("NOT a", Not(BooleanCast(A))),
        ("NOT a = 1", Equal(Not(BooleanCast(A)), _int(1))),  # NOT binds tighter than =
        ("-5 < a", Compare("<", Negate(_int(5)), A)),
        ("+a = +1", Equal(A, _int(1))),
        ("a IN ('x', 'y')", In(A, ("x", "y"))),
        ("(a) NOT IN ('x')", In(A, ("x",), negated=True)),
        ("a AND b OR a", Or((And((BooleanCast(A), BooleanCast(B))), BooleanCast(A)))),
        ("a OR b AND a", Or((BooleanCast(A), And((BooleanCast(B), BooleanCast(A)))))),
        ("a OR (b OR a) OR b", Or(tuple(BooleanCast(p) for p in (A, B, A, B)))),
        ("a = b = a", Equal(Equal(A, B), A)),
        ("2147483647 = a", Equal(_int(2147483647), A)),
        ("2147483648 = a", Equal(Constant(2147483648, "Long"), A)),
        ("10L = a", Equal(_int(10), A)),
        ("9223372036854775807 = a", Equal(Constant(2**63 - 1, "Long"), A)),
        ("-2147483648 = a", Equal(Negate(Constant(2147483648, "Long")), A)),
        ("5. = .5", Equal(Constant(5.0, "Double"), Constant(0.5, "Double"))),
        ("1E3 = 0.0", Equal(Constant(1000.0, "Double"), Constant(0.0, "Double"))),
        ("a = 'it''s'", Equal(A, Constant("it's", "String"))),
        ("TRUE", BooleanConstant(True)),
        ("1 = TRUE", Equal(_int(1), BooleanConstant(True))),
    ],
)
def test_trees(text: str, tree: object) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize(
    "text",
    [
        "a = 1 -- comment",
        "a = 1 -- comment\n AND b = 2",
        "/* lead */ a /* ** */ = 1",
        "a\n=\t1\r\f",
        "a = 1 and b = 2 Or c IS not null",
        "a bEtWeEn 1 aNd 2",
        "a nOt In ('x')",
        "not a",
        "true",
        "NULL",
        "NULL IS NULL",
        "5 IS NULL",
        "a = 5.",
        "a = .5",
        "a = 1E3",
        "a = 10L",
        "a = 0.0",
        "a = 0",
        "a = 1e-400",  # rounds to 0.0, which we accept
        "ANDY = 1 AND INx = 'a' AND nulls IS NULL AND $a_1 = _x",
        "a BETWEEN 1 AND 1",
        "a BETWEEN 1 AND 2.5",
        "a BETWEEN b AND 1",
        "a BETWEEN 3 AND -1",  # a negation is not a constant: no range check
        "a NOT BETWEEN 3 AND 1",
        "1 = TRUE",
        "TRUE = TRUE",
        "TRUE = a",
        "-a > 1",
        "a > -(b = 1)",
        "(a = 'x') = 'y'",
        "a = 9223372036854775807",
        " OR ".join(["a = 1"] * 300),  # long chains are flat, not deep
        "(" * 20 + "a" + ")" * 20,
    ],
)
def test_accepted(text: str) -> None:
    assert compile_selector(text).expression == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # lexical
        ("a != 1", "unexpected character '!'"),
        ("a * 2 > 1", "unexpected character '*'"),
        ("!a", "unexpected character '!'"),
        ("é = 1", "unexpected character 'é'"),
        ("a.b = 1", "unexpected character '.'"),
        ("a = 1;", "unexpected character ';'"),
        ("a = 'abc", "unterminated string"),
        ("a = 'it''", "unterminated string"),
        ("/* x", "unterminated comment"),
        ("a = 1 /*/", "unterminated comment"),
        ("a = 9223372036854775808", "does not fit a Java long"),
        ("a = 1" + "0" * 5000, "does not fit a Java long"),
        ("a = 1e400", "greater than 1.7976931348623157E308"),
        # syntax
        ("", "expected an expression but found the end"),
        ("a == 1", "expected an expression"),
        ("a = 1 xyz", "expected an operator or the end of the selector but found 'xyz'"),
        ("a = 1 b = 2", "end of the selector"),
        ("a = 1)", "end of the selector"),
        ("(a = 1", "expected ')'"),
        ("a = 1 OR", "expected an expression"),
        ("007 = a", "end of the selector"),
        ("0L = a", "found 'L'"),
        ("a IS 5", "expected NULL"),
        ("a IS NOT 5", "expected NULL"),
        ("a NOT 5", "end of the selector"),
        ("a BETWEEN 1", "expected AND"),
        ("a BETWEEN 1 OR 2", "expected AND"),
        ("a IN 'x'", "'(' after IN"),
        ("a IN ()", "string literal"),
        ("a IN (1)", "string literal"),
        ("a IN ('x',)", "string literal"),
        ("a IN ('x' 'y')", "',' or ')'"),
        ("a IN (b)", "string literal"),
        # rule 1: a boolean is required
        ("5", "will not result in a boolean value: '5'"),
        ("(5)", "boolean value: '(5)'"),
        ("'x'", "boolean value"),
        ("-a", "boolean value"),
        ("-5", "boolean value"),
        ("a AND 5", "boolean value: '5'"),
        ("1.5 OR a", "boolean value"),
        ("NOT 5", "boolean value"),
        ("NOT 'x'", "boolean value"),
        ("a = 1 AND -b", "boolean value"),
        # rule 2: ordering operands
        ("a > 'x'", "cannot be compared with >"),
        ("'x' < a", "cannot be compared with <"),
        ("a >= TRUE", "cannot be compared with >="),
        ("a <= NULL", "cannot be compared with <="),
        ("a > (b = 1)", "cannot be compared"),
        ("a > b > 1", "cannot be compared"),
        ("NOT a > 1", "cannot be compared"),  # (NOT a) > 1
        ("a BETWEEN 'x' AND b", "cannot be compared"),
        ("a BETWEEN FALSE AND TRUE", "cannot be compared"),
        ("(a IS NULL) BETWEEN 1 AND 2", "cannot be compared"),
        # rule 3: equality operands
        ("a = NULL", "use IS NULL"),
        ("NULL = a", "use IS NULL"),
        ("a <> NULL", "use IS NULL"),
        ("TRUE = 1", "'TRUE' cannot be compared with '1'"),
        ("false = 'x'", "cannot be compared with"),
        ("TRUE <> 1.5", "cannot be compared with"),
        # rule 4: BETWEEN's constant bounds
        ("a BETWEEN 3 AND 1", "out of order"),
        ("a BETWEEN 2.5 AND 1", "out of order"),
        ("a BETWEEN 3000000000 AND 2", "out of order"),
        ("a BETWEEN NULL AND 1", "NULL cannot be a bound"),
        ("a BETWEEN 1 AND NULL", "NULL cannot be a bound"),
        # rule 5: IN
        ("5 IN ('a')", "IN needs a property on its left"),
        ("'x' IN ('a')", "IN needs a property"),
        ("-a IN ('a')", "IN needs a property"),
        ("(a = 1) IN ('a')", "IN needs a property"),
        ("a IN ('x') IN ('y')", "IN needs a property"),
        # nesting
        ("(" * 100 + "a" + ")" * 100, "nested too deeply"),
        ("NOT " * 100 + "a", "nested too deeply"),
        ("a" + " = a" * 100, "nested too deeply"),
    ],
)
def test_refused(text: str, reason: str) -> None:
    with pytest.raises(SelectorError) as caught:
        compile_selector(text)
    assert reason in str(caught.value)


# --- Java conversions ------------------------------------------------------------------

BAD = EvaluationError


@pytest.mark.parametrize(
    ("text", "int_value", "long_value"),
    [
        ("6", 6, 6),
        ("+6", 6, 6),
        ("-6", -6, -6),
        ("007", 7, 7),
        ("-0", 0, 0),
        ("٣٤", 34, 34),  # Unicode decimal digits, like Character.digit
        ("2147483647", 2147483647, 2147483647),
        ("-2147483648", -2147483648, -2147483648),
        ("2147483648", BAD, 2147483648),
        ("-2147483649", BAD, -2147483649),
        ("9223372036854775807", BAD, 2**63 - 1),
        ("9223372036854775808", BAD, BAD),
        ("0" * 5000 + "5", 5, 5),  # longer than int() converts by default
        ("9" * 5000, BAD, BAD),
        ("", BAD, BAD),
        ("+", BAD, BAD),
        ("+-1", BAD, BAD),
        (" 6", BAD, BAD),
        ("6 ", BAD, BAD),
        ("6\n", BAD, BAD),
        ("1_000", BAD, BAD),
        ("5.5", BAD, BAD),
        ("²", BAD, BAD),  # a digit, but not a decimal digit
        ("0x10", BAD, BAD),
    ],
)
def test_java_int_and_long(text: str, int_value: object, long_value: object) -> None:
    for parse_it, expected in ((java_int, int_value), (java_long, long_value)):
        if expected is BAD:
            with pytest.raises(EvaluationError):
                parse_it(text)
        else:
            assert parse_it(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("6", 6.0),
        (" 6 ", 6.0),
        ("\x00\x1f6\x20", 6.0),  # String.trim: everything up to U+0020
        ("+.5", 0.5),
        ("5.", 5.0),
        ("-1e3", -1000.0),
        ("1E+3", 1000.0),
        ("2d", 2.0),
        ("2.5F", 2.5),
        ("1e400", math.inf),
        ("-1e400", -math.inf),
        ("1e-400", 0.0),
        ("0.1", 0.1),
        ("9007199254740993", 9007199254740992.0),  # the full double, correctly rounded
        ("NaN", math.nan),
        ("-NaN", math.nan),
        ("Infinity", math.inf),
        ("-Infinity", -math.inf),
        ("0x1p3", 8.0),
        ("0X1.8P1D", 3.0),
        ("-0x.8p1", -1.0),
        ("0x1.p1", 2.0),
        ("0x1p99999", math.inf),
        ("0x1p-99999", 0.0),
        ("", BAD),
        ("   ", BAD),
        (".", BAD),
        ("e5", BAD),
        ("1e", BAD),
        ("1e5.5", BAD),
        ("inf", BAD),
        ("nan", BAD),
        ("infinity", BAD),
        ("NaNd", BAD),
        ("1_000", BAD),
        ("٣", BAD),  # Double.valueOf takes ASCII digits only
        ("1 2", BAD),
        ("\u00a06", BAD),  # no-break space is above U+0020: not trimmed
        ("2dd", BAD),
        ("0x1", BAD),  # a hex float needs its exponent
        ("0x.p1", BAD),
        ("0xgp1", BAD),
    ],
)
def test_java_double(text: str, expected: float | type[EvaluationError]) -> None:
    if expected is BAD:
        with pytest.raises(EvaluationError):
            java_double(text)
        return
    value = java_double(text)
    assert isinstance(expected, float)
    if math.isnan(expected):
        assert math.isnan(value)
    else:
        assert value == expected
        assert math.copysign(1.0, value) == math.copysign(1.0, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("tRuE", True), ("yes", False), ("", False)],
)
def test_java_boolean(text: str, expected: bool) -> None:
    assert java_boolean(text) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (1.0, 2.0, -1),
        (2.0, 1.0, 1),
        (1.0, 1.0, 0),
        (-0.0, 0.0, -1),
        (0.0, -0.0, 1),
        (-0.0, -0.0, 0),
        (math.nan, math.nan, 0),
        (math.nan, math.inf, 1),
        (-math.inf, math.nan, -1),
        (math.nan, -0.0, 1),
    ],
)
def test_double_compare(a: float, b: float, expected: int) -> None:
    assert double_compare(a, b) == expected


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (5, Kind.INTEGER, -5),
        (-(2**31), Kind.INTEGER, -(2**31)),  # wraps around, as Java's int does
        (-(2**63), Kind.LONG, -(2**63)),
        (2**31, Kind.LONG, -(2**31)),
        (0.0, Kind.DOUBLE, -0.0),
    ],
)
def test_java_negate(value: float, kind: Kind, expected: float) -> None:
    result = java_negate(value, kind)
    assert result == expected
    assert math.copysign(1.0, result) == math.copysign(1.0, expected)


# --- evaluation --------------------------------------------------------------------------

T, F, N = True, False, None  # N: NULL, or an evaluation error (never a match)
BIG9 = "9" * 25

EVALUATIONS: list[tuple[str, dict[str, str], bool | None]] = [
    # a property compared with an Integer must parse as a Java int
    ("a > 5", {"a": "6"}, T),
    ("a > 5", {"a": "5"}, F),
    ("a > 5", {"a": "+6"}, T),
    ("a > 5", {"a": "٦"}, T),
    ("a > 5", {"a": "5.5"}, N),
    ("a > 5", {"a": " 6"}, N),
    ("a > 5", {"a": "abc"}, N),
    ("a > 5", {"a": BIG9}, N),
    ("a > 5", {}, N),
    ("a = 5", {"a": "05"}, T),
    ("a = 5", {"a": "3000000000"}, N),  # beyond int: Integer.valueOf throws
    ("a = 3000000000", {"a": "3000000000"}, T),  # a Long constant parses as long
    ("a = 3000000000", {"a": "x"}, N),
    ("a > 2147483647", {"a": "2147483648"}, N),
    ("a > 2147483648", {"a": "2147483649"}, T),
    ("a = 9223372036854775807", {"a": "9223372036854775808"}, N),
    ("a = 10L", {"a": "10"}, T),
    ("a = -2147483648", {"a": "-2147483648"}, T),
    ("a < -5", {"a": "-6"}, T),
    ("a = - -5", {"a": "5"}, T),
    ("1 = '1'", {}, T),
    ("'1' = 1", {}, T),
    ("'1.0' = 1", {}, N),
    ("1.0 = '1'", {}, T),
    # ... with a Double, as a Java double (trimmed; NaN and Infinity spelled out)
    ("a > 5.5", {"a": " 6 "}, T),
    ("a > 5.5", {"a": "6d"}, T),
    ("a > 5.5", {"a": "0x1.8p2"}, T),
    ("a > 5.5", {"a": "5"}, F),
    ("a > 5.5", {"a": "Infinity"}, T),
    ("a > 5.5", {"a": "inf"}, N),
    ("a > 5.5", {"a": "1_000"}, N),
    ("a > 5.5", {"a": ""}, N),
    ("a > 5.5", {"a": "٦"}, N),
    ("a > 5.5", {"a": "NaN"}, T),  # Double.compare puts NaN above everything
    ("a < 5.5", {"a": "NaN"}, F),
    ("a = 5.5", {"a": "NaN"}, F),
    ("a >= 0.0", {"a": "-0"}, F),  # -0.0 < 0.0 for Double.compare
    ("a >= 0.0", {"a": "0"}, T),
    ("a > 1.0", {"a": "0x1p99999"}, T),
    ("a = 1.5", {"a": "1.50"}, T),
    # two strings are ordered as doubles, but compared for equality as strings
    ("a > b", {"a": "10", "b": "9"}, T),
    ("a > b", {"a": "1e1", "b": " 9.5"}, T),
    ("a > b", {"a": "x", "b": "1"}, N),
    ("a > b", {"a": "1"}, N),
    ("a = b", {"a": "1", "b": "1.0"}, F),
    ("a = b", {"a": "x", "b": "x"}, T),
    ("a = b", {}, T),  # NULL = NULL is TRUE, as in RocketMQ
    ("a = b", {"a": "x"}, N),
    # strings
    ("a = 'x'", {"a": "x"}, T),
    ("a = 'x'", {"a": "X"}, F),
    ("a = 'x'", {}, N),
    ("a <> 'x'", {"a": "y"}, T),
    ("a <> 'x'", {}, N),
    ("'x' = a", {}, N),  # RocketMQ: FALSE; we keep NULL
    ("'x' <> a", {}, N),  # RocketMQ: TRUE
    ("a = 'it''s'", {"a": "it's"}, T),
    # booleans: a string compared with one converts by Boolean.valueOf
    ("b = TRUE", {"b": "TRUE"}, T),
    ("b = TRUE", {"b": "true"}, T),
    ("b = TRUE", {"b": "yes"}, F),
    ("b = TRUE", {}, N),
    ("b = FALSE", {"b": "no"}, T),
    ("'true' = TRUE", {}, T),
    ("'x' = TRUE", {}, F),
    ("TRUE = b", {"b": "true"}, N),  # Boolean vs String: ClassCastException in Java
    ("(a = 'x') = TRUE", {"a": "x"}, T),
    ("(a = 'x') = 'x'", {"a": "x"}, N),
    ("(a = 'x') = 1", {"a": "x"}, F),  # incomparable: "less"
    ("1 = TRUE", {}, F),
    ("TRUE", {}, T),
    ("FALSE", {}, F),
    ("NULL", {}, N),
    ("TRUE <> FALSE", {}, T),
    ("a", {"a": "true"}, F),  # a bare string property casts to FALSE
    ("NOT a", {"a": "x"}, T),
    ("NOT a", {}, N),
    # numbers of different types
    ("2147483648 > 2147483647", {}, T),
    ("1 = 1.0", {}, T),
    ("1.5 > 1", {}, T),
    ("9007199254740993 = 9007199254740992.0", {}, T),  # the long widens to double
    ("-0.0 = 0.0", {}, F),  # Double.equals compares bits
    ("-0.0 < 0.0", {}, T),
    ("0.0 = 0.0", {}, T),
    # three-valued AND, OR, NOT
    ("a = 'x' AND b = 'y'", {"a": "x", "b": "y"}, T),
    ("a = 'x' AND b = 'y'", {"a": "x"}, N),
    ("a = 'x' AND b = 'y'", {"a": "z"}, F),
    ("a = 'x' AND b = 'y'", {"b": "z"}, F),
    ("a = 'x' AND b = 'y'", {"b": "y"}, N),
    ("a = 'x' OR b = 'y'", {"a": "x"}, T),
    ("a = 'x' OR b = 'y'", {"b": "y"}, T),
    ("a = 'x' OR b = 'y'", {}, N),
    ("a = 'x' OR b = 'y'", {"a": "z", "b": "z"}, F),
    ("a = 'x' OR b = 'y'", {"a": "z"}, N),
    ("a = 'x' AND b = 'y' AND c = 'z'", {"a": "x", "c": "q"}, F),
    ("a = 'x' OR b = 'y' OR c = 'z'", {"c": "z"}, T),
    ("a = 'x' OR b = 'y' OR c = 'z'", {"a": "q", "b": "q"}, N),
    ("NOT (a = 'x')", {"a": "x"}, F),
    ("NOT (a = 'x')", {"a": "y"}, T),
    ("NOT (a = 'x')", {}, N),
    # short-circuits decide whether an error is seen
    ("a = 'x' OR b > 1", {"a": "x", "b": "z"}, T),
    ("b > 1 OR a = 'x'", {"a": "x", "b": "z"}, N),
    ("a = 'y' AND b > 1", {"a": "x", "b": "z"}, F),
    ("b > 1 AND a = 'y'", {"a": "x", "b": "z"}, N),
    ("(a > -(TRUE = c)) IS NULL", {"c": "x"}, T),  # NULL left: right side not evaluated
    ("(a > -(TRUE = c)) IS NULL", {"a": "1", "c": "x"}, N),
    ("(a = -(TRUE = c)) IS NULL", {"c": "x"}, N),  # = evaluates both sides
    ("(a = -(TRUE = c)) IS NULL", {}, F),
    # IS [NOT] NULL
    ("a IS NULL", {}, T),
    ("a IS NULL", {"a": ""}, F),
    ("a IS NOT NULL", {}, F),
    ("a IS NOT NULL", {"a": "x"}, T),
    ("(a > 1) IS NULL", {}, T),
    ("(a > 1) IS NULL", {"a": "x"}, N),
    ("NULL IS NULL", {}, T),
    ("5 IS NOT NULL", {}, T),
    # BETWEEN
    ("a BETWEEN 1 AND 3", {"a": "2"}, T),
    ("a BETWEEN 1 AND 3", {"a": "3"}, T),
    ("a BETWEEN 1 AND 3", {"a": "4"}, F),
    ("a BETWEEN 1 AND 3", {"a": "2.5"}, N),
    ("a BETWEEN 1 AND 3", {}, N),
    ("a BETWEEN 1 AND 2.5", {"a": "2"}, T),
    ("a BETWEEN 1 AND 2.5", {"a": "2.2"}, N),  # "2.2" >= 1 needs an int
    ("a NOT BETWEEN 1 AND 3", {"a": "0"}, T),
    ("a NOT BETWEEN 1 AND 3", {"a": "2"}, F),
    ("a NOT BETWEEN 1 AND 3", {}, N),
    ("a NOT BETWEEN 3 AND 1", {"a": "2"}, T),
    # IN
    ("a IN ('x', 'y')", {"a": "y"}, T),
    ("a IN ('x', 'y')", {"a": "z"}, F),
    ("a IN ('x', 'y')", {}, N),
    ("a NOT IN ('x')", {}, N),
    ("a NOT IN ('x')", {"a": "x"}, F),
    ("a NOT IN ('x')", {"a": "y"}, T),
    ("TAGS IN ('TagA', 'TagB')", {"TAGS": "TagB", "KEYS": "k"}, T),
    # minus on anything but a number is NULL
    ("-a > 1", {"a": "-5"}, N),
    ("-a > 1", {"a": "5"}, N),
    ("a > -1", {"a": "0"}, T),
    ("-a IS NULL", {"a": "5"}, T),
    ("-'x' IS NULL", {}, T),
    ("-(a = 'x') IS NULL", {"a": "x"}, T),
    ("-(a = 'x') IS NULL", {"a": "y"}, T),  # minus of FALSE is NULL too
    ("a = -b", {}, T),
    ("a = -b", {"a": "1", "b": "1"}, N),
]


@pytest.mark.parametrize(("text", "properties", "expected"), EVALUATIONS)
def test_evaluation(text: str, properties: dict[str, str], expected: bool | None) -> None:
    selector = compile_selector(text)
    assert selector.evaluate(properties) is expected
    assert selector.matches(properties) is (expected is True)


def test_errors_are_evaluation_errors_inside() -> None:
    # evaluate() hides them as None; the compiled program raises them.
    from rocklet.protocol.sql92.evaluate import compile_tree

    with pytest.raises(EvaluationError):
        compile_tree(parse("a > 5"))({"a": "x"})
    assert compile_tree(parse("a > 5"))({}) is None
