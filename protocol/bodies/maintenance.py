"""Bodies of the broker maintenance and client-tool admin codes.

* QUERY_CONSUME_QUEUE (321) answer: ``QueryConsumeQueueResponseBody`` (the queue's
  min and max index, the raw entries as ``ConsumeQueueData``, and the group's
  subscription when one was named).
* GET_ALL_PRODUCER_INFO (328) answer: ``ProducerTableInfo`` (producer group to a list of
  ``ProducerInfo``).
* CONSUME_MESSAGE_DIRECTLY (309), answered by a client: ``ConsumeMessageDirectlyResult``.

Members are those of the Java 4.9 classes (``common/protocol/body``), in fastjson's
alphabetical order, members that are null left out.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_opt_str,
    get_str,
    parse_object,
)
from rocklet.protocol.bodies.heartbeat import SubscriptionData
from rocklet.protocol.errors import BodyError

__all__ = [
    "CMResult",
    "ConsumeMessageDirectlyResult",
    "ConsumeQueueData",
    "ProducerInfo",
    "ProducerTableInfo",
    "QueryConsumeQueueResponseBody",
]


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    """One consume-queue entry as ``mqadmin queryCq`` prints it."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        out: dict[str, Any] = {}
        if self.bit_map is not None:
            out["bitMap"] = self.bit_map
        out["eval"] = self.eval
        if self.extend_data_json is not None:
            out["extendDataJson"] = self.extend_data_json
        if self.msg is not None:
            out["msg"] = self.msg
        out["physicOffset"] = self.physic_offset
        out["physicSize"] = self.physic_size
        out["tagsCode"] = self.tags_code
        return out

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object.

        Raises:
            BodyError: A member is missing or ill-typed.
        """
        what = "ConsumeQueueData"
        data = as_object(obj, what)
        return cls(
            physic_offset=get_int(data, "physicOffset", what),
            physic_size=get_int(data, "physicSize", what),
            tags_code=get_int(data, "tagsCode", what),
            extend_data_json=get_opt_str(data, "extendDataJson", what),
            bit_map=get_opt_str(data, "bitMap", what),
            eval=get_bool(data, "eval", what, False),
            msg=get_opt_str(data, "msg", what),
        )


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody:
    """QUERY_CONSUME_QUEUE's answer."""

    max_queue_index: int
    min_queue_index: int
    queue_data: tuple[ConsumeQueueData, ...] | None = None
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None

    def to_json(self) -> bytes:
        """Serialize."""
        out: dict[str, Any] = {}
        if self.filter_data is not None:
            out["filterData"] = self.filter_data
        out["maxQueueIndex"] = self.max_queue_index
        out["minQueueIndex"] = self.min_queue_index
        if self.queue_data is not None:
            out["queueData"] = [q.to_dict() for q in self.queue_data]
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_dict()
        return encode(out)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid QueryConsumeQueueResponseBody.
        """
        what = cls.__name__
        obj = parse_object(data, what)
        queues = obj.get("queueData")
        sub = obj.get("subscriptionData")
        return cls(
            max_queue_index=get_int(obj, "maxQueueIndex", what, 0),
            min_queue_index=get_int(obj, "minQueueIndex", what, 0),
            queue_data=None
            if queues is None
            else tuple(ConsumeQueueData.from_dict(q) for q in get_list(obj, "queueData", what)),
            subscription_data=None if sub is None else SubscriptionData.from_dict(sub),
            filter_data=get_opt_str(obj, "filterData", what),
        )


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer channel (``body/ProducerInfo.java``)."""

    client_id: str
    remote_ip: str  #: the peer as Java's ``SocketAddress.toString()``: ``/host:port``
    language: str  #: a ``LanguageCode`` name
    version: int
    last_update_timestamp: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "clientId": self.client_id,
            "language": self.language,
            "lastUpdateTimestamp": self.last_update_timestamp,
            "remoteIP": self.remote_ip,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object.

        Raises:
            BodyError: A member is missing or ill-typed.
        """
        what = "ProducerInfo"
        data = as_object(obj, what)
        return cls(
            client_id=get_str(data, "clientId", what),
            remote_ip=get_str(data, "remoteIP", what, ""),
            language=get_str(data, "language", what, "OTHER"),
            version=get_int(data, "version", what, 0),
            last_update_timestamp=get_int(data, "lastUpdateTimestamp", what, 0),
        )


@dataclass(frozen=True, slots=True)
class ProducerTableInfo:
    """GET_ALL_PRODUCER_INFO's answer: ``{"data":{group:[ProducerInfo...]}}``."""

    data: Mapping[str, tuple[ProducerInfo, ...]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Serialize."""
        return encode({"data": {g: [p.to_dict() for p in ps] for g, ps in self.data.items()}})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid ProducerTableInfo.
        """
        what = cls.__name__
        table = get_map(parse_object(data, what), "data", what)
        out: dict[str, tuple[ProducerInfo, ...]] = {}
        for group, items in table.items():
            if not isinstance(items, list):
                raise BodyError(f"{what} data[{group!r}] is not an array")
            out[group] = tuple(ProducerInfo.from_dict(p) for p in items)
        return cls(out)


class CMResult(enum.Enum):
    """How a directly consumed message went (``CMResult.java``)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    """A client's answer to CONSUME_MESSAGE_DIRECTLY."""

    consume_result: CMResult | None = None
    order: bool = False
    auto_commit: bool = True
    remark: str | None = None
    spent_time_mills: int = 0

    def to_json(self) -> bytes:
        """Serialize."""
        out: dict[str, Any] = {"autoCommit": self.auto_commit}
        if self.consume_result is not None:
            out["consumeResult"] = self.consume_result.value
        out["order"] = self.order
        if self.remark is not None:
            out["remark"] = self.remark
        out["spentTimeMills"] = self.spent_time_mills
        return encode(out)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid ConsumeMessageDirectlyResult.
        """
        what = cls.__name__
        obj = parse_object(data, what)
        name = get_opt_str(obj, "consumeResult", what)
        try:
            result = None if name is None else CMResult(name)
        except ValueError:
            raise BodyError(f"{what} consumeResult {name!r} is not a CMResult") from None
        return cls(
            consume_result=result,
            order=get_bool(obj, "order", what, False),
            auto_commit=get_bool(obj, "autoCommit", what, True),
            remark=get_opt_str(obj, "remark", what),
            spent_time_mills=get_int(obj, "spentTimeMills", what, 0),
        )
