"""Transactional sends against a real broker: commit, rollback and check-back."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rocklet.client.errors import InvalidMessageError
from rocklet.client.message import Message, MessageExt
from rocklet.client.transaction import HalfMessage, LocalTransactionState, TransactionProducer
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.protocol.message import SysFlag
from rocklet.protocol.names import TRANS_OP_HALF_TOPIC
from rocklet.protocol.properties import Prop
from tests.client.producer_support import WAIT_S, long_poll, stored, stored_all
from tests.cluster import Cluster, running_cluster

State = LocalTransactionState


def far_future_ms() -> int:
    """A check-round time after every half message's transaction timeout."""
    return int(time.time() * 1000) + 120_000


async def wait_op(cluster: Cluster, offset: int = 0) -> None:
    """Wait until the broker wrote the op record that resolves a half message."""
    await long_poll(cluster.broker.port, TRANS_OP_HALF_TOPIC, 0, offset)


async def test_committed_transaction_is_delivered(tmp_path: Path) -> None:
    ran_in: list[str] = []

    def local(msg: Message, arg: Any) -> LocalTransactionState:
        # A plain function runs in a worker thread, not on the event loop.
        ran_in.append(threading.current_thread().name)
        assert msg.body.startswith(b"pay ") and arg == "order-7"
        return State.COMMIT

    async with (
        running_cluster(tmp_path) as cluster,
        TransactionProducer(
            "PG_TX", cluster.namesrv_addr, check_listener=lambda m: State.UNKNOWN
        ) as producer,
    ):
        outcome = await producer.send_in_transaction(
            Message("TxOrders", b"pay 10", tags="T"), local, "order-7"
        )
        assert outcome.local_state is State.COMMIT
        assert ran_in and ran_in[0] != threading.current_thread().name
        mq = outcome.send_result.message_queue
        (got,) = await long_poll(cluster.broker.port, "TxOrders", mq.queue_id)
        assert got.body == b"pay 10" and got.tags == "T"
        assert got.sys_flag & 0xC == SysFlag.TRANSACTION_COMMIT
        assert got.properties[Prop.UNIQ_KEY] == outcome.send_result.msg_id
        # The result names the real queue (round robin moves on to the next one).
        second = await producer.send_in_transaction(
            Message("TxOrders", b"pay 20"), local, "order-7"
        )
        mq2 = second.send_result.message_queue
        assert mq2 != mq
        (got2,) = await long_poll(cluster.broker.port, "TxOrders", mq2.queue_id)
        assert got2.body == b"pay 20"
        # Resolved: nothing left to check back.
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 0


async def test_rolled_back_transaction_is_never_delivered(tmp_path: Path) -> None:
    async def local(_msg: Message, _arg: Any) -> LocalTransactionState:
        return State.ROLLBACK

    async with (
        running_cluster(tmp_path) as cluster,
        TransactionProducer(
            "PG_TX", cluster.namesrv_addr, check_listener=lambda m: State.COMMIT
        ) as producer,
    ):
        outcome = await producer.send_in_transaction(Message("TxGone", b"nope"), local)
        assert outcome.local_state is State.ROLLBACK
        await wait_op(cluster)
        assert stored(cluster.broker, "TxGone", outcome.send_result.message_queue.queue_id) == []
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 0


async def test_half_messages_ended_later_by_another_producer_of_the_group(
    tmp_path: Path,
) -> None:
    """send_half + end: a coordinator decides, with a producer that did not send them."""
    async with running_cluster(tmp_path) as cluster:
        async with TransactionProducer(
            "PG_2PC", cluster.namesrv_addr, check_listener=lambda m: State.UNKNOWN
        ) as sender:
            keep = HalfMessage.of("Tx2pc", await sender.send_half(Message("Tx2pc", b"keep")))
            drop = HalfMessage.of("Tx2pc", await sender.send_half(Message("Tx2pc", b"drop")))
            with pytest.raises(InvalidMessageError):
                await sender.send_half(Message("Tx2pc", b"late", delay_level=2))
        assert stored_all(cluster.broker, "Tx2pc") == []  # invisible so far
        # A fresh producer of the same group, with no route cached yet, ends both.
        async with TransactionProducer(
            "PG_2PC", cluster.namesrv_addr, check_listener=lambda m: State.UNKNOWN
        ) as coordinator:
            assert await coordinator.end(keep, State.COMMIT)
            assert await coordinator.end(drop, State.ROLLBACK)
            with pytest.raises(ValueError):
                await coordinator.end(keep, State.UNKNOWN)
        (committed,) = stored_all(cluster.broker, "Tx2pc")
        assert committed.body == b"keep" and committed.properties[Prop.UNIQ_KEY] == keep.msg_id
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 0


