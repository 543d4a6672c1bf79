"""The system the ``mqadmin`` verb tests share, seeded once per system.

Both systems are seeded the same way: a topic of 4 queues with 8 messages (keys, tags)
sent by the Java client, push consumers of two groups that stay online, a group whose
consumer read everything and stopped, a producer that stays online
(``seeded`` in conftest.py, session-scoped: seeding starts five client JVMs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.java.javatier import (
    Event,
    JavaDriver,
    OutgoingMessage,
    System,
    java_clients,
    make_topic,
)
from tests.java.mqadmin import JavaProcess, MqAdmin

TOPIC = "AdmT"
QUEUES = 4
COUNT = 8
#: The group whose push consumer stays online for the whole module.
ONLINE = "AdmG"
#: Another group online for the whole module, whose offsets a test resets.
RESET_ONLINE = "AdmResetOn"
#: The group whose consumer read every message and stopped before the tests.
OFFLINE = "AdmOff"
#: The group of a producer that stays online.
PRODUCER_GROUP = "AdmPG"
CLUSTER = "DefaultCluster"
BROKER = "broker-a"
#: Deliveries, a client's start, a state the broker reaches (offsets are committed every 5 s).
STEP_TIMEOUT_S = 60.0
#: Java's String.hashCode of the tags: a consume queue entry's tags code.
TAGS_CODE = {"TagA": 2598919, "TagB": 2598920}


def message(i: int) -> OutgoingMessage:
    return OutgoingMessage(
        f"k{i} admKey", "TagA" if i % 2 == 0 else "TagB", {}, body=f"body {i}", queue=i % QUEUES
    )


@dataclass(frozen=True)
class Seeded:
    """A seeded system and the ``mqadmin`` to drive it.

    Attributes:
        system: The name server and broker.
        admin: ``mqadmin`` against its name server.
        sent: The ``sent`` events of the 8 messages (msgId, offsetMsgId, queueId, ...).
        online: The push consumers that stay online, by group.
    """

    system: System
    admin: MqAdmin
    sent: list[Event]
    online: dict[str, JavaProcess]

    def run(self, verb: str, *args: str) -> str:
        return self.admin.run(verb, *args)

    def wait_output(self, check: Callable[[str], bool], what: str, verb: str, *args: str) -> str:
        return self.admin.wait_output(check, what, verb, *args, timeout_s=STEP_TIMEOUT_S)


def progress_rows(output: str) -> dict[tuple[str, int], tuple[int, int]]:
    """``consumerProgress -g``'s rows: (topic, queue) -> (broker offset, consumer offset)."""
    rows = {}
    for line in output.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == BROKER and f[2].isdigit():
            rows[(f[0], int(f[2]))] = (int(f[3]), int(f[4]))
    return rows


def settled(output: str) -> bool:
    """Every queue of the topic consumed and its offset committed to the broker."""
    rows = progress_rows(output)
    return all(rows.get((TOPIC, q)) == (2, 2) for q in range(QUEUES))


def seed(
    java_driver: JavaDriver, admin_system: System, admin_tool: MqAdmin, home: Path
) -> Iterator[Seeded]:
    """Seed ``admin_system``, yield it, then stop the clients (a fixture's body)."""
    messages = [message(i) for i in range(COUNT)]

    async def produce() -> list[Event]:
        async with java_clients(java_driver, home / "clients", admin_system.namesrv) as c:
            return await c.produce("producer", TOPIC, messages)

    asyncio.run(make_topic(admin_system, TOPIC, QUEUES))
    namesrv = admin_system.namesrv
    # The clients' JVMs start while the messages are sent (the consumers start from the
    # first offset: they get all of them either way).
    consumers = {
        group: JavaProcess(
            java_driver, home / "java", group, "consume", namesrv, TOPIC, group, "timeout=600"
        )
        for group in (ONLINE, RESET_ONLINE, OFFLINE)
    }
    producer = JavaProcess(
        java_driver, home / "java", "producer-online", "tx", namesrv, PRODUCER_GROUP,
        "UNKNOW", "600",
    )  # fmt: skip
    try:
        sent = asyncio.run(produce())
        for consumer in consumers.values():
            consumer.wait_count("consumed", COUNT, STEP_TIMEOUT_S)
        producer.wait_event(("started",), STEP_TIMEOUT_S)
        online = {g: c for g, c in consumers.items() if g != OFFLINE}
        result = Seeded(admin_system, admin_tool, sent, online)
        # Every group consumed everything and the broker has their offsets (a client
        # commits them every 5 s); then one group goes offline.
        for group in consumers:
            result.wait_output(settled, f"the offsets of {group}", "consumerProgress", "-g", group)
        assert consumers[OFFLINE].stop() == 0, consumers[OFFLINE].diagnostics()
        yield result
    finally:
        # The group whose offsets a test reset: its client would hold its shutdown 10 s.
        consumers.pop(RESET_ONLINE).kill()
        for child in (*consumers.values(), producer):
            child.stop()


def retry_topic(seeded: Seeded, group: str) -> None:
    """The group's retry topic, which consumerProgress routes by (a consumer would make it)."""
    seeded.run("updateTopic", "-c", CLUSTER, "-t", f"%RETRY%{group}", "-r", "1", "-w", "1")


def assert_topic_status(seeded: Seeded) -> None:
    """``topicStatus`` shows every queue of the seeded topic from offset 0 to 2."""
    output = seeded.run("topicStatus", "-t", TOPIC)
    rows = [line.split()[:4] for line in output.splitlines()[1:] if line.strip()]
    assert sorted(rows) == [[BROKER, str(q), "0", "2"] for q in range(QUEUES)], output
