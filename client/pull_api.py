"""PULL_MESSAGE for every consumer: build the request, read the answer, decode the body.

Shared by the push consumer's pull loops and the pull / lite-pull consumers
(RocketMQ's ``PullAPIWrapper``). The body of a found pull is back-to-back stored
records (docs/protocol.md); :func:`decode_messages` turns them into
:class:`~rocklet.client.message.MessageExt` with
:class:`~rocklet.protocol.records.RecordScanner` (a compiled loop when built, setting each
message's slots directly; properties stay raw until read), drops records whose tag the
subscription does not want (the broker filters by tag hash, which collides, so clients
re-check the string, as Java and C++ do), and restores the original topic of retried
messages (``resetRetryAndNamespace``).
"""

from __future__ import annotations

import enum
from collections.abc import Set
from dataclasses import dataclass
from typing import Final, Protocol

from rocklet.client.errors import error_for_code
from rocklet.client.message import MessageExt
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode, SerializeType
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.base import Header
from rocklet.protocol.headers.consumer import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    SearchOffsetRequestHeader,
)
from rocklet.protocol.headers.pull import (
    PullMessageResponseHeader,
    PullSysFlag,
    pull_request_fields,
)
from rocklet.protocol.message import decode_message
from rocklet.protocol.properties import Prop
from rocklet.protocol.records import LazyProperties, RecordScanner
from rocklet.protocol.sql92 import TAG

__all__ = [
    "LazyProperties",
    "PullInvoker",
    "PullResult",
    "PullStatus",
    "RawPullResult",
    "decode_messages",
    "max_offset",
    "min_offset",
    "pull_request",
    "read_pull_response",
    "read_pull_response_raw",
    "search_offset",
]

# Plain ints: ``int & IntFlag`` goes through enum machinery, slow on a per-request path.
_SUBSCRIPTION: Final = int(PullSysFlag.SUBSCRIPTION)
_COMMIT_OFFSET: Final = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND: Final = int(PullSysFlag.SUSPEND)


class PullStatus(enum.Enum):
    """What a pull found (``PullStatus.java``)."""

    FOUND = "FOUND"  #: messages (possibly all filtered out on the client)
    NO_NEW_MSG = "NO_NEW_MSG"  #: caught up, after the long-poll hold
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  #: everything scanned was filtered out
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  #: the offset is outside the queue


_STATUS_BY_CODE: Final = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's outcome.

    Attributes:
        status: What was found.
        next_begin_offset: Where the next pull of this queue starts.
        min_offset: The queue's smallest stored offset.
        max_offset: The queue's next offset to be written.
        messages: The messages that match the subscription, in offset order.
        suggest_which_broker_id: The broker id of its group the broker says to pull
            this queue from next (0, the master, unless ``slaveReadEnable``).
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    suggest_which_broker_id: int = 0


@dataclass(frozen=True, slots=True)
class RawPullResult:
    """One pull's outcome with the records left undecoded (:func:`read_pull_response_raw`).

    Attributes:
        status: What was found.
        next_begin_offset: Where the next pull of this queue starts.
        min_offset: The queue's smallest stored offset.
        max_offset: The queue's next offset to be written.
        body: The back-to-back stored records as the broker sent them, not filtered by
            tag on this side (empty unless ``status`` is FOUND).
        suggest_which_broker_id: The broker id of its group to pull this queue from next.
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes
    suggest_which_broker_id: int = 0


class PullInvoker(Protocol):
    """The slice of the client instance a pull needs."""

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request to ``addr`` and return the answer."""
        ...


def pull_request(
    group: str,
    mq: MessageQueue,
    offset: int,
    max_nums: int,
    *,
    subscription: str | None,
    commit_offset: int | None = None,
    suspend_ms: int = 0,
    sub_version: int = 0,
    expression_type: str = TAG,
) -> RemotingCommand:
    """Build a PULL_MESSAGE request.

    The subscription always travels with the pull (FLAG_SUBSCRIPTION), as the C++
    client and ali-ons do, so the broker never depends on our heartbeat having
    arrived first.

    Args:
        group: The consumer group.
        mq: The queue.
        offset: The first queue offset wanted.
        max_nums: Most messages wanted.
        subscription: The tag expression or SQL92 selector (``None`` for everything).
        commit_offset: Piggy-backed commit of this offset (FLAG_COMMIT_OFFSET), or
            ``None``.
        suspend_ms: Long-poll hold the broker may apply (FLAG_SUSPEND); 0 for none.
        sub_version: The subscription's version.
        expression_type: ``"TAG"`` or ``"SQL92"`` (sent only when not a tag
            expression, as tag pulls have always been).

    Returns:
        The request.
    """
    flags = _SUBSCRIPTION
    commit = 0
    if commit_offset is not None and commit_offset > 0:
        flags |= _COMMIT_OFFSET
        commit = commit_offset
    if suspend_ms > 0:
        flags |= _SUSPEND
    # PullMessageRequestHeader's extFields, built directly: one per pull.
    fields = pull_request_fields(
        group,
        mq.topic,
        mq.queue_id,
        offset,
        max_nums,
        flags,
        commit,
        suspend_ms,
        subscription or "*",
        sub_version,
    )
    if expression_type != TAG:
        fields["expressionType"] = expression_type
    # The binary header, as sends use: compiled at both ends (the answer comes back in kind).
    return RemotingCommand(
        RequestCode.PULL_MESSAGE, ext_fields=fields, serialize_type=SerializeType.ROCKETMQ
    )


