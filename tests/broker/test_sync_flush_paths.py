"""Under SYNC_FLUSH every put made on a client's behalf is on disk before it is
acknowledged, not only SEND_MESSAGE's: send-back, END_TRANSACTION's committed copy,
stored replies and the transaction check-back's put-back copies.

Each test looks at the store's flushed offset the moment the answer (or the check
round) is back: the message's bytes must already be below it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocklet.broker.transaction_check import TRANS_SYS_GROUP
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.message import decode_message
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.names import TRANS_HALF_TOPIC
from rocklet.store.config import FlushDiskType
from rocklet.store.message_store import MessageStore
from rocklet.transport.dial import open_connection
from tests.broker.test_reply import reply_props, reply_v2, requester
from tests.broker.test_send_pull import cpp_send
from tests.broker.test_sendback import cpp_send_back, send
from tests.broker.test_transaction import (
    BORN,
    TIMEOUT_MS,
    end_transaction,
    producer,
    send_half,
)
from tests.cluster import running_cluster

SYNC = FlushDiskType.SYNC_FLUSH


def durable_up_to_the_end(store: MessageStore) -> bool:
    """Whether everything stored so far is known to be on disk."""
    return store.flush_service.flushed_offset >= store.commitlog_max_offset()


async def test_send_back_is_answered_once_its_copy_is_on_disk(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, flush_disk_type=SYNC) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        store = cluster.broker.ctx.store
        for n in range(20):
            offset = await send(conn, cpp_send("SBT", f"m{n}".encode()))
            answer = await conn.request(cpp_send_back("SBGroup", offset), 5)
            durable = durable_up_to_the_end(store)  # nothing else is stored meanwhile
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert durable


async def test_a_commit_is_answered_once_the_committed_copy_is_on_disk(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, flush_disk_type=SYNC) as cluster,
        producer(cluster) as prod,
    ):
        store = cluster.broker.ctx.store
        for n in range(20):
            half = await send_half(prod.conn, "TxSync", b"payload", f"U-{n}")
            answer = await prod.conn.request(end_transaction(half, 8), 5)
            flushed = store.flush_service.flushed_offset
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            # The committed copy must be on disk (the op record after it need not be).
            got = store.get_messages("TxSync", 1, n, 1)
            committed = decode_message(got.buffers[0])
            assert flushed >= committed.physical_offset + committed.size


async def test_a_stored_reply_is_answered_once_it_is_on_disk(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, flush_disk_type=SYNC) as cluster,
        requester(cluster, "requester-1") as req,
        await open_connection("127.0.0.1", cluster.broker.port) as replier,
    ):
        store = cluster.broker.ctx.store
        for _ in range(20):
            answer = await replier.request(reply_v2(b"pong", reply_props("requester-1")), 5)
            durable = durable_up_to_the_end(store)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert parse_offset_msg_id(answer.ext_fields["msgId"]).offset >= 0
            assert durable
            await asyncio.wait_for(req.pushed.get(), 5)


async def test_check_back_progress_is_kept_only_for_copies_on_disk(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, flush_disk_type=SYNC) as cluster,
        producer(cluster) as prod,
    ):
        store, check = cluster.broker.ctx.store, cluster.broker.transaction_check
        offsets = cluster.broker.ctx.offsets
        for n in range(10):
            await send_half(prod.conn, "TxCheck", b"undecided", f"U-C{n}")
            assert await check.check_once(BORN + TIMEOUT_MS + 1 + n) >= 1
            durable = durable_up_to_the_end(store)
            # The round recorded its progress past the half, and its copy is on disk.
            assert offsets.query(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, 0) is not None
            assert durable
