"""``MessageQueue``, and the fastjson encoding of maps keyed by it.

Java serializes a ``Map<MessageQueue, V>`` (``ConsumeStats.offsetTable``,
``ConsumerRunningInfo.mqTable``, ``ResetOffsetBody.offsetTable``...) with fastjson's
default features, which write each key as the MessageQueue's own JSON object, unquoted:
``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``. fastjson reads that back, and so
does :func:`decode_mq_map`; it also reads the standard-JSON variant in which each key
is a string holding that JSON text (fastjson's ``WriteNonStringKeyAsString``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Self, TypeVar

from rocklet.protocol.bodies._fields import as_object, get_int, get_str
from rocklet.protocol.errors import BodyError
from rocklet.protocol.fastjson import RawJson

__all__ = ["MessageQueue", "decode_mq_map", "encode_mq_map"]

V = TypeVar("V")


class MessageQueue(NamedTuple):
    """One queue of a topic on one broker (``common/message/MessageQueue.java``)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON object Java writes, members in fastjson's (alphabetical) order."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object form.

        Args:
            obj: A decoded JSON value.

        Returns:
            The queue.

        Raises:
            BodyError: Not an object, or ``topic``/``brokerName``/``queueId`` missing.
        """
        mq = as_object(obj, "MessageQueue")
        return cls(
            get_str(mq, "topic", "MessageQueue"),
            get_str(mq, "brokerName", "MessageQueue"),
            get_int(mq, "queueId", "MessageQueue"),
        )

    def key_json(self) -> RawJson:
        """This queue as a fastjson map key: its compact JSON text, written unquoted."""
        return RawJson(json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False))

    @classmethod
    def from_key(cls, key: str) -> Self:
        """Read a map key holding the queue's JSON text.

        Args:
            key: The key, as returned by ``fastjson.loads(..., object_keys=True)``.

        Returns:
            The queue.

        Raises:
            BodyError: The key is not a MessageQueue's JSON text.
        """
        try:
            obj = json.loads(key)
        except (ValueError, RecursionError):
            raise BodyError(f"map key is not a MessageQueue object: {key[:80]!r}") from None
        return cls.from_dict(obj)


def encode_mq_map(
    table: Mapping[MessageQueue, V], value: Callable[[V], object]
) -> dict[RawJson, object]:
    """Build a MessageQueue-keyed map in fastjson's form, sorted by queue.

    Args:
        table: Queue to value.
        value: Turns a value into its JSON-ready form.

    Returns:
        A dict whose keys :func:`rocklet.protocol.fastjson.dumps` writes as unquoted objects.
    """
    return {mq.key_json(): value(table[mq]) for mq in sorted(table)}


def decode_mq_map(
    obj: Mapping[str, Any], key: str, what: str, value: Callable[[object], V]
) -> dict[MessageQueue, V]:
    """Read a MessageQueue-keyed map member (parsed with ``object_keys=True``).

    Args:
        obj: The enclosing JSON object.
        key: The member holding the map; absent or null means empty.
        what: The enclosing body's name, for error messages.
        value: Reads one value.

    Returns:
        Queue to value.

    Raises:
        BodyError: The member is not an object, or a key or value is malformed.
    """
    raw = obj.get(key)
    if raw is None:
        return {}
    table = as_object(raw, f"{what} member {key!r}")
    return {MessageQueue.from_key(k): value(v) for k, v in table.items()}
