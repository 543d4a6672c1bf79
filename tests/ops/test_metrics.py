"""The broker's Prometheus endpoint, scraped over real HTTP from a real broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from tests.broker.test_send_pull import cpp_send, pull
from tests.broker.wire_clients import commit_offset
from tests.cluster import running_cluster

TIMEOUT = 10.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def http_get(port: int, target: str, method: str = "GET") -> tuple[int, bytes]:
    reader, writer = await open_connection_raw(port)
    writer.write(f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), TIMEOUT)  # the server closes after answering
    writer.close()
    await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def open_connection_raw(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT)


async def scrape(port: int) -> Samples:
    status, body = await http_get(port, "/metrics")
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


async def test_puts_gets_requests_lag_and_store_gauges(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, metrics_port=0) as cluster:
        port = cluster.broker.metrics_port
        assert port is not None and port > 0
        async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
            for body in (b"a", b"bb" * 100, b"ccc"):
                sent = await conn.request(cpp_send("Metered", body), TIMEOUT)
                assert sent.code == ResponseCode.SUCCESS, sent.remark
            got = await conn.request(pull("Metered", 0, 0), TIMEOUT)
            assert got.code == ResponseCode.SUCCESS
            done = await conn.request(commit_offset("CG", "Metered", 0, 1), TIMEOUT)
            assert done.code == ResponseCode.SUCCESS, done.remark
            unknown = await conn.request(RemotingCommand(9999), TIMEOUT)
            assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        async with Producer("PG", cluster.namesrv_addr) as producer:
            for _ in range(2):  # the second batch is stored straight from its body
                await producer.send([Message("MeteredBatch", b"x" * 10) for _ in range(4)])
        samples = await scrape(port)

    stored_bytes = len(got.body)  # the pull returns the stored records themselves
    assert value(samples, "rocklet_messages_put_total", topic="Metered") == 3
    assert value(samples, "rocklet_messages_put_total", topic="MeteredBatch") == 8
    assert value(samples, "rocklet_bytes_put_total", topic="Metered") == stored_bytes
    assert value(samples, "rocklet_messages_get_total", topic="Metered", group="CG") == 3
    assert value(samples, "rocklet_bytes_get_total", topic="Metered", group="CG") == stored_bytes
    lag = value(samples, "rocklet_consumer_lag_messages", group="CG", topic="Metered", queue="0")
    assert lag == 2
    assert value(samples, "rocklet_request_duration_seconds_count", code="SEND_MESSAGE") == 3
    sends_ok = value(
        samples, "rocklet_responses_total", request_code="SEND_MESSAGE", response_code="SUCCESS"
    )
    assert sends_ok == 3
    not_supported = value(
        samples,
        "rocklet_responses_total",
        request_code="9999",
        response_code="REQUEST_CODE_NOT_SUPPORTED",
    )
    assert not_supported == 1
    batch_bytes = value(samples, "rocklet_bytes_put_total", topic="MeteredBatch")
    assert value(samples, "rocklet_commitlog_max_offset_bytes") == stored_bytes + batch_bytes
    assert value(samples, "rocklet_commitlog_min_offset_bytes") == 0
    assert 0 < value(samples, "rocklet_store_disk_used_ratio") <= 1
    assert value(samples, "rocklet_store_disk_full") == 0
    level = value(samples, "rocklet_store_disk_level")
    assert level == int(cluster.broker.ctx.store.disk.state.level)
    info = {
        k: v
        for (name, labels), _ in samples.items()
        if name == "rocklet_broker_info"
        for k, v in labels
    }
    assert info["broker_name"] == "broker-a" and info["cluster"] == "DefaultCluster"
    assert info["addr"] == f"127.0.0.1:{cluster.broker.port}"


async def test_long_poll_holds_are_counted_while_parked(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, metrics_port=0) as cluster:
        port = cluster.broker.metrics_port
        assert port is not None
        async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
            sent = await conn.request(cpp_send("Held", b"first"), TIMEOUT)
            assert sent.code == ResponseCode.SUCCESS
            parked = asyncio.create_task(conn.request(pull("Held", 0, 1, suspend_ms=20_000), 30))
            await asyncio.wait_for(cluster.broker.ctx.holds.wait_parked(1), TIMEOUT)
            assert value(await scrape(port), "rocklet_long_poll_held") == 1
            await conn.request(cpp_send("Held", b"second"), TIMEOUT)
            woken = await asyncio.wait_for(parked, TIMEOUT)
            assert woken.code == ResponseCode.SUCCESS
            samples = await scrape(port)
    assert value(samples, "rocklet_long_poll_held") == 0
    assert value(samples, "rocklet_request_duration_seconds_count", code="PULL_MESSAGE") == 1


async def test_endpoint_answers_only_get_metrics_and_is_off_by_default(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "on", metrics_port=0) as cluster:
        port = cluster.broker.metrics_port
        assert port is not None
        assert (await http_get(port, "/elsewhere"))[0] == 404
        assert (await http_get(port, "/metrics", method="POST"))[0] == 405
        assert await http_get(port, "/metrics", method="HEAD") == (200, b"")
        status, body = await http_get(port, "/metrics?name=x")
        assert status == 200 and b"rocklet_long_poll_held" in body
    async with running_cluster(tmp_path / "off") as cluster:
        assert cluster.broker.metrics_port is None
