"""Encoding a put's records together with what the consume queue and index need.

The append path used to encode each record, copy it into the commitlog and then parse
it back (``check_record``) to dispatch it. Everything dispatch needs is known while
encoding (topic, queue, offsets, size, store time, tags, keys), so :func:`encode_batch`
produces the records and the dispatch data together, and the store writes the consume
queue entries and index keys from that. Recovery and catch-up still dispatch by parsing
(:mod:`rocklet.store._reput`); ``tests/store/test_dispatch_equivalence.py`` checks both give
byte-identical consume queues and index files.

The record layout is in :mod:`rocklet.protocol.message`; its fixed part up to the body length
is one struct here (88 bytes with IPv4 hosts).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter
from typing import Final, NamedTuple
from zlib import crc32

from rocklet.protocol import compiled
from rocklet.protocol.message import MESSAGE_MAGIC, RECORD_OVERHEAD, TRANSACTION_MASK, SysFlag
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.protocol.properties import (
    MAX_PROPERTIES_SIZE,
    Prop,
    decode_properties,
    encode_properties,
)
from rocklet.store._consume_queue import ENTRY
from rocklet.store._dispatch_request import deliver_time
from rocklet.store._hashing import index_key_hash, index_key_hashes, tags_hash
from rocklet.store.results import MessageToStore, PutMessageStatus

__all__ = ["MAX_TOPIC_SIZE", "NOT_IN_QUEUE", "EncodedBatch", "encode_batch", "rewrite_delay"]

#: TOPIC length is a signed byte.
MAX_TOPIC_SIZE: Final = 127
#: Transaction types kept out of consume queues (``CommitLogDispatcherBuildConsumeQueue``).
NOT_IN_QUEUE: Final = frozenset(
    (int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_ROLLBACK))
)

# TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG,
# BORNTIMESTAMP, BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED OFFSET,
# BODY length.
_FIXED = struct.Struct(">iiiiiqqiq8sq8siqi")
_PROPS_LEN = struct.Struct(">h")
# Plain ints: IntFlag arithmetic costs microseconds per record.
_CLEAR_V6: Final = ~int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
_ROLLBACK: Final = int(SysFlag.TRANSACTION_ROLLBACK)
_CRC_MASK: Final = 0x7FFFFFFF
_TAGS, _KEYS, _UNIQ_KEY, _DELAY = Prop.TAGS, Prop.KEYS, Prop.UNIQ_KEY, Prop.DELAY
_BODY = attrgetter("body")
_get = dict.get
# The compiled twins of _encode_each/_dispatch_data (None: the Python ones serve).
_speedups = compiled.load("rocklet.store._speedups")
_C_STATUS: Final = {
    1: PutMessageStatus.MESSAGE_ILLEGAL,
    2: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
}


class EncodedBatch(NamedTuple):
    """Records ready to append and their dispatch data.

    Attributes:
        data: The records back to back, offsets and store time filled in.
        offsets: Commitlog offset of each record.
        cq_entries: The 20-byte consume-queue entries (empty if not queued).
        tags_codes: Tags code of each record (empty if not queued).
        key_hashes: Index key hash of each ``topic#key`` to index, in index order.
        key_offsets: Commitlog offset of the record of each key hash.
        queued: Whether the records go to the consume queue (not prepared/rolled back).
        indexed: Whether the records go to the index (enabled, not rolled back).
    """

    data: bytes
    offsets: list[int]
    cq_entries: bytes
    tags_codes: list[int]
    key_hashes: list[int]
    key_offsets: list[int]
    queued: bool
    indexed: bool


class _Shape(NamedTuple):
    """What every record of one put shares."""

    topic_part: bytes  # TOPIC length + TOPIC
    fixed: int  # record bytes besides body and properties
    queue_id: int
    queue_offset: int  # of the first record (0 when not queued)
    queued: bool
    indexed: bool
    tran: int  # transaction type all records must have
    prefix: str  # "topic#", for index keys
    schedule: bool  # tags codes are deliver times
    store_timestamp: int
    max_body: int
    delay_levels_ms: tuple[int, ...]


#: Records, their offsets and sizes, and the properties dispatch reads.
_Encoded = tuple[bytes, list[int], list[int], Sequence[dict[str, str]]]


def encode_batch(
    msgs: Sequence[MessageToStore],
    phy: int,
    queue_offset: int,
    store_timestamp: int,
    *,
    max_body: int,
    segment_size: int,
    index: bool,
    delay_levels_ms: tuple[int, ...],
) -> EncodedBatch | PutMessageStatus:
    """Encode records of one topic and queue as if appended at ``phy``.

    Validates as ``putMessage`` does: the first bad message decides the status.
    Messages of a batch must share one transaction type (RocketMQ refuses
    transactional batches outright); prepared and rolled-back records get queue
    offset 0 and no consume-queue entry, and rolled-back ones are not indexed.

    Args:
        msgs: The messages, all with the topic and queue of the first.
        phy: Commitlog offset of the first record.
        queue_offset: Queue offset of the first record (ignored if not queued).
        store_timestamp: Store time of every record.
        max_body: Largest body accepted.
        segment_size: Commitlog segment size (a batch must fit one segment).
        index: Whether the index is enabled.
        delay_levels_ms: Delay table (deliver times of schedule-topic records).

    Returns:
        The batch, or the status refusing it.

    Raises:
        ValueError: A host field is not 8 bytes (it would shift every later field).
        UnicodeEncodeError: The topic or a property is not encodable text.
    """
    first = msgs[0]
    topic = _topic_part(first.topic)
    if topic is None:
        return PutMessageStatus.MESSAGE_ILLEGAL
    topic_part, prefix = topic
    tran = first.sys_flag & TRANSACTION_MASK
    queued = tran not in NOT_IN_QUEUE
    indexed = index and tran != _ROLLBACK
    schedule = queued and first.topic == SCHEDULE_TOPIC and bool(delay_levels_ms)
    qoff = queue_offset if queued else 0
    if _speedups is not None and not schedule:
        # The usual put, compiled end to end (no _Shape, no Python dispatch).
        out = _speedups.encode_each(
            msgs, phy, RECORD_OVERHEAD + len(topic_part) - 1, max_body, tran, topic_part,
            first.queue_id, store_timestamp, qoff, int(queued), MESSAGE_MAGIC, crc32,
        )  # fmt: skip
        if type(out) is int:
            return _C_STATUS[out]
        if out is not None:
            # _too_large, inlined for a single message (the usual put).
            if (
                len(first.body) + 208 > segment_size
                if len(msgs) == 1
                else _too_large(msgs, segment_size)
            ):
                return PutMessageStatus.MESSAGE_ILLEGAL
            data, offsets, sizes, props = out
            fast = _speedups.dispatch_data(
                props, offsets, sizes, queued, indexed, prefix, _tags_code, index_key_hash
            )
            if fast is not None:
                entries, codes, hashes, key_offsets = fast
                return EncodedBatch(
                    data, offsets, entries, codes, hashes, key_offsets, queued, indexed
                )
    shape = _Shape(
        topic_part,
        RECORD_OVERHEAD + len(topic_part) - 1,
        first.queue_id,
        qoff,
        queued,
        indexed,
        tran,
        prefix,
        schedule,
        store_timestamp,
        max_body,
        delay_levels_ms,
    )
    encoded = _encode_each_c(msgs, phy, shape) if _speedups is not None else None
    if encoded is None:  # no compiled twin, or input it leaves to the Python one
        encoded = _encode_each(msgs, phy, shape)
    if isinstance(encoded, PutMessageStatus):
        return encoded
    if _too_large(msgs, segment_size):
        return PutMessageStatus.MESSAGE_ILLEGAL
    data, offsets, sizes, props = encoded
    try:
        dispatch = _dispatch_data(shape, props, offsets, sizes)
    except (TypeError, AttributeError):
        # A name or value that is not a str (the type says str; f-strings stored its
        # text): dispatch what readers will parse, as the old re-parse did.
        props = [decode_properties(encode_properties(m.properties)) for m in msgs]
        dispatch = _dispatch_data(shape, props, offsets, sizes)
    return EncodedBatch(data, offsets, *dispatch)


def _too_large(msgs: Sequence[MessageToStore], segment_size: int) -> bool:
    """The old pre-check (``CommitLog.calMsgLength`` bound per message), kept as it was."""
    bodies = len(msgs[0].body) if len(msgs) == 1 else sum(map(len, map(_BODY, msgs)))
    return bodies + 8 + 200 * len(msgs) > segment_size


def _encode_each_c(
    msgs: Sequence[MessageToStore], phy: int, s: _Shape
) -> _Encoded | PutMessageStatus | None:
    """The compiled twin of :func:`_encode_each`; None for input it leaves to Python."""
    assert _speedups is not None
    out = _speedups.encode_each(
        msgs, phy, s.fixed, s.max_body, s.tran, s.topic_part, s.queue_id, s.store_timestamp,
        s.queue_offset, int(s.queued), MESSAGE_MAGIC, crc32,
    )  # fmt: skip
    if type(out) is int:
        return _C_STATUS[out]
    return out  # type: ignore[no-any-return]


def _encode_each(
    msgs: Sequence[MessageToStore], phy: int, s: _Shape
) -> _Encoded | PutMessageStatus:
    """The records back to back, with the offsets, sizes and properties dispatch needs.

    One struct pack per record for everything up to the body length; the body,
    topic and properties follow as slices, and one join copies the whole batch.
    """
    pack, pack_len = _FIXED.pack, _PROPS_LEN.pack
    # Locals: a NamedTuple field read costs ~40 ns, several per record.
    fixed, max_body, tran, topic_part = s.fixed, s.max_body, s.tran, s.topic_part
    queue_id, store_ts, qoff, step = s.queue_id, s.store_timestamp, s.queue_offset, int(s.queued)
    parts: list[bytes] = []
    offsets: list[int] = []
    sizes: list[int] = []
    dispatch_props: list[dict[str, str]] = []
    for m in msgs:
        body = m.body
        if len(body) > max_body:
            return PutMessageStatus.MESSAGE_ILLEGAL
        props = m.properties
        items = [f"{k}\x01{v}" for k, v in props.items() if k and v]  # encode_properties
        text = "\x02".join(items)
        props_b = text.encode()
        if len(props_b) > MAX_PROPERTIES_SIZE:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        sys_flag = m.sys_flag
        if sys_flag & TRANSACTION_MASK != tran:
            return PutMessageStatus.MESSAGE_ILLEGAL
        if len(m.born_host) != 8 or len(m.store_host) != 8:
            raise ValueError("born_host and store_host must be 8-byte fields from pack_host()")
        size = fixed + len(body) + len(props_b)
        parts += (
            pack(
                size,
                MESSAGE_MAGIC,
                crc32(body) & _CRC_MASK,
                queue_id,
                m.flag,
                qoff,
                phy,
                sys_flag & _CLEAR_V6,
                m.born_timestamp,
                m.born_host,
                store_ts,
                m.store_host,
                m.reconsume_times,
                m.prepared_transaction_offset,
                len(body),
            ),
            body,
            topic_part,
            pack_len(len(props_b)) + props_b,
        )
        if text.count("\x02") != len(items) - 1 or text.count("\x01") != len(items):
            # A separator inside a name or value: dispatch what a reader will parse.
            dispatch_props.append(decode_properties(text))
        else:
            dispatch_props.append(props if type(props) is dict else dict(props))
        offsets.append(phy)
        sizes.append(size)
        phy += size
        qoff += step
    return b"".join(parts), offsets, sizes, dispatch_props


def _dispatch_data(
    s: _Shape, props: Sequence[dict[str, str]], offsets: list[int], sizes: list[int]
) -> tuple[bytes, list[int], list[int], list[int], bool, bool]:
    """Consume-queue entries, tags codes, index key hashes and offsets, flags."""
    codes: list[int] = []
    if s.queued:
        if s.schedule:
            ts, levels = s.store_timestamp, s.delay_levels_ms
            codes = [deliver_time(p.get(_DELAY), ts, levels) for p in props]
        else:
            codes = list(map(_tags_code, map(_get, props, repeat(_TAGS))))
    entries = b"".join(map(ENTRY.pack, offsets, sizes, codes))
    keys: list[str] = []
    key_offsets: list[int] = []
    if s.indexed:
        prefix = s.prefix
        uniqs = map(_get, props, repeat(_UNIQ_KEY))
        more_keys = map(_get, props, repeat(_KEYS))
        for offset, uniq, more in zip(offsets, uniqs, more_keys, strict=True):
            # IndexService.buildIndex order: UNIQ_KEY first, then each of KEYS.
            if uniq:
                keys.append(prefix + uniq)
                key_offsets.append(offset)
            if more:
                for key in more.split():
                    keys.append(prefix + key)
                    key_offsets.append(offset)
    return entries, codes, index_key_hashes(keys), key_offsets, s.queued, s.indexed


@functools.lru_cache(maxsize=4096)
def _topic_part(topic: str) -> tuple[bytes, str] | None:
    """The record's TOPIC field and the index keys' ``topic#`` prefix (cached).

    Returns None for a name the record cannot hold.
    """
    topic_b = topic.encode()
    if not topic_b or len(topic_b) > MAX_TOPIC_SIZE:
        return None
    return bytes((len(topic_b),)) + topic_b, topic + "#"


@functools.lru_cache(maxsize=4096)
def _tags_code(tags: str | None) -> int:
    return tags_hash(tags) if tags else 0


def rewrite_delay(m: MessageToStore, levels: int) -> MessageToStore:
    """Move a delayed message to ``SCHEDULE_TOPIC_XXXX`` (``CommitLog.asyncPutMessage``).

    A DELAY level on a normal, non-transactional message becomes queue level-1 of the
    schedule topic, clamped to the table, with REAL_TOPIC / REAL_QID kept to restore.

    Args:
        m: The message.
        levels: Number of delay levels.

    Returns:
        The rewritten message, or ``m`` itself if it is not delayed.
    """
    level_text = m.properties.get(_DELAY)
    if not level_text or m.topic == SCHEDULE_TOPIC or m.delay_done:
        return m
    if m.sys_flag & TRANSACTION_MASK in NOT_IN_QUEUE:
        return m
    try:
        level = int(level_text)
    except ValueError:
        return m
    if level <= 0:
        return m
    level = min(level, levels)
    props = dict(m.properties)
    props[_DELAY] = str(level)
    props[Prop.REAL_TOPIC] = m.topic
    props[Prop.REAL_QID] = str(m.queue_id)
    return MessageToStore(
        SCHEDULE_TOPIC,
        level - 1,
        m.body,
        props,
        m.flag,
        m.sys_flag,
        m.born_timestamp,
        m.born_host,
        m.store_host,
        m.reconsume_times,
        m.prepared_transaction_offset,
    )
