"""The compiled record encoder against its pure-Python twin: byte-identical output."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.store import _encoder
from rocklet.store.results import MessageToStore
from tests.speedups_support import compiled_module
from tests.store.helpers import BORN, STORE_HOST

_C = compiled_module("rocklet.store._speedups")
# Separators, non-ASCII, astral characters (UTF-16 surrogate pairs in Java's hash),
# lone surrogates (no UTF-8 form), empty names and values, and values that are not text.
_TEXT = st.text(alphabet="ab ZK\x01\x02é😀\ud800ĀŸ", max_size=7)
_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x", ""]) | _TEXT
_VALUES = _TEXT | st.sampled_from(["1", "k1 k2  k3", "3"]) | st.integers(-3, 3)
# Values that are not text break the type on purpose: the encoders must agree anyway.
_PROPS: st.SearchStrategy[dict[str, Any]] = st.dictionaries(_NAMES, _VALUES, max_size=5)
_PLAIN: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "x"]),
    st.text(alphabet="abK 1é", min_size=1, max_size=12),
    max_size=4,
)
_INTS = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([2**31, -(2**63), 2**63])


@st.composite
def _batches(draw: st.DrawFn) -> list[MessageToStore]:
    topic = draw(st.sampled_from(["T", "Üñí", SCHEDULE_TOPIC, "a" * 127, "a" * 128]))
    sys_flag = draw(st.sampled_from([0, 0x1, 0x4, 0x8, 0xC, 0x30]))
    msgs = []
    for _ in range(draw(st.integers(1, 6))):
        odd = draw(st.integers(0, 9)) == 0
        msgs.append(
            MessageToStore(
                topic,
                3,
                draw(st.binary(max_size=300)),
                draw(_PROPS if odd else _PLAIN),
                draw(_INTS) if odd else draw(st.integers(-5, 5)),
                draw(st.sampled_from([sys_flag, 0x4])) if odd else sys_flag,
                17,
                draw(st.sampled_from([BORN, b"short"])) if odd else BORN,
                STORE_HOST,
                2,
                99,
            )
        )
    return msgs


def _outcome(msgs: list[MessageToStore], index: bool) -> tuple[str, Any]:
    try:
        return "ok", _encoder.encode_batch(
            msgs,
            4096,
            7,
            1_700_000_000_000,
            max_body=250,
            segment_size=1 << 20,
            index=index,
            delay_levels_ms=(1000, 5000),
        )
    except Exception as exc:  # the same exception type and text either way
        return type(exc).__name__, str(exc)


@settings(max_examples=500, deadline=None)
@given(_batches(), st.booleans())
def test_compiled_encoder_matches_the_python_twin(msgs: list[MessageToStore], index: bool) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_encoder, "_speedups", _C)
        compiled = _outcome(msgs, index)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_encoder, "_speedups", None)
        python = _outcome(msgs, index)
    assert compiled == python


def test_unusual_input_is_left_to_the_python_twin() -> None:
    base = MessageToStore("T", 0, b"x", {"TAGS": "a"}, 0, 0, 1, BORN, STORE_HOST)
    args = (4096, 91 + 1, 250, 0, b"\x01T", 0, 1, 0, 1, -626843481, len)
    assert _C.encode_each([base], *args) is not None
    for odd in (
        {"TAGS": "a\x01b"},  # a separator: readers parse something else
        {"TAGS": "\ud800"},  # no UTF-8 form: the twin raises UnicodeEncodeError
        {"TAGS": 5},  # not text
    ):
        msg = MessageToStore("T", 0, b"x", odd, 0, 0, 1, BORN, STORE_HOST)  # type: ignore[arg-type]
        assert _C.encode_each([msg], *args) is None
    not_bytes = MessageToStore("T", 0, bytearray(b"x"))  # type: ignore[arg-type]
    assert _C.encode_each([not_bytes], *args) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 2**31 - 1) | st.sampled_from([0, 7, 2**31 - 1]), max_size=12),
        min_size=1,
        max_size=8,
    )
)
def test_compiled_index_insert_writes_the_same_file(puts: list[list[int]]) -> None:
    import tempfile
    from pathlib import Path

    from rocklet.store import _index_file

    files = {}
    for name, module in (("compiled", _C), ("python", None)):
        with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
            patch.setattr(_index_file, "_speedups", module)
            index = _index_file.IndexFile(Path(tmp) / "idx", slots=7, max_entries=40)
            results = []
            phy, ts = 1000, 1_700_000_000_000
            for hashes in puts:
                offsets = [phy + 100 * i for i in range(len(hashes))]
                results.append(index.put_keys(hashes, offsets, 0, ts))
                phy, ts = phy + 5000, ts + 1500
            files[name] = (bytes(index.file.view), results, index.slot_count)
            index.file.view.release()
            index.file.try_close()
    assert files["compiled"] == files["python"]
