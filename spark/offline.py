"""The offline reader: a batch source over a store's commitlog segments, no broker.

``spark.read.format("rocklet").load("/path/to/store")`` reads every record of every
commitlog segment, one Spark partition per segment, with the broker source's schema.
It is for audits and backfills: it reads a RocketMQ 4.x store (the layout Rocklet
keeps, docs/store-format.md) as well as Rocklet's own, without starting anything. Read a
stopped store or a copy: a segment being written may end in a half-written record.

Walking a segment (docs/store-format.md; RocketMQ's ``CommitLog.checkMessageAndReturnSize``):
records follow each other from byte 0; a record whose magic is BLANK_MAGIC is the
filler that pads a segment's end when the next record did not fit; four zero bytes
where a record would start mean nothing was written past there (segments are
preallocated). Anything else is corruption: it fails the query, or with
``failOnCorruption=false`` ends that segment there with a warning, the way RocketMQ's
recovery truncates at the first bad record.

The commitlog holds what the broker stored, so it also shows internal records:
delayed messages first under ``SCHEDULE_TOPIC_XXXX``, half messages of transactions,
retry topics. Filter with ``subscribe``/``topic``/``subscribePattern``.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rocklet.client.message import MessageExt
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.filter import parse_tag_expression, tags_match
from rocklet.protocol.message import BLANK_MAGIC, MESSAGE_MAGIC, RECORD_OVERHEAD, decode_message
from rocklet.spark.options import OfflineOptions
from rocklet.spark.ranges import FLUSH_BYTES, FLUSH_ROWS
from rocklet.spark.schema import RowBuffer
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["OfflineStoreReader", "Segment", "StoreCorruptionError", "read_segment"]

_log = get_logger(__name__)

_HEAD: Final = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE


class StoreCorruptionError(RuntimeError):
    """A commitlog record does not decode (and failOnCorruption is on)."""


@dataclass(frozen=True)
class Segment(InputPartition):
    """One commitlog segment file.

    Attributes:
        path: The file.
        base_offset: Its first commitlog offset (the file's name).
    """

    path: str
    base_offset: int

    def __repr__(self) -> str:
        return f"Segment({self.path})"


def list_segments(commitlog_dir: Path) -> list[Segment]:
    """The segments of a commitlog directory, in offset order."""
    files = [p for p in commitlog_dir.iterdir() if p.is_file() and p.name.isdigit()]
    return [Segment(str(p), int(p.name)) for p in sorted(files, key=lambda p: int(p.name))]


class OfflineStoreReader(DataSourceReader):
    """Batch reader over a store directory's commitlog.

    Args:
        opts: Parsed offline options.
    """

    def __init__(self, opts: OfflineOptions) -> None:
        self._opts = opts

    def partitions(self) -> list[InputPartition]:
        """One partition per segment file."""
        return list(list_segments(self._opts.commitlog_dir))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one segment (executor)."""
        if not isinstance(partition, Segment):
            return iter(())
        return read_segment(partition, self._opts)


def _wanted(opts: OfflineOptions, tags: frozenset[str] | None, msg: MessageExt) -> bool:
    if opts.topics and msg.topic not in opts.topics:
        return False
    if opts.pattern is not None and not opts.pattern.fullmatch(msg.topic):
        return False
    return tags_match(tags, msg.tags)


def read_segment(segment: Segment, opts: OfflineOptions) -> Iterator[pa.RecordBatch]:
    """Decode the records of one segment.

    Args:
        segment: The file.
        opts: Filters and checks.

    Yields:
        Arrow batches of the wanted records, in commitlog order.

    Raises:
        StoreCorruptionError: A bad record, with ``fail_on_corruption``.
    """
    with open(segment.path, "rb") as f:
        if not f.seek(0, 2):
            return  # an empty file holds nothing
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(data)
    try:
        yield from _walk(segment, view, opts)
    finally:
        view.release()
        data.close()


def _walk(segment: Segment, data: memoryview, opts: OfflineOptions) -> Iterator[pa.RecordBatch]:
    tags = parse_tag_expression(opts.sub_expression)
    rows = RowBuffer(opts.broker_name)
    size, pos, end = 0, 0, len(data)
    while pos + _HEAD.size <= end:
        total, magic = _HEAD.unpack_from(data, pos)
        if magic == BLANK_MAGIC or (magic == 0 and total == 0):
            break
        try:
            msg = _decode(data, pos, total, magic, opts.verify_crc)
        except MessageFormatError as exc:
            _corruption(segment, pos, str(exc), opts)
            break
        pos += total
        if not _wanted(opts, tags, msg):
            continue
        rows.add(msg)
        size += len(msg.body)
        if len(rows) >= FLUSH_ROWS or size >= FLUSH_BYTES:
            yield rows.flush()
            size = 0
    if len(rows):
        yield rows.flush()


def _decode(data: memoryview, pos: int, total: int, magic: int, verify_crc: bool) -> MessageExt:
    if magic != MESSAGE_MAGIC:
        raise MessageFormatError(f"unknown magic {magic & 0xFFFFFFFF:#010x}")
    if total < RECORD_OVERHEAD or pos + total > len(data):
        raise MessageFormatError(f"record size {total} does not fit the segment")
    stored = decode_message(data, pos)
    if verify_crc and not stored.crc_ok():
        raise MessageFormatError("body CRC does not match")
    return MessageExt.from_stored(stored)


def _corruption(segment: Segment, pos: int, why: str, opts: OfflineOptions) -> None:
    where = f"{segment.path} at byte {pos} (commitlog offset {segment.base_offset + pos})"
    if opts.fail_on_corruption:
        raise StoreCorruptionError(
            f"bad record in {where}: {why}. Set failOnCorruption=false to stop reading "
            "the segment there instead (as RocketMQ's recovery truncates)."
        )
    _log.warning("bad record; rest of the segment skipped", where=where, why=why)
