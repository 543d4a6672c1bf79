"""A slave's copy of the master's metadata (SlaveSynchronize), with real processes.

The slave syncs at start and every 10 s; these tests restart the slave to make it sync
now rather than wait 10 s (its store, offsets and files are kept across restarts).
"""

from __future__ import annotations

import re
from pathlib import Path

from rocklet.protocol import fastjson
from rocklet.protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import QueryConsumerOffsetRequestHeader
from tests.broker.test_send_pull import cpp_send
from tests.broker.wire_clients import commit_offset
from tests.replication.nodes import (
    SlaveProcess,
    ha_port,
    master_props,
    running_master,
    slave_props,
    until,
)
from tests.replication.test_replication import TOPIC, _connect, bodies, caught_up, send_some

_STARTED = re.compile(r"broker started")
# The first sync after a start says one or the other: "resumed" when the start's sync
# was paused until the HA check, "synced" when the check came first.
_TAKEN = re.compile(r"metadata sync from the master resumed|metadata synced from the master")


async def _request(addr: str, code: RequestCode, body: bytes | None = None) -> RemotingCommand:
    async with await _connect(addr) as conn:
        cmd = RemotingCommand(code) if body is None else RemotingCommand(code, body=body)
        resp = await conn.request(cmd, 5)
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
        return resp


async def _delay_offsets(addr: str) -> dict[str, int]:
    resp = await _request(addr, RequestCode.GET_ALL_DELAY_OFFSET)
    return dict(fastjson.loads(resp.body)["offsetTable"])


