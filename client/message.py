"""Messages as the SDK user sees them: what is sent, what is received, what a send returns.

:class:`Message` is what a producer sends; :class:`MessageExt` is a received or looked-up
message with every stored field (built from :class:`rocklet.protocol.message.StoredMessage`);
:class:`SendResult` is a send's outcome. Property names follow RocketMQ's
``MessageConst`` (:class:`rocklet.protocol.properties.Prop`).
"""

from __future__ import annotations

import enum
import ipaddress
import itertools
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from rocklet.client.errors import InvalidMessageError
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.message import StoredMessage, SysFlag, pack_host
from rocklet.protocol.message_id import make_offset_msg_id
from rocklet.protocol.names import AUTO_CREATE_TOPIC, check_topic_name
from rocklet.protocol.properties import Prop
from rocklet.transport.clock import SYSTEM_CLOCK

__all__ = [
    "MAX_MESSAGE_SIZE",
    "RESERVED_PROPERTIES",
    "Message",
    "MessageExt",
    "SendResult",
    "SendStatus",
    "UniqKeyGenerator",
    "send_properties",
    "validate_message",
]

#: ``DefaultMQProducer.maxMessageSize``: 4 MiB.
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024

#: Properties a user may not set through ``Message.properties``: the SDK and broker own
#: them (a subset of Java's ``MessageConst.STRING_HASH_SET`` that matters on send).
RESERVED_PROPERTIES: Final = frozenset(
    {Prop.TAGS, Prop.KEYS, Prop.DELAY, Prop.UNIQ_KEY, Prop.WAIT, Prop.TRAN_MSG, Prop.PGROUP}
)

#: Why a field holding 0x01 or 0x02 is refused, as the error says it.
_SEPARATORS: Final = "'\\x01' or '\\x02', the separators of RocketMQ's message properties"
_KEYS_TYPE: Final = "Message keys must be a str or an iterable of str, not %s"


def _check_int(value: object, name: str) -> None:
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"Message {name} must be an int, not {type(value).__name__}")


@dataclass(slots=True)
class Message:
    """A message to send.

    Args:
        topic: Destination topic.
        body: Payload bytes (a ``str`` is encoded as UTF-8, a ``bytearray`` or
            ``memoryview`` copied to bytes).
        tags: One tag consumers can filter on (``"TagA"``), or ``None``.
        keys: Business keys, indexed by the broker for query-by-key. A single string
            is one key; ``None`` is none.
        properties: User properties (names in :data:`RESERVED_PROPERTIES` are refused
            at send time; use the dedicated fields).
        delay_level: Delayed delivery level (1 = 1 s ... 18 = 2 h with the default
            levels); 0 delivers at once.
        flag: User flag, stored as-is.

    Raises:
        TypeError: A field has the wrong type: ``body`` not bytes or str, ``tags``
            not a str, ``keys`` not strings, ``delay_level`` or ``flag`` not an int.
            (What the values may hold is checked at send time, by
            :func:`validate_message`.)
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: Iterable[str] | str = ()
    properties: dict[str, str] | None = None
    delay_level: int = 0
    flag: int = 0

    def __post_init__(self) -> None:
        # Wrong types fail here, named, rather than deep in the send path (a len()
        # of an int) or, worse, sent as their str() (a delay level "2").
        body = self.body
        if type(body) is not bytes:
            if isinstance(body, str):
                self.body = body.encode()
            elif isinstance(body, bytearray | memoryview):
                self.body = bytes(body)
            elif not isinstance(body, bytes):
                raise TypeError(f"Message body must be bytes or str, not {type(body).__name__}")
        keys = self.keys
        if isinstance(keys, str):
            self.keys = (keys,)
        elif keys is None:
            self.keys = ()
        else:
            if not isinstance(keys, tuple):
                if not isinstance(keys, Iterable):
                    raise TypeError(_KEYS_TYPE % type(keys).__name__)
                self.keys = keys = tuple(keys)
            for key in keys:
                if not isinstance(key, str):
                    raise TypeError(_KEYS_TYPE % type(key).__name__)
        if self.tags is not None and not isinstance(self.tags, str):
            raise TypeError(f"Message tags must be a str or None, not {type(self.tags).__name__}")
        _check_int(self.delay_level, "delay_level")
        _check_int(self.flag, "flag")

    @property
    def key_list(self) -> tuple[str, ...]:
        """The keys as a tuple."""
        keys = self.keys
        return keys if isinstance(keys, tuple) else tuple(keys)


class SendStatus(enum.Enum):
    """How durable a successful send is (``SendStatus.java``)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  #: stored, not flushed within the timeout
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  #: stored, not replicated in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  #: stored, no slave to replicate to


