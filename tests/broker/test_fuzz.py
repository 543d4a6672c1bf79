"""Fuzzing the remoting decoder and every request handler, in process (tests/fuzzing.py).

A broker and a name server on loopback get fuzzed frames (a few thousand here;
``ROCKLET_FUZZ_FRAMES`` for more, and tests/adversity/test_hostile_input.py for a real
process). Passing means: no crash (no answer carrying an exception's text, no
"processor failed" or other failure in the log, no exception the event loop saw),
every intact request that expects an answer got one, a well-behaved client was served
throughout, and its messages read back intact afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rocklet.broker.config import NamesrvConfig
from rocklet.broker.namesrv.kv_config import KVConfigManager
from rocklet.broker.namesrv.processors import NamesrvProcessors
from rocklet.broker.namesrv.route_info import RouteInfoManager
from rocklet.broker.wiring import register_processors
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.transport import ProcessorRegistry
from rocklet.transport.clock import SystemClock
from rocklet.transport.dial import open_connection
from tests.broker.test_send_pull import cpp_send
from tests.cluster import Cluster, running_cluster
from tests.fuzzing import (
    FAILURE_LOG_EVENTS,
    KEEP_TOPIC,
    WITNESS_GROUP,
    Mutator,
    Target,
    fuzz,
    seeded_codes,
    seeds,
)

#: Frames per run of ``make test``; ROCKLET_FUZZ_FRAMES asks for more.
FRAMES = int(os.environ.get("ROCKLET_FUZZ_FRAMES", "3000"))
#: A different run each time unless ROCKLET_FUZZ_SEED pins one (failures print it).
SEED = int(os.environ.get("ROCKLET_FUZZ_SEED", str(random.randrange(2**32))))


class _Failures(logging.Handler):
    """Keeps the log records that mean a crash."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if any(event in text for event in FAILURE_LOG_EVENTS) or record.exc_info:
            self.lines.append(f"{record.name}: {text}")


@contextmanager
def failures_logged() -> Iterator[_Failures]:
    handler = _Failures()
    for name in ("rocklet", "asyncio"):
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler
    finally:
        for name in ("rocklet", "asyncio"):
            logging.getLogger(name).removeHandler(handler)


def witness_pull(offset: int) -> RemotingCommand:
    ext = {
        "consumerGroup": WITNESS_GROUP,
        "topic": KEEP_TOPIC,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",
        "subscription": "*",
    }
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext)


async def witness(cluster: Cluster, stop: asyncio.Event) -> list[bytes]:
    """A well-behaved client: send, read back and ask the name server, until told to stop."""
    sent: list[bytes] = []
    async with (
        await open_connection("127.0.0.1", cluster.broker.port) as broker,
        await open_connection("127.0.0.1", cluster.namesrv.port) as namesrv,
    ):
        while not stop.is_set() or not sent:
            body = f"witness-{len(sent)}".encode()
            answer = await broker.request(cpp_send(KEEP_TOPIC, body), 10)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            sent.append(body)
            got = await broker.request(witness_pull(len(sent) - 1), 10)
            assert got.code == ResponseCode.SUCCESS, got.remark
            assert [m.body for m in iter_messages(got.body)][:1] == [body]
            listed = RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            assert (await namesrv.request(listed, 10)).code == ResponseCode.SUCCESS
            await asyncio.sleep(0.01)  # pacing only: nothing waits on it
    return sent


async def test_every_request_code_has_a_seed(tmp_path: Path) -> None:
    """A new request code is fuzzed as soon as it is registered (or this fails)."""
    covered = seeded_codes(seeds())
    broker = ProcessorRegistry()
    async with running_cluster(tmp_path) as cluster:
        register_processors(broker, cluster.broker.ctx)
    assert set(broker) <= covered["broker"], sorted(set(broker) - covered["broker"])
    namesrv = NamesrvProcessors(
        RouteInfoManager(), KVConfigManager(), NamesrvConfig(), SystemClock()
    ).registry()
    assert set(namesrv) <= covered["namesrv"], sorted(set(namesrv) - covered["namesrv"])


async def test_fuzzed_frames_get_answers_and_break_nothing(tmp_path: Path) -> None:
    with failures_logged() as failures:
        async with running_cluster(tmp_path) as cluster:
            stop = asyncio.Event()
            served = asyncio.create_task(witness(cluster, stop))
            ports: dict[Target, int] = {
                "broker": cluster.broker.port,
                "namesrv": cluster.namesrv.port,
            }
            report = await fuzz(Mutator(SEED), ports, FRAMES)
            stop.set()
            sent = await served
            # Afterwards every witness message reads back, in order.
            async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
                got = await conn.request(witness_pull(0), 10)
                assert [m.body for m in iter_messages(got.body)] == sent[:32]
    print(f"seed {SEED}: {report.summary()}")
    assert report.crashes == [], (SEED, report.crashes[:5])
    assert report.unanswered == [], (SEED, report.unanswered[:5])
    assert failures.lines == [], (SEED, failures.lines[:5])
    assert report.frames == FRAMES and report.answered > FRAMES // 2
    assert report.closed_by_server > 0  # broken frames did close their connections
