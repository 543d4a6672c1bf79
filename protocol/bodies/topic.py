"""Topic configuration bodies: ``TopicConfig``, ``DataVersion`` and their wrapper.

``TopicConfigSerializeWrapper`` is the GET_ALL_TOPIC_CONFIG (21) answer and the core of
a broker's registration (docs/protocol.md)::

    {"dataVersion":{"counter":N,"timestamp":ms},
     "topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,
         "topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}

The same JSON is RocketMQ's ``config/topics.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_bool,
    get_int,
    get_map,
    get_str,
    parse_object,
)
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.errors import BodyError

__all__ = ["DataVersion", "TopicConfig", "TopicConfigSerializeWrapper"]

#: ``TopicFilterType`` values; only SINGLE_TAG is used in practice.
TOPIC_FILTER_TYPES: Final = frozenset({"SINGLE_TAG", "MULTI_TAG"})
#: ``TopicConfig.defaultReadQueueNums`` / ``defaultWriteQueueNums``.
DEFAULT_QUEUE_NUMS: Final = 16


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's configuration on a broker (``common/TopicConfig.java``)."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = Perm.READ | Perm.WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, members in fastjson's order."""
        return {
            "order": self.order,
            "perm": int(self.perm),
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members take Java's defaults.

        Raises:
            BodyError: ``topicName`` is missing or a member is ill-typed.
        """
        what = "TopicConfig"
        data = as_object(obj, what)
        return cls(
            topic_name=get_str(data, "topicName", what),
            read_queue_nums=get_int(data, "readQueueNums", what, DEFAULT_QUEUE_NUMS),
            write_queue_nums=get_int(data, "writeQueueNums", what, DEFAULT_QUEUE_NUMS),
            perm=get_int(data, "perm", what, Perm.READ | Perm.WRITE),
            topic_filter_type=get_str(data, "topicFilterType", what, "SINGLE_TAG"),
            topic_sys_flag=get_int(data, "topicSysFlag", what, 0),
            order=get_bool(data, "order", what, False),
        )

    def encode(self) -> str:
        """The space-separated form of compressed registrations (``TopicConfig.encode``).

        ``"name read write perm filterType"``; ``topicSysFlag`` and ``order`` are not
        carried, exactly as in Java.
        """
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{int(self.perm)} {self.topic_filter_type}"
        )

    @classmethod
    def decode(cls, text: str) -> Self:
        """Parse the space-separated form (``TopicConfig.decode``).

        Args:
            text: ``"name read write perm filterType"``.

        Returns:
            The config, with ``topicSysFlag`` 0 and ``order`` false.

        Raises:
            BodyError: Not five fields, a non-numeric count, or an unknown filter type.
        """
        parts = text.split(" ")
        if len(parts) != 5:
            raise BodyError(f"encoded TopicConfig needs 5 space-separated fields: {text!r}")
        name, read, write, perm, filter_type = parts
        if filter_type not in TOPIC_FILTER_TYPES:
            raise BodyError(f"encoded TopicConfig has an unknown filter type: {text!r}")
        try:
            return cls(name, int(read), int(write), int(perm), filter_type)
        except ValueError:
            raise BodyError(f"encoded TopicConfig has a non-numeric field: {text!r}") from None


@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version stamp of a broker's topic table (``common/DataVersion.java``)."""

    counter: int = 0
    timestamp: int = 0

    def next_version(self, timestamp_ms: int) -> DataVersion:
        """The version after a change (``DataVersion.nextVersion``).

        Args:
            timestamp_ms: The change time, epoch milliseconds.

        Returns:
            A version with the counter incremented.
        """
        return replace(self, counter=self.counter + 1, timestamp=timestamp_ms)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members are 0.

        Raises:
            BodyError: A member is not an integer.
        """
        data = as_object(obj, "DataVersion")
        return cls(
            counter=get_int(data, "counter", "DataVersion", 0),
            timestamp=get_int(data, "timestamp", "DataVersion", 0),
        )

    def to_json(self) -> bytes:
        """Serialize as ``{"counter":N,"timestamp":ms}``."""
        return encode(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the JSON form.

        Raises:
            BodyError: Not a valid DataVersion.
        """
        return cls.from_dict(parse_object(data, "DataVersion"))


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    """A broker's topic table with its version."""

    topic_config_table: Mapping[str, TopicConfig]
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, members in fastjson's order."""
        return {
            "dataVersion": self.data_version.to_dict(),
            "topicConfigTable": {
                name: config.to_dict() for name, config in self.topic_config_table.items()
            },
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object.

        Raises:
            BodyError: A member is missing or ill-typed.
        """
        what = "TopicConfigSerializeWrapper"
        data = as_object(obj, what)
        table = {
            name: TopicConfig.from_dict(config)
            for name, config in get_map(data, "topicConfigTable", what).items()
        }
        return cls(table, DataVersion.from_dict(get_map(data, "dataVersion", what)))

    def to_json(self) -> bytes:
        """Serialize as the GET_ALL_TOPIC_CONFIG body."""
        return encode(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the GET_ALL_TOPIC_CONFIG body.

        Raises:
            BodyError: Not a valid TopicConfigSerializeWrapper.
        """
        return cls.from_dict(parse_object(data, "TopicConfigSerializeWrapper"))
