"""The sink's batch sends, their bodies built from the Arrow columns in bulk.

Turning every row into an SDK :class:`~rocklet.client.message.Message` (a Python value
per cell, a dict, a message) and letting the producer encode each SEND_BATCH_MESSAGE
body from them costs several microseconds a row, most of a task's Python time.
:func:`encode_rows` builds the same bodies from a record batch's columns at once:

* each message's properties text (``UNIQ_KEY``, ``WAIT``, ``TAGS``, ``KEYS``, the
  ``properties`` map's entries, ``rockletWriteId``: ``send_properties``' order) is
  joined column-wise with Arrow compute, the map's entries as one list per row;
* the UNIQ_KEYs are reserved from the producer's generator in one step and written as
  hex by numpy table lookups, exactly as ``UniqKeyGenerator.next`` makes them;
* the fixed item heads (protocol.batch) are a numpy big-endian structured array, and
  every row's whole item (head, body, properties) is one joined binary column whose
  value buffer, in send order, holds the batch bodies back to back.

The rows are grouped as :func:`~rocklet.spark.sink.batches_by_topic` groups messages
(one topic, row order, at most ``BATCH_MESSAGES`` messages and ``BATCH_BYTES`` of
bodies), and the bodies are byte for byte those of the per-row path with the same
UNIQ_KEYs. A record batch this path does not build exactly the same way goes the
per-row way (``encode_rows`` returns None before taking any write id): one with a row
the per-row path refuses (no body, no topic, an invalid topic, a body, properties text
or batch over its limit: that path raises its usual error), columns of other types, a
``properties`` map that repeats a name or sets ``rockletWriteId`` while write ids are
on (the per-row dict keeps the first position and the last value).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocklet.client.send_wire import UNIQ_COUNTER_MASK, EncodedBatch
from rocklet.protocol.names import AUTO_CREATE_TOPIC, check_topic_name
from rocklet.protocol.properties import MAX_PROPERTIES_SIZE, Prop

if TYPE_CHECKING:
    from rocklet.spark.sink_marker import WriteIdent

__all__ = [
    "BATCH_BYTES",
    "BATCH_MESSAGES",
    "PY_WHITESPACE",
    "SYSTEM_PROPERTIES",
    "WRITE_ID_PROPERTY",
    "UniqKeySource",
    "WriteIds",
    "encode_rows",
]

#: The property holding a message's deterministic write id.
WRITE_ID_PROPERTY: Final = "rockletWriteId"
#: Messages and bytes of bodies per batch send (RocketMQ caps a batch body at 4 MiB).
BATCH_MESSAGES: Final = 256
BATCH_BYTES: Final = 1 << 20
#: Property names the SDK or broker own: dropped from the ``properties`` column.
SYSTEM_PROPERTIES: Final = frozenset(
    value for name, value in vars(Prop).items() if name.isupper() and isinstance(value, str)
)
#: The characters ``str.split()`` splits on (``str.isspace``), for the ``keys`` text.
PY_WHITESPACE: Final = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
#: ``keys`` text that ``" ".join(text.split())`` would change (RE2 syntax).
_UNSPLIT: Final = "^ | $|  |[" + PY_WHITESPACE.replace(" ", "") + "]"
#: A batch item's fixed head (protocol.batch): size, magic, body CRC, flag, body length.
_HEAD: Final = np.dtype(
    [("size", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body", ">i4")]
)
_ITEM_OVERHEAD: Final = 22  # the head and the int16 properties length
_HEX: Final = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_SHIFTS: Final = np.arange(44, -1, -4, dtype=np.uint64)  # a UNIQ_KEY's 12 hex digits
#: Binary offsets are int32: a record batch whose items outgrow them goes per row.
_MAX_COLUMN: Final = (1 << 31) - 1
_STRINGS: Final = (pa.string(), pa.large_string(), pa.string_view())
_BINARIES: Final = (*_STRINGS, pa.binary(), pa.large_binary(), pa.binary_view())
_SYSTEM_NAMES: Final = pa.array(sorted(SYSTEM_PROPERTIES), pa.string())
#: What _user_properties returns when no row has an entry to send.
_NO_ENTRIES: Final = pa.array([], pa.binary())
_ENTRIES: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))


class UniqKeySource(Protocol):
    """Where UNIQ_KEYs come from (:meth:`rocklet.client.producer.Producer.reserve_uniq_keys`)."""

    def reserve_uniq_keys(self, n: int) -> tuple[str, int]:
        """``(prefix, first)`` of ``n`` reserved keys (``send_wire.reserve_uniq_keys``)."""
        ...


class WriteIds(Iterator[str]):
    """``rockletWriteId`` values ``<prefix><seq>``, seq = 0, 1, ...

    An iterator for the per-row path; the columnar path takes a run of numbers.

    Args:
        prefix: Everything before the sequence number.
    """

    __slots__ = ("prefix", "seq")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.seq = 0

    @classmethod
    def of(cls, ident: WriteIdent) -> WriteIds:
        """The write ids of a streaming task (``WriteIdent.write_ids``' values)."""
        return cls(ident.write_id_prefix)

    def __next__(self) -> str:
        seq = self.seq
        self.seq = seq + 1
        return f"{self.prefix}{seq}"


def encode_rows(
    rows: pa.RecordBatch,
    topic: str | None,
    write_ids: WriteIds | None,
    ids: UniqKeySource,
    max_size: int,
) -> list[EncodedBatch] | None:
    """The batch sends of one Arrow batch of sink rows, built column-wise.

    Args:
        rows: The rows (``body``, ``topic``, ``tags``, ``keys``, ``properties``).
        topic: The ``topic`` option (wins over the column), or None.
        write_ids: Where the rows' ``rockletWriteId`` values come from, or None.
        ids: Reserves the messages' UNIQ_KEYs (the producer that sends them).
        max_size: The producer's largest message body, and batch body.

    Returns:
        The batches in send order (as ``batches_by_topic`` orders them), or None when
        the rows need the per-row path; then no write id was taken.
    """
    n = rows.num_rows
    if n == 0:
        return []
    index = rows.schema.get_field_index("body")
    if index < 0 or rows.schema.field(index).type not in _BINARIES:
        return None
    body = _as_binary(rows.column(index))
    blen = pc.fill_null(pc.binary_length(body), 0).to_numpy().astype(np.int64)
    if not blen.all() or int(blen.max()) > max_size:
        return None  # an empty or oversized body: the per-row path raises
    grouped = _by_topic(rows, topic, n)
    if grouped is None:
        return None
    order, names, ends = grouped
    rest = _properties_after_uniq(rows, n, write_ids)
    if rest is None:
        return None
    plen = pc.binary_length(rest).to_numpy().astype(np.int64)
    spans = _chunks(blen if order is None else blen[order], ends)
    # The properties' and batches' sizes are checked once the keys are drawn: a
    # refusal then only leaves unused numbers in the producer's generator.
    prefix, first = ids.reserve_uniq_keys(n)
    uniq = _uniq_matrix(prefix, first, n)  # in send order
    plen += 9 + uniq.shape[1]  # "UNIQ_KEY" 0x01 <uniq>
    size = _ITEM_OVERHEAD + blen + plen
    if int(plen.max()) > MAX_PROPERTIES_SIZE or int(size.sum()) > _MAX_COLUMN:
        return None  # the per-row path raises (too long), or sends it (too big for us)
    rank = None if order is None else np.empty(n, dtype=np.int64)
    if rank is not None:
        rank[order] = np.arange(n)
    uniq_rows = _fixed_binary(uniq if rank is None else uniq[rank])
    props = pc.binary_join_element_wise(b"UNIQ_KEY\x01", uniq_rows, rest, b"")
    head = np.zeros(n, dtype=_HEAD)
    head["size"] = size
    head["body"] = blen
    items = pc.binary_join_element_wise(
        _fixed_binary(head.view(np.uint8).reshape(n, _HEAD.itemsize)),
        body,
        _fixed_binary(plen.astype(">i2").view(np.uint8).reshape(n, 2)),
        props,
        b"",
    )
    if order is not None:
        items = items.take(pa.array(order))
    where = items.buffers()[1]
    offsets = np.frombuffer(where, dtype=np.int32, count=n + 1, offset=items.offset * 4)
    starts, stops = np.array(spans).T
    if int((offsets[stops] - offsets[starts]).max()) > max_size:
        return None  # a batch body over the limit: the per-row path raises
    if write_ids is not None:
        write_ids.seq += n
    values = items.buffers()[2]
    # Each batch's UNIQ_KEYs comma-joined (SendResult.msg_id): the keys' rows in send
    # order with a comma each, one text, sliced per batch.
    width = uniq.shape[1] + 1
    listed = np.empty((n, width), dtype=np.uint8)
    listed[:, :-1] = uniq
    listed[:, -1] = ord(",")
    text = listed.tobytes().decode("ascii")
    out = []
    for s, e in spans:
        topic_of = names[int(np.searchsorted(ends, s, side="right"))]
        start = int(offsets[s])
        chunk = values.slice(start, int(offsets[e]) - start).to_pybytes()
        out.append(EncodedBatch(topic_of, chunk, text[s * width : e * width - 1], e - s))
    return out


def _as_binary(column: pa.Array) -> pa.Array:
    """A text or binary column as ``binary`` (``string``: the same buffers)."""
    if column.type in _STRINGS:
        column = column.cast(pa.string())
    return column.cast(pa.binary())


def _by_topic(
    rows: pa.RecordBatch, topic: str | None, n: int
) -> tuple[np.ndarray | None, list[str], np.ndarray] | None:
    """Send order (None: row order), the topics in it, and where each topic's rows end."""
    if topic:
        names = [topic]
        order = None
        ends = np.array([n])
    else:
        index = rows.schema.get_field_index("topic")
        if index < 0 or rows.schema.field(index).type not in _STRINGS:
            return None
        column = rows.column(index).cast(pa.string())
        if column.null_count or not pc.all(pc.greater(pc.binary_length(column), 0)).as_py():
            return None  # a row without topic: the per-row path raises
        encoded = column.dictionary_encode()
        found = encoded.dictionary.to_pylist()
        names = sorted(found)  # Python's order: batches_by_topic's sort
        rank = np.empty(len(found), dtype=np.int64)
        rank[sorted(range(len(found)), key=found.__getitem__)] = np.arange(len(found))
        ranked = rank[encoded.indices.to_numpy()]
        order = None if len(found) == 1 else np.argsort(ranked, kind="stable")
        ends = np.cumsum(np.bincount(ranked, minlength=len(found)))
    for name in names:
        if check_topic_name(name) is not None or name == AUTO_CREATE_TOPIC:
            return None  # the per-row path raises the producer's error
    return order, names, ends


def _chunks(blen: np.ndarray, ends: np.ndarray) -> list[tuple[int, int]]:
    """``batches_by_topic``'s cuts, one Python step per batch: (start, stop) in send order."""
    total = np.cumsum(blen)
    spans = []
    start = 0
    for end in ends.tolist():
        while start < end:
            base = int(total[start - 1]) if start else 0
            fits = int(np.searchsorted(total, base + BATCH_BYTES, side="right"))
            stop = max(start + 1, min(fits, start + BATCH_MESSAGES, end))
            spans.append((start, stop))
            start = stop
    return spans


def _properties_after_uniq(
    rows: pa.RecordBatch, n: int, write_ids: WriteIds | None
) -> pa.Array | None:
    """Each row's properties text after its UNIQ_KEY (binary; write ids from ``seq`` on)."""
    parts: list[Any] = [b"\x02WAIT\x01true"]
    tags = _optional(rows, "tags")
    if tags is not None:
        if tags.type not in _STRINGS:
            return None
        parts.append(_labelled(b"\x02TAGS\x01", _as_binary(tags)))
    keys = _optional(rows, "keys")
    if keys is not None:
        keys = _keys_text(keys)
        if keys is None:
            return None
        parts.append(_labelled(b"\x02KEYS\x01", keys))
    entries = _optional(rows, "properties")
    if entries is not None:
        user = _user_properties(entries, n, write_ids is not None)
        if user is None:
            return None
        if user is not _NO_ENTRIES:
            parts.append(user)
    if write_ids is not None:
        seqs = pa.array(np.arange(write_ids.seq, write_ids.seq + n)).cast(pa.string())
        label = f"\x02{WRITE_ID_PROPERTY}\x01{write_ids.prefix}".encode()
        parts.append(pc.binary_join_element_wise(label, seqs.cast(pa.binary()), b""))
    if len(parts) == 1:
        return pa.repeat(pa.scalar(parts[0], pa.binary()), n)  # only WAIT
    return pc.binary_join_element_wise(*parts, b"")


def _optional(rows: pa.RecordBatch, name: str) -> pa.Array | None:
    """An optional column, or None when missing or of Arrow's null type (all null)."""
    index = rows.schema.get_field_index(name)
    if index < 0 or pa.types.is_null(rows.schema.field(index).type):
        return None
    return rows.column(index)


def _labelled(label: bytes, values: pa.Array) -> pa.Array:
    """``label + value`` where the value is set and not empty, else empty."""
    joined = pc.binary_join_element_wise(label, values, b"")
    keep = pc.fill_null(pc.greater(pc.binary_length(values), 0), False)
    return pc.if_else(keep, joined, b"")


def _keys_text(column: pa.Array) -> pa.Array | None:
    """The ``keys`` column as KEYS text (binary; null or empty for no keys)."""
    if column.type in _STRINGS:
        text = column.cast(pa.string())
        odd = pc.fill_null(pc.match_substring_regex(text, _UNSPLIT), False)
        if pc.any(odd).as_py():
            # Tabs, runs of spaces...: the per-row normalisation, for those rows only.
            fixed = [" ".join(s.split()) for s in text.filter(odd).to_pylist()]
            text = pc.replace_with_mask(text, odd, pa.array(fixed, pa.string()))
        return text.cast(pa.binary())
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return None
    if column.type.value_type not in _STRINGS:
        return None
    lists = column.cast(pa.list_(pa.string()))
    flat = pc.list_flatten(lists)
    kept = pc.fill_null(pc.greater(pc.binary_length(flat), 0), False)
    if not pc.all(kept).as_py():  # None and "" keys are left out
        parent = pc.list_parent_indices(lists).to_numpy()
        lists = _lists(flat.filter(kept), parent[kept.to_numpy(zero_copy_only=False)], len(lists))
    return pc.binary_join(lists, " ").cast(pa.binary())


def _user_properties(column: pa.Array, n: int, with_write_id: bool) -> pa.Array | None:
    """The ``properties`` entries as properties text (binary), or ``_NO_ENTRIES``."""
    if not pa.types.is_map(column.type):
        return None
    if column.type.key_type not in _STRINGS or column.type.item_type not in _STRINGS:
        return None
    entries = column.cast(_ENTRIES)
    flat = pc.list_flatten(entries)
    if len(flat) == 0:
        return _NO_ENTRIES
    names, values = flat.field("key"), flat.field("value")
    parent = pc.list_parent_indices(entries).to_numpy()
    user = pc.and_(pc.is_valid(values), pc.invert(pc.is_in(names, _SYSTEM_NAMES)))
    user_np = user.to_numpy(zero_copy_only=False)
    names, parent = names.filter(user), parent[user_np]
    values = values.filter(user)
    if len(names) == 0:
        return _NO_ENTRIES
    if with_write_id and pc.any(pc.equal(names, WRITE_ID_PROPERTY)).as_py():
        return None  # the write id takes that entry's place in the per-row dict
    if int(np.bincount(parent).max()) > 1:
        pairs = pa.table({"p": parent, "k": names}).group_by(["p", "k"]).aggregate([])
        if pairs.num_rows < len(names):
            return None  # a repeated name: the per-row dict keeps the last value
    # send_properties skips empty names and values.
    shown = pc.and_(pc.greater(pc.binary_length(names), 0), pc.greater(pc.binary_length(values), 0))
    pairs_text = pc.binary_join_element_wise(
        b"\x02", names.cast(pa.binary()), b"\x01", values.cast(pa.binary()), b""
    )
    lists = _lists(pairs_text.filter(shown), parent[shown.to_numpy(zero_copy_only=False)], n)
    return pc.binary_join(lists, b"")


def _lists(values: pa.Array, parent: np.ndarray, n: int) -> pa.Array:
    """``n`` lists of ``values``, each value going to the row ``parent`` names (ordered)."""
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent, minlength=n), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _uniq_matrix(prefix: str, first: int, n: int) -> np.ndarray:
    """UNIQ_KEYs ``first`` .. ``first + n - 1`` as ASCII rows (``send_wire.uniq_key``)."""
    numbers = (np.arange(n, dtype=np.uint64) + np.uint64(first)) & np.uint64(UNIQ_COUNTER_MASK)
    head = np.frombuffer(prefix.encode("ascii"), dtype=np.uint8)
    out = np.empty((n, len(head) + len(_SHIFTS)), dtype=np.uint8)
    out[:, : len(head)] = head
    out[:, len(head) :] = _HEX[(numbers[:, None] >> _SHIFTS) & np.uint64(15)]
    return out


def _fixed_binary(rows: np.ndarray) -> pa.Array:
    """A 2-D uint8 array's rows as a binary column."""
    n, width = rows.shape
    data = pa.py_buffer(np.ascontiguousarray(rows))
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, data])
    return fixed.cast(pa.binary())
