"""What a consumer subscribes to: tags, or an SQL92 selector over message properties.

A plain string is a tag expression (``"*"``, ``"TagA || TagB"``), filtered by the
broker on the tag hash and again here on the tag itself. :meth:`MessageSelector.by_sql`
(Java's ``MessageSelector.bySql``) selects by properties instead; only the broker
evaluates it, and only a broker with ``enablePropertyFilter=true`` accepts it
(docs/filtering.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

from rocklet.protocol.filter import SUB_ALL, parse_tag_expression
from rocklet.protocol.sql92 import SQL92, TAG, SelectorError, compile_selector

__all__ = ["SQL92", "TAG", "Expression", "MessageSelector", "SelectorError", "as_selector"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression and its type.

    Attributes:
        expression_type: ``"TAG"`` or ``"SQL92"``.
        expression: The tag expression or the SQL92 selector text.
    """

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, tags: str = SUB_ALL) -> MessageSelector:
        """Messages whose tag is one of ``tags`` (``"*"`` or ``"TagA || TagB"``).

        Raises:
            SelectorError: ``tags`` has separators but no tag (``"||"``), which Java's
                client refuses too ("subString split error"); ``"*"`` means every tag.
        """
        text = tags.strip() or SUB_ALL
        if "|" in text and parse_tag_expression(text) is None:
            raise SelectorError(f"tag expression {tags!r} names no tag; '*' means every tag")
        return cls(TAG, text)

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """Messages whose properties ``sql`` accepts, e.g. ``"a > 5 AND region = 'eu'"``.

        The selector is compiled here first, so a typo fails now rather than at the
        broker.

        Raises:
            SelectorError: ``sql`` is not a valid RocketMQ 4.9 selector.
        """
        compile_selector(sql)
        return cls(SQL92, sql)

    @property
    def is_tag(self) -> bool:
        """Whether this is a tag expression."""
        return self.expression_type == TAG

    def tags(self) -> frozenset[str] | None:
        """The tags a client re-checks, or ``None`` (everything, or an SQL92 selector)."""
        return parse_tag_expression(self.expression) if self.is_tag else None


#: What the consumers' ``subscribe`` and ``pull`` take: a tag expression or a selector.
Expression: TypeAlias = "str | MessageSelector"

_ALL: Final = MessageSelector(TAG, SUB_ALL)


def as_selector(expression: str | MessageSelector | None) -> MessageSelector:
    """``expression`` as a selector: a string is a tag expression, ``None`` everything."""
    if expression is None:
        return _ALL
    if isinstance(expression, MessageSelector):
        return expression
    return MessageSelector.by_tag(expression)
