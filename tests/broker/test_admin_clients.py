"""Client admin codes against a real broker and Rocklet's own SDK clients.

CONSUME_MESSAGE_DIRECTLY (309) goes admin -> broker -> a running push consumer and
back; GET_ALL_PRODUCER_INFO (328) lists a running producer; an offset reset with nobody
online is refused with CONSUMER_NOT_ONLINE and the SDK's admin falls back to committing
the offsets itself, as ``mqadmin`` does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocklet.client.admin import Admin
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from rocklet.protocol.bodies.maintenance import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ProducerTableInfo,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import OUR_LANGUAGE, RemotingCommand
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.transport.dial import open_connection
from tests.broker.test_admin import admin, create_topic, ok, reset, send
from tests.broker.wire_clients import commit_offset
from tests.cluster import running_cluster

WAIT_S = 20.0


class Listener:
    """Records messages; raises on the body ``boom``."""

    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self.changed = asyncio.Condition()

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        if any(m.body == b"boom" for m in msgs):
            raise ValueError("boom on purpose")
        self.messages.extend(msgs)
        async with self.changed:
            self.changed.notify_all()
        return ConsumeResult.SUCCESS

    async def wait_count(self, count: int) -> None:
        async with asyncio.timeout(WAIT_S), self.changed:
            await self.changed.wait_for(lambda: len(self.messages) >= count)


async def test_consume_message_directly_and_producer_table(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        listener = Listener()
        consumer = PushConsumer("CG309", cluster.namesrv_addr, consume_from="first")
        consumer.subscribe("T309", "*", listener)
        async with (
            Producer("PG309", cluster.namesrv_addr) as producer,
            await open_connection("127.0.0.1", cluster.broker.port) as conn,
        ):
            sent = await producer.send(Message("T309", b"hello", tags="A"))
            boom = await producer.send(Message("T309", b"boom"))
            async with consumer:
                await listener.wait_count(1)
                assert consumer.client_id is not None

                def direct(
                    msg_id: str, client_id: str = consumer.client_id or ""
                ) -> RemotingCommand:
                    return admin(
                        RequestCode.CONSUME_MESSAGE_DIRECTLY,
                        consumerGroup="CG309",
                        clientId=client_id,
                        msgId=msg_id,
                    )

                answer = await ok(conn, direct(sent.offset_msg_id))
                result = ConsumeMessageDirectlyResult.from_json(answer.body)
                assert result.consume_result is CMResult.CR_SUCCESS
                assert (result.order, result.auto_commit) == (False, True)
                await listener.wait_count(2)
                again = listener.messages[-1]
                assert (again.body, again.topic, again.broker_name) == (
                    b"hello",
                    "T309",
                    "broker-a",
                )

                raised = await ok(conn, direct(boom.offset_msg_id))
                failed = ConsumeMessageDirectlyResult.from_json(raised.body)
                assert failed.consume_result is CMResult.CR_THROW_EXCEPTION
                assert failed.remark == "ValueError: boom on purpose"

                gone = await conn.request(direct(sent.offset_msg_id, "nobody"), 5)
                assert (gone.code, gone.remark) == (
                    ResponseCode.SYSTEM_ERROR,
                    "The Consumer <CG309> <nobody> not online",
                )
                past = parse_offset_msg_id(sent.offset_msg_id)
                beyond = sent.offset_msg_id[:16] + f"{past.offset + 10**9:016X}"
                missing = await conn.request(direct(beyond), 5)
                assert missing.code == ResponseCode.SYSTEM_ERROR

            producers = await ok(conn, admin(RequestCode.GET_ALL_PRODUCER_INFO))
            table = ProducerTableInfo.from_json(producers.body).data
            (info,) = table["PG309"]
            assert info.client_id and info.language == OUR_LANGUAGE
            assert info.remote_ip.startswith("/127.0.0.1:")
            assert info.version > 0 and info.last_update_timestamp > 0


async def test_offline_reset_is_refused_and_the_sdk_falls_back(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        await ok(conn, create_topic("RT", 2, 2))
        for n in range(6):
            await ok(conn, send("RT", n % 2, b"m"))
        await ok(conn, commit_offset("RG", "RT", 0, 2))
        await ok(conn, commit_offset("RG", "RT", 1, 3))

        refused = await conn.request(reset("RT", "RG", 0, force=True), 5)
        assert refused.code == ResponseCode.CONSUMER_NOT_ONLINE
        assert refused.remark == (
            "Consumer not online, so can not reset offset, Group: RG Topic: RT Timestamp: 0"
        )
        offsets = cluster.broker.ctx.offsets
        assert offsets.offsets_of("RG", "RT") == {0: 2, 1: 3}  # nothing moved

        async with Admin(cluster.namesrv_addr, instance_name="admin") as tool:
            # Not forced and to the end: nothing moves forward.
            kept = await tool.reset_offset_by_time("RG", "RT", -1, force=False)
            assert kept == {
                MessageQueue("RT", "broker-a", 0): 2,
                MessageQueue("RT", "broker-a", 1): 3,
            }
            back = await tool.reset_offset_by_time("RG", "RT", 0)
            assert back == {MessageQueue("RT", "broker-a", q): 0 for q in (0, 1)}
            assert offsets.offsets_of("RG", "RT") == {0: 0, 1: 0}
            end = await tool.reset_offset_by_time("RG", "RT", -1)
            assert set(end.values()) == {3}
            assert offsets.offsets_of("RG", "RT") == {0: 3, 1: 3}
