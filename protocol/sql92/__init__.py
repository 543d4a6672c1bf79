"""RocketMQ 4.9's SQL92 message selectors (``MessageSelector.bySql(...)``).

A selector such as ``a > 5 AND TAGS IN ('x', 'y')`` is tested against a message's
property map (``str`` to ``str``, system properties such as ``TAGS`` and ``KEYS``
included); a missing name is NULL. :func:`compile_selector` parses it, makes RocketMQ's
compile-time checks and returns a :class:`Selector`; ``Selector.matches`` is True only
when the selector evaluates to TRUE. Values follow Java's rules: a property compared
with ``5`` must parse as a Java int, with ``5.5`` as a double, and so on (see
:mod:`rocklet.protocol.sql92.evaluate`).

Deliberate differences from RocketMQ 4.9:

* Trailing input is refused: RocketMQ compiles ``a = 1 xyz`` as ``a = 1``.
* ``=`` and ``<>`` with exactly one NULL side are NULL (unknown), as in SQL. RocketMQ
  gives NULL when the left side is NULL but FALSE when only the right side is, so
  there ``'x' = a`` is FALSE and ``'x' <> a`` TRUE for a message without ``a``.
  As in RocketMQ, ``IS [NOT] NULL`` is always TRUE or FALSE and two NULLs are ``=``.
* The float literal ``0.0`` (or any that rounds to zero) is accepted; RocketMQ refuses
  literals below Double.MIN_VALUE, zero included.
* A ``--`` comment may end the text without a line break.
* Expressions nested deeper than :data:`~rocklet.protocol.sql92.parser.MAX_DEPTH`
  levels are refused, to keep Python's stack safe.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from rocklet.protocol.sql92.evaluate import Program, compile_tree
from rocklet.protocol.sql92.lexer import SelectorError
from rocklet.protocol.sql92.parser import parse, property_names

__all__ = ["SQL92", "TAG", "Selector", "SelectorError", "compile_selector", "is_tag_type"]

#: ``ExpressionType.SQL92``: the subscription's expression is a selector.
SQL92: Final = "SQL92"
#: ``ExpressionType.TAG``: the subscription's expression is a tag list (``"a || b"``).
TAG: Final = "TAG"


def is_tag_type(expression_type: str | None) -> bool:
    """Return whether a subscription's expression type means tags.

    Like ``ExpressionType.isTagType``: None, empty and exactly ``"TAG"`` (case matters)
    mean tags; anything else does not.
    """
    return expression_type is None or expression_type in ("", TAG)


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled selector. ``Selector(text)`` compiles (uncached) or raises.

    Attributes:
        expression: The selector text it was compiled from.
        property_names: The properties it reads; every other one can be left out of
            the map given to :meth:`matches` (a broker extracts only these).
    """

    expression: str
    _program: Program = field(init=False, repr=False, compare=False)
    property_names: frozenset[str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        tree = parse(self.expression)
        object.__setattr__(self, "_program", compile_tree(tree))
        object.__setattr__(self, "property_names", property_names(tree))

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Return whether a message with these properties is selected.

        Args:
            properties: The message's properties; a missing name is NULL.

        Returns:
            True only if the selector is TRUE. FALSE, NULL (unknown) and evaluation
            errors are all False; this method never raises.
        """
        try:
            return self._program(properties) is True
        except Exception:  # Java's evaluation errors mean "no match", as do ours
            return False

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """Return the selector's three-valued result for these properties.

        Args:
            properties: The message's properties; a missing name is NULL.

        Returns:
            True or False, or None for NULL (unknown). An evaluation error (such as a
            property that does not parse as the number it is compared with) is
            reported as None too, since neither TRUE nor FALSE would be honest.
        """
        try:
            result: bool | None = self._program(properties)
        except Exception:
            return None
        return result


@functools.lru_cache(maxsize=256)
def compile_selector(expression: str) -> Selector:
    """Compile a selector, reusing the result for a text seen recently.

    Args:
        expression: The selector text.

    Returns:
        The compiled selector (the same object for the same text while cached).

    Raises:
        SelectorError: If the text is not a valid selector (raised again on every
            call; failures are not cached).
    """
    return Selector(expression)