async def _commit(addr: str, offset: int) -> None:
    async with await _connect(addr) as conn:
        resp = await conn.request(commit_offset("CG", TOPIC, 0, offset), 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _committed(addr: str) -> int:
    async with await _connect(addr) as conn:
        query = QueryConsumerOffsetRequestHeader("CG", TOPIC, 0)
        cmd = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=query.to_ext_fields())
        resp = await conn.request(cmd, 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return int(resp.ext_fields["offset"])


async def _resync(slave: SlaveProcess) -> None:
    """Restart the slave; it holds data, so it syncs once its HA connection found its
    commitlog in step with the master's, and says so."""
    assert await slave.stop() == 0
    await slave.start()
    await slave.wait_line(_STARTED, 30)
    await slave.wait_line(_TAKEN, 30)


async def test_slave_syncs_groups_and_delay_offsets(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        await send_some(master.broker_addr, 8)
        async with await _connect(master.broker_addr) as conn:
            resp = await conn.request(cpp_send("MdDelay", b"later", props={"DELAY": "1"}), 5)
            assert resp.code == ResponseCode.SUCCESS
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await slave.wait_line(_STARTED, 30)
            await caught_up(master, slave)  # it holds the delayed message's schedule record

            async def delivered() -> bool:
                return await _delay_offsets(master.broker_addr) == {"1": 1}

            await until("the master delivering the delayed message", delivered)
            group = SubscriptionGroupConfig("SyncedGroup", retry_max_times=7)
            await _request(
                master.broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, group.to_json()
            )
            await _resync(slave)

            # Delay offsets: the slave's delayOffset.json is the master's, so a slave
            # restarted as master delivers from there.
            assert await _delay_offsets(slave.broker_addr) == {"1": 1}
            on_disk = (slave.store / "config" / "delayOffset.json").read_text()
            assert fastjson.loads(on_disk)["offsetTable"] == {"1": 1}
            # Subscription groups, with the master's data version.
            master_groups = SubscriptionGroupWrapper.from_json(
                (
                    await _request(master.broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
                ).body
            )
            slave_groups = SubscriptionGroupWrapper.from_json(
                (
                    await _request(slave.broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
                ).body
            )
            assert slave_groups.subscription_group_table["SyncedGroup"].retry_max_times == 7
            assert slave_groups == master_groups
            # The slave refuses group changes of its own, as RocketMQ does.
            async with await _connect(slave.broker_addr) as conn:
                cmd = RemotingCommand(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                    body=SubscriptionGroupConfig("Other").to_json(),
                )
                assert (await conn.request(cmd, 5)).code != ResponseCode.SUCCESS
            # The slave, promoted by hand (restarted as a master), delivers no delayed
            # message twice: its delay service starts from the master's offset.
            assert await slave.stop() == 0
            (tmp_path / "s" / "broker.conf").write_text(
                "brokerRole=ASYNC_MASTER\nbrokerId=0\nmappedFileSizeCommitLog=65536\n"
            )
            await slave.start()
            await slave.wait_line(_STARTED, 30)
            async with await _connect(slave.broker_addr) as conn:
                resp = await conn.request(cpp_send("MdDelay", b"later2", props={"DELAY": "1"}), 5)
                assert resp.code == ResponseCode.SUCCESS

            async def second_delivered() -> bool:
                return len(await bodies(slave.broker_addr, 0, "MdDelay")) >= 2

            # Level 1's queue is delivered in order: the old record would come first.
            await until("the promoted slave delivering a new delayed message", second_delivered)
            assert await bodies(slave.broker_addr, 0, "MdDelay") == [b"later", b"later2"]
        finally:
            await slave.close()


async def test_offsets_never_move_back_but_a_reset_on_the_master_does(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        await send_some(master.broker_addr, 40)
        await _commit(master.broker_addr, 7)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await slave.wait_line(_STARTED, 30)
            assert await _committed(slave.broker_addr) == 7
            # Consumers committed on the slave while the master was unreachable: the
            # master's older offset does not move the slave back (RocketMQ's would).
            await _commit(slave.broker_addr, 9)
            await _resync(slave)
            assert await _committed(slave.broker_addr) == 9
            assert "kept consumer offsets ahead of the master's" in "\n".join(slave.lines)
            # A master moving ahead is taken.
            await _commit(master.broker_addr, 10)
            await _resync(slave)
            assert await _committed(slave.broker_addr) == 10
            # A deliberate move back on the master (an admin's commit, as
            # resetOffsetByTime does) reaches the slave.
            await _commit(master.broker_addr, 2)
            await _resync(slave)
            assert await _committed(slave.broker_addr) == 2
            # ...once: the same stamp does not move the slave back again later.
            await _commit(slave.broker_addr, 5)
            await _resync(slave)
            assert await _committed(slave.broker_addr) == 5
        finally:
            await slave.close()


async def _delete_topic(addr: str, topic: str) -> None:
    async with await _connect(addr) as conn:
        cmd = RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": topic})
        resp = await conn.request(cmd, 5)
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)


async def test_a_topic_deleted_on_the_master_is_dropped_or_followed_on_the_slave(
    tmp_path: Path,
) -> None:
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        await send_some(master.broker_addr, 8)
        async with await _connect(master.broker_addr) as conn:
            resp = await conn.request(cpp_send("Brief", b"short-lived"), 5)
            assert resp.code == ResponseCode.SUCCESS
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await slave.wait_line(_STARTED, 30)
            await caught_up(master, slave)
            brief = slave.store / "consumequeue" / "Brief"
            assert brief.is_dir()
            # Deleted and made again at once (the slave's sync cannot see it): the
            # queues number from 0 again on the master, and the slave follows them.
            await _delete_topic(master.broker_addr, TOPIC)
            await send_some(master.broker_addr, 4, start=100)
            await caught_up(master, slave)
            for queue_id in range(4):
                on_master = await bodies(master.broker_addr, queue_id)
                assert len(on_master) == 1
                assert await bodies(slave.broker_addr, queue_id) == on_master
            # Deleted for good: once its sync has the master's table, cleanUnusedTopic
            # drops the slave's files too (its sync alone does not: a master started
            # without its topics.json would make it drop every queue).
            await _delete_topic(master.broker_addr, "Brief")
            await _resync(slave)
            assert brief.is_dir()
            await _request(slave.broker_addr, RequestCode.CLEAN_UNUSED_TOPIC)
            assert not brief.exists()
            for queue_id in range(4):
                assert len(await bodies(slave.broker_addr, queue_id)) == 1
        finally:
            await slave.close()
