"""The batch encoder: a batch encodes exactly as its messages one by one.

Offsets, queue offsets, refusals and dispatch data must carry across a batch as
across consecutive single puts.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.message import decode_message
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.store._encoder import EncodedBatch, encode_batch
from rocklet.store.results import MessageToStore, PutMessageStatus
from tests.store.helpers import BORN, STORE_HOST

LEVELS = (1000, 5000, 10000)
# Separators inside names or values change what readers parse; empty ones are dropped.
_TEXT = st.text(alphabet="ab ZK\x01\x02é😀", max_size=6)
_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x", ""]) | _TEXT
_PLAIN = st.text(alphabet="ab Kk1é😀", min_size=1, max_size=8)
_PLAIN_PROPS = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x"]), _PLAIN, max_size=4
)
_ODD_PROPS = st.dictionaries(_NAMES, _TEXT | st.just("1"), max_size=5)


@st.composite
def _batches(draw: st.DrawFn) -> tuple[str, list[MessageToStore]]:
    topic = draw(st.sampled_from(["T", "Üñí", SCHEDULE_TOPIC]))
    sys_flag = draw(st.sampled_from([0, 0x1, 0x4, 0x8, 0xC, 0x30]))
    odd = draw(st.booleans())
    msgs = []
    for _ in range(draw(st.integers(1, 12))):
        props = draw(_ODD_PROPS if odd and draw(st.booleans()) else _PLAIN_PROPS)
        body = draw(st.binary(max_size=260))
        flag = draw(st.integers(-(2**31), 2**31 - 1))
        msgs.append(
            MessageToStore(topic, 3, body, props, flag, sys_flag, 17, BORN, STORE_HOST, 2, 99)
        )
    return topic, msgs


def _encode(msgs: list[MessageToStore], phy: int, qoff: int) -> EncodedBatch | PutMessageStatus:
    return encode_batch(
        msgs,
        phy,
        qoff,
        1_700_000_000_000,
        max_body=250,
        segment_size=1 << 20,
        index=True,
        delay_levels_ms=LEVELS,
    )


@settings(max_examples=300, deadline=None)
@given(_batches())
def test_batch_equals_messages_one_by_one(batch: tuple[str, list[MessageToStore]]) -> None:
    """Records, offsets, consume-queue entries, tags codes and index keys all agree."""
    _topic, msgs = batch
    whole = _encode(msgs, 1000, 7)
    phy, qoff = 1000, 7
    parts: list[EncodedBatch] = []
    for m in msgs:
        one = _encode([m], phy, qoff)
        if isinstance(one, PutMessageStatus):
            assert whole is one  # the first refused message decides
            return
        parts.append(one)
        phy += len(one.data)
        qoff += 1 if one.queued else 0
    assert isinstance(whole, EncodedBatch)
    assert whole.data == b"".join(p.data for p in parts)
    assert whole.offsets == [o for p in parts for o in p.offsets]
    assert whole.cq_entries == b"".join(p.cq_entries for p in parts)
    assert whole.tags_codes == [c for p in parts for c in p.tags_codes]
    assert whole.key_hashes == [h for p in parts for h in p.key_hashes]
    assert whole.key_offsets == [o for p in parts for o in p.key_offsets]
    for offset in whole.offsets:
        record = decode_message(whole.data, offset - 1000)
        assert record.physical_offset == offset


def test_batch_records_decode_to_what_was_put() -> None:
    """A plain batch decodes to what was put, queue and commitlog offsets filled in."""
    msgs = [
        MessageToStore(
            "T",
            1,
            b"body%d" % n,
            {"TAGS": "t", "KEYS": f"k{n} j{n}", "UNIQ_KEY": f"U{n}"},
            born_host=BORN,
            store_host=STORE_HOST,
        )
        for n in range(8)
    ]
    enc = _encode(msgs, 500, 40)
    assert isinstance(enc, EncodedBatch) and len(enc.key_hashes) == 24
    for n, offset in enumerate(enc.offsets):
        rec = decode_message(enc.data, offset - 500)
        assert (rec.queue_offset, rec.physical_offset, rec.body) == (40 + n, offset, b"body%d" % n)
        assert rec.properties == msgs[n].properties