async def test_undecided_transaction_is_resolved_by_the_check_listener(tmp_path: Path) -> None:
    asked: asyncio.Queue[MessageExt] = asyncio.Queue()

    async def check(msg: MessageExt) -> LocalTransactionState:
        await asked.put(msg)
        return State.COMMIT

    async with (
        running_cluster(tmp_path) as cluster,
        TransactionProducer("PG_TX", cluster.namesrv_addr, check_listener=check) as producer,
    ):
        outcome = await producer.send_in_transaction(
            Message("TxLater", b"maybe", keys="k-later"), lambda m, a: State.UNKNOWN
        )
        assert outcome.local_state is State.UNKNOWN
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 1

        msg = await asyncio.wait_for(asked.get(), WAIT_S)
        assert (msg.topic, msg.body, msg.keys) == ("TxLater", b"maybe", ("k-later",))
        assert msg.properties[Prop.UNIQ_KEY] == outcome.send_result.msg_id
        mq = outcome.send_result.message_queue
        (got,) = await long_poll(cluster.broker.port, "TxLater", mq.queue_id)
        assert got.body == b"maybe"


@pytest.mark.parametrize("auto_create", [True, False])
async def test_a_restarted_producer_that_sends_nothing_is_checked_back(
    tmp_path: Path, auto_create: bool
) -> None:
    # The process that sent the half message is gone; a new member of the group only
    # answers check-backs. It must be a live member on the broker without sending.
    asked: asyncio.Queue[MessageExt] = asyncio.Queue()

    async def check(msg: MessageExt) -> LocalTransactionState:
        await asked.put(msg)
        return State.COMMIT

    async with running_cluster(tmp_path, auto_create_topic_enable=auto_create) as cluster:
        cluster.broker.ctx.topics.update(TopicConfig("TxOrphan", 2, 2))
        await cluster.broker.next_registration()
        async with TransactionProducer(
            "PG_ORPHAN", cluster.namesrv_addr, check_listener=lambda m: State.UNKNOWN
        ) as sender:
            await sender.send_in_transaction(
                Message("TxOrphan", b"orphan"), lambda m, a: State.UNKNOWN
            )
        async with TransactionProducer(
            "PG_ORPHAN", cluster.namesrv_addr, check_listener=check, instance_name="recovery"
        ):
            assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 1
            msg = await asyncio.wait_for(asked.get(), WAIT_S)
            assert msg.body == b"orphan"


async def test_failing_local_transaction_is_unknown_then_rolled_back_on_check(
    tmp_path: Path,
) -> None:
    asked: asyncio.Queue[MessageExt] = asyncio.Queue()

    def local(_msg: Message, _arg: Any) -> LocalTransactionState:
        raise RuntimeError("database down")

    async def check(msg: MessageExt) -> LocalTransactionState:
        await asked.put(msg)
        return State.ROLLBACK

    async with (
        running_cluster(tmp_path) as cluster,
        TransactionProducer("PG_TX", cluster.namesrv_addr, check_listener=check) as producer,
    ):
        # A first, committed transaction writes op record 0 (and creates the op topic).
        await producer.send_in_transaction(Message("TxFail", b"ok"), lambda m, a: State.COMMIT)
        await wait_op(cluster, 0)

        outcome = await producer.send_in_transaction(Message("TxFail", b"x"), local)
        assert outcome.local_state is State.UNKNOWN
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 1
        assert (await asyncio.wait_for(asked.get(), WAIT_S)).body == b"x"
        await wait_op(cluster, 1)  # the rollback's op record
        bodies = [m.body for q in range(4) for m in stored(cluster.broker, "TxFail", q)]
        assert bodies == [b"ok"]
