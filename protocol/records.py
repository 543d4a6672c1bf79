"""Pull and query bodies: back-to-back stored records scanned straight into message objects.

A consumer turns every record of a pull answer (the layout in
:mod:`rocklet.protocol.message`) into one message object; at a few hundred thousand
messages a second that loop is most of the SDK's consume cost. :func:`scan_records` does
it for the common records (IPv4 hosts, body not compressed) and stops at the first other
one, which the caller decodes with :func:`~rocklet.protocol.message.decode_message`. The
properties stay raw (:class:`LazyProperties`) until someone reads them.

It has a compiled twin in ``protocol/_speedups.pyx`` that sets the message's slots
directly instead of calling its ``__init__``; this module's Python loop stays the
reference and the fallback (``ROCKLET_PURE_PYTHON=1``), and
``tests/protocol/test_records_speedups.py`` checks both give equal messages and the same
errors.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Generic, TypeVar

from rocklet.protocol import compiled
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import MESSAGE_MAGIC, SysFlag
from rocklet.protocol.properties import decode_properties

__all__ = ["RECORD_FIELDS", "LazyProperties", "RecordScanner"]

#: What a scanned record fills, in this order (the consumer's message class declares
#: these slots, and its ``__init__`` takes them positionally in this order).
RECORD_FIELDS: Final = (
    "topic",
    "body",
    "properties",
    "flag",
    "queue_id",
    "queue_offset",
    "commit_log_offset",
    "sys_flag",
    "born_timestamp",
    "born_host",
    "store_timestamp",
    "store_host",
    "reconsume_times",
    "prepared_transaction_offset",
    "store_size",
    "body_crc",
    "broker_name",
)

#: size, magic, crc, queue id, flag, queue offset, physical offset, sysFlag,
#: born time, born host, store time, store host, reconsume times, prepared offset,
#: body length: everything before the body of a record with IPv4 hosts.
_FIXED: Final = struct.Struct(">iiiiiqqiq8sq8siqi")
#: Records the scan leaves to the caller: IPv6 hosts (another layout) or a
#: compressed body (inflating can fail, with the caller's error).
_UNUSUAL: Final = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | SysFlag.COMPRESSED)
_I16: Final = struct.Struct(">h")
_host_cache: dict[bytes, tuple[str, int]] = {}

M = TypeVar("M")


class LazyProperties(Mapping[str, str]):
    """A message's properties, parsed from the stored string on first use.

    Most listeners read the body and never the properties; parsing them costs about
    as much as building the message, so it waits until someone looks.

    Args:
        raw: The stored properties string.
    """

    __slots__ = ("_parsed", "_raw")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._parsed: dict[str, str] | None = None

    def _table(self) -> dict[str, str]:
        parsed = self._parsed
        if parsed is None:
            parsed = self._parsed = decode_properties(self._raw)
        return parsed

    def __getitem__(self, key: str) -> str:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return repr(self._table())


def _host(raw: bytes) -> tuple[str, int]:
    host = _host_cache.get(raw)
    if host is None:
        port = int.from_bytes(raw[4:], "big", signed=True)
        host = (f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}", port)
        if len(_host_cache) < 4096:  # a consumer sees few hosts; stay bounded anyway
            _host_cache[raw] = host
    return host


def scan_records_py(
    data: bytes, pos: int, make: Callable[..., M], broker_name: str
) -> tuple[list[M], int]:
    """Build a message per common record from ``pos`` on (the Python twin).

    Args:
        data: Back-to-back records (a pull or query body).
        pos: Where the first record starts.
        make: Called with the :data:`RECORD_FIELDS` values, positionally.
        broker_name: The last field of every message.

    Returns:
        The messages, and where scanning stopped: ``len(data)``, or the start of the
        first record with IPv6 hosts or a compressed body (checked as far as its fixed
        fields), which the caller decodes itself.

    Raises:
        MessageFormatError: A record is malformed or truncated.
    """
    out: list[M] = []
    append = out.append
    unpack = _FIXED.unpack_from
    fixed = _FIXED.size
    end_of_data = len(data)
    topics: dict[bytes, str] = {}
    cached_host = _host_cache.get
    while pos < end_of_data:
        if pos + fixed > end_of_data:
            raise MessageFormatError(f"record at {pos} is truncated in its fixed fields")
        (size, magic, crc, qid, flag, qoff, poff, sys_flag, born_ts, born_raw, store_ts,
         store_raw, reconsume, prepared, body_len) = unpack(data, pos)  # fmt: skip
        end = pos + size
        if magic != MESSAGE_MAGIC or end > end_of_data or size < fixed:
            raise MessageFormatError(f"bad record at {pos} (size {size}, magic {magic:#x})")
        if sys_flag & _UNUSUAL:
            break
        p = pos + fixed
        body_end = p + body_len
        if body_len < 0 or body_end + 3 > end:
            raise MessageFormatError(f"body length {body_len} overruns the record at {pos}")
        topic_len = data[body_end]
        topic_end = body_end + 1 + topic_len
        if topic_end + 2 > end:
            raise MessageFormatError(f"record at {pos} does not add up to its size")
        (props_len,) = _I16.unpack_from(data, topic_end)
        if topic_end + 2 + props_len != end:
            raise MessageFormatError(f"record at {pos} does not add up to its size")
        raw_topic = data[body_end + 1 : topic_end]
        topic = topics.get(raw_topic)
        if topic is None:
            topic = topics[raw_topic] = raw_topic.decode("utf-8", "replace")
        append(
            make(
                topic,
                data[p:body_end],
                LazyProperties(data[topic_end + 2 : end]),
                flag,
                qid,
                qoff,
                poff,
                sys_flag,
                born_ts,
                cached_host(born_raw) or _host(born_raw),
                store_ts,
                cached_host(store_raw) or _host(store_raw),
                reconsume,
                prepared,
                size,
                crc,
                broker_name,
            )
        )
        pos = end
    return out, pos


class RecordScanner(Generic[M]):
    """Scans records into instances of one message class (compiled when built).

    Args:
        cls: A slotted class with every :data:`RECORD_FIELDS` slot whose ``__init__``
            takes them positionally in that order and only stores them (a
            ``dataclass(slots=True)`` without ``__post_init__``): the compiled twin
            sets the slots without calling it.
    """

    __slots__ = ("_cls", "_scan")

    def __init__(self, cls: type[M]) -> None:
        self._cls = cls
        self._scan: Callable[[bytes, int, str], tuple[list[M], int]] = self._python
        native = compiled.load("rocklet.protocol._speedups")
        if native is not None:
            self.use_compiled(native)

    def use_compiled(self, native: Any) -> None:
        """Scan with ``native.scan_records`` (the compiled module; tests pass it in).

        Args:
            native: The compiled ``rocklet.protocol._speedups`` module.
        """
        slots = tuple(getattr(self._cls, name) for name in RECORD_FIELDS)
        props_slots = (LazyProperties.__dict__["_raw"], LazyProperties.__dict__["_parsed"])
        cls, scan = self._cls, native.scan_records

        def compiled_scan(data: bytes, pos: int, broker_name: str) -> tuple[list[M], int]:
            found: tuple[list[M], int] | None = scan(
                data, pos, cls, slots, LazyProperties, props_slots, broker_name
            )
            if found is None:  # not buildable by slot offset: the reference loop builds it
                return scan_records_py(data, pos, cls, broker_name)
            return found

        self._scan = compiled_scan

    def _python(self, data: bytes, pos: int, broker_name: str) -> tuple[list[M], int]:
        return scan_records_py(data, pos, self._cls, broker_name)

    def scan(self, data: bytes, pos: int, broker_name: str) -> tuple[list[M], int]:
        """Build a message per common record from ``pos`` on.

        Args:
            data: Back-to-back records (a pull or query body).
            pos: Where the first record starts.
            broker_name: The last field of every message.

        Returns:
            The messages, and where scanning stopped: ``len(data)``, or the start of
            the first record with IPv6 hosts or a compressed body, which the caller
            decodes itself (with :func:`~rocklet.protocol.message.decode_message`).

        Raises:
            MessageFormatError: A record is malformed or truncated.
        """
        return self._scan(data, pos, broker_name)
