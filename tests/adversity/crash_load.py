"""Load for kill -9 loops, and the ledger of everything the broker acknowledged.

A :class:`CrashLoad` runs against one run of a :class:`~tests.adversity.procs.BrokerProcess`:
producers sending continuously (now and then to a topic nobody created, which the send
auto-creates), an admin creating topics and subscription groups, and a consumer
committing offsets with answered UPDATE_CONSUMER_OFFSET requests. Each acknowledgement
goes into an :class:`Acked` ledger the moment it arrives; whatever was in flight when the
process died is not in it. :func:`verify` then checks a restarted run against the
ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field

from rocklet.client import Message, Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import CreateTopicRequestHeader
from rocklet.protocol.headers.consumer import UpdateConsumerOffsetRequestHeader
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.adversity.procs import BrokerProcess

#: The topic most messages go to, and the group whose commits are tracked.
MAIN_TOPIC = "CrashT"
COMMIT_GROUP = "CrashG"
COMMIT_QUEUES = 4
#: A sender moves to a brand-new (auto-created) topic every this many messages.
NEW_TOPIC_EVERY = 25
SENDERS = 4


@dataclass
class Acked:
    """Everything a broker acknowledged, over all runs of a loop."""

    #: (topic, queue id) -> {queue offset: body}.
    messages: dict[tuple[str, int], dict[int, bytes]] = field(default_factory=dict)
    #: Topics created by an admin request -> queue count; by a send -> 0.
    topics: dict[str, int] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    #: Queue id -> the highest offset a commit of COMMIT_GROUP on MAIN_TOPIC was answered for.
    offsets: dict[int, int] = field(default_factory=dict)
    commits: int = 0

    @property
    def message_count(self) -> int:
        """Acknowledged messages."""
        return sum(len(by_offset) for by_offset in self.messages.values())


class CrashLoad:
    """The load of one run; :meth:`start` it, :meth:`wait_acks`, kill, :meth:`stop`.

    Args:
        broker: The running broker process.
        acked: The ledger acknowledgements go to.
        run: This run's number (names its topics, groups and bodies).
    """

    def __init__(self, broker: BrokerProcess, acked: Acked, run: int) -> None:
        self._broker = broker
        self._acked = acked
        self._run = run
        self._acks = 0
        self._changed = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self._producer = Producer(f"crash-producer-{run}", broker.namesrv_addr)
        #: New in this run: the (topic, queue) pairs that got messages, and new topics.
        self.queues: set[tuple[str, int]] = set()
        self.new_topics: set[str] = set()

    async def start(self) -> None:
        """Start every load task."""
        await self._producer.start()
        host, port = self._broker.broker_addr.split(":")
        admin = await open_connection(host, int(port))
        committer = await open_connection(host, int(port))
        self._tasks = [asyncio.create_task(self._send(i)) for i in range(SENDERS)] + [
            asyncio.create_task(self._admin(admin)),
            asyncio.create_task(self._commit(committer)),
        ]

    async def wait_acks(self, count: int, timeout_s: float = 60.0) -> None:
        """Wait until this run has had ``count`` acknowledgements of any kind."""
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: self._acks >= count)

    async def stop(self) -> None:
        """Stop the load (after the kill: every task is failing or about to)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._producer.close(), 30)

    async def _acked_one(self) -> None:
        async with self._changed:
            self._acks += 1
            self._changed.notify_all()

    async def _send(self, sender: int) -> None:
        topic, n = MAIN_TOPIC, 0
        while True:
            if n % NEW_TOPIC_EVERY == NEW_TOPIC_EVERY - 1:
                topic = f"Auto-{self._run}-{sender}-{n}"
            body = f"{self._run}/{sender}/{n}".encode()
            try:
                result = await self._producer.send(Message(topic, body, keys=body.decode()))
            except Exception:
                return  # the broker died under this send: not acknowledged
            if result.status.value != "SEND_OK":
                continue  # stored but not durable in time: not acknowledged as durable
            mq = result.message_queue
            self._acked.messages.setdefault((topic, mq.queue_id), {})[result.queue_offset] = body
            self.queues.add((topic, mq.queue_id))
            if topic != MAIN_TOPIC and topic not in self._acked.topics:
                self._acked.topics[topic] = 0
                self.new_topics.add(topic)
            n += 1
            await self._acked_one()

    async def _admin(self, conn: Connection) -> None:
        n = 0
        try:
            while True:
                topic = f"Admin-{self._run}-{n}"
                header = CreateTopicRequestHeader(
                    topic=topic,
                    default_topic="TBW102",
                    read_queue_nums=2,
                    write_queue_nums=2,
                    perm=6,
                )
                create = RemotingCommand(
                    RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=header.to_ext_fields()
                )
                if (await conn.request(create, 10)).code == ResponseCode.SUCCESS:
                    self._acked.topics[topic] = 2
                    self.new_topics.add(topic)
                    await self._acked_one()
                group = SubscriptionGroupConfig(f"Group-{self._run}-{n}")
                update = RemotingCommand(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json()
                )
                if (await conn.request(update, 10)).code == ResponseCode.SUCCESS:
                    self._acked.groups.add(group.group_name)
                    await self._acked_one()
                n += 1
        except Exception:
            return
        finally:
            await conn.close()

    async def _commit(self, conn: Connection) -> None:
        try:
            while True:
                queue_id = self._acked.commits % COMMIT_QUEUES
                offset = self._acked.offsets.get(queue_id, 0) + 1
                header = UpdateConsumerOffsetRequestHeader(
                    COMMIT_GROUP, MAIN_TOPIC, queue_id, offset
                )
                cmd = RemotingCommand(
                    RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=header.to_ext_fields()
                )
                if (await conn.request(cmd, 10)).code == ResponseCode.SUCCESS:
                    self._acked.offsets[queue_id] = offset
                    self._acked.commits += 1
                    await self._acked_one()
        except Exception:
            return
        finally:
            await conn.close()


