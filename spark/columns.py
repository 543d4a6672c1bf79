"""Source rows built column by column from raw stored records (pull bodies).

The broker source used to decode every pulled record into an SDK ``MessageExt``,
parse its properties into a dict and append 14 Python values per row to
:class:`~rocklet.spark.schema.RowBuffer`; at a few microseconds a row that was most of
a partition's Python time. :class:`RecordColumns` keeps the pull bodies as they came
and, at flush, builds each Arrow column from the record layout
(:mod:`rocklet.protocol.message`) in bulk:

* one Python step per record only to find where it starts (records are variable
  length) and to drop offsets outside the window being read;
* the fixed-width fields of all records gathered at once (numpy over the record
  starts), timestamps scaled to microseconds, the offset msgId hex-encoded by table;
* topic, body and properties as Arrow binary arrays sliced straight out of the
  bodies' buffer, the properties split into key/value lists with Arrow compute and
  built with ``MapArray.from_arrays``; UNIQ_KEY, KEYS and TAGS become their columns;
* the tag filter (the broker filters by tag hash, which collides) as one mask.

The rows are exactly :class:`~rocklet.spark.schema.RowBuffer`'s. Batches this path does
not handle exactly the same way are built by the SDK's decoder and ``RowBuffer``
instead, as before: without numpy, with IPv6 hosts, properties that are not valid
UTF-8 (decoded with replacement there) or that repeat a name (the last value wins
there), or a record that does not add up (the SDK decoder raises its error).
Compressed bodies are inflated one by one in both paths.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Set
from typing import TYPE_CHECKING, Any, Final

from rocklet.client.message import MessageExt
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import MESSAGE_MAGIC, RECORD_OVERHEAD, SysFlag, decode_message
from rocklet.protocol.properties import Prop
from rocklet.spark.schema import RowBuffer, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

try:
    import numpy as np
except ImportError:  # pragma: no cover - pyspark's Arrow support brings numpy along
    np = None  # type: ignore[assignment]

__all__ = ["RecordColumns"]

#: size, magic, (crc, queue id, flag), queue offset: what the walk reads of each record.
_WALK: Final = struct.Struct(">ii12xq")
_HOSTS_V6: Final = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
_COMPRESSED: Final = int(SysFlag.COMPRESSED)
_COMPRESSION_TYPE: Final = int(SysFlag.COMPRESSION_TYPE)
#: Bytes before the body of a record with IPv4 hosts (through BODY length).
_FIXED_SIZE: Final = 88
#: Property names that get columns of their own rather than map entries.
_SPECIAL: Final = (Prop.UNIQ_KEY, Prop.KEYS, Prop.TAGS)


class RecordColumns:
    """Collects pulled records and turns them into one RecordBatch of source rows.

    Args:
        broker_name: Every row's ``brokerName`` (``""``: null, as ``RowBuffer``).
        tags: Keep only records whose TAGS is one of these; ``None`` keeps all.
        columnar: Build columns in bulk when possible (``False``: always the SDK
            decoder and ``RowBuffer``; tests compare the two).
    """

    __slots__ = ("_broker_name", "_chunks", "_columnar", "_starts", "_tags", "_used")

    def __init__(
        self, broker_name: str, tags: Set[str] | None = None, *, columnar: bool = True
    ) -> None:
        self._broker_name = broker_name
        self._tags = None if tags is None else frozenset(tags)
        self._columnar = columnar and np is not None
        self._chunks: list[bytes] = []
        #: Start of each kept record, counted across the chunks (as if joined).
        self._starts: list[int] = []
        self._used = 0

    def __len__(self) -> int:
        """Records collected (before the tag filter, which applies at flush)."""
        return len(self._starts)

    def add(self, data: bytes, low: int, high: int) -> int:
        """Take the records of one pull body whose queue offsets are in ``[low, high)``.

        With a tag filter the broker scans past the offsets asked for until it has
        enough matches; the records outside the window belong to another window.

        Args:
            data: Back-to-back stored records (a pull body).
            low: First queue offset wanted.
            high: Offset after the last wanted.

        Returns:
            The bytes of the records taken (what the flush thresholds count).

        Raises:
            MessageFormatError: A record's head is malformed or it runs past the body.
        """
        kept: list[int] = []
        append, unpack, base = kept.append, _WALK.unpack_from, self._used
        pos, total, taken = 0, len(data), 0
        while pos < total:
            if pos + _WALK.size > total:
                raise MessageFormatError(f"record at {pos} is truncated in its fixed fields")
            size, magic, queue_offset = unpack(data, pos)
            if magic != MESSAGE_MAGIC or size < RECORD_OVERHEAD or pos + size > total:
                raise MessageFormatError(f"bad record at {pos} (size {size}, magic {magic:#x})")
            if low <= queue_offset < high:
                append(base + pos)
                taken += size
            pos += size
        if taken:
            self._starts += kept
            self._chunks.append(data)
            self._used += len(data)
        return taken

    def flush(self) -> pa.RecordBatch:
        """Return the collected rows (tag-filtered) as a batch and start empty again.

        Raises:
            MessageFormatError: A record does not decode (a compressed body that does
                not inflate, a length that runs past its record).
        """
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        starts = self._starts
        self._chunks, self._starts, self._used = [], [], 0
        batch = _columns(data, starts, self._broker_name or None) if self._columnar else None
        if batch is None:
            return self._decoded(data, starts)
        if self._tags is not None:
            import pyarrow as pa
            import pyarrow.compute as pc

            wanted = pa.array(sorted(self._tags), pa.string())
            batch = batch.filter(pc.fill_null(pc.is_in(batch.column(5), value_set=wanted), False))
        return batch

    def _decoded(self, data: bytes, starts: list[int]) -> pa.RecordBatch:
        # The reference path: the SDK's decoder, its tag check and RowBuffer.
        rows = RowBuffer()
        tags = self._tags
        for pos in starts:
            msg = MessageExt.from_stored(decode_message(data, pos), broker_name=self._broker_name)
            if tags is None or msg.properties.get(Prop.TAGS) in tags:
                rows.add(msg)
        return rows.flush()


# -- the bulk path ----------------------------------------------------------------------------

#: The fixed fields of a record with IPv4 hosts, big-endian, at their offsets.
_FIXED_FIELDS: Final = {
    "size": (">i4", 0),
    "queue_id": (">i4", 12),
    "flag": (">i4", 16),
    "queue_offset": (">i8", 20),
    "physical_offset": (">i8", 28),
    "sys_flag": (">i4", 36),
    "born_timestamp": (">i8", 40),
    "store_timestamp": (">i8", 56),
    "reconsume_times": (">i4", 72),
    "body_len": (">i4", 84),
}
_np_cache: dict[str, Any] = {}


def _np_tables() -> dict[str, Any]:
    """The numpy constants, made once per process."""
    if not _np_cache:
        _np_cache["dtype"] = np.dtype(
            {
                "names": list(_FIXED_FIELDS),
                "formats": [f for f, _ in _FIXED_FIELDS.values()],
                "offsets": [o for _, o in _FIXED_FIELDS.values()],
                "itemsize": _FIXED_SIZE,
            }
        )
        _np_cache["fixed"] = np.arange(_FIXED_SIZE, dtype=np.int64)
        # Upper-case hex digits of every byte value: the offset msgId's alphabet.
        _np_cache["hex"] = np.frombuffer(
            "".join(f"{b:02X}" for b in range(256)).encode(), dtype=np.uint8
        ).reshape(256, 2)
    return _np_cache


def _columns(data: bytes, starts: list[int], broker_name: str | None) -> pa.RecordBatch | None:
    """Build the batch in bulk, or ``None`` when the records need the reference path."""
    import pyarrow as pa

    n = len(starts)
    schema = arrow_schema()
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    t = _np_tables()
    buf = np.frombuffer(data, dtype=np.uint8)
    start = np.asarray(starts, dtype=np.int64)
    # Every record is at least RECORD_OVERHEAD (> 88) bytes and inside ``data`` (the
    # walk checked), so the fixed fields can be gathered before anything else.
    fixed = buf[start[:, None] + t["fixed"]]
    rec = fixed.view(t["dtype"]).reshape(n)
    sys_flag = rec["sys_flag"]
    if (sys_flag & _HOSTS_V6).any():
        return None  # another layout; rare (Java brokers with IPv6 hosts)
    end = start + rec["size"]
    body_len = rec["body_len"].astype(np.int64)
    body_start = start + _FIXED_SIZE
    body_end = body_start + body_len
    if ((body_len < 0) | (body_end + 3 > end)).any():
        return None  # malformed: the reference path raises the SDK's error
    topic_len = buf[body_end].astype(np.int64)
    topic_end = body_end + 1 + topic_len
    if (topic_len > 127).any() or (topic_end + 2 > end).any():
        return None
    props_len = (buf[topic_end].astype(np.int64) << 8) | buf[topic_end + 1]
    props_start = topic_end + 2
    if (props_start + props_len != end).any():
        return None
    values = pa.py_buffer(data)
    topic = _slices(values, body_end + 1, topic_end)
    raw_props = _slices(values, props_start, end)
    props = _properties(raw_props, n)
    if props is None:
        return None
    try:
        topic = topic.cast(pa.string())
    except pa.ArrowInvalid:
        return None  # not UTF-8: the reference path decodes with replacement
    uniq, keys, tags, entries = props
    if uniq.null_count:
        import pyarrow.compute as pc

        ids = np.concatenate([fixed[:, 64:72], fixed[:, 28:36]], axis=1)  # store host + offset
        hexed = t["hex"][ids].reshape(n, 32)
        offsets = pa.py_buffer(np.arange(0, 32 * (n + 1), 32, dtype=np.int32))
        offset_ids = pa.Array.from_buffers(
            pa.string(), n, [None, offsets, pa.py_buffer(hexed.tobytes())]
        )
        msg_id = pc.coalesce(uniq, offset_ids)
    else:
        msg_id = uniq
    compressed = np.flatnonzero(sys_flag & _COMPRESSED)
    if len(compressed):
        body = _inflated(data, body_start, body_end, sys_flag, compressed)
    else:
        body = _slices(values, body_start, body_end).cast(pa.binary())
    ts = schema.field("bornTimestamp").type
    arrays = [
        topic,
        pa.array(rec["queue_id"].astype(np.int32)),
        pa.array(rec["queue_offset"].astype(np.int64)),
        msg_id,
        keys,
        tags,
        body,
        entries,
        pa.array(rec["born_timestamp"].astype(np.int64) * 1000).view(ts),
        pa.array(rec["store_timestamp"].astype(np.int64) * 1000).view(ts),
        pa.nulls(n, pa.string()) if broker_name is None else pa.repeat(broker_name, n),
        pa.array(rec["flag"].astype(np.int32)),
        pa.array(rec["reconsume_times"].astype(np.int32)),
        pa.array(rec["physical_offset"].astype(np.int64)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _slices(values: pa.Buffer, start: Any, end: Any) -> pa.Array:
    """``values[start[i]:end[i]]`` for each i, as one compact large_binary array.

    The slices are in buffer order and do not overlap, so start/end interleaved are
    valid Arrow offsets of an array whose even elements are the slices (the odd ones
    are the bytes between); taking the even ones copies them out in one pass.
    """
    import pyarrow as pa

    n = len(start)
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = start
    bounds[1::2] = end
    both = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), values])
    return both.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))


def _properties(raw: pa.Array, n: int) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array] | None:
    """UNIQ_KEY, KEYS and TAGS columns and the map of the rest, from raw properties.

    Splits as :func:`~rocklet.protocol.properties.decode_properties` does: items on
    0x02, name and value on the first 0x01, items without one or with an empty name
    or value dropped. ``None`` when a record repeats a name or the text is not UTF-8
    (the reference path resolves those as it always has).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    items = pc.split_pattern(raw, "\x02")
    row = pc.list_parent_indices(items)
    pairs = pc.split_pattern(pc.list_flatten(items), "\x01", max_splits=1)
    whole = pc.equal(pc.list_value_length(pairs), 2)
    pairs, row = pairs.filter(whole), row.filter(whole)
    names, values = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    kept = pc.and_(pc.greater(pc.binary_length(names), 0), pc.greater(pc.binary_length(values), 0))
    names, values, row = names.filter(kept), values.filter(kept), row.filter(kept)
    try:
        names, values = names.cast(pa.string()), values.cast(pa.string())
    except pa.ArrowInvalid:
        return None
    rows = np.asarray(row, dtype=np.int64)
    if len(rows):
        distinct = pa.table({"r": row, "k": names}).group_by(["r", "k"]).aggregate([])
        if distinct.num_rows != len(rows):
            return None
    special = []
    rest = None
    for name in _SPECIAL:
        hit = pc.equal(names, name)
        rest = hit if rest is None else pc.or_(rest, hit)
        where = np.flatnonzero(np.asarray(hit, dtype=bool))
        index = np.full(n, -1, dtype=np.int64)
        index[rows[where]] = np.arange(len(where), dtype=np.int64)
        picks = pa.array(index, mask=index < 0)
        special.append(values.filter(hit).take(picks))
    other = pc.invert(rest) if rest is not None else None
    map_rows = rows[np.asarray(other, dtype=bool)] if other is not None else rows
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(map_rows, minlength=n), out=offsets[1:])
    map_type = arrow_schema().field("properties").type
    entries = pa.MapArray.from_arrays(
        pa.array(offsets),
        names.filter(other) if other is not None else names,
        values.filter(other) if other is not None else values,
        type=map_type,
    )
    return special[0], special[1], special[2], entries


def _inflated(data: bytes, start: Any, end: Any, sys_flag: Any, compressed: Any) -> pa.Array:
    """The body column when some bodies are compressed: those inflated one by one."""
    import pyarrow as pa

    bodies = [data[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)]
    for i in compressed.tolist():
        kind = int(sys_flag[i]) & _COMPRESSION_TYPE
        # As StoredMessage.payload: zlib only (types 0 and 0x300), same errors.
        if kind not in (0, 0x300):
            raise MessageFormatError(f"unsupported compression type {kind:#x}")
        try:
            bodies[i] = zlib.decompress(bodies[i])
        except zlib.error as exc:
            raise MessageFormatError(f"compressed body does not inflate: {exc}") from None
    return pa.array(bodies, pa.binary())