def read_pull_response(
    answer: RemotingCommand,
    broker_name: str,
    *,
    tags: Set[str] | None = None,
    retry_topic: str | None = None,
    addr: str | None = None,
) -> PullResult:
    """Interpret a PULL_MESSAGE answer.

    Args:
        answer: The broker's answer.
        broker_name: The broker the queue belongs to (set on each message).
        tags: Wanted tags, or ``None`` for all.
        retry_topic: ``%RETRY%<group>`` for push consumers: messages of that topic get
            their original topic back from RETRY_TOPIC.
        addr: The broker's address, for errors.

    Returns:
        The result.

    Raises:
        BrokerError: The broker answered with an error code.
        MessageFormatError: The body is not well-formed records.
    """
    status = _STATUS_BY_CODE.get(answer.code)  # type: ignore[call-overload]
    if status is None:
        raise error_for_code(answer.code, answer.remark, addr=addr)
    header = PullMessageResponseHeader.from_ext_fields(answer.ext_fields)
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND and answer.body:
        messages = decode_messages(answer.body, broker_name, tags=tags, retry_topic=retry_topic)
    return PullResult(
        status,
        header.next_begin_offset,
        header.min_offset,
        header.max_offset,
        messages,
        header.suggest_which_broker_id,
    )


def read_pull_response_raw(answer: RemotingCommand, *, addr: str | None = None) -> RawPullResult:
    """Interpret a PULL_MESSAGE answer, leaving its records undecoded.

    For readers that decode the records themselves (the Spark connector builds
    columns straight from them); they must re-check the tag filter on their side.

    Args:
        answer: The broker's answer.
        addr: The broker's address, for errors.

    Returns:
        The result, with the raw body.

    Raises:
        BrokerError: The broker answered with an error code.
    """
    status = _STATUS_BY_CODE.get(answer.code)  # type: ignore[call-overload]
    if status is None:
        raise error_for_code(answer.code, answer.remark, addr=addr)
    header = PullMessageResponseHeader.from_ext_fields(answer.ext_fields)
    body = answer.body if status is PullStatus.FOUND and answer.body else b""
    return RawPullResult(
        status,
        header.next_begin_offset,
        header.min_offset,
        header.max_offset,
        body if type(body) is bytes else bytes(body),
        header.suggest_which_broker_id,
    )


_scanner: Final = RecordScanner(MessageExt)


def decode_messages(
    data: bytes,
    broker_name: str,
    *,
    tags: Set[str] | None = None,
    retry_topic: str | None = None,
) -> list[MessageExt]:
    """Decode back-to-back stored records into messages, filtering by tag.

    The common records go through :class:`~rocklet.protocol.records.RecordScanner`
    (compiled when built); one with IPv6 hosts or a compressed body is decoded whole.

    Args:
        data: The records (a pull body).
        broker_name: Set on every message.
        tags: Keep only messages whose TAGS is one of these; ``None`` keeps all.
        retry_topic: Messages of this topic get the topic named by their RETRY_TOPIC
            property.

    Returns:
        The kept messages, in order.

    Raises:
        MessageFormatError: A record is malformed or truncated.
    """
    if type(data) is not bytes:
        data = bytes(data)
    out, pos = _scanner.scan(data, 0, broker_name)
    end_of_data = len(data)
    while pos < end_of_data:
        # An unusual record (IPv6 hosts, compressed body): the general decoder.
        stored = decode_message(data, pos)
        out.append(MessageExt.from_stored(stored, broker_name=broker_name))
        more, pos = _scanner.scan(data, pos + stored.size, broker_name)
        out += more
    if tags is not None:
        out = [m for m in out if m.properties.get(Prop.TAGS) in tags]
    if retry_topic is not None:
        for msg in out:
            if msg.topic == retry_topic:
                msg.topic = msg.properties.get(Prop.RETRY_TOPIC, retry_topic)
    return out


async def _offset_query(
    invoker: PullInvoker, addr: str, code: RequestCode, header: Header, timeout_s: float | None
) -> int:
    answer = await invoker.invoke(
        addr, RemotingCommand(code, ext_fields=header.to_ext_fields()), timeout_s
    )
    if answer.code != ResponseCode.SUCCESS:
        raise error_for_code(answer.code, answer.remark, addr=addr)
    # The max, min and search answers all carry one ``offset`` field.
    return GetMaxOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset


async def max_offset(
    invoker: PullInvoker, addr: str, mq: MessageQueue, timeout_s: float | None = None
) -> int:
    """GET_MAX_OFFSET (30): the queue's next offset to be written.

    Raises:
        BrokerError: The broker refused.
        TransportError: The broker could not be reached.
    """
    header = GetMaxOffsetRequestHeader(mq.topic, mq.queue_id)
    return await _offset_query(invoker, addr, RequestCode.GET_MAX_OFFSET, header, timeout_s)


async def min_offset(
    invoker: PullInvoker, addr: str, mq: MessageQueue, timeout_s: float | None = None
) -> int:
    """GET_MIN_OFFSET (31): the queue's smallest stored offset.

    Raises:
        BrokerError: The broker refused.
        TransportError: The broker could not be reached.
    """
    header = GetMinOffsetRequestHeader(mq.topic, mq.queue_id)
    return await _offset_query(invoker, addr, RequestCode.GET_MIN_OFFSET, header, timeout_s)


async def search_offset(
    invoker: PullInvoker,
    addr: str,
    mq: MessageQueue,
    timestamp_ms: int,
    timeout_s: float | None = None,
) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the first offset stored at or after a time.

    Raises:
        BrokerError: The broker refused.
        TransportError: The broker could not be reached.
    """
    header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
    code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
    return await _offset_query(invoker, addr, code, header, timeout_s)