async def _table(broker: BrokerProcess, code: int, key: str) -> dict[str, object]:
    host, port = broker.broker_addr.split(":")
    async with await open_connection(host, int(port)) as conn:
        answer = await conn.request(RemotingCommand(code), 30)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    obj = fastjson.loads(answer.body)
    assert isinstance(obj, dict)
    table = obj[key]
    assert isinstance(table, dict)
    return table


async def live_store_check(broker: BrokerProcess) -> dict[str, object]:
    """Ask the running broker to check its own store (ROCKLET_STORE_CHECK); its report."""
    host, port = broker.broker_addr.split(":")
    async with await open_connection(host, int(port)) as conn:
        answer = await conn.request(RemotingCommand(RequestCode.ROCKLET_STORE_CHECK), 120)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    report = json.loads(answer.body)
    assert isinstance(report, dict)
    return report


async def verify(
    broker: BrokerProcess,
    acked: Acked,
    queues: set[tuple[str, int]],
    route_topics: set[str],
) -> list[str]:
    """Compare a restarted broker with the ledger; return what is missing.

    Args:
        broker: The restarted run.
        acked: Everything acknowledged so far.
        queues: The (topic, queue) pairs whose acknowledged messages are read back
            (all of ``acked.messages`` for a full check).
        route_topics: Topics whose route is asked of the name server.

    Returns:
        One line per loss; empty when nothing acknowledged is missing.
    """
    lost: list[str] = []
    topics = await _table(broker, RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
    for topic, queue_nums in acked.topics.items():
        config = topics.get(topic)
        if not isinstance(config, dict):
            lost.append(f"topic {topic}")
        elif queue_nums and config.get("readQueueNums") != queue_nums:
            lost.append(f"topic {topic} has {config.get('readQueueNums')} queues")
    groups = await _table(
        broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable"
    )
    lost += [f"group {g}" for g in sorted(acked.groups - groups.keys())]
    offsets = await _table(broker, RequestCode.GET_ALL_CONSUMER_OFFSET, "offsetTable")
    committed = offsets.get(f"{MAIN_TOPIC}@{COMMIT_GROUP}", {})
    assert isinstance(committed, dict)
    for queue_id, offset in acked.offsets.items():
        now = committed.get(queue_id, committed.get(str(queue_id), -1))
        if not isinstance(now, int) or now < offset:
            lost.append(f"offset of queue {queue_id} went back from {offset} to {now}")
    async with PullConsumer("crash-verifier", broker.namesrv_addr) as reader:
        for topic in sorted(route_topics):
            try:
                await reader.fetch_queues(topic)
            except Exception as exc:
                lost.append(f"route of {topic}: {exc}")
        for topic, queue_id in sorted(queues):
            lost += await _read_back(reader, broker, topic, queue_id, acked)
    return lost


async def _read_back(
    reader: PullConsumer, broker: BrokerProcess, topic: str, queue_id: int, acked: Acked
) -> list[str]:
    wanted = acked.messages[(topic, queue_id)]
    mq = MessageQueue(topic, "broker-a", queue_id)
    found: dict[int, bytes] = {}
    offset, end = min(wanted), max(wanted) + 1
    try:
        await reader.fetch_queues(topic)
        while offset < end:
            result = await reader.pull(mq, offset, 32)
            if not result.messages:
                break
            for msg in result.messages:
                found[msg.queue_offset] = msg.body
            offset = result.next_begin_offset
    except Exception as exc:
        return [f"{topic}/{queue_id}: {exc}"]
    return [
        f"message {topic}/{queue_id}@{qoff}"
        for qoff, body in sorted(wanted.items())
        if found.get(qoff) != body
    ]
