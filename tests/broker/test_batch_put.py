"""Sends stored straight from their bytes: the records, the answer, the waits.

The first batch to a new topic takes the per-message path (the topic is written to disk
first); later ones are stored from the body (``MessageStore.put_raw_batch``). Both must
store the same records and answer the same way. A plain single send takes the same road
as a batch of one; retry-topic, transactional and non-ASCII ones do not.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.protocol.message import StoredMessage, decode_message
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.store import _raw_batch
from rocklet.store._raw_batch import RawBatch
from rocklet.store.config import FlushDiskType
from rocklet.store.message_store import MessageStore
from rocklet.store.results import PutResult
from tests.cluster import running_cluster

#: Batches put_raw_batch stores for the second send (under ROCKLET_PURE_PYTHON it hands
#: every batch back, and both sends are decoded per message).
_FROM_BODY = 0 if _raw_batch._speedups is None else 1


def _batch() -> list[Message]:
    return [
        Message("RawBatch", b"body %d" % i, tags=f"t{i % 2}", keys=(f"k{i}", "kk"), flag=i)
        for i in range(6)
    ]


def _records(store: MessageStore, offset_ids: str) -> list[StoredMessage]:
    out = []
    for msg_id in offset_ids.split(","):
        raw = store.read_record(parse_offset_msg_id(msg_id).offset)
        assert raw is not None
        out.append(decode_message(raw))
    return out


def _comparable(m: StoredMessage) -> tuple[StoredMessage, list[tuple[str, str]]]:
    """A record without what differs between two puts of the same messages."""
    props = [(k, v) for k, v in m.properties.items() if k != "UNIQ_KEY"]  # in stored order
    return replace(
        m, queue_id=0, queue_offset=0, physical_offset=0, born_timestamp=0, store_timestamp=0,
        born_host=("", 0), properties=dict(props),
    ), props  # fmt: skip


class _Spy:
    """Counts the batches ``put_raw_batch`` stored; declines the first ``decline``."""

    def __init__(self, store: MessageStore, decline: int = 0) -> None:
        self.real, self.stored, self.decline = store.put_raw_batch, 0, decline

    def __call__(self, raw: RawBatch) -> PutResult | None:
        if self.decline:
            self.decline -= 1
            return None  # as put_raw_batch does for what it leaves to the decoding path
        out = self.real(raw)
        self.stored += out is not None
        return out


#: A plain single send: the raw road once its topic is on disk.
_SINGLE = Message("RawOne", b"one body", tags="t", keys=("k1", "k2"), flag=-7,
                  properties={"user": "v"})  # fmt: skip


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize("single", [False, True], ids=["batch", "single"])
async def test_a_send_stored_from_its_bytes_is_what_decoding_stored(
    tmp_path: Path, flush: FlushDiskType, single: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        running_cluster(tmp_path, flush_disk_type=flush) as cluster,
        Producer("PG", cluster.namesrv_addr) as producer,
    ):
        store = cluster.broker.ctx.store
        spy = _Spy(store, decline=1)
        monkeypatch.setattr(store, "put_raw_batch", spy)
        first = await producer.send(_SINGLE if single else _batch())  # declined: decoded
        # Without the compiled module a single send never reaches put_raw_batch.
        assert spy.stored == 0 and spy.decline == (1 if single and not _FROM_BODY else 0)
        second = await producer.send(_SINGLE if single else _batch())
        assert spy.stored == _FROM_BODY
        if flush is FlushDiskType.SYNC_FLUSH:  # answered once on disk
            assert store.flush_service.flushed_offset >= store.commitlog_max_offset()
        decoded, raw = _records(store, first.offset_msg_id), _records(store, second.offset_msg_id)
        assert [m.properties["UNIQ_KEY"] for m in raw] == second.msg_id.split(",")
        assert "WAIT" not in raw[0].properties and raw[0].properties["CLUSTER"]
        assert [_comparable(m) for m in raw] == [_comparable(m) for m in decoded]
        assert second.message_queue.queue_id == raw[0].queue_id
        if second.message_queue == first.message_queue:
            assert second.queue_offset == first.queue_offset + len(raw)
        if single:
            assert len(store.query_by_key("RawOne", "k2", 10)) == 2  # both indexed
            # Not plain: decoded and stored per message, as before.
            for odd in (
                replace(_SINGLE, properties={"user": "é"}),
                replace(_SINGLE, delay_level=1),
            ):
                assert (await producer.send(odd)).status.name == "SEND_OK"
            assert spy.stored == _FROM_BODY
