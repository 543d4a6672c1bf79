"""A batch body stored straight from its bytes against decoding it into messages first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.batch import BatchItem, encode_batch
from rocklet.protocol.errors import MessageFormatError
from rocklet.store import _encoder, _raw_batch
from rocklet.store._raw_batch import RawBatch, reference_messages
from rocklet.store.message_store import MessageStore
from rocklet.store.results import PutMessageStatus
from rocklet.transport.clock import ManualClock
from tests.speedups_support import compiled_module
from tests.store.helpers import BORN, STORE_HOST, small_config

_C = compiled_module("rocklet.store._speedups")
_CLUSTER = ("CLUSTER", "DefaultCluster")

# Canonical properties (what clients send) and odd ones the compiled path leaves to the
# per-message path: separators in values, non-ASCII, empty names or values, a name
# twice, DELAY, a trailing separator.
_NAME = st.sampled_from(["UNIQ_KEY", "WAIT", "TAGS", "KEYS", "CLUSTER", "a", "Zz"])
_VALUE = st.text(alphabet="ab K1\t", min_size=1, max_size=10).filter(lambda v: v.strip())
# Canonical, and as the C++ client writes them: one separator after the last item.
_CANONICAL = st.builds(
    lambda d, tail: ("\x02".join(f"{k}\x01{v}" for k, v in d.items()) + tail).encode(),
    st.dictionaries(_NAME, _VALUE, max_size=5),
    st.sampled_from(["", "", "\x02"]),
).filter(lambda b: b != b"\x02")
_ODD = st.sampled_from(
    [
        b"DELAY\x013",
        b"TRAN_MSG\x01true",
        b"\x02",
        b"a\x01b\x01c",
        b"a\x01x\x02a\x01y",
        b"\x01v",
        b"n\x01",
        "TAGS\x01é".encode(),
        b"\xff\x01a",
        b"WAIT\x01true\x02\x02TAGS\x01t",
    ]
)


@st.composite
def _raw_batches(draw: st.DrawFn) -> tuple[RawBatch, bool]:
    """A batch, and whether it is canonical (the compiled path must take it)."""
    canonical = True
    items = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 7)) == 0:
            props, canonical = draw(_ODD), False
        else:
            props = draw(_CANONICAL)
        body = draw(st.binary(max_size=300))
        canonical = canonical and len(body) <= 250
        items.append(BatchItem(draw(st.integers(-(2**31), 2**31 - 1)), body, props))
    body = encode_batch(items)
    if draw(st.integers(0, 9)) == 0:
        body, canonical = body[: draw(st.integers(0, len(body) - 1))], False
    sys_flag = draw(st.sampled_from([0, 0x1, 0x4, 0x8, 0xC, 0x30]))
    topic = draw(st.sampled_from(["T", "Üñí", "a" * 127, "😀"]))
    raw = RawBatch(topic, 3, body, sys_flag, 17, BORN, STORE_HOST, 2, "WAIT", _CLUSTER)
    return raw, canonical


def _reference(raw: RawBatch, index: bool) -> Any:
    """What the per-message path encodes (the pure-Python encoder), or why it refuses."""
    try:
        msgs = reference_messages(raw)
    except MessageFormatError:
        return "bad body"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_encoder, "_speedups", None)
        return _encoder.encode_batch(
            msgs, 4096, 7, 1_700_000_000_000, max_body=250, segment_size=1 << 20,
            index=index, delay_levels_ms=(1000,),
        )  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_raw_batches(), st.booleans())
def test_compiled_path_writes_what_decoding_writes(
    case: tuple[RawBatch, bool], index: bool
) -> None:
    raw, canonical = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_raw_batch, "_speedups", _C)
        fast = _raw_batch.encode_raw_batch(
            raw, 4096, 7, 1_700_000_000_000, max_body=250, segment_size=1 << 20, index=index
        )
    if canonical:
        assert fast is not None
    if fast is not None:
        assert fast == _reference(raw, index)


def test_without_the_compiled_module_the_per_message_path_decides() -> None:
    raw = RawBatch("T", 0, encode_batch([BatchItem(0, b"x", b"")]), 0, 1, BORN, STORE_HOST, 0,
                   "WAIT", _CLUSTER)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_raw_batch, "_speedups", None)
        assert (
            _raw_batch.encode_raw_batch(raw, 0, 0, 1, max_body=9, segment_size=4096, index=True)
            is None
        )


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.text(max_size=40), st.integers(-(2**40), 2**40))
def test_a_single_message_is_a_batch_of_one(body: bytes, props: str, flag: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_raw_batch, "_speedups", _C)
        item = _raw_batch.single_message_body(body, props, flag)
    if props.isascii() and -(2**31) <= flag < 2**31:
        assert item == encode_batch([BatchItem(flag, body, props.encode())])
    else:  # left to the per-message path
        assert item is None


def test_odd_fields_are_left_to_the_per_message_path() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_raw_batch, "_speedups", _C)
        assert _raw_batch.single_message_body(b"x", "", 2**70) is None
        assert _raw_batch.single_message_body(bytearray(b"x"), "", 0) is None  # type: ignore[arg-type]
        patch.setattr(_raw_batch, "_speedups", None)
        assert _raw_batch.single_message_body(b"x", "", 0) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=5))
def test_compiled_msg_ids_match_the_python_text(offsets: list[int]) -> None:
    host = STORE_HOST.hex().upper()
    assert _C.offset_msg_ids(host, tuple(offsets)) == ",".join(
        f"{host}{offset:016X}" for offset in offsets
    )


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for sub in ("commitlog", "consumequeue", "index")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def _batch(n: int, count: int) -> RawBatch:
    props = "UNIQ_KEY\x01U{n}-{i}\x02WAIT\x01true\x02TAGS\x01t{tag}\x02KEYS\x01k{i} g"
    items = [
        BatchItem(n, bytes([n]) * (300 + 40 * i), props.format(n=n, i=i, tag=i % 2).encode())
        for i in range(count)
    ]
    return RawBatch("T", 1, encode_batch(items), 0, 5, BORN, STORE_HOST, 0, "WAIT", _CLUSTER)


def test_stored_files_match_the_per_message_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_raw_batch, "_speedups", _C)  # under ROCKLET_PURE_PYTHON too
    results = []
    for name in ("raw", "decoded"):
        clock = ManualClock(1_700_000_000_000)
        with MessageStore.open(small_config(tmp_path / name), clock=clock) as store:
            for n in range(12):  # ~10 KiB each: rolls the 16 KiB commitlog segments
                raw = _batch(n, 8)
                if name == "raw":
                    res = store.put_raw_batch(raw)
                    assert res is not None
                else:
                    res = store.put_messages(reference_messages(raw))
                assert res.status is PutMessageStatus.PUT_OK
                results.append((res.wrote_offset, res.queue_offset, res.record_offsets))
                clock.advance(7)
    assert results[:12] == results[12:]
    raw_files, decoded_files = _files(tmp_path / "raw"), _files(tmp_path / "decoded")
    assert len(raw_files) > 3 and raw_files == decoded_files


def test_refusals_are_handed_back_untouched(tmp_path: Path) -> None:
    delayed = encode_batch([BatchItem(0, b"x", b"DELAY\x012")])
    with MessageStore.open(small_config(tmp_path)) as store:
        raw = RawBatch("T", 0, delayed, 0, 1, BORN, STORE_HOST, 0, "WAIT", _CLUSTER)
        assert store.put_raw_batch(raw) is None
        assert store.put_raw_batch(raw._replace(body=delayed[:-1])) is None
        assert store.commitlog.max_offset() == 0
