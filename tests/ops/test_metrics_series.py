"""The Prometheus endpoint stays bounded: deleted topics and groups, and gone groups' lag.

A real broker on loopback is scraped over HTTP. Lag ages out on the broker's clock, a
:class:`ManualClock` the tests move past :data:`LAG_WINDOW_MS`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.prometheus import LAG_WINDOW_MS
from rocklet.broker.tls_config import TlsSettings
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import UnregisterClientRequestHeader
from rocklet.transport.clock import ManualClock
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_send_pull import cpp_send, pull
from tests.broker.wire_clients import commit_offset, consumer_heartbeat
from tests.cluster import running_cluster, small_broker_config
from tests.ops.test_metrics import Samples, scrape, value

TIMEOUT = 10.0
LAG = "rocklet_consumer_lag_messages"


def series(samples: Samples, name: str, **labels: str) -> set[frozenset[tuple[str, str]]]:
    """The label sets of ``name``'s samples that include ``labels``."""
    want = set(labels.items())
    return {lbls for (n, lbls) in samples if n == name and want <= lbls}


async def request(conn: Connection, cmd: RemotingCommand) -> None:
    answer = await conn.request(cmd, TIMEOUT)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def admin(code: RequestCode, **ext: str) -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext)


def pull_as(group: str, topic: str) -> RemotingCommand:
    cmd = pull(topic, 0, 0)
    return RemotingCommand(cmd.code, ext_fields={**cmd.ext_fields, "consumerGroup": group})


async def test_deleting_a_topic_or_a_group_removes_its_series(tmp_path: Path) -> None:
    """Removed whatever ``autoDeleteUnusedStats`` says (here its default, off)."""
    async with running_cluster(tmp_path, metrics_port=0) as cluster:
        port = cluster.broker.metrics_port
        assert port is not None
        async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
            for topic in ("Doomed", "Kept"):
                await request(conn, cpp_send(topic, b"body"))
                for group in ("G1", "G2"):
                    await request(conn, pull_as(group, topic))
            before = await scrape(port)
            for topic in ("Doomed", "Kept"):
                assert value(before, "rocklet_messages_put_total", topic=topic) == 1
                assert series(before, "rocklet_messages_get_total", topic=topic) == {
                    frozenset({("topic", topic), ("group", g)}) for g in ("G1", "G2")
                }

            await request(conn, admin(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName="G2"))
            no_g2 = await scrape(port)
            for name in ("rocklet_messages_get_total", "rocklet_bytes_get_total"):
                assert not series(no_g2, name, group="G2")
                assert len(series(no_g2, name, group="G1")) == 2

            await request(conn, admin(RequestCode.DELETE_TOPIC_IN_BROKER, topic="Doomed"))
            after = await scrape(port)
            for name in (
                "rocklet_messages_put_total",
                "rocklet_bytes_put_total",
                "rocklet_messages_get_total",
                "rocklet_bytes_get_total",
            ):
                assert not series(after, name, topic="Doomed"), name
                assert series(after, name, topic="Kept"), name

            # The topic comes back with its next send, counted from zero.
            await request(conn, cpp_send("Doomed", b"again"))
            again = await scrape(port)
            assert value(again, "rocklet_messages_put_total", topic="Doomed") == 1
            assert value(again, "rocklet_messages_put_total", topic="Kept") == 1


@asynccontextmanager
async def clocked_broker(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Broker]:
    tls = TlsSettings()
    namesrv = await NamesrvServer.start("127.0.0.1", 0, tls=tls)
    try:
        config = small_broker_config(tmp_path, f"127.0.0.1:{namesrv.port}", metrics_port=0)
        broker = await Broker.start(config, host="127.0.0.1", tls=tls, clock=clock)
        try:
            yield broker
        finally:
            await broker.stop()
    finally:
        await namesrv.stop()


async def test_lag_is_exported_for_online_or_recently_active_groups_only(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    async with clocked_broker(tmp_path, clock) as broker:
        port = broker.metrics_port
        assert port is not None
        clients = broker.ctx.clients
        async with (
            await open_connection("127.0.0.1", broker.port) as online,
            await open_connection("127.0.0.1", broker.port) as other,
        ):
            for body in (b"a", b"b", b"c"):
                await request(other, cpp_send("Lagged", body))
            await request(online, consumer_heartbeat("online-1", "Online", "Lagged"))
            await request(online, commit_offset("Online", "Lagged", 0, 1))
            # "Left" commits without ever being online (a tool, or a consumer gone since).
            await request(other, commit_offset("Left", "Lagged", 0, 2))
            samples = await scrape(port)
            assert value(samples, LAG, group="Online", topic="Lagged", queue="0") == 2
            assert value(samples, LAG, group="Left", topic="Lagged", queue="0") == 1

            clock.advance(LAG_WINDOW_MS + 1)
            # A heartbeat after the jump: the channel scan may have expired the consumer.
            await request(online, consumer_heartbeat("online-1", "Online", "Lagged"))
            samples = await scrape(port)
            assert value(samples, LAG, group="Online", topic="Lagged", queue="0") == 2
            assert not series(samples, LAG, group="Left")

            # A commit that moves its offset makes the group active again.
            await request(other, commit_offset("Left", "Lagged", 0, 3))
            samples = await scrape(port)
            assert value(samples, LAG, group="Left", topic="Lagged", queue="0") == 0

            # "Online" leaves (answered once the broker has forgotten it).
            leave = UnregisterClientRequestHeader("online-1", consumer_group="Online")
            unregister = RemotingCommand(
                RequestCode.UNREGISTER_CLIENT, ext_fields=leave.to_ext_fields()
            )
            await request(online, unregister)
            assert clients.consumer_group("Online") is None
        samples = await scrape(port)  # still within the window of its last sighting
        assert series(samples, LAG, group="Online")
        clock.advance(LAG_WINDOW_MS + 1)
        samples = await scrape(port)
        assert not series(samples, LAG, group="Online")
        assert not series(samples, LAG, group="Left")
        assert not series(samples, LAG)


async def test_offsets_from_before_a_restart_export_no_lag_until_the_group_is_active(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    async with (
        clocked_broker(tmp_path, clock) as broker,
        await open_connection("127.0.0.1", broker.port) as conn,
    ):
        await request(conn, cpp_send("Lagged", b"a"))
        await request(conn, commit_offset("Gone", "Lagged", 0, 1))
        await broker.ctx.offsets.durable()
    async with clocked_broker(tmp_path, clock) as broker:
        port = broker.metrics_port
        assert port is not None
        assert broker.ctx.offsets.query("Gone", "Lagged", 0) == 1
        assert not series(await scrape(port), LAG)
        async with await open_connection("127.0.0.1", broker.port) as conn:
            await request(conn, consumer_heartbeat("back-1", "Gone", "Lagged"))
            samples = await scrape(port)
        assert value(samples, LAG, group="Gone", topic="Lagged", queue="0") == 0
