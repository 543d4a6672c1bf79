"""Transactional messages checked back on a new producer of the group, with the Java client.

Each scenario runs against Rocklet and, as the other parameter, against a real
RocketMQ 4.9.4 with the same expectations: the RocketMQ runs prove them. Both brokers
check half messages older than a second every second (``quick_system``:
``transactionCheckInterval=1000``, ``transactionTimeOut=1000``, RocketMQ's keys, which
Rocklet reads too).

The scenario runs once per system (a module fixture): a ``TransactionMQProducer``
sends a message whose local transaction answers ``UNKNOW``, and answers ``UNKNOW`` to
the broker's check too; once it has been checked it is killed (SIGKILL: no shutdown,
no unregistering). A new producer process of the same group, whose
``checkLocalTransaction`` answers ``COMMIT_MESSAGE``, starts; the broker's next check
reaches it and the message becomes visible to a consumer that has waited from the start.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from unittest.mock import ANY
from urllib.parse import quote

import pytest

from tests.java.javatier import (
    Event,
    JavaClient,
    JavaDriver,
    System,
    java_clients,
    make_topic,
    tier_marks,
)

pytestmark = tier_marks()

TOPIC = "JavaTierTransactions"
PRODUCER_GROUP = "javatier_tx"
CONSUMER_GROUP = "javatier_tx_consumer"
KEYS = "tx-1"
BODY = "transactional body"
#: A client's start, a check-back: generous for a busy two-core machine.
STEP_TIMEOUT_S = 90
#: How long a driver may run at most (the test ends it before).
DRIVER_TIMEOUT_S = 240
CLUSTER = "DefaultCluster"


def _dump(*clients: JavaClient) -> str:
    return "\n".join(f"-- {c.name}\n" + "\n".join(json.dumps(e) for e in c.events) for c in clients)


@dataclass(frozen=True)
class CheckedBack:
    system: System
    sent: Event
    #: The first producer's checks, and what the consumer had when the first came.
    first_checks: list[Event]
    consumed_while_half: list[Event]
    #: The new producer's checks and the consumer's deliveries, at the end.
    second_checks: list[Event]
    consumed: list[Event]
    dump: str


async def _checked_back(driver: JavaDriver, system: System, home: Path) -> CheckedBack:
    await make_topic(system, TOPIC, 4)
    async with java_clients(driver, home, system.namesrv) as clients:
        consumer = await clients.start("consumer", "consume", TOPIC, CONSUMER_GROUP)
        first = await clients.start(
            "first", "tx", PRODUCER_GROUP, "UNKNOW", str(DRIVER_TIMEOUT_S),
            TOPIC, quote(KEYS), quote(BODY), "UNKNOW",
        )  # fmt: skip
        sent = await first.wait_event(("sent", "send_failed"), STEP_TIMEOUT_S)
        assert sent["event"] == "sent", first.diagnostics()
        await first.wait_event(("checked",), STEP_TIMEOUT_S)
        consumed_while_half = list(consumer.of("consumed"))
        await first.kill()
        second = await clients.start(
            "second", "tx", PRODUCER_GROUP, "COMMIT_MESSAGE", str(DRIVER_TIMEOUT_S)
        )
        await second.wait_event(("checked",), STEP_TIMEOUT_S)
        await consumer.wait_event(("consumed",), STEP_TIMEOUT_S)
        await second.close_stdin()
        await consumer.close_stdin()
        for client in (second, consumer):
            await client.wait_event(("done",), STEP_TIMEOUT_S)
        return CheckedBack(
            system,
            sent,
            first.of("checked"),
            consumed_while_half,
            second.of("checked"),
            consumer.of("consumed"),
            _dump(first, second, consumer),
        )


@pytest.fixture(scope="module")
def checked_back(
    java_driver: JavaDriver, quick_system: System, tmp_path_factory: pytest.TempPathFactory
) -> CheckedBack:
    home = tmp_path_factory.mktemp(f"{quick_system.name}-tx")
    return asyncio.run(_checked_back(java_driver, quick_system, home))


def _is_the_half(check: Event, sent: Event) -> None:
    """A check carries the half message as sent: topic and queue restored, id, key, body."""
    assert (check["topic"], check["queueId"]) == (TOPIC, sent["queueId"]), check
    assert check["transactionId"] == sent["msgId"], check
    assert (check["keys"], check["body"]) == (KEYS, BODY), check


def test_a_new_producer_of_the_group_is_checked_back_and_its_commit_delivers(
    checked_back: CheckedBack,
) -> None:
    cb, sent = checked_back, checked_back.sent
    assert (sent["status"], sent["localTransactionState"]) == ("SEND_OK", "UNKNOW"), cb.dump
    # While the transaction is unknown, the broker asks its producer, and nobody sees it.
    assert cb.first_checks, cb.dump
    assert {c["answer"] for c in cb.first_checks} == {"UNKNOW"}
    assert cb.consumed_while_half == [], cb.dump
    for check in cb.first_checks + cb.second_checks:
        _is_the_half(check, sent)
    # The first producer is gone: the next check goes to the new one of the group.
    assert cb.second_checks and {c["answer"] for c in cb.second_checks} == {"COMMIT_MESSAGE"}
    first_times = int(cb.first_checks[0]["allProps"]["TRANSACTION_CHECK_TIMES"])
    second_times = int(cb.second_checks[0]["allProps"]["TRANSACTION_CHECK_TIMES"])
    assert second_times > first_times, cb.dump  # the broker counts the checks
    # Its commit delivers the message, once, where it was sent.
    (delivered,) = cb.consumed
    assert delivered["msgId"] == sent["msgId"], cb.dump
    assert (delivered["topic"], delivered["queueId"], delivered["queueOffset"]) == (
        TOPIC,
        sent["queueId"],
        0,
    ), cb.dump
    assert (delivered["keys"], delivered["body"]) == (KEYS, BODY), cb.dump
    assert delivered["allProps"]["TRAN_MSG"] == "true", cb.dump
    assert delivered["allProps"]["PGROUP"] == PRODUCER_GROUP, cb.dump


def test_a_checked_half_message_has_the_properties_rocketmq_gives_it(
    checked_back: CheckedBack,
) -> None:
    for check in checked_back.first_checks + checked_back.second_checks:
        print(f"{checked_back.system.name}: checked message's properties {check['allProps']}")
        assert check["allProps"] == {
            "CLUSTER": CLUSTER,
            "KEYS": KEYS,
            "PGROUP": PRODUCER_GROUP,
            "REAL_QID": str(checked_back.sent["queueId"]),
            "REAL_TOPIC": TOPIC,
            "TRANSACTION_CHECK_TIMES": ANY,
            "TRAN_MSG": "true",
            "UNIQ_KEY": checked_back.sent["msgId"],
            "WAIT": "false",
        }


def test_a_committed_transactional_message_has_the_properties_rocketmq_gives_it(
    checked_back: CheckedBack,
) -> None:
    (delivered,) = checked_back.consumed
    props = delivered["allProps"]
    print(f"{checked_back.system.name}: committed message's properties {props}")
    assert props == {
        "CLUSTER": CLUSTER,
        "CONSUME_START_TIME": ANY,
        "KEYS": KEYS,
        "MAX_OFFSET": "1",
        "MIN_OFFSET": "0",
        "PGROUP": PRODUCER_GROUP,
        "REAL_QID": str(checked_back.sent["queueId"]),
        "REAL_TOPIC": TOPIC,
        "TRANSACTION_CHECK_TIMES": ANY,
        "TRAN_MSG": "true",
        "UNIQ_KEY": checked_back.sent["msgId"],
        "WAIT": "true",
    }
