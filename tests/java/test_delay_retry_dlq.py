"""Delayed messages, consumer retries and the dead-letter queue, with the Java client.

Each scenario runs against Rocklet and, as the other parameter, against a real
RocketMQ 4.9.4 with the same expectations: the RocketMQ runs prove them. Both brokers
have every delay level set to 1 s (``quick_system``): a retry is a delayed message
too, and RocketMQ's broker gives the n-th retry (no level asked by the consumer) level
``3 + reconsumeTimes``, so it comes back in a second rather than in 10 s.

Each scenario runs once per system (a module fixture); the tests then check what the
driver printed: first the behaviour the Java client relies on, then, separately, the
stored properties the consumer sees (``MessageExt.getProperties()``), all of them,
compared with what RocketMQ shows. Values that differ from run to run (ids, times) are
checked by what they must equal, or matched by anything.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from unittest.mock import ANY

import pytest

from rocklet.protocol.bodies.route import TopicRouteData
from tests.compat.harness import route_of, wait_for_route
from tests.java.javatier import (
    Event,
    JavaClient,
    JavaDriver,
    OutgoingMessage,
    System,
    java_clients,
    make_topic,
    tier_marks,
)

pytestmark = tier_marks()

QUEUES = 4
#: A client's start, a delivery: generous for a busy two-core machine.
STEP_TIMEOUT_S = 90
#: RocketMQ 4.9.4 adds this cluster name (its broker.conf's, and Rocklet's default).
CLUSTER = "DefaultCluster"
#: Read and write (PermName.PERM_READ | PERM_WRITE).
PERM_READ_WRITE = 6
#: The properties the client adds itself when it delivers (not stored by the broker).
PULLED = {"MIN_OFFSET": "0", "MAX_OFFSET": "1"}


def _dump(*clients: JavaClient) -> str:
    return "\n".join(f"-- {c.name}\n" + "\n".join(json.dumps(e) for e in c.events) for c in clients)


def _message(keys: str, queue: int | None = None, delay: int | None = None) -> OutgoingMessage:
    return OutgoingMessage(keys, "TagA", {"u": "1"}, body=f"body of {keys}", queue=queue,
                           delay_level=delay)  # fmt: skip


def _same_message(event: Event, sent: Event, message: OutgoingMessage) -> None:
    """The delivery is the message sent: id, key, tag, user properties, body."""
    assert event["msgId"] == sent["msgId"], event
    assert (event["keys"], event["tags"], event["props"], event["body"]) == (
        message.keys,
        message.tags,
        message.props,
        message.body,
    ), event


# --- the delayed message -------------------------------------------------------------------

DELAY_TOPIC = "JavaTierDelay"
DELAY_QUEUE = 2


@dataclass(frozen=True)
class Delayed:
    system: System
    message: OutgoingMessage
    sent: Event
    delivery: Event
    dump: str


async def _delayed(driver: JavaDriver, system: System, home: Path) -> Delayed:
    await make_topic(system, DELAY_TOPIC, QUEUES)
    message = _message("delayed", queue=DELAY_QUEUE, delay=1)
    async with java_clients(driver, home, system.namesrv) as clients:
        (sent,) = await clients.produce("producer", DELAY_TOPIC, [message])
        consumer = await clients.start(
            "consumer", "consume", DELAY_TOPIC, "javatier_delay", "expect=1"
        )
        await consumer.wait_event(("done",), STEP_TIMEOUT_S)
        deliveries = consumer.of("consumed")
        assert len(deliveries) == 1, _dump(consumer)
        return Delayed(system, message, sent, deliveries[0], _dump(consumer))


@pytest.fixture(scope="module")
def delayed(
    java_driver: JavaDriver, quick_system: System, tmp_path_factory: pytest.TempPathFactory
) -> Delayed:
    home = tmp_path_factory.mktemp(f"{quick_system.name}-delay")
    return asyncio.run(_delayed(java_driver, quick_system, home))


def test_a_delayed_message_arrives_after_its_delay_on_its_own_topic_and_queue(
    delayed: Delayed,
) -> None:
    d = delayed.delivery
    _same_message(d, delayed.sent, delayed.message)
    assert (d["topic"], d["queueId"]) == (DELAY_TOPIC, DELAY_QUEUE), delayed.dump
    # Stored again when level 1 (1 s) was up: no earlier than a second after its birth.
    assert d["storeTimestamp"] - d["bornTimestamp"] >= 1000, delayed.dump
    assert d["reconsumeTimes"] == 0, delayed.dump


def test_a_delayed_message_keeps_delay_real_topic_and_real_qid(delayed: Delayed) -> None:
    props = delayed.delivery["allProps"]
    print(f"{delayed.system.name}: delayed delivery's properties {props}")
    assert props == {
        "CLUSTER": CLUSTER,
        "CONSUME_START_TIME": ANY,
        "DELAY": "1",
        "KEYS": delayed.message.keys,
        "REAL_QID": str(DELAY_QUEUE),
        "REAL_TOPIC": DELAY_TOPIC,
        "TAGS": "TagA",
        "UNIQ_KEY": delayed.sent["msgId"],
        "WAIT": "true",
        "u": "1",
        **PULLED,
    }


# --- a retry -----------------------------------------------------------------------------------

RETRY_TOPIC = "JavaTierRetry"
RETRY_GROUP = "javatier_retry"


@dataclass(frozen=True)
class Retried:
    system: System
    message: OutgoingMessage
    sent: Event
    deliveries: list[Event]
    retry_route: TopicRouteData | None
    dump: str


async def _retried(driver: JavaDriver, system: System, home: Path) -> Retried:
    await make_topic(system, RETRY_TOPIC, QUEUES)
    message = _message("retried")
    async with java_clients(driver, home, system.namesrv) as clients:
        (sent,) = await clients.produce("producer", RETRY_TOPIC, [message])
        consumer = await clients.start(
            "consumer", "consume", RETRY_TOPIC, RETRY_GROUP, "later=first", "expect=2"
        )
        await consumer.wait_event(("done",), STEP_TIMEOUT_S)
        route = await route_of(system.namesrv, f"%RETRY%{RETRY_GROUP}")
        return Retried(system, message, sent, consumer.of("consumed"), route, _dump(consumer))


@pytest.fixture(scope="module")
def retried(
    java_driver: JavaDriver, quick_system: System, tmp_path_factory: pytest.TempPathFactory
) -> Retried:
    home = tmp_path_factory.mktemp(f"{quick_system.name}-retry")
    return asyncio.run(_retried(java_driver, quick_system, home))


def test_a_message_consumed_later_comes_back_once_as_it_was(retried: Retried) -> None:
    first, again = retried.deliveries
    assert (first["status"], again["status"]) == ("RECONSUME_LATER", "CONSUME_SUCCESS")
    assert (first["reconsumeTimes"], again["reconsumeTimes"]) == (0, 1), retried.dump
    for d in (first, again):
        _same_message(d, retried.sent, retried.message)
        # The redelivery is read from %RETRY%<group>; the client gives it its topic back.
        assert d["topic"] == RETRY_TOPIC, retried.dump
    assert again["allProps"]["RETRY_TOPIC"] == RETRY_TOPIC, retried.dump
    assert again["allProps"].get("ORIGIN_MESSAGE_ID"), retried.dump
    # The group's retry topic: one queue, read and write.
    assert retried.retry_route is not None
    (queues,) = retried.retry_route.queue_datas
    assert (queues.read_queue_nums, queues.write_queue_nums, queues.perm) == (
        1,
        1,
        PERM_READ_WRITE,
    )


def test_a_retried_message_has_the_properties_rocketmq_gives_it(retried: Retried) -> None:
    again = retried.deliveries[1]
    props = again["allProps"]
    print(f"{retried.system.name}: redelivery's properties {props}")
    assert props == {
        "CLUSTER": CLUSTER,
        "CONSUME_START_TIME": ANY,
        "DELAY": "3",
        "KEYS": retried.message.keys,
        "ORIGIN_MESSAGE_ID": retried.sent["offsetMsgId"],
        "REAL_QID": "0",
        "REAL_TOPIC": f"%RETRY%{RETRY_GROUP}",
        "RETRY_TOPIC": RETRY_TOPIC,
        "TAGS": "TagA",
        "UNIQ_KEY": retried.sent["msgId"],
        "WAIT": "false",
        "u": "1",
        **PULLED,
    }


# --- the dead-letter queue ----------------------------------------------------------------------

DLQ_TOPIC = "JavaTierDlq"
DLQ_GROUP = "javatier_dlq"
DLQ = f"%DLQ%{DLQ_GROUP}"


@dataclass(frozen=True)
class DeadLettered:
    system: System
    message: OutgoingMessage
    sent: Event
    deliveries: list[Event]
    consumer_done: Event
    dlq_route: TopicRouteData
    dead: list[Event]
    dump: str


async def _dead_lettered(driver: JavaDriver, system: System, home: Path) -> DeadLettered:
    await make_topic(system, DLQ_TOPIC, QUEUES)
    message = _message("doomed")
    async with java_clients(driver, home, system.namesrv) as clients:
        (sent,) = await clients.produce("producer", DLQ_TOPIC, [message])
        consumer = await clients.start(
            "consumer", "consume", DLQ_TOPIC, DLQ_GROUP, "later=always", "maxReconsumeTimes=1"
        )

        def delivered_twice(client: JavaClient) -> bool | None:
            return True if len(client.of("consumed")) >= 2 else None

        await consumer.wait_for(delivered_twice, STEP_TIMEOUT_S, "the retry")
        # The second RECONSUME_LATER sends it to the DLQ, which the broker creates then.
        route = await wait_for_route(system.namesrv, DLQ, 1, STEP_TIMEOUT_S)
        (queue,) = route.queue_datas
        reader = await clients.spawn(
            "reader", "read", DLQ, "javatier_dlq_reader", queue.broker_name, "0", "1", "60"
        )
        await reader.wait_event(("done", "read_failed", "fatal"), STEP_TIMEOUT_S)
        await consumer.close_stdin()
        done = await consumer.wait_event(("done",), STEP_TIMEOUT_S)
        return DeadLettered(
            system,
            message,
            sent,
            consumer.of("consumed"),
            done,
            route,
            reader.of("consumed"),
            _dump(consumer, reader),
        )


@pytest.fixture(scope="module")
def dead_lettered(
    java_driver: JavaDriver, quick_system: System, tmp_path_factory: pytest.TempPathFactory
) -> DeadLettered:
    home = tmp_path_factory.mktemp(f"{quick_system.name}-dlq")
    return asyncio.run(_dead_lettered(java_driver, quick_system, home))


def test_after_max_reconsume_times_a_message_goes_to_the_dlq(dead_lettered: DeadLettered) -> None:
    dl = dead_lettered
    # maxReconsumeTimes 1: the first delivery and one retry, then no more.
    assert [d["reconsumeTimes"] for d in dl.deliveries] == [0, 1], dl.dump
    assert dl.consumer_done["consumed"] == 2, dl.dump
    # %DLQ%<group>: one queue, read and write (RocketMQ 4.9.4 creates it so).
    (queues,) = dl.dlq_route.queue_datas
    assert (queues.read_queue_nums, queues.write_queue_nums, queues.perm) == (
        1,
        1,
        PERM_READ_WRITE,
    ), dl.dlq_route
    (dead,) = dl.dead
    _same_message(dead, dl.sent, dl.message)
    assert (dead["topic"], dead["queueId"], dead["queueOffset"]) == (DLQ, 0, 0), dl.dump
    assert dead["reconsumeTimes"] == 2, dl.dump
    assert dead["allProps"]["RETRY_TOPIC"] == DLQ_TOPIC, dl.dump
    assert dead["allProps"].get("ORIGIN_MESSAGE_ID"), dl.dump


def test_a_dead_letter_has_the_properties_rocketmq_gives_it(dead_lettered: DeadLettered) -> None:
    (dead,) = dead_lettered.dead
    props = dead["allProps"]
    print(f"{dead_lettered.system.name}: dead letter's properties {props}")
    assert props == {
        "CLUSTER": CLUSTER,
        "DELAY": "0",
        "KEYS": dead_lettered.message.keys,
        "ORIGIN_MESSAGE_ID": dead_lettered.sent["offsetMsgId"],
        "REAL_QID": "0",
        "REAL_TOPIC": f"%RETRY%{DLQ_GROUP}",
        "RETRY_TOPIC": DLQ_TOPIC,
        "TAGS": "TagA",
        "UNIQ_KEY": dead_lettered.sent["msgId"],
        "WAIT": "false",
        "u": "1",
        **PULLED,
    }