@dataclass(frozen=True, slots=True)
class SendResult:
    """The outcome of a send.

    Attributes:
        status: Durability of the stored message.
        msg_id: The client-generated UNIQ_KEY (comma-joined for a batch), as Java's
            ``SendResult.msgId``.
        offset_msg_id: The broker's offset msgId(s): store host + commitlog offset.
        message_queue: The queue the message went to.
        queue_offset: Its offset in that queue (the first message's, for a batch).
        transaction_id: The transaction id for half messages, else ``None``.
        region_id: The broker's region (``MSG_REGION``).
        trace_on: Whether the broker has tracing on.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True


@dataclass(slots=True)
class MessageExt:
    """A received or looked-up message, with every stored field.

    Treat it as read-only. It is not a frozen dataclass because a consumer builds one
    per message received, and a frozen ``__init__`` (``object.__setattr__`` per field)
    cost several times a plain one; use :func:`dataclasses.replace` for a changed copy.

    Attributes:
        topic: The topic (for retry deliveries, the original topic once restored).
        body: The payload, inflated if it was sent compressed.
        properties: Every property, system ones included.
        flag: The user flag.
        queue_id: The queue it is stored in.
        queue_offset: Its offset in that queue.
        commit_log_offset: Its offset in the broker's commitlog.
        sys_flag: Stored ``sysFlag`` bits (:class:`rocklet.protocol.message.SysFlag`).
        born_timestamp: When the producer made it, epoch ms.
        born_host: The producer's ``(ip, port)``.
        store_timestamp: When the broker stored it, epoch ms.
        store_host: The broker's ``(ip, port)``.
        reconsume_times: How many times it was delivered again after failures.
        prepared_transaction_offset: Commitlog offset of the half message, if any.
        store_size: Stored record size in bytes.
        body_crc: Stored body checksum.
        broker_name: The broker group it came from ("" when unknown).
    """

    topic: str
    body: bytes
    properties: Mapping[str, str]
    flag: int = 0
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("0.0.0.0", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_size: int = 0
    body_crc: int = 0
    broker_name: str = field(default="")

    @classmethod
    def from_stored(cls, stored: StoredMessage, *, broker_name: str = "") -> MessageExt:
        """Build from a decoded stored record, inflating a compressed body.

        Args:
            stored: The record (from a pull, query, view or check-back body).
            broker_name: The broker group it came from.

        Returns:
            The message.

        Raises:
            MessageFormatError: The body is flagged compressed but does not inflate.
        """
        body = stored.payload() if stored.sys_flag & SysFlag.COMPRESSED else stored.body
        return cls(
            stored.topic,
            body,
            stored.properties,
            stored.flag,
            stored.queue_id,
            stored.queue_offset,
            stored.physical_offset,
            stored.sys_flag,
            stored.born_timestamp,
            stored.born_host,
            stored.store_timestamp,
            stored.store_host,
            stored.reconsume_times,
            stored.prepared_transaction_offset,
            stored.size,
            stored.body_crc,
            broker_name,
        )

    @property
    def tags(self) -> str | None:
        """The TAGS property."""
        return self.properties.get(Prop.TAGS)

    @property
    def keys(self) -> tuple[str, ...]:
        """The KEYS property split on spaces."""
        return tuple(self.properties.get(Prop.KEYS, "").split())

    @property
    def delay_level(self) -> int:
        """The DELAY property (0 when absent)."""
        return int(self.properties.get(Prop.DELAY, "0") or 0)

    @property
    def offset_msg_id(self) -> str:
        """The broker's id for this record: store host + commitlog offset (32 hex)."""
        ip, port = self.store_host
        if ":" in ip:  # IPv6 store host: Java's 56-character form
            host = ipaddress.IPv6Address(ip).packed + port.to_bytes(4, "big")
            return (host + self.commit_log_offset.to_bytes(8, "big", signed=True)).hex().upper()
        return make_offset_msg_id(pack_host(ip, port), self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The client's UNIQ_KEY, else the offset msgId (Java's ``MessageClientExt``)."""
        return self.properties.get(Prop.UNIQ_KEY) or self.offset_msg_id

    @property
    def message_queue(self) -> MessageQueue:
        """The queue this message is stored in."""
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    @property
    def store_addr(self) -> str:
        """The broker's address as ``"ip:port"``."""
        return f"{self.store_host[0]}:{self.store_host[1]}"

    def to_message(self) -> Message:
        """A new :class:`Message` with the same topic, body, tags, keys and user properties."""
        user = {k: v for k, v in self.properties.items() if k not in RESERVED_PROPERTIES}
        return Message(
            self.topic,
            self.body,
            tags=self.tags,
            keys=self.keys,
            properties=user,
            delay_level=self.delay_level,
            flag=self.flag,
        )


