"""Syntax tree and recursive-descent parser of RocketMQ 4.9's SQL92 selectors.

Precedence, lowest first: ``OR``; ``AND``; ``=``, ``<>``, ``IS [NOT] NULL``; ``>``,
``>=``, ``<``, ``<=``, ``[NOT] BETWEEN``, ``[NOT] IN``; unary ``+``, ``-``, ``NOT``.
Binary operators associate to the left. Parentheses only group. ``BETWEEN``, ``<>``
and ``IS NOT NULL`` are spelled with the other nodes, as RocketMQ builds them.

The parser also makes RocketMQ's compile-time type checks, so that a selector the
Java broker refuses is refused here too (:class:`SelectorError`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias, TypeGuard

from rocklet.protocol.sql92.lexer import SelectorError, Token, tokenize

__all__ = ["MAX_DEPTH", "Node", "SelectorError", "is_boolean", "parse", "property_names"]
# The syntax tree's node classes:
__all__ += ["And", "BooleanCast", "BooleanConstant", "Compare", "Constant", "Equal", "In"]
__all__ += ["Negate", "Not", "Or", "Property"]

#: How deeply expressions may nest (parentheses, unary operators, operator chains).
#: Parsing, compiling and evaluating all recurse, and Python's stack is small.
MAX_DEPTH: Final = 64

_INT_MAX: Final = (1 << 31) - 1


JavaType: TypeAlias = Literal["Integer", "Long", "Double", "String"]
Ordering: TypeAlias = Literal[">", ">=", "<", "<="]
_ORDERINGS: Final[dict[str, Ordering]] = {">": ">", ">=": ">=", "<": "<", "<=": "<="}


@dataclass(frozen=True, slots=True)
class _Node:
    # Where the node sits in the text (start, end), for messages; not part of equality.
    span: tuple[int, int] = field(default=(0, 0), kw_only=True, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Property(_Node):
    """A message property by name; NULL when the message lacks it."""

    name: str


@dataclass(frozen=True, slots=True)
class Constant(_Node):
    """A number or string literal, tagged with the Java class RocketMQ gives it."""

    value: int | float | str
    java_type: JavaType


@dataclass(frozen=True, slots=True)
class BooleanConstant(_Node):
    """``TRUE``, ``FALSE`` or ``NULL`` (``value`` None): a constant and a boolean."""

    value: bool | None


@dataclass(frozen=True, slots=True)
class Negate(_Node):
    """Unary minus. Never a constant, not even ``-5`` (as in RocketMQ)."""

    operand: Node


@dataclass(frozen=True, slots=True)
class Not(_Node):
    """Logical ``NOT`` of a boolean expression."""

    operand: Node


@dataclass(frozen=True, slots=True)
class BooleanCast(_Node):
    """A bare property used where a boolean is needed."""

    operand: Node


@dataclass(frozen=True, slots=True)
class And(_Node):
    """``AND`` of two or more operands (chains are flattened; AND is associative)."""

    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or(_Node):
    """``OR`` of two or more operands (chains are flattened; OR is associative)."""

    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Equal(_Node):
    """``left = right``; ``x IS NULL`` is ``Equal(x, BooleanConstant(None))``."""

    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare(_Node):
    """An ordering comparison: ``left op right``."""

    op: Ordering
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In(_Node):
    """``operand [NOT] IN ('v1', ...)``."""

    operand: Property
    values: tuple[str, ...]
    negated: bool = False


_Leaf: TypeAlias = Property | Constant | BooleanConstant
Node: TypeAlias = _Leaf | Negate | Not | BooleanCast | And | Or | Equal | Compare | In

_BOOLEAN_NODES: Final = (BooleanConstant, Not, BooleanCast, And, Or, Equal, Compare, In)


def property_names(node: Node) -> frozenset[str]:
    """The names of the properties ``node`` reads (what a matcher needs to extract)."""
    if isinstance(node, Property):
        return frozenset((node.name,))
    names: frozenset[str] = frozenset()
    for child in _children(node):
        names |= property_names(child)
    return names


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Negate | Not | BooleanCast):
        return (node.operand,)
    if isinstance(node, And | Or):
        return node.operands
    if isinstance(node, Equal | Compare):
        return (node.left, node.right)
    if isinstance(node, In):
        return (node.operand,)
    return ()


def is_boolean(node: Node) -> bool:
    """Return whether ``node`` is a boolean expression (RocketMQ's BooleanExpression)."""
    return isinstance(node, _BOOLEAN_NODES)


def parse(expression: str) -> Node:
    """Parse and type-check a selector; return its tree (a boolean expression).

    Raises:
        SelectorError: If the text is not a valid selector.
    """
    return _Parser(expression).selector()


def _is_constant(node: Node) -> bool:
    return isinstance(node, Constant | BooleanConstant)


def _is_null(node: Node) -> bool:
    return isinstance(node, BooleanConstant) and node.value is None


def _is_number(node: Node) -> TypeGuard[Constant]:
    return isinstance(node, Constant) and node.java_type != "String"


def _logic(kind: type[And] | type[Or], left: Node, right: Node) -> Node:
    """Join two operands with AND or OR, merging nested chains of the same kind."""
    operands = [node.operands if isinstance(node, kind) else (node,) for node in (left, right)]
    return kind((*operands[0], *operands[1]), span=(left.span[0], right.span[1]))


class _Parser:
    """One parse: the token list, a cursor and the current nesting depth."""

    def __init__(self, expression: str) -> None:
        self.text = expression
        self.tokens = tokenize(expression)
        self.i = 0
        self.depth = 0

    # -- helpers ---------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def accept(self, kind: str) -> Token | None:
        """Consume and return the next token if it is of this kind."""
        token = self.tokens[self.i]
        if token.kind != kind:
            return None
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return token

    def expect(self, kind: str, what: str) -> Token:
        token = self.accept(kind)
        if token is None:
            raise self.unexpected(what)
        return token

    def unexpected(self, what: str) -> SelectorError:
        found = self.peek()
        text = "the end" if found.kind == "EOF" else repr(found.text)
        return SelectorError(f"expected {what} but found {text}", found.pos)

    def fail(self, message: str, *nodes: Node) -> SelectorError:
        """An error at ``nodes[0]``; each ``{}`` in the message becomes a node's text."""
        texts = [self.text[node.span[0] : node.span[1]] for node in nodes]
        quoted = [repr(t if len(t) <= 40 else t[:37] + "...") for t in texts]
        return SelectorError(message.format(*quoted), nodes[0].span[0])

    def boolean(self, node: Node) -> Node:
        """Check an operand that must be boolean; wrap a bare property in a cast."""
        if is_boolean(node):
            return node
        if isinstance(node, Property):
            return BooleanCast(node, span=node.span)
        raise self.fail("expression will not result in a boolean value: {}", node)

    # -- grammar ---------------------------------------------------------------------

    def selector(self) -> Node:
        node = self.or_()
        # RocketMQ 4.9 stops at the first token it cannot use; we refuse the rest.
        self.expect("EOF", "an operator or the end of the selector")
        return self.boolean(node)

    def or_(self) -> Node:
        return self.logic("OR", Or, self.and_)

    def and_(self) -> Node:
        return self.logic("AND", And, self.equality)

    def logic(self, keyword: str, kind: type[And] | type[Or], operand: Callable[[], Node]) -> Node:
        left = operand()
        while self.accept(keyword):
            left = _logic(kind, self.boolean(left), self.boolean(operand()))
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while True:
            if token := self.accept("=") or self.accept("<>"):
                node: Node = self.equal(left, self.comparison())
                left = node if token.kind == "=" else Not(node, span=node.span)
            elif self.accept("IS"):
                negated = self.accept("NOT")
                null = self.expect("NULL", "NULL")
                span = (left.span[0], null.end)
                # Built without equal()'s checks: IS NULL is the one way to test for NULL.
                node = Equal(left, BooleanConstant(None, span=(null.pos, null.end)), span=span)
                left = Not(node, span=span) if negated else node
            else:
                return left

    def comparison(self) -> Node:
        left = self.unary()
        while True:
            negated = self.peek().kind == "NOT" and self.peek(1).kind in ("BETWEEN", "IN")
            if negated:
                self.accept("NOT")
            op = _ORDERINGS.get(self.peek().kind)
            if op is not None and self.accept(op):
                left = self.compare(op, left, self.unary())
            elif self.accept("BETWEEN"):
                low = self.unary()
                self.expect("AND", "AND")
                high = self.unary()
                if negated:
                    left = _logic(Or, self.compare("<", left, low), self.compare(">", left, high))
                else:
                    self.check_range(low, high)
                    left = _logic(
                        And, self.compare(">=", left, low), self.compare("<=", left, high)
                    )
            elif self.accept("IN"):
                left = self.in_(left, negated)
            else:
                return left

    def unary(self) -> Node:
        token = self.peek()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SelectorError("expression nested too deeply", token.pos)
        if self.accept("+"):
            node = self.unary()
        elif self.accept("-"):
            operand = self.unary()
            node = Negate(operand, span=(token.pos, operand.span[1]))
        elif self.accept("NOT"):
            operand = self.boolean(self.unary())
            node = Not(operand, span=(token.pos, operand.span[1]))
        else:
            node = self.primary()
        self.depth -= 1
        return node

    def primary(self) -> Node:
        token = self.peek()
        kind, span = token.kind, (token.pos, token.end)
        if self.accept("("):
            node = self.or_()
            close = self.expect(")", "')'")
            # Parentheses only group; the span grows so that messages quote them.
            return dataclasses.replace(node, span=(token.pos, close.end))
        if kind == "IDENT":
            node = Property(token.text, span=span)
        elif kind == "STRING":
            node = Constant(token.value, "String", span=span)
        elif kind == "DECIMAL":  # Java makes it an Integer if it fits, else a Long
            java_type: JavaType = "Integer" if token.value <= _INT_MAX else "Long"
            node = Constant(token.value, java_type, span=span)
        elif kind == "FLOAT":
            node = Constant(token.value, "Double", span=span)
        elif kind in ("TRUE", "FALSE", "NULL"):
            node = BooleanConstant({"TRUE": True, "FALSE": False}.get(kind), span=span)
        else:
            raise self.unexpected("an expression")
        self.accept(kind)
        return node

    # -- RocketMQ's compile-time checks ----------------------------------------------

    def equal(self, left: Node, right: Node) -> Equal:
        for side in (left, right):
            if _is_null(side):
                raise self.fail("NULL cannot be compared with = or <>; use IS NULL", side)
        if isinstance(left, BooleanConstant) and isinstance(right, Constant):
            raise self.fail("{} cannot be compared with {}", left, right)
        return Equal(left, right, span=(left.span[0], right.span[1]))

    def compare(self, op: Ordering, left: Node, right: Node) -> Compare:
        for side in (left, right):
            # Numbers, properties and negations only; a string, boolean or NULL is refused.
            if not _is_number(side) and (_is_constant(side) or is_boolean(side)):
                raise self.fail("{} cannot be compared with " + op, side)
        return Compare(op, left, right, span=(left.span[0], right.span[1]))

    def check_range(self, low: Node, high: Node) -> None:
        """Refuse ``BETWEEN`` with constant bounds that are NULL or out of order."""
        if _is_constant(low) and _is_constant(high):
            for bound in (low, high):
                if _is_null(bound):
                    raise self.fail("NULL cannot be a bound of BETWEEN", bound)
        # Any other non-number bound fails compare()'s check right after this one.
        if _is_number(low) and _is_number(high) and _java_less(high, low):
            raise self.fail("BETWEEN bounds out of order: {} is below {}", high, low)

    def in_(self, left: Node, negated: bool) -> In:
        if not isinstance(left, Property):
            raise self.fail("IN needs a property on its left, not {}", left)
        self.expect("(", "'(' after IN")
        values = [self.expect("STRING", "a string literal").value]
        while self.accept(","):
            values.append(self.expect("STRING", "a string literal").value)
        close = self.expect(")", "',' or ')'")
        return In(left, tuple(values), negated, span=(left.span[0], close.end))


def _java_less(a: Constant, b: Constant) -> bool:
    """Java's ``a < b`` for two number literals: a Double side makes both doubles."""
    if a.java_type == "Double" or b.java_type == "Double":
        # Literals are finite and not negative, so IEEE "<" is Double.compare's order.
        return float(a.value) < float(b.value)
    return int(a.value) < int(b.value)
