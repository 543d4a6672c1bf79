"""The wire form of a send: SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE requests, and answers.

Pure functions the :class:`~rocklet.client.producer.Producer` calls on every send
(``MQClientAPIImpl.sendMessage`` and ``processSendResponse``): the request with its
V2 header, a batch body, the :class:`~rocklet.client.message.SendResult` read from the
answer, and the error a send that failed every attempt raises. They run once per
message, so they are written for speed (see the comments).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rocklet.client.errors import InvalidMessageError, RequestTimeoutError, error_for_code
from rocklet.client.message import (
    Message,
    SendResult,
    SendStatus,
    UniqKeyGenerator,
    send_properties,
    validate_message,
)
from rocklet.client.routes import DEFAULT_TOPIC_QUEUE_NUMS
from rocklet.protocol import compiled
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import ResponseCode, SerializeType
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.send import SendMessageResponseHeader
from rocklet.protocol.names import AUTO_CREATE_TOPIC, check_topic_name
from rocklet.protocol.properties import MAX_PROPERTIES_SIZE

__all__ = [
    "BATCH_PROPERTIES",
    "UNIQ_COUNTER_MASK",
    "EncodedBatch",
    "check_encoded_batch",
    "encode_batch",
    "read_send_result",
    "reserve_uniq_keys",
    "send_command",
    "send_failure",
    "uniq_key",
]

#: Java's MessageBatch carries WAIT but no UNIQ_KEY of its own (sendKernelImpl).
BATCH_PROPERTIES: Final = "WAIT\x01true"

#: Successful send codes and the status they mean (``MQClientAPIImpl.processSendResponse``).
_STATUS: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
#: ``defaultTopicQueueNums`` as its header text.
_DEFAULT_QUEUE_NUMS: Final = str(DEFAULT_TOPIC_QUEUE_NUMS)
#: A batch item's fixed part (protocol.batch): total size, magic, body CRC (clients
#: send 0 for both), flag, body length; then the body, an int16 properties length and
#: the properties.
_BATCH_ITEM_HEAD: Final = struct.Struct(">iiiii")
_BATCH_ITEM_OVERHEAD: Final = 22
_I16: Final = struct.Struct(">h")
#: A UNIQ_KEY's counter part: 12 hex digits (``UniqKeyGenerator.next``).
UNIQ_COUNTER_MASK: Final = 0xFFFFFFFFFFFF
#: The compiled twin of encode_batch's loop (None: the Python loop serves).
_speedups = compiled.load("rocklet.protocol._speedups")


def send_command(
    code: int,
    group: str,
    mq: MessageQueue,
    body: bytes,
    props: str,
    sys_flag: int,
    flag: int,
    born_ms: int,
    *,
    batch: bool,
    any_queue: bool,
    serialize_type: SerializeType,
) -> RemotingCommand:
    """The send request for one message (or one batch) to ``mq``.

    Args:
        code: SEND_MESSAGE_V2, SEND_REPLY_MESSAGE_V2 or SEND_BATCH_MESSAGE.
        group: The producer group.
        mq: The queue.
        body: The (possibly compressed, or batch-encoded) body.
        props: The properties text.
        sys_flag: The message's sysFlag.
        flag: The message's flag.
        born_ms: The born timestamp, wall-clock ms.
        batch: Whether ``body`` is a batch.
        any_queue: Let the broker pick the queue (queueId -1).
        serialize_type: How the header is serialized.

    Returns:
        The request.
    """
    # SendMessageRequestHeaderV2's single-letter keys, built as one dict literal:
    # this runs per send, and the typed header costs ten times as much.
    fields = {
        "a": group,
        "b": mq.topic,
        "c": AUTO_CREATE_TOPIC,
        "d": _DEFAULT_QUEUE_NUMS,
        # -1: "any queue", which both RocketMQ's and Rocklet's brokers honour.
        "e": "-1" if any_queue else str(mq.queue_id),
        "f": str(sys_flag),
        "g": str(born_ms),
        "h": str(flag),
        "i": props,
        "j": "0",
        "k": "false",
        "m": "true" if batch else "false",
    }
    return RemotingCommand(code, ext_fields=fields, body=body, serialize_type=serialize_type)


def encode_batch(
    msgs: Sequence[Message], ids: UniqKeyGenerator, max_size: int
) -> tuple[bytes, list[str]]:
    """Check the messages of a batch and write its body (protocol.batch's layout).

    A batch of plain messages (no delay, no user properties) is written by the compiled
    twin when it is built; anything else, and every error, by the Python loop below.

    Args:
        msgs: Messages of one topic, without delay levels.
        ids: Makes each message's UNIQ_KEY.
        max_size: Largest message body, and largest batch body.

    Returns:
        The batch body and the messages' UNIQ_KEYs.

    Raises:
        InvalidMessageError: The batch or a message in it is not allowed.
        MessageFormatError: A message's properties are too long.
    """
    if not msgs:
        raise InvalidMessageError("a batch needs at least one message")
    topic = msgs[0].topic
    validate_message(msgs[0], max_size)
    _check_separators(msgs, max_size)
    if _speedups is not None:
        prefix, counter = ids.parts()
        fast = _speedups.encode_send_batch(msgs, topic, prefix, counter, max_size)
        if fast is not None:
            fast_body: bytes = fast[0]
            if len(fast_body) > max_size:
                raise InvalidMessageError(f"the batch is {len(fast_body)} bytes; max {max_size}")
            return fast_body, fast[1]
    next_id = ids.next
    uniqs: list[str] = []
    # The body is written as the messages are checked: one pass, no BatchItem per
    # message. The topic was checked once above; a message's other checks run only
    # when it could fail them.
    body = bytearray()
    for msg in msgs:
        if msg.topic != topic:
            validate_message(msg, max_size)  # an invalid topic is reported as such
            raise InvalidMessageError("every message of a batch must have the same topic")
        payload = msg.body
        if not payload or len(payload) > max_size or msg.delay_level or msg.properties:
            validate_message(msg, max_size)
            if msg.delay_level > 0:
                raise InvalidMessageError("messages of a batch cannot be delayed")
        uniq = next_id()
        uniqs.append(uniq)
        props = send_properties(msg, uniq).encode()
        if len(props) > MAX_PROPERTIES_SIZE:
            raise MessageFormatError(
                f"properties are {len(props)} bytes; the limit is {MAX_PROPERTIES_SIZE}"
            )
        body += _BATCH_ITEM_HEAD.pack(
            _BATCH_ITEM_OVERHEAD + len(payload) + len(props), 0, 0, msg.flag, len(payload)
        )
        body += payload
        body += _I16.pack(len(props))
        body += props
    if len(body) > max_size:
        raise InvalidMessageError(f"the batch is {len(body)} bytes; max {max_size}")
    return bytes(body), uniqs


def _check_separators(msgs: Sequence[Message], max_size: int) -> None:
    """Refuse a batch whose tags or keys hold a property separator (0x01, 0x02).

    Neither encoder checks them (the compiled one writes tags and keys as given), so
    the batch's tags and keys are searched once, joined: far cheaper than a check per
    message, and a hit leaves it to :func:`validate_message` to name the message.
    """
    try:
        text = "".join([m.tags or "" for m in msgs]) + "".join(["".join(m.keys) for m in msgs])
    except TypeError:
        text = "\x01"  # a tag or key of another type: validate_message names it
    if "\x01" in text or "\x02" in text:
        for msg in msgs:
            validate_message(msg, max_size)


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A SEND_BATCH_MESSAGE body its caller encoded (``Producer.send_encoded_batch``).

    Attributes:
        topic: The topic of every message in it.
        body: The batch body (protocol.batch's layout), each message's properties text
            holding its UNIQ_KEY first, as :func:`encode_batch` writes them; the keys
            reserved with :func:`reserve_uniq_keys` from the sending producer.
        msg_ids: The messages' UNIQ_KEYs comma-joined, in body order (the result's
            ``msg_id``).
        count: How many messages the body holds.
    """

    topic: str
    body: bytes
    msg_ids: str
    count: int


def uniq_key(prefix: str, number: int) -> str:
    """The UNIQ_KEY ``UniqKeyGenerator.next`` makes of a prefix and a counter number."""
    return prefix + "%012X" % (number & UNIQ_COUNTER_MASK)


def reserve_uniq_keys(ids: UniqKeyGenerator, n: int) -> tuple[str, int]:
    """Take ``n`` consecutive UNIQ_KEYs from a generator, for a body its caller encodes.

    Args:
        ids: The generator (a producer's).
        n: How many, at least 1.

    Returns:
        ``(prefix, first)``: the i-th key is ``uniq_key(prefix, first + i)``, exactly
        what ``n`` calls of ``ids.next()`` would have returned.

    Raises:
        ValueError: ``n`` is below 1.
    """
    if n < 1:
        raise ValueError(f"reserve at least one UNIQ_KEY, not {n}")
    prefix, counter = ids.parts()
    first = next(counter)
    if n > 1:
        # Past the other n - 1 numbers in one call (C-speed, no key made).
        last = next(itertools.islice(counter, n - 2, None))
        assert last == first + n - 1, "UNIQ_KEY numbers are consecutive"
    return prefix, first


def check_encoded_batch(batch: EncodedBatch, max_size: int) -> None:
    """Check what a producer can of a batch its caller encoded, before sending it.

    The topic, and the body's size (the broker refuses larger); each message's own
    limits are the encoder's to keep (as :func:`encode_batch` keeps them).

    Raises:
        InvalidMessageError: The topic, the body or the count is not allowed.
    """
    if (reason := check_topic_name(batch.topic)) is not None:
        raise InvalidMessageError(reason)
    if batch.topic == AUTO_CREATE_TOPIC:
        raise InvalidMessageError(
            f"the topic {AUTO_CREATE_TOPIC} is the auto-create template; send elsewhere"
        )
    if batch.count < 1 or not batch.body:
        raise InvalidMessageError("a batch needs at least one message")
    if len(batch.body) > max_size:
        raise InvalidMessageError(f"the batch is {len(batch.body)} bytes; max {max_size}")
    if batch.msg_ids.count(",") != batch.count - 1:
        raise InvalidMessageError(
            f"{batch.count} messages but not as many UNIQ_KEYs: {batch.msg_ids[:80]}"
        )


def read_send_result(
    answer: RemotingCommand, mq: MessageQueue, msg_id: str, addr: str, *, trust_queue_id: bool
) -> SendResult:
    """The send result in a broker's answer.

    Args:
        answer: The answer.
        mq: The queue the message was sent to.
        msg_id: Its UNIQ_KEY (a batch: the keys comma-joined).
        addr: The broker, for the error.
        trust_queue_id: Whether the answer's queue id names the queue used.

    Returns:
        The result.

    Raises:
        BrokerError: The answer is an error.
    """
    status = _STATUS.get(answer.code)
    if status is None:
        raise error_for_code(answer.code, answer.remark, addr=addr)
    header = SendMessageResponseHeader.from_ext_fields(answer.ext_fields)
    # The answer names the queue the broker used (it picks one for queueId -1). For a
    # half message RocketMQ names the real queue asked for, while Rocklet's broker
    # names RMQ_SYS_TRANS_HALF_TOPIC's queue 0: there, keep the queue we asked for.
    same = header.queue_id == mq.queue_id or not trust_queue_id
    return SendResult(
        status,
        msg_id,
        header.msg_id,
        mq if same else MessageQueue(mq.topic, mq.broker_name, header.queue_id),
        header.queue_offset,
        header.transaction_id,
        header.msg_region,
        header.trace_on,
    )


def send_failure(failures: list[BaseException], code: int, timeout_s: float) -> BaseException:
    """The error to raise for a send whose every attempt failed (or none started).

    Args:
        failures: Each attempt's failure, in order.
        code: The request code.
        timeout_s: The send budget.

    Returns:
        The last failure, noting the earlier ones; a timeout when there was none.
    """
    if not failures:
        return RequestTimeoutError(code=code, opaque=-1, timeout_s=timeout_s, peer=None)
    last = failures[-1]
    if len(failures) > 1:
        last.add_note(
            f"send failed {len(failures)} times: " + "; ".join(repr(f) for f in failures[:-1])
        )
    return last