class UniqKeyGenerator:
    """Makes UNIQ_KEY values: 32 uppercase hex characters, unique, cheap.

    Layout, in the spirit of Java's ``MessageClientIDSetter`` (16 bytes): a fixed
    10-byte prefix (IPv4, low 16 bits of the pid, 4 random bytes) and a 6-byte counter
    that starts at ``(ms since the start of the month) << 16``. The counter only
    increments, so ids from one generator never repeat (until 2**48 sends); the random
    bytes keep two generators in one process, or two processes, apart. Each id costs
    one ``next()`` and one format.

    Args:
        ip: This host's IPv4 address.
        now_ms: Wall-clock time, ms (the counter's start). Default: the system clock.
    """

    __slots__ = ("_counter", "_prefix")

    def __init__(self, ip: str = "127.0.0.1", now_ms: int | None = None) -> None:
        try:
            ip_bytes = bytes(int(part) for part in ip.split("."))
        except ValueError:
            ip_bytes = b""
        if len(ip_bytes) != 4:
            ip_bytes = os.urandom(4)
        prefix = ip_bytes + (os.getpid() & 0xFFFF).to_bytes(2, "big") + os.urandom(4)
        self._prefix = prefix.hex().upper()
        if now_ms is None:
            now_ms = SYSTEM_CLOCK.now_ms()
        self._counter = itertools.count(_ms_since_month_start(now_ms) << 16)

    def next(self) -> str:
        """Return the next id."""
        return self._prefix + "%012X" % (next(self._counter) & 0xFFFFFFFFFFFF)

    def parts(self) -> tuple[str, Iterator[int]]:
        """The ids' prefix and their shared counter.

        A compiled batch encoder numbers a batch's ids itself, exactly as :meth:`next`
        would, drawing from the same counter.
        """
        return self._prefix, self._counter


def _ms_since_month_start(now_ms: int) -> int:
    # The month in this host's time zone, as Java's client counts it, so that
    # ``mqadmin DecodeMessageId`` on the same host reads back when the id was made.
    now = now_ms / 1000
    t = time.localtime(now)
    month_start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    return max(0, int((now - month_start) * 1000)) & 0xFFFFFFFF


