"""A SEND_BATCH_MESSAGE body stored without a Python object per message.

The broker's batch path used to decode the body into one ``MessageToStore`` (with a
properties dict) per message and hand those to :func:`~rocklet.store._encoder.encode_batch`.
:func:`encode_raw_batch` instead walks the body (:mod:`rocklet.protocol.batch`'s layout)
in compiled code and writes each stored record straight from it: the per-put fields
(queue, offsets, hosts, timestamps, sysFlag) from the request, FLAG and body from the
item, BODYCRC computed, and the properties as the broker stores them (one name dropped,
one set: WAIT and CLUSTER). The consume-queue entries and index keys are collected in
the same pass.

The result is byte for byte what decoding and encoding give
(:func:`reference_messages` is that Python twin, and ``tests/store/test_raw_batch.py``
compares them). The compiled path takes only canonical bodies (ASCII properties, no
name twice, no DELAY or TRAN_MSG, every size acceptable); for anything else, refusals
included, it answers ``None`` and the caller runs the per-message path, which decides
as it always has. Without the compiled module (or under ``ROCKLET_PURE_PYTHON=1``) it
always answers ``None``.

The usual single send takes the same road as a batch of one
(:func:`single_message_body`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final, NamedTuple
from zlib import crc32

from rocklet.protocol import compiled
from rocklet.protocol.batch import decode_batch
from rocklet.protocol.message import MESSAGE_MAGIC, RECORD_OVERHEAD, TRANSACTION_MASK, SysFlag
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.protocol.properties import decode_properties
from rocklet.store._encoder import NOT_IN_QUEUE, EncodedBatch, _tags_code, _topic_part
from rocklet.store._hashing import index_key_hash
from rocklet.store.results import MessageToStore

__all__ = [
    "RawBatch",
    "encode_raw_batch",
    "offset_msg_ids",
    "reference_messages",
    "single_message_body",
]

_speedups = compiled.load("rocklet.store._speedups")
_ROLLBACK: Final = int(SysFlag.TRANSACTION_ROLLBACK)
#: ``decode_batch``'s item limit.
_MAX_ITEMS: Final = 100_000


class RawBatch(NamedTuple):
    """A batch body and what every message of it shares.

    Attributes:
        topic: Topic of every message.
        queue_id: Queue of every message.
        body: The SEND_BATCH_MESSAGE body (:mod:`rocklet.protocol.batch`).
        sys_flag: sysFlag of every message.
        born_timestamp: Producer time, ms.
        born_host: 8-byte host field of the producer.
        store_host: 8-byte host field of the broker.
        reconsume_times: Delivery attempts so far.
        drop_property: A property not stored (the client-side WAIT).
        set_property: A property stored with this value (CLUSTER, the broker's cluster).
    """

    topic: str
    queue_id: int
    body: bytes
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_host: bytes
    reconsume_times: int
    drop_property: str
    set_property: tuple[str, str]


def reference_messages(raw: RawBatch) -> list[MessageToStore]:
    """The messages the per-message path stores for ``raw`` (the Python twin).

    Raises:
        MessageFormatError: The body is not a batch.
    """
    name, value = raw.set_property
    out = []
    for flag, item_body, raw_props in decode_batch(raw.body, max_items=_MAX_ITEMS):
        props = decode_properties(raw_props)
        props.pop(raw.drop_property, None)
        props[name] = value
        out.append(
            MessageToStore(
                raw.topic,
                raw.queue_id,
                item_body,
                props,
                flag,
                raw.sys_flag,
                raw.born_timestamp,
                raw.born_host,
                raw.store_host,
                raw.reconsume_times,
            )
        )
    return out


def encode_raw_batch(
    raw: RawBatch,
    phy: int,
    queue_offset: int,
    store_timestamp: int,
    *,
    max_body: int,
    segment_size: int,
    index: bool,
) -> EncodedBatch | None:
    """Encode a batch body's records as if appended at ``phy`` (compiled only).

    Args:
        raw: The batch.
        phy: Commitlog offset of the first record.
        queue_offset: Queue offset of the first record.
        store_timestamp: Store time of every record.
        max_body: Largest message body accepted.
        segment_size: Commitlog segment size.
        index: Whether the index is enabled.

    Returns:
        The records and their dispatch data, as
        :func:`~rocklet.store._encoder.encode_batch` gives for
        :func:`reference_messages`; ``None`` when the per-message path must decide.
    """
    if _speedups is None or raw.topic == SCHEDULE_TOPIC:
        return None
    shared = _shared_fields(raw.topic, raw.drop_property, raw.set_property)
    if shared is None:
        return None
    topic_part, prefix, drop, set_name, set_value = shared
    tran = raw.sys_flag & TRANSACTION_MASK
    queued = tran not in NOT_IN_QUEUE
    indexed = index and tran != _ROLLBACK
    try:
        out = _speedups.encode_raw_batch(
            raw.body, phy, RECORD_OVERHEAD + len(topic_part) - 1, max_body, segment_size,
            topic_part, raw.queue_id, raw.sys_flag, raw.born_timestamp, raw.born_host,
            raw.store_host, raw.reconsume_times, store_timestamp, queue_offset, queued,
            indexed, MESSAGE_MAGIC, drop, set_name, set_value, prefix, crc32, _tags_code,
            index_key_hash, _MAX_ITEMS,
        )  # fmt: skip
    except (OverflowError, TypeError):
        return None  # a field out of its record range: the Python path refuses it
    if out is None:
        return None
    data, offsets, entries, codes, hashes, key_offsets = out
    return EncodedBatch(data, offsets, entries, codes, hashes, key_offsets, queued, indexed)


def offset_msg_ids(store_host_hex: str, offsets: Sequence[int]) -> str:
    """The batch answer's msgId: each record's offset msgId, comma-joined.

    ``make_offset_msg_id``'s text with the host's half formatted once (commitlog
    offsets are never negative).

    Args:
        store_host_hex: The 8-byte store host field as upper-case hex.
        offsets: Commitlog offset of each record.

    Returns:
        The msgIds.
    """
    if _speedups is not None:
        ids = _speedups.offset_msg_ids(store_host_hex, offsets)
        if ids is not None:
            return ids  # type: ignore[no-any-return]
    return ",".join([f"{store_host_hex}{offset:016X}" for offset in offsets])


def single_message_body(body: bytes, properties: str, flag: int) -> bytes | None:
    """One message as a batch body of one item, for :func:`encode_raw_batch`.

    A plain SEND_MESSAGE (not to a retry topic, not transactional) is stored like a
    batch of one: no properties dict and no message object on the hot path.

    Args:
        body: The message body.
        properties: Its properties text, as the request header carries it.
        flag: Its FLAG.

    Returns:
        The batch body; ``None`` without the compiled module (the raw path would
        decline it anyway) or for input the per-message path must take (non-ASCII
        properties, a field out of range).
    """
    if _speedups is None:
        return None
    try:
        return _speedups.single_item(body, properties, flag)  # type: ignore[no-any-return]
    except (OverflowError, TypeError):
        return None  # a FLAG beyond int64, a body that is not bytes: the per-message path


@functools.lru_cache(maxsize=4096)
def _shared_fields(
    topic: str, drop: str, set_property: tuple[str, str]
) -> tuple[bytes, str, bytes, bytes, bytes] | None:
    """What every record of a put shares, as the compiled walk takes it.

    The record's TOPIC field, the index prefix, the dropped name and the set property.
    Cached: one lookup per put (the property pair is the broker's constant). None when
    the walk cannot write them as they are.
    """
    topic_fields = _topic_part(topic)
    set_name, set_value = set_property
    if topic_fields is None or not (
        _canonical(set_name) and _canonical(set_value) and drop.isascii()
    ):
        return None
    return (*topic_fields, drop.encode(), set_name.encode(), set_value.encode())


def _canonical(text: str) -> bool:
    """Text the compiled path writes as is: ASCII, not empty, no separator."""
    return bool(text) and text.isascii() and "\x01" not in text and "\x02" not in text
