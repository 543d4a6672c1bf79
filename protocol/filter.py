"""Tag subscription expressions: ``"*"``, ``"TagA"``, ``"TagA || TagB"``.

Brokers filter by tag *hash* (the consume queue stores ``String.hashCode()`` of TAGS)
and clients re-check the tag string, because hashes collide. RocketMQ's
``FilterAPI.buildSubscriptionData`` splits on ``||``, trims, and drops empty items;
``*`` or an empty expression means every message. The C++ client's heartbeat sends
bogus codes (``atoi(tag)``), so brokers recompute them here (docs/protocol.md).
"""

from __future__ import annotations

from typing import Final

from rocklet.protocol.message import java_string_hash

__all__ = ["SUB_ALL", "parse_tag_expression", "tag_codes", "tags_match"]

#: The expression meaning "every message".
SUB_ALL: Final = "*"


def parse_tag_expression(expression: str | None) -> frozenset[str] | None:
    """Return the tags of an expression, or ``None`` when it selects everything.

    Args:
        expression: The subscription string.

    Returns:
        The set of tags, or ``None`` for ``*``/empty.
    """
    if expression is None:
        return None
    text = expression.strip()
    if not text or text == SUB_ALL:
        return None
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return tags or None


def tag_codes(tags: frozenset[str] | None) -> frozenset[int] | None:
    """Return the tag hashes a broker compares with consume-queue entries."""
    return None if tags is None else frozenset(java_string_hash(t) for t in tags)


def tags_match(tags: frozenset[str] | None, tag: str | None) -> bool:
    """Return whether a message with ``tag`` matches a subscription's tag set."""
    return tags is None or (tag is not None and tag in tags)
