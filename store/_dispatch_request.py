"""Parsing one stored record for dispatch and recovery (``checkMessageAndReturnSize``).

Reads only the fields the consume queue and the index need, straight from the mapped
commitlog, and tells a record from the end-of-segment blank and from garbage.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final, NamedTuple

from rocklet.protocol.message import BLANK_MAGIC, MESSAGE_MAGIC, RECORD_OVERHEAD, SysFlag
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.protocol.properties import Prop, decode_properties
from rocklet.store._hashing import tags_hash

__all__ = [
    "BLANK",
    "INVALID",
    "DispatchRequest",
    "check_record",
    "deliver_time",
    "record_mismatch",
    "tags_hash",
]

#: :func:`check_record` result for the end-of-segment blank (roll to the next file).
BLANK: Final = 0
#: :func:`check_record` result for bytes that are not a whole, valid record.
INVALID: Final = -1

_HEAD = struct.Struct(">iiiiiqqiq")  # size, magic, crc, qid, flag, qoff, phy, sysflag, born
# size, magic, queue id, queue offset, sysflag (CRC, flag, physical offset skipped)
_ENTRY_HEAD = struct.Struct(">ii4xi4xq8xi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_Q = struct.Struct(">q")
# Plain ints: IntFlag arithmetic costs microseconds per record on the hot path.
_BORN_V6: Final = int(SysFlag.BORNHOST_V6)
_STORE_V6: Final = int(SysFlag.STOREHOST_V6)
_HOSTS_V6: Final = _BORN_V6 | _STORE_V6
#: BODYLENGTH's position in a record with IPv4 hosts (each IPv6 host adds 12).
_BODY_LEN_POS: Final = 84


class DispatchRequest(NamedTuple):
    """What the dispatchers need from one record (``DispatchRequest``)."""

    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str
    uniq_key: str
    sys_flag: int


def _host_len(sys_flag: int, bit: int) -> int:
    return 20 if sys_flag & bit else 8


def check_record(
    view: memoryview,
    pos: int,
    *,
    check_crc: bool,
    delay_levels_ms: tuple[int, ...] = (),
) -> DispatchRequest | int:
    """Parse the record at ``pos`` of a segment's view.

    Args:
        view: The whole mapped segment.
        pos: Position of the record in the segment.
        check_crc: Verify BODYCRC (recovery does; dispatch right after append need not).
        delay_levels_ms: Delay table, to put the deliver time of a schedule-topic
            record in its tags code.

    Returns:
        The dispatch request, :data:`BLANK` at the end-of-segment filler or a zero
        size (no more records), or :data:`INVALID` for anything else.
    """
    limit = len(view)
    if pos + 8 > limit:
        return BLANK
    size, magic = struct.unpack_from(">ii", view, pos)
    if magic == BLANK_MAGIC or (size == 0 and magic == 0):
        return BLANK
    if magic != MESSAGE_MAGIC or size < RECORD_OVERHEAD or pos + size > limit:
        return INVALID
    try:
        _, _, crc, qid, _, qoff, phy, sys_flag, _ = _HEAD.unpack_from(view, pos)
        p = pos + 48 + _host_len(sys_flag, _BORN_V6)
        (store_ts,) = _Q.unpack_from(view, p)
        p += 8 + _host_len(sys_flag, _STORE_V6) + 12
        (body_len,) = _I32.unpack_from(view, p)
        p += 4
        end = pos + size
        if body_len < 0 or p + body_len + 3 > end:
            return INVALID
        if check_crc and zlib.crc32(view[p : p + body_len]) & 0x7FFFFFFF != crc:
            return INVALID
        p += body_len
        topic_len = view[p]
        topic = bytes(view[p + 1 : p + 1 + topic_len]).decode("utf-8", "replace")
        p += 1 + topic_len
        (props_len,) = _I16.unpack_from(view, p)
        if props_len < 0 or p + 2 + props_len != end:
            return INVALID
        props = decode_properties(view[p + 2 : end]) if props_len else {}
    except (struct.error, IndexError):
        return INVALID
    tags = props.get(Prop.TAGS)
    tags_code = tags_hash(tags) if tags else 0
    if topic == SCHEDULE_TOPIC and delay_levels_ms:
        tags_code = deliver_time(props.get(Prop.DELAY), store_ts, delay_levels_ms)
    return DispatchRequest(
        topic,
        qid,
        phy,
        size,
        tags_code,
        store_ts,
        qoff,
        props.get(Prop.KEYS, ""),
        props.get(Prop.UNIQ_KEY, ""),
        sys_flag,
    )


def deliver_time(level_text: str | None, store_ts: int, levels: tuple[int, ...]) -> int:
    """Deliver time of a schedule-topic record, its tags code (``computeDeliverTimestamp``).

    Store time plus the level's delay; out-of-range levels clamp to the table, as
    RocketMQ clamps at put time, and a missing or bad level waits one second.

    Args:
        level_text: The DELAY property.
        store_ts: The record's store time.
        levels: Delay table in ms.

    Returns:
        The deliver time in ms.
    """
    try:
        level = int(level_text or "0")
    except ValueError:
        level = 0
    if level <= 0:
        return store_ts + 1000
    return store_ts + levels[min(level, len(levels)) - 1]


def record_mismatch(
    view: memoryview, pos: int, topic: bytes, queue_id: int, queue_offset: int, size: int
) -> str | None:
    """Why the record at ``pos`` is not the one a consume-queue entry names, or None.

    The record must have the entry's size, the message magic, the queue's id and topic
    and the entry's queue offset. Reads two header fields and the topic, nothing else
    (recovery runs this for every entry it checks); the tags code is compared where
    the record is parsed whole (:func:`check_record`).

    Args:
        view: The mapped segment holding the record (``pos + size`` lies within).
        pos: The record's position in ``view``.
        topic: The queue's topic, UTF-8.
        queue_id: The queue's id.
        queue_offset: The entry's queue offset.
        size: The entry's record size.

    Returns:
        None if the record is the entry's, else a short reason for a report.
    """
    try:
        rsize, magic, qid, qoff, sys_flag = _ENTRY_HEAD.unpack_from(view, pos)
        if magic != MESSAGE_MAGIC:
            return f"no record there (magic {magic & 0xFFFFFFFF:#010x})"
        if rsize != size or qid != queue_id or qoff != queue_offset:
            return (
                f"the entry says {size} bytes; the record there is queue {qid} offset "
                f"{qoff} of {rsize} bytes"
            )
        p = pos + _BODY_LEN_POS
        if sys_flag & _HOSTS_V6:
            p += (12 if sys_flag & _BORN_V6 else 0) + (12 if sys_flag & _STORE_V6 else 0)
        (body_len,) = _I32.unpack_from(view, p)
        p += 4 + body_len
        if body_len < 0 or p >= pos + size:
            return "the record's field lengths do not add up"
        topic_len = view[p]
        if view[p + 1 : p + 1 + topic_len] != topic:
            text = bytes(view[p + 1 : p + 1 + topic_len]).decode("utf-8", "replace")
            return f"the record there is of topic {text!r}"
    except (struct.error, IndexError):
        return "the record runs past its segment"
    return None
