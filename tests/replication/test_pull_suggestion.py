"""suggestWhichBrokerId in pull answers, as RocketMQ 4.9.4's PullMessageProcessor sets it.

One in-process master: without ``slaveReadEnable`` every answer suggests the master;
with it, a consumer whose last record read lies further behind the commitlog's end than
``accessMessageInMemoryMaxRatio`` percent of memory is sent to the group's
``whichBrokerWhenConsumeSlowly``, and one that is close to the end to its ``brokerId``.
Ratio 0 makes "behind" mean "any byte behind", so the test needs no gigabytes.
A slave (in process too) past its end: PULL_RETRY_IMMEDIATELY keeping the offset, or
with ``offsetCheckInSlave`` the master's PULL_OFFSET_MOVED and corrected offset.
"""

from __future__ import annotations

from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.broker.config import BrokerRole
from rocklet.broker.tls_config import TlsSettings
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from tests.broker.test_send_pull import connect, cpp_send, pull
from tests.cluster import running_cluster, small_broker_config
from tests.replication.nodes import until


async def _suggestions(tmp_path: Path, **overrides: bool | int) -> list[str]:
    async with (
        running_cluster(tmp_path, tls=None, **overrides) as cluster,
        await connect(cluster) as conn,
    ):
        for body in (b"first", b"second"):
            sent = await conn.request(cpp_send("Suggest", body), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        answers = [
            await conn.request(pull("Suggest", 0, 0, max_nums=1), 5),  # one record behind
            await conn.request(pull("Suggest", 0, 1, max_nums=1), 5),  # the last record
            await conn.request(pull("Suggest", 0, 2), 5),  # caught up: nothing read
        ]
        assert [a.code for a in answers] == [
            ResponseCode.SUCCESS,
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
        ]
        return [a.ext_fields["suggestWhichBrokerId"] for a in answers]


async def test_without_slave_read_enable_every_answer_suggests_the_master(
    tmp_path: Path,
) -> None:
    assert await _suggestions(tmp_path, access_message_in_memory_max_ratio=0) == ["0"] * 3


async def test_a_lagging_consumer_is_sent_to_which_broker_when_consume_slowly(
    tmp_path: Path,
) -> None:
    got = await _suggestions(tmp_path, slave_read_enable=True, access_message_in_memory_max_ratio=0)
    # Group defaults: whichBrokerWhenConsumeSlowly 1, brokerId 0. The distance is
    # measured from the start of the last record read (maxPhyOffsetPulling in 4.9.4),
    # so with ratio 0 even the newest record counts as behind; nothing read, no lag.
    assert got == ["1", "1", "0"]


async def test_default_ratio_keeps_a_close_consumer_on_the_master(tmp_path: Path) -> None:
    assert await _suggestions(tmp_path, slave_read_enable=True) == ["0"] * 3


async def _answers_past_the_end(
    tmp_path: Path, offset_check_in_slave: bool
) -> tuple[RemotingCommand, RemotingCommand]:
    """The master's and the slave's answers to a pull far past the queue's end."""
    async with running_cluster(tmp_path / "m", tls=None) as cluster, await connect(cluster) as conn:
        sent = await conn.request(cpp_send("Suggest", b"only"), 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        config = small_broker_config(
            tmp_path / "s",
            cluster.namesrv_addr,
            broker_id=1,
            broker_role=BrokerRole.SLAVE,
            offset_check_in_slave=offset_check_in_slave,
        )
        slave = await Broker.start(config, host="127.0.0.1", tls=TlsSettings())
        try:
            async with await open_connection("127.0.0.1", slave.port) as sconn:

                async def knows_topic() -> bool:
                    resp = await sconn.request(pull("Suggest", 0, 0), 5)
                    return resp.code == ResponseCode.SUCCESS  # synced and replicated

                await until("the slave holding the message", knows_topic)
                return (
                    await conn.request(pull("Suggest", 0, 9999), 5),
                    await sconn.request(pull("Suggest", 0, 9999), 5),
                )
        finally:
            await slave.stop()


async def test_a_slave_keeps_an_offset_past_its_end(tmp_path: Path) -> None:
    _, got = await _answers_past_the_end(tmp_path, offset_check_in_slave=False)
    assert got.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert got.ext_fields["nextBeginOffset"] == "9999"
    assert got.ext_fields["suggestWhichBrokerId"] == "0"


async def test_offset_check_in_slave_corrects_it_as_a_master_does(tmp_path: Path) -> None:
    master, got = await _answers_past_the_end(tmp_path, offset_check_in_slave=True)
    assert master.code == got.code == ResponseCode.PULL_OFFSET_MOVED
    assert got.ext_fields["nextBeginOffset"] == master.ext_fields["nextBeginOffset"] != "9999"
