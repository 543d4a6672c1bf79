"""The SDK and a broker process through the fault-injecting proxy (tests/adversity/proxy.py):
frames cut and delayed are put back together, a reset breaks only the connection it hits,
a stalled connection holds up nobody else, and a frame cut short harms only its sender.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import pytest

from rocklet.client import Message, Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.transport.errors import TransportError
from tests.adversity.conftest import rounds
from tests.adversity.procs import BrokerProcess, running_broker
from tests.adversity.proxy import PROXY_HOST, FaultyProxy, broker_proxy

TOPIC: Final = "Proxied"
STORE: Final = {"mappedFileSizeCommitLog": str(16 * 1024 * 1024)}


@asynccontextmanager
async def proxied_broker(root: Path) -> AsyncIterator[tuple[BrokerProcess, FaultyProxy]]:
    """A broker whose clients reach it only through a proxy (its advertised address)."""
    async with running_broker(root, STORE, ("--broker-ip1", PROXY_HOST)) as broker:  # noqa: SIM117
        async with broker_proxy(broker.broker_port) as proxy:  # needs the broker's port
            yield broker, proxy


def body(i: int) -> bytes:
    return f"m{i}".encode() * 50


async def test_split_and_delayed_frames_are_reassembled(tmp_path: Path) -> None:
    count = rounds(20, 200)
    async with proxied_broker(tmp_path) as (broker, proxy):
        proxy.split_bytes = 7  # every frame arrives in pieces, both ways
        proxy.delay_s = 0.001
        async with Producer("proxy-split", broker.namesrv_addr) as producer:
            sent = [
                await producer.send(Message(TOPIC, f"m{i}".encode() * 50)) for i in range(count)
            ]
        async with PullConsumer("proxy-split-reader", broker.namesrv_addr) as reader:
            await reader.fetch_queues(TOPIC)
            bodies: list[bytes] = []
            for result in sent:
                pulled = await reader.pull(result.message_queue, result.queue_offset, 1)
                bodies.extend(m.body for m in pulled.messages)
        assert bodies == [body(i) for i in range(count)]
        assert all(r.offset_msg_id for r in sent)
        links = proxy.links
        assert links and sum(link.pieces for link in links) > 10 * count  # really cut up


@pytest.mark.parametrize("retries", [0, 2])
async def test_a_reset_mid_request_breaks_only_that_connection(
    tmp_path: Path, retries: int
) -> None:
    async with (
        proxied_broker(tmp_path) as (broker, proxy),
        Producer("proxy-a", broker.namesrv_addr, instance_name="a", retry_times=retries) as a,
        Producer("proxy-b", broker.namesrv_addr, instance_name="b") as b,
    ):
        await a.send(Message(TOPIC, b"a0"))  # both connections exist
        await b.send(Message(TOPIC, b"b0"))
        link_a, link_b = await proxy.wait_links(2)
        link_a.stall()
        task = asyncio.create_task(a.send(Message(TOPIC, b"a1")))
        await link_a.wait_held()  # the request is on its way, held in the proxy
        link_a.reset()
        if retries:
            # The SDK reconnects and sends again: the reset cost one attempt.
            assert (await task).offset_msg_id
        else:
            with pytest.raises(TransportError):
                await task
        # The other connection never noticed; the broken one reconnects.
        assert not link_b.closed.is_set()
        assert (await b.send(Message(TOPIC, b"b1"))).offset_msg_id
        assert (await a.send(Message(TOPIC, b"a2"))).offset_msg_id
        assert len(proxy.links) == 3


async def test_a_stalled_connection_holds_up_nobody_else(tmp_path: Path) -> None:
    async with (
        proxied_broker(tmp_path) as (broker, proxy),
        Producer("proxy-a", broker.namesrv_addr, instance_name="a") as a,
        Producer("proxy-b", broker.namesrv_addr, instance_name="b") as b,
    ):
        await a.send(Message(TOPIC, b"a0"))
        await b.send(Message(TOPIC, b"b0"))
        link_a, _link_b = await proxy.wait_links(2)
        link_a.stall()
        stalled = asyncio.create_task(a.send(Message(TOPIC, b"a1")))
        await link_a.wait_held()
        # While a's request hangs in the proxy, b is answered as usual.
        for i in range(rounds(20, 500)):
            assert (await b.send(Message(TOPIC, f"b{i}".encode()))).offset_msg_id
        assert not stalled.done()
        link_a.restore()
        assert (await stalled).offset_msg_id  # and a's answer comes once it flows
        assert len(proxy.links) == 2  # nobody had to reconnect


async def test_a_frame_cut_short_harms_only_its_sender(tmp_path: Path) -> None:
    async with proxied_broker(tmp_path) as (broker, proxy):
        async with (
            Producer("proxy-a", broker.namesrv_addr, instance_name="a", retry_times=0) as a,
            Producer("proxy-b", broker.namesrv_addr, instance_name="b") as b,
        ):
            await a.send(Message(TOPIC, b"a0"))
            await b.send(Message(TOPIC, b"b0"))
            link_a, link_b = await proxy.wait_links(2)
            link_a.truncate_next(11)  # the length words and 3 header bytes, then a reset
            with pytest.raises(TransportError):
                await a.send(Message(TOPIC, b"cut"))
            assert (await b.send(Message(TOPIC, b"b1"))).offset_msg_id
            assert (await a.send(Message(TOPIC, b"a1"))).offset_msg_id
            assert not link_b.closed.is_set()
            # Nothing of the cut frame was stored: a reader sees a0, b0, b1, a1 only.
        async with PullConsumer("proxy-cut-reader", broker.namesrv_addr) as reader:
            queues = await reader.fetch_queues(TOPIC)
            bodies: set[bytes] = set()
            for mq in queues:
                pulled = await reader.pull(mq, 0, 32)
                bodies.update(m.body for m in pulled.messages)
        assert bodies == {b"a0", b"b0", b"b1", b"a1"}
