"""The compiled record scanner (pull bodies into messages) against its pure-Python twin."""

from __future__ import annotations

import gc
import sys
import zlib
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import SysFlag, encode_message
from rocklet.protocol.records import RECORD_FIELDS, LazyProperties, RecordScanner, scan_records_py
from tests.speedups_support import compiled_module

_C = compiled_module("rocklet.protocol._speedups")


@dataclass(slots=True)
class Msg:
    """The consumer's message shape (RECORD_FIELDS, in order)."""

    topic: str
    body: bytes
    properties: LazyProperties
    flag: int
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    store_size: int
    body_crc: int
    broker_name: str


def _compiled() -> RecordScanner[Msg]:
    scanner = RecordScanner(Msg)
    scanner.use_compiled(_C)  # even under ROCKLET_PURE_PYTHON=1
    return scanner


def _outcome(scan: object, data: bytes, pos: int = 0) -> tuple[object, ...]:
    try:
        msgs, stop = scan(data, pos, "broker-a")  # type: ignore[operator]
    except MessageFormatError as exc:
        return ("error", str(exc))
    fields = [name for name in RECORD_FIELDS if name != "properties"]
    rows = [(m.properties._raw, *(getattr(m, name) for name in fields)) for m in msgs]
    tables = [dict(m.properties) for m in msgs]
    return ("ok", rows, tables, stop)


int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
host = st.binary(min_size=8, max_size=8)
records = st.builds(
    encode_message,
    topic=st.text(max_size=20).filter(lambda t: len(t.encode()) <= 127),
    body=st.binary(max_size=64),
    queue_id=int32,
    flag=int32,
    properties=st.dictionaries(
        st.text("abKEYS_", min_size=1, max_size=5), st.text("xyü 1", min_size=1, max_size=5)
    ),
    # Mostly plain records; sometimes one the scan leaves to the caller.
    sys_flag=st.sampled_from([0, 0, 0, 2, 8, int(SysFlag.COMPRESSED), 0x10, 0x20]),
    born_timestamp=int64,
    born_host=host,
    store_timestamp=int64,
    store_host=host,
    reconsume_times=int32,
    prepared_transaction_offset=int64,
    queue_offset=int64,
    physical_offset=int64,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(records, max_size=6))
def test_scans_of_well_formed_bodies_match(recs: list[bytearray]) -> None:
    data = b"".join(bytes(r) for r in recs)
    python = _outcome(lambda d, p, b: scan_records_py(d, p, Msg, b), data)
    assert python == _outcome(_compiled().scan, data)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(records, min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    st.integers(0, 10_000),
)
def test_damaged_bodies_give_the_same_messages_or_errors(
    recs: list[bytearray], flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(b"".join(bytes(r) for r in recs))
    for where, value in flips:
        data[where % len(data)] = value
    damaged = bytes(data[: len(data) - cut % len(data)])
    python = _outcome(lambda d, p, b: scan_records_py(d, p, Msg, b), damaged)
    assert python == _outcome(_compiled().scan, damaged)


def test_the_scan_stops_at_a_record_it_leaves_to_the_caller() -> None:
    plain = bytes(encode_message(topic="T", body=b"a", queue_offset=1))
    packed = bytes(
        encode_message(
            topic="T", body=zlib.compress(b"b"), sys_flag=SysFlag.COMPRESSED, queue_offset=2
        )
    )
    data = plain + packed + plain
    for scan in (_compiled().scan, lambda d, p, b: scan_records_py(d, p, Msg, b)):
        msgs, stop = scan(data, 0, "b")
        assert ([m.queue_offset for m in msgs], stop) == ([1], len(plain))
        msgs, stop = scan(data, len(plain) + len(packed), "b")
        assert ([m.body for m in msgs], stop) == ([b"a"], len(data))


def test_compiled_messages_are_left_out_of_the_cycle_collector() -> None:
    # Their fields are atoms (str, bytes, int, tuples of those), as CPython's own
    # untracked tuples and dicts; a consumer caches thousands of them.
    data = bytes(encode_message(topic="T", body=b"a", properties={"K": "v"}))
    (msg,), _ = _compiled().scan(data, 0, "b")
    assert not gc.is_tracked(msg)
    assert not gc.is_tracked(msg.properties)
    assert dict(msg.properties) == {"K": "v"}


def test_a_class_without_the_record_slots_is_refused() -> None:
    @dataclass(slots=True)
    class Short:
        topic: str

    with pytest.raises(AttributeError):
        RecordScanner(Short).use_compiled(_C)


class MsgWithNew(Msg):
    """Msg with its own ``__new__``: the scan does not write its slots directly."""

    __slots__ = ()

    def __new__(cls, *args: object, **kwargs: object) -> MsgWithNew:
        return super().__new__(cls)


def test_a_class_the_scan_cannot_build_by_offset_gets_the_same_messages() -> None:
    data = b"".join(
        bytes(encode_message(topic="T", body=bytes([i]), queue_offset=i)) for i in range(5)
    )
    scanner = RecordScanner(MsgWithNew)
    scanner.use_compiled(_C)
    python = _outcome(lambda d, p, b: scan_records_py(d, p, Msg, b), data)
    assert _outcome(scanner.scan, data) == python


def test_scanned_messages_hold_exactly_one_reference_to_each_field() -> None:
    # The scan writes the slots of fresh instances directly; a missing or extra
    # reference would crash or leak. Shared fields (topic, hosts, broker name) show it.
    broker = "broker-refcount-" + str(id(object()))
    data = b"".join(bytes(encode_message(topic="T", body=b"x", queue_offset=i)) for i in range(50))
    scan = _compiled().scan
    baseline = sys.getrefcount(broker)
    msgs, _ = scan(data, 0, broker)
    assert sys.getrefcount(broker) == baseline + 50
    topic = msgs[0].topic
    assert all(m.topic is topic for m in msgs)
    del msgs
    gc.collect()
    assert sys.getrefcount(broker) == baseline
