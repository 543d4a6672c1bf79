"""A failing transaction check listener, against a real broker on loopback.

Its exception is the application's: logged with its traceback, answered UNKNOWN (the
broker asks again later, as Java does when ``checkLocalTransaction`` throws) and given
to the TransactionProducer's own ``on_error``. It must never come out of a call of
another client sharing the client instance (it used to fail their next send).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.transaction import LocalTransactionState, TransactionProducer
from tests.client.producer_support import WAIT_S, long_poll
from tests.cluster import running_cluster

State = LocalTransactionState


class CheckFailed(Exception):
    """What the check listeners below raise."""


def far_future_ms() -> int:
    """A check-round time after every half message's transaction timeout."""
    return int(time.time() * 1000) + 120_000


@contextmanager
def logged_failures() -> Iterator[tuple[list[logging.LogRecord], asyncio.Event]]:
    """Records of the SDK's log that carry a CheckFailed, and an event set at the first."""
    records: list[logging.LogRecord] = []
    seen = asyncio.Event()

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.exc_info and isinstance(record.exc_info[1], CheckFailed):
                records.append(record)
                seen.set()  # logged on the event loop's thread

    handler = Handler(logging.ERROR)
    logger = logging.getLogger("rocklet")
    logger.addHandler(handler)
    try:
        yield records, seen
    finally:
        logger.removeHandler(handler)


async def test_a_failing_check_listener_does_not_fail_other_clients(tmp_path: Path) -> None:
    checks = 0

    async def check(_msg: MessageExt) -> LocalTransactionState:
        nonlocal checks
        checks += 1
        raise CheckFailed("ledger unreachable")

    async def ok(_msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    async with (
        running_cluster(tmp_path) as cluster,
        TransactionProducer("PG_TX", cluster.namesrv_addr, check_listener=check) as tx,
        Producer("PG_PLAIN", cluster.namesrv_addr) as plain,  # the same client instance
        PushConsumer("CG_SHARED", cluster.namesrv_addr).subscribe("Other", "*", ok) as consumer,
    ):
        assert plain.instance is tx.instance
        with logged_failures() as (records, seen):
            outcome = await tx.send_in_transaction(
                Message("TxChecked", b"undecided"), lambda m, a: State.UNKNOWN
            )
            assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 1
            await asyncio.wait_for(seen.wait(), WAIT_S)
        assert checks == 1
        (record,) = records
        assert record.exc_info is not None and record.exc_info[2] is not None  # a traceback
        # Nobody else hears of it: sends go out, the consumer reports nothing.
        result = await plain.send(Message("Other", b"after the failed check"))
        (got,) = await long_poll(cluster.broker.port, "Other", result.message_queue.queue_id)
        assert got.body == b"after the failed check"
        consumer.check_errors()
        await tx.send(Message("Other", b"the transaction producer sends too"))
        # Answered UNKNOWN: the half message is still undecided, and asked about again.
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 1
        assert outcome.local_state is State.UNKNOWN


async def test_a_failing_check_listener_reaches_the_producers_own_on_error(
    tmp_path: Path,
) -> None:
    failures: asyncio.Queue[BaseException] = asyncio.Queue()

    def check(_msg: MessageExt) -> LocalTransactionState:  # plain: runs in a thread
        raise CheckFailed("ledger unreachable")

    async with (
        running_cluster(tmp_path) as cluster,
        TransactionProducer(
            "PG_TX", cluster.namesrv_addr, check_listener=check, on_error=failures.put_nowait
        ) as tx,
        Producer("PG_PLAIN", cluster.namesrv_addr) as plain,
    ):
        await tx.send_in_transaction(Message("TxChecked", b"undecided"), lambda m, a: State.UNKNOWN)
        assert await cluster.broker.transaction_check.check_once(far_future_ms()) == 1
        failure = await asyncio.wait_for(failures.get(), WAIT_S)
        assert isinstance(failure, CheckFailed)
        await plain.send(Message("Other", b"unaffected"))
        await tx.send(Message("Other", b"unaffected too"))
        assert failures.empty()


def test_check_listener_and_on_error_must_be_callable() -> None:
    with pytest.raises(TypeError, match="check_listener"):
        TransactionProducer("PG_TX", check_listener=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_error"):
        TransactionProducer("PG_TX", check_listener=lambda m: State.COMMIT, on_error=1)  # type: ignore[arg-type]
