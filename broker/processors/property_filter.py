"""SQL92 property filters for pulls (``ConsumerFilterManager``, ``ExpressionMessageFilter``).

A consumer subscribed with ``MessageSelector.bySql`` gets only the records whose
properties the selector accepts (docs/filtering.md). The selector reaches the broker
two ways, as in RocketMQ 4.9.4:

- in the pull itself (the subscription flag, set by pull consumers): compiled there; a
  selector that does not compile is SUBSCRIPTION_PARSE_FAILED;
- in the consumer's heartbeat (push consumers): compiled on first use for its
  (topic, group, subscription version); one that does not compile is
  FILTER_DATA_NOT_EXIST, like the Java broker, which registers nothing for it.

Either way a broker without ``enablePropertyFilter`` then answers SYSTEM_ERROR "The
broker does not support consumer to filter message by SQL92", RocketMQ's answer. A
compiled selector is kept per (topic, group) until the subscription changes, so a pull
costs one dictionary lookup; tag-only pulls never come here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

from rocklet.broker.processors.refusal import Refused
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import record_properties_text
from rocklet.protocol.properties import decode_properties
from rocklet.protocol.sql92 import SQL92, Selector, SelectorError, compile_selector

__all__ = ["PropertyFilters", "RecordFilter", "unsupported_remark"]

#: Whether a whole stored record is wanted.
RecordFilter = Callable[[memoryview], bool]
#: The separators of a stored properties string: between items, and name from value.
_ITEM: Final = "\x02"
_NAME: Final = "\x01"
#: (topic, group) entries kept before the table is emptied (only odd clients vary
#: their subscriptions without end).
_MAX_ENTRIES: Final = 10_000


def unsupported_remark(expression_type: str) -> str:
    """RocketMQ's remark when ``enablePropertyFilter`` is off."""
    return f"The broker does not support consumer to filter message by {expression_type}"


def _compile(expression_type: str, expression: str | None) -> Selector:
    if expression_type != SQL92:
        # RocketMQ 4.9.4 knows no other filter type (class filters are gone).
        raise SelectorError(f"expression type {expression_type} is not supported")
    return compile_selector(expression or "")


def _record_filter(selector: Selector) -> RecordFilter:
    r"""Whether a record's properties pass ``selector``, reading only the names it uses.

    Decoding a record's whole property map costs more than evaluating most selectors;
    each name the selector reads is found in the raw text instead (the last item of
    that name, as Java's map keeps). No name or value holds the item separator and no
    name holds the name separator, so ``\x02name\x01`` matches only a whole item
    name. An empty value, which Java's decoder drops, sends the record to the full
    decoder.
    """
    matches = selector.matches
    keys = [(name, f"{_ITEM}{name}{_NAME}") for name in sorted(selector.property_names)]

    def wanted(record: memoryview) -> bool:
        try:
            raw = record_properties_text(record)
        except MessageFormatError:
            return False  # properties that cannot be read match nothing
        text = _ITEM + raw
        found: dict[str, str] = {}
        for name, key in keys:
            at = text.rfind(key)
            if at >= 0:
                start = at + len(key)
                end = text.find(_ITEM, start)
                value = text[start:] if end < 0 else text[start:end]
                if not value:
                    return matches(decode_properties(raw))
                found[name] = value
        return matches(found)

    return wanted


@functools.lru_cache(maxsize=256)
def _pull_filter(expression_type: str, expression: str | None) -> RecordFilter | None:
    """The record filter of a selector carried in pulls (``None``: it does not compile).

    Pull consumers send their selector with every pull: the filter is built once per
    expression, not once per pull.
    """
    try:
        return _record_filter(_compile(expression_type, expression))
    except SelectorError:
        return None


class PropertyFilters:
    """Compiled SQL92 selectors of the consumers of one broker. Event loop only.

    Args:
        enabled: ``enablePropertyFilter``.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._table: dict[tuple[str, str], tuple[int, str, RecordFilter | None]] = {}

    def check(self, expression_type: str, expression: str | None) -> None:
        """CHECK_CLIENT_CONFIG's verdict on a non-tag subscription.

        Raises:
            Refused: SYSTEM_ERROR when property filters are off; SUBSCRIPTION_PARSE_FAILED
                when the selector does not compile (the remark says why).
        """
        if not self.enabled:
            raise Refused(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type))
        try:
            _compile(expression_type, expression)
        except SelectorError as exc:
            raise Refused(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"Invalid MessageSelector. {exc}"
            ) from None

    def from_pull(self, expression_type: str, expression: str | None) -> RecordFilter:
        """The filter of a pull that carries its own selector.

        Raises:
            Refused: SUBSCRIPTION_PARSE_FAILED, then SYSTEM_ERROR when filters are off.
        """
        wanted = _pull_filter(expression_type, expression)
        if wanted is None:
            raise Refused(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                "parse the consumer's subscription failed",
            )
        return self._allowed(expression_type, wanted)

    def from_heartbeat(
        self, topic: str, group: str, expression_type: str, expression: str, version: int
    ) -> RecordFilter:
        """The filter of a consumer group's heartbeat subscription to ``topic``.

        Raises:
            Refused: FILTER_DATA_NOT_EXIST when the selector does not compile, then
                SYSTEM_ERROR when filters are off.
        """
        key = (topic, group)
        entry = self._table.get(key)
        if entry is None or entry[0] != version or entry[1] != expression:
            try:
                wanted: RecordFilter | None = _record_filter(_compile(expression_type, expression))
            except SelectorError:
                wanted = None
            if len(self._table) >= _MAX_ENTRIES:
                self._table.clear()
            entry = self._table[key] = (version, expression, wanted)
        if entry[2] is None:
            raise Refused(
                ResponseCode.FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!",
            )
        return self._allowed(expression_type, entry[2])

    def _allowed(self, expression_type: str, wanted: RecordFilter) -> RecordFilter:
        if not self.enabled:
            raise Refused(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type))
        return wanted
