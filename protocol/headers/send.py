"""SEND_MESSAGE family headers (docs/protocol.md).

The same request header travels in two spellings:

* V1 (codes 10 and 324): descriptive keys (``producerGroup``, ``topic``...). The only
  form the C++ client sends, with numbers as JSON numbers and booleans as "0"/"1".
* V2 (codes 310, 320 and 325): single-letter keys ``a``..``n``
  (``SendMessageRequestHeaderV2``), which Java and ali-ons send by default.

:func:`parse_send_header` turns either into one :class:`SendMessageRequestHeader`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final, Self

from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import HeaderError
from rocklet.protocol.headers.base import (
    INT32,
    NON_NEGATIVE_INT32,
    NON_NEGATIVE_INT64,
    Header,
    wire,
)

__all__ = [
    "MESSAGE_SYS_FLAG_BITS",
    "SEND_CODES",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "parse_send_header",
    "send_response_fields",
]

#: The message ``sysFlag`` bits a client may send (``MessageSysFlag``): compressed,
#: multi tags, the transaction type, the two IPv6 host bits and RocketMQ 5's unwrap,
#: inner-batch and compression-type bits, which 5.x clients set on compressed bodies.
MESSAGE_SYS_FLAG_BITS: Final = 0x7FF
_SYS_FLAG: Final = (0, MESSAGE_SYS_FLAG_BITS)

#: Codes whose header is the send header, and whether it is the V2 spelling.
SEND_CODES: Final = {
    RequestCode.SEND_MESSAGE: False,
    RequestCode.SEND_REPLY_MESSAGE: False,
    RequestCode.SEND_MESSAGE_V2: True,
    RequestCode.SEND_BATCH_MESSAGE: True,
    RequestCode.SEND_REPLY_MESSAGE_V2: True,
}


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader(Header):
    """``SendMessageRequestHeader``: a producer's send (V1 keys).

    ``batch`` and ``unit_mode`` accept "true"/"false" in any case and "1"/"0": the
    C++ client marks its batches with ``batch="1"``, which Java's
    ``Boolean.parseBoolean`` would read as false (rocketmq-client-cpp #363, #447).
    """

    producer_group: str = wire("producerGroup")
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    default_topic_queue_nums: int = wire("defaultTopicQueueNums", bounds=INT32)
    #: Negative lets the broker pick a queue (RocketMQ's ``randomQueueId``).
    queue_id: int = wire("queueId", bounds=INT32)
    sys_flag: int = wire("sysFlag", bounds=_SYS_FLAG)
    born_timestamp: int = wire("bornTimestamp", bounds=NON_NEGATIVE_INT64)
    flag: int = wire("flag", bounds=INT32)
    properties: str | None = wire("properties", None)
    reconsume_times: int = wire("reconsumeTimes", 0, bounds=NON_NEGATIVE_INT32)
    unit_mode: bool = wire("unitMode", False)
    batch: bool = wire("batch", False)
    #: Sent by Java for retry-topic sends; ``None`` when absent.
    max_reconsume_times: int | None = wire("maxReconsumeTimes", None, bounds=INT32)
    #: 4.9.7's target broker name (``RpcRequestHeader.bname``; V2 key ``n``).
    broker_name: str | None = wire("bname", None)

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """The same header with the V2 single-letter keys (``createSendMessageRequestHeaderV2``)."""
        return SendMessageRequestHeaderV2(**{v2: getattr(self, v1) for v2, v1 in _V2_TO_V1})


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2(Header):
    """``SendMessageRequestHeaderV2``: the send header with single-letter keys."""

    a: str = wire("a")  #: producerGroup
    b: str = wire("b")  #: topic
    c: str = wire("c")  #: defaultTopic
    d: int = wire("d", bounds=INT32)  #: defaultTopicQueueNums
    e: int = wire("e", bounds=INT32)  #: queueId
    f: int = wire("f", bounds=_SYS_FLAG)  #: sysFlag
    g: int = wire("g", bounds=NON_NEGATIVE_INT64)  #: bornTimestamp
    h: int = wire("h", bounds=INT32)  #: flag
    i: str | None = wire("i", None)  #: properties
    j: int = wire("j", 0, bounds=NON_NEGATIVE_INT32)  #: reconsumeTimes
    k: bool = wire("k", False)  #: unitMode
    #: maxReconsumeTimes (consumeRetryTimes)
    l: int | None = wire("l", None, bounds=INT32)  # noqa: E741
    m: bool = wire("m", False)  #: batch
    n: str | None = wire("n", None)  #: brokerName (4.9.7)

    def to_v1(self) -> SendMessageRequestHeader:
        """The same header with the V1 keys (``createSendMessageRequestHeaderV1``)."""
        return SendMessageRequestHeader(**{v1: getattr(self, v2) for v2, v1 in _V2_TO_V1})

    @classmethod
    def from_v1(cls, header: SendMessageRequestHeader) -> Self:
        """Build the V2 spelling of a V1 header (``createSendMessageRequestHeaderV2``)."""
        return cls(**{v2: getattr(header, v1) for v2, v1 in _V2_TO_V1})


#: V2 attribute (= its wire key) to V1 attribute (``SendMessageRequestHeaderV2`` comments).
_V2_TO_V1: Final = (
    ("a", "producer_group"),
    ("b", "topic"),
    ("c", "default_topic"),
    ("d", "default_topic_queue_nums"),
    ("e", "queue_id"),
    ("f", "sys_flag"),
    ("g", "born_timestamp"),
    ("h", "flag"),
    ("i", "properties"),
    ("j", "reconsume_times"),
    ("k", "unit_mode"),
    ("l", "max_reconsume_times"),
    ("m", "batch"),
    ("n", "broker_name"),
)
#: Reads a V2 header's one-letter keys straight into the V1 class (one object, not two).
_parse_v2_as_v1 = SendMessageRequestHeader.parser_for_keys({v1: v2 for v2, v1 in _V2_TO_V1})


def parse_send_header(cmd: RemotingCommand) -> SendMessageRequestHeader:
    """Read the send header of any send-family request.

    Codes 10 and 324 carry V1 keys; 310, 320 and 325 carry V2 keys. Code 320
    (SEND_BATCH_MESSAGE) is a batch whatever its ``m`` key says, because Java's broker
    dispatches batches on the code.

    Args:
        cmd: The request.

    Returns:
        The header in its V1 form.

    Raises:
        HeaderError: The code is not a send code, or a field is missing or ill-typed.
    """
    # An int finds its IntEnum key (same hash, equal): no RequestCode(...) per request.
    is_v2 = SEND_CODES.get(cmd.code)  # type: ignore[call-overload]
    if is_v2 is None:
        raise HeaderError(f"request code {cmd.code} does not carry a send header")
    if not is_v2:
        return SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    header = _parse_v2_as_v1(cmd.ext_fields)
    if cmd.code == RequestCode.SEND_BATCH_MESSAGE and not header.batch:
        header = dataclasses.replace(header, batch=True)
    return header


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(Header):
    """``SendMessageResponseHeader`` plus the two extFields Java's broker adds.

    ``msgId`` is the offset msgId (comma-joined ids for a batch); Java's client unboxes
    ``queueId`` and ``queueOffset`` and reads ``MSG_REGION`` without a null check, and
    the C++ client reads only string values (docs/protocol.md), so all
    are always emitted as strings.
    """

    msg_id: str = wire("msgId")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset")
    transaction_id: str | None = wire("transactionId", None)
    #: ``MessageConst.PROPERTY_MSG_REGION``; the broker's ``regionId``.
    msg_region: str = wire("MSG_REGION", "DefaultRegion")
    #: ``MessageConst.PROPERTY_TRACE_SWITCH``; the broker's ``traceOn``.
    trace_on: bool = wire("TRACE_ON", True)


def send_response_fields(msg_id: str, queue_id: int, queue_offset: int) -> dict[str, str]:
    """The extFields of a successful send's answer with the default region and trace.

    The same dict as ``SendMessageResponseHeader(msg_id, queue_id,
    queue_offset).to_ext_fields()``, built directly: the broker answers every send
    with it.

    Args:
        msg_id: The offset msgId (comma-joined for a batch).
        queue_id: The queue the producer is told.
        queue_offset: The (first) message's queue offset.

    Returns:
        Key to string value.
    """
    return {
        "msgId": msg_id,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