def validate_message(msg: Message, max_size: int = MAX_MESSAGE_SIZE) -> None:
    """Check a message before sending, as Java's ``Validators.checkMessage`` does.

    Also refuses text that would change the properties it is sent in: names, values,
    tags and keys travel as ``name 0x01 value`` pairs joined by ``0x02``
    (:func:`send_properties`), so a ``0x01`` or ``0x02`` in one of them would cut it
    or add properties (a TAGS the reserved-name check never saw).

    Args:
        msg: The message.
        max_size: Largest body accepted, bytes.

    Raises:
        InvalidMessageError: Bad topic, empty or oversized body, reserved property,
            delay level out of range, or a separator character in the tags, a key or
            a property.
        TypeError: ``msg`` is not a :class:`Message`, or a field has the wrong type
            (set after the message was made: the constructor checks them too).
    """
    if not isinstance(msg, Message):
        raise TypeError(f"send takes a Message or a list of Messages, not {type(msg).__name__}")
    topic = msg.topic
    if (reason := check_topic_name(topic)) is not None:
        raise InvalidMessageError(reason)
    if topic == AUTO_CREATE_TOPIC:
        raise InvalidMessageError(
            f"the topic {AUTO_CREATE_TOPIC} is the auto-create template; send elsewhere"
        )
    body = msg.body
    if type(body) is not bytes and not isinstance(body, bytes):
        raise TypeError(f"Message body must be bytes or str, not {type(body).__name__}")
    if not body:
        raise InvalidMessageError("the message body is empty")
    if len(body) > max_size:
        raise InvalidMessageError(f"the message body is {len(body)} bytes; max {max_size}")
    delay = msg.delay_level
    if type(delay) is not int:
        _check_int(delay, "delay_level")
    if delay < 0:
        raise InvalidMessageError(f"delay level {delay} is negative")
    # The separator checks below search each text at C speed: this runs per send.
    tags = msg.tags
    if tags:
        if not isinstance(tags, str):
            raise TypeError(f"Message tags must be a str or None, not {type(tags).__name__}")
        if "\x01" in tags or "\x02" in tags:
            raise InvalidMessageError(f"the tags {tags!r} hold {_SEPARATORS}")
    keys = msg.keys
    if keys:
        try:
            text = "".join(keys)
        except TypeError:
            wrong = next(k for k in keys if not isinstance(k, str))
            raise TypeError(_KEYS_TYPE % type(wrong).__name__) from None
        if "\x01" in text or "\x02" in text:
            key = next(k for k in keys if "\x01" in k or "\x02" in k)
            raise InvalidMessageError(f"the key {key!r} holds {_SEPARATORS}")
    props = msg.properties
    if props:
        reserved = RESERVED_PROPERTIES.intersection(props)
        if reserved:
            raise InvalidMessageError(
                f"properties {sorted(reserved)} are set by the SDK; use the Message fields"
            )
        try:
            for name, value in props.items():
                if "\x01" in name or "\x02" in name or "\x01" in value or "\x02" in value:
                    _refuse_separator_in(props)
        except TypeError:  # a name or value that is no str is sent as its str()
            _refuse_separator_in(props)


def _refuse_separator_in(props: Mapping[str, str]) -> None:
    """Raise for the first property whose name or value holds 0x01 or 0x02, if any.

    Names and values are searched as :func:`send_properties` writes them.
    """
    for name, value in props.items():
        for where, text in (("name", f"{name}"), ("value", f"{value}")):
            if "\x01" in text or "\x02" in text:
                raise InvalidMessageError(
                    f"the {where} of property {name!r} (value {value!r}) holds {_SEPARATORS}"
                )


def send_properties(
    msg: Message, uniq_key: str | None, extra: Mapping[str, str] | None = None
) -> str:
    """The properties string a message is sent with (``name 0x01 value`` joined by 0x02).

    Built directly as text: it runs once per message on the send path.

    Args:
        msg: The message (already validated).
        uniq_key: Its UNIQ_KEY, or ``None`` for none (a batch's outer message).
        extra: System properties the SDK adds (TRAN_MSG, CORRELATION_ID...).

    Returns:
        The properties text.
    """
    # WAIT=true: the broker answers after the store accepted the message (Java's
    # default waitStoreMsgOK); the broker drops it before storing.
    text = "WAIT\x01true"
    if uniq_key is not None:
        text = f"UNIQ_KEY\x01{uniq_key}\x02{text}"
    if msg.tags:
        text = f"{text}\x02TAGS\x01{msg.tags}"
    keys = msg.keys
    if keys:
        text = f"{text}\x02KEYS\x01{' '.join(keys)}"
    if msg.delay_level > 0:
        text = f"{text}\x02DELAY\x01{msg.delay_level}"
    for props in (msg.properties, extra):
        if props:
            for name, value in props.items():
                if name and value:
                    text = f"{text}\x02{name}\x01{value}"
    return text
