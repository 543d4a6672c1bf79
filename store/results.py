"""The store's public value types: input message, statuses, results, listener."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Final, Protocol

__all__ = [
    "ZERO_HOST",
    "GetMessageStatus",
    "GetResult",
    "MessageArrivingListener",
    "MessageToStore",
    "PutMessageStatus",
    "PutResult",
]

#: An all-zero 8-byte host field.
ZERO_HOST: Final = b"\x00" * 8


class PutMessageStatus(enum.Enum):
    """Outcome of a put (``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(enum.Enum):
    """Outcome of a read by queue (``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class MessageToStore:
    """A message as the broker hands it to the store (store time comes from the clock).

    Attributes:
        topic: Topic (at most 127 UTF-8 bytes).
        queue_id: Queue id.
        body: Body as stored (compressed if the producer compressed it).
        properties: Properties (TAGS, KEYS, UNIQ_KEY, DELAY, ...).
        flag: User flag.
        sys_flag: ``SysFlag`` bits.
        born_timestamp: Producer time, ms.
        born_host: 8-byte IPv4 host field (``rocklet.protocol.message.pack_host``).
        store_host: 8-byte host field of the broker's reachable address.
        reconsume_times: Delivery attempts so far.
        prepared_transaction_offset: Commitlog offset of the half message, if any.
        delay_done: Its DELAY property records a delay already served (a delivered
            delayed message keeps DELAY, REAL_TOPIC and REAL_QID, as RocketMQ stores
            it): the store does not delay it again.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = ZERO_HOST
    store_host: bytes = ZERO_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    delay_done: bool = False


# Not frozen: built for every put, and a frozen dataclass's __init__ costs ~3x more.
# Nothing changes a result after the store returns it.
@dataclass(slots=True)
class PutResult:
    """Where a put (one message or a batch) landed.

    Attributes:
        status: The outcome; the other fields are meaningful only for PUT_OK.
        wrote_offset: Commitlog offset of the first record.
        wrote_bytes: Bytes appended.
        queue_offset: Queue offset of the first record.
        msg_count: Records appended.
        store_timestamp: Store time of the records.
        record_offsets: Commitlog offset of each record (offset msgIds derive from it).
        durable: SYNC_FLUSH only: completed (True) once the bytes are on disk.
    """

    status: PutMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    queue_offset: int = 0
    msg_count: int = 0
    store_timestamp: int = 0
    record_offsets: tuple[int, ...] = ()
    durable: Future[bool] | None = None

    @property
    def ok(self) -> bool:
        """Whether the put succeeded."""
        return self.status is PutMessageStatus.PUT_OK


@dataclass(frozen=True, slots=True)
class GetResult:
    """Records read from one queue (``GetMessageResult``).

    Attributes:
        status: The outcome.
        buffers: Zero-copy views of whole stored records, in queue order. Release them
            (or drop them) promptly: a segment cannot be deleted while viewed.
        queue_offsets: Queue offset of each buffer.
        next_begin_offset: Where the next read should start.
        min_offset: The queue's min offset.
        max_offset: The queue's max offset (next to be written).
    """

    status: GetMessageStatus
    buffers: list[memoryview]
    queue_offsets: list[int]
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @property
    def total_bytes(self) -> int:
        """Sum of the buffers' sizes."""
        return sum(len(b) for b in self.buffers)


class MessageArrivingListener(Protocol):
    """Told about every message dispatched to a consume queue (``MessageArrivingListener``).

    Called on the thread that put the message, under the store lock: implementations
    must be quick and must not call back into the store (the broker hands the event
    to its event loop with ``call_soon_threadsafe``).
    """

    def arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int
    ) -> None:
        """A message arrived.

        Args:
            topic: Topic.
            queue_id: Queue id.
            max_offset: The queue's new max offset (next index).
            tags_code: The entry's tags code.
            store_timestamp: The record's store time.
        """

    def arrived(
        self, topic: str, queue_id: int, first_offset: int, tags_codes: Sequence[int],
        store_timestamp: int,
    ) -> None:  # fmt: skip
        """A run of messages arrived in one queue, one call for a whole batch.

        Args:
            topic: Topic.
            queue_id: Queue id.
            first_offset: The run's first queue offset; the queue's new max offset is
                ``first_offset + len(tags_codes)``.
            tags_codes: Each entry's tags code, in queue order. The sequence may be
                reused after the call: copy it to keep it.
            store_timestamp: The records' store time.
        """
