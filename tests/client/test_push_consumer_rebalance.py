"""Rebalancer decisions against a fake broker: start offsets, hand-over, locks, resets.

The fake implements the instance's public ``invoke`` with the broker's documented
answers (docs/protocol.md), so each rule of
``RebalancePushImpl`` can be driven precisely; the real broker is used by the other
consumer tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from rocklet.client.allocate import allocate_averagely
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import RemoteOffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.client.rebalance import ConsumeFrom, Rebalancer, subscription
from rocklet.protocol.bodies.consumer import (
    ConsumerListBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import (
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocklet.transport.clock import ManualClock

ME = "10.0.0.1@1"
OTHER = "10.0.0.2@2"


def mq(q: int, topic: str = "T") -> MessageQueue:
    return MessageQueue(topic, "broker-a", q)


@dataclass
class FakeBroker:
    """One broker's answers for the requests a rebalance makes."""

    client_id: str = ME
    cids: list[str] = field(default_factory=lambda: [ME])
    committed: dict[MessageQueue, int] = field(default_factory=dict)
    max_offset: int = 100
    lock_owner: dict[MessageQueue, str] = field(default_factory=dict)
    unlocked: list[MessageQueue] = field(default_factory=list)
    clock: ManualClock = field(default_factory=ManualClock)

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        assert addr == "broker-a:1"
        handler = {
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self._cids,
            RequestCode.QUERY_CONSUMER_OFFSET: self._query,
            RequestCode.UPDATE_CONSUMER_OFFSET: self._update,
            RequestCode.GET_MAX_OFFSET: self._max,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self._search,
            RequestCode.LOCK_BATCH_MQ: self._lock,
            RequestCode.UNLOCK_BATCH_MQ: self._unlock,
        }[RequestCode(cmd.code)]
        return handler(cmd)

    def _cids(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(0, body=ConsumerListBody(tuple(self.cids)).to_json())

    def _query(self, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.committed.get(mq(h.queue_id, h.topic))
        if offset is None:
            return cmd.make_response(ResponseCode.QUERY_NOT_FOUND)
        return cmd.make_response(0, ext_fields={"offset": str(offset)})

    def _update(self, cmd: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        self.committed[mq(h.queue_id, h.topic)] = h.commit_offset
        return cmd.make_response(0)

    def _max(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(0, ext_fields={"offset": str(self.max_offset)})

    def _search(self, cmd: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        return cmd.make_response(0, ext_fields={"offset": str(h.timestamp // 1000)})

    def _lock(self, cmd: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(cmd.body)
        ok = []
        for q in body.mq_set:
            if self.lock_owner.setdefault(q, body.client_id) == body.client_id:
                ok.append(q)
        return cmd.make_response(0, body=LockBatchResponseBody(tuple(ok)).to_json())

    def _unlock(self, cmd: RemotingCommand) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(cmd.body)
        for q in body.mq_set:
            self.unlocked.append(q)
            if self.lock_owner.get(q) == body.client_id:
                del self.lock_owner[q]
        return cmd.make_response(0)

    @property
    def routes(self) -> FakeBroker:
        return self  # it answers the route look-ups too

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        return TopicRouteData(
            (QueueData("broker-a", 4, 4),), (BrokerData("c", "broker-a", {0: "broker-a:1"}),)
        )

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        return [mq(q, topic) for q in range(1 if topic.startswith("%RETRY%") else 4)]

    def master_addr(self, broker_name: str) -> str | None:
        return "broker-a:1" if broker_name == "broker-a" else None

    def admin_addr(self, broker_name: str) -> str | None:
        return self.master_addr(broker_name)


class Recorder:
    def __init__(self) -> None:
        self.added: dict[MessageQueue, int] = {}
        self.removed: list[MessageQueue] = []

    def on_added(self, q: MessageQueue, _pq: ProcessQueue[MessageExt], offset: int) -> None:
        self.added[q] = offset

    def on_removed(self, q: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        assert pq.dropped
        self.removed.append(q)


def rebalancer(
    broker: FakeBroker,
    rec: Recorder,
    *,
    consume_from: ConsumeFrom = "last",
    orderly: bool = False,
    offsets: RemoteOffsetStore | None = None,
) -> Rebalancer:
    r = Rebalancer(
        "G", broker, offsets or RemoteOffsetStore("G", broker), on_added=rec.on_added,
        on_removed=rec.on_removed, strategy=allocate_averagely, orderly=orderly,
        consume_from=consume_from,
    )  # fmt: skip
    now = broker.clock.now_ms()
    r.subscriptions = {
        "T": subscription("T", "*", now),
        "%RETRY%G": subscription("%RETRY%G", "*", now),
    }
    return r


@pytest.mark.parametrize(
    ("consume_from", "normal", "retry"),
    [("last", 100, 0), ("first", 0, 0), (1_700_000_000_000, 1_700_000_000, 100)],
)
async def test_start_offset_follows_consume_from_when_nothing_is_committed(
    consume_from: ConsumeFrom, normal: int, retry: int
) -> None:
    broker, rec = FakeBroker(committed={mq(3): 17}), Recorder()
    r = rebalancer(broker, rec, consume_from=consume_from)
    assert await r.compute_start_offset(mq(0)) == normal
    assert await r.compute_start_offset(mq(0, "%RETRY%G")) == retry
    assert await r.compute_start_offset(mq(3)) == 17  # a committed offset always wins


async def test_members_share_queues_and_a_lost_queue_commits_first() -> None:
    broker, rec = FakeBroker(cids=[ME, OTHER]), Recorder()
    offsets = RemoteOffsetStore("G", broker)
    r = rebalancer(broker, rec, offsets=offsets)
    assert await r.rebalance()
    # Averagely over the sorted ids: ME takes queues 0 and 1 of T and the retry queue.
    assert sorted(rec.added) == [mq(0, "%RETRY%G"), mq(0), mq(1)]
    assert rec.added[mq(0)] == 100 and rec.added[mq(0, "%RETRY%G")] == 0

    broker.cids = [ME]  # the other member left: everything is ours
    assert await r.rebalance()
    assert set(r.process_queues) == {mq(0, "%RETRY%G"), *(mq(q) for q in range(4))}
    assert not await r.rebalance()  # nothing changed

    offsets.update(mq(1), 123)  # consumed up to 123 before the queue moves away
    broker.cids = ["0.0.0.0@0", ME]  # a new member sorts first: T's 0..1 and the retry queue
    assert await r.rebalance()
    assert rec.removed == [mq(0), mq(1), mq(0, "%RETRY%G")]
    assert broker.committed[mq(1)] == 123  # committed before letting go
    assert offsets.read_memory(mq(1)) is None


async def test_orderly_members_lock_before_taking_and_unlock_after_consuming() -> None:
    broker, rec = FakeBroker(lock_owner={mq(2): OTHER}), Recorder()
    r = rebalancer(broker, rec, orderly=True)
    await r.rebalance()
    assert mq(2) not in r.process_queues  # someone else holds it: not ours this round
    assert all(pq.locked for pq in r.process_queues.values())
    del broker.lock_owner[mq(2)]
    await r.rebalance()
    assert mq(2) in r.process_queues

    pq = r.process_queues[mq(3)]
    broker.cids = [ME, OTHER]  # queues 2 and 3 go to the other member
    async with pq.consume_lock:  # a batch is in the listener
        await r.rebalance()
        assert pq.dropped and mq(3) in r.process_queues and pq.try_unlock_times == 1
    assert mq(3) in broker.lock_owner  # not unlocked while consuming
    await r.rebalance()
    assert mq(3) not in r.process_queues and mq(3) in broker.unlocked
    assert mq(3) not in broker.lock_owner

    await r.release_all()
    assert not r.process_queues and not broker.lock_owner


async def test_reset_jumps_owned_queues_to_new_offsets() -> None:
    broker, rec = FakeBroker(), Recorder()
    r = rebalancer(broker, rec)
    await r.rebalance()
    old = r.process_queues[mq(1)]
    await r.reset({mq(1): 5})
    assert old.dropped and r.process_queues[mq(1)] is not old
    assert rec.added[mq(1)] == 5 and broker.committed[mq(1)] == 5
