"""Admin statistics bodies keyed by MessageQueue: ``ConsumeStats`` and ``TopicStatsTable``.

* GET_CONSUME_STATS (208) answer (``admin/ConsumeStats.java``)::

      {"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:
          {"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000}}}

* GET_TOPIC_STATS_INFO (202) answer (``admin/TopicStatsTable.java``)::

      {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:
          {"lastUpdateTimestamp":1700000000000,"maxOffset":10,"minOffset":0}}}

The map keys are written as fastjson does by default: the MessageQueue's JSON object,
unquoted (see :mod:`rocklet.protocol.bodies.queue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocklet.protocol.bodies._fields import (
    ScalarSpec,
    encode,
    get_float,
    parse_object,
    read_scalars,
    write_scalars,
)
from rocklet.protocol.bodies.queue import MessageQueue, decode_mq_map, encode_mq_map

__all__ = ["ConsumeStats", "OffsetWrapper", "TopicOffset", "TopicStatsTable"]

_OFFSET_WRAPPER: Final[tuple[ScalarSpec, ...]] = (
    ("broker_offset", "brokerOffset", int),
    ("consumer_offset", "consumerOffset", int),
    ("last_timestamp", "lastTimestamp", int),
)
_TOPIC_OFFSET: Final[tuple[ScalarSpec, ...]] = (
    ("min_offset", "minOffset", int),
    ("max_offset", "maxOffset", int),
    ("last_update_timestamp", "lastUpdateTimestamp", int),
)


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """A group's progress on one queue (``admin/OffsetWrapper.java``)."""

    broker_offset: int = 0  #: the queue's max offset
    consumer_offset: int = 0  #: the group's committed offset
    last_timestamp: int = 0  #: store time of the last consumed message, ms

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return write_scalars(self, _OFFSET_WRAPPER)

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members are 0.

        Raises:
            BodyError: Not an object or a member is not a number.
        """
        return cls(**read_scalars(obj, "OffsetWrapper", _OFFSET_WRAPPER))


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """A consumer group's progress per queue, and its consume rate."""

    offset_table: Mapping[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    @property
    def total_diff(self) -> int:
        """Messages not yet consumed over all queues (``ConsumeStats.computeTotalDiff``)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def to_json(self) -> bytes:
        """Serialize as Java does (MessageQueue keys unquoted)."""
        return encode(
            {
                "consumeTps": float(self.consume_tps),
                "offsetTable": encode_mq_map(self.offset_table, OffsetWrapper.to_dict),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body (object keys or JSON-text string keys).

        Raises:
            BodyError: Not a valid ConsumeStats.
        """
        what = cls.__name__
        obj = parse_object(data, what, object_keys=True)
        return cls(
            offset_table=decode_mq_map(obj, "offsetTable", what, OffsetWrapper.from_dict),
            consume_tps=get_float(obj, "consumeTps", what, 0.0),
        )


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """A queue's offset range (``admin/TopicOffset.java``)."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0  #: store time of the queue's last message, ms

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return write_scalars(self, _TOPIC_OFFSET)

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members are 0.

        Raises:
            BodyError: Not an object or a member is not a number.
        """
        return cls(**read_scalars(obj, "TopicOffset", _TOPIC_OFFSET))


@dataclass(frozen=True, slots=True)
class TopicStatsTable:
    """Offset ranges of every queue of a topic on one broker."""

    offset_table: Mapping[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Serialize as Java does (MessageQueue keys unquoted)."""
        return encode({"offsetTable": encode_mq_map(self.offset_table, TopicOffset.to_dict)})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid TopicStatsTable.
        """
        what = cls.__name__
        obj = parse_object(data, what, object_keys=True)
        return cls(decode_mq_map(obj, "offsetTable", what, TopicOffset.from_dict))
