"""Broadcasting push consumers and the lite pull consumer's assign/seek/commit, in Java.

Each scenario runs against Rocklet and, as the other parameter, against a real
RocketMQ 4.9.4 with the same expectations: the RocketMQ runs prove them.
"""

from __future__ import annotations

import json
from pathlib import Path

from rocklet.protocol import ResponseCode
from rocklet.transport.dial import open_connection
from tests.broker.wire_clients import commit_offset
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

#: A client's start, a scenario's deliveries: generous for a busy two-core machine.
STEP_TIMEOUT_S = 90


def _dump(*clients: JavaClient) -> str:
    return "\n".join(f"-- {c.name}\n" + "\n".join(json.dumps(e) for e in c.events) for c in clients)


# --- broadcasting ------------------------------------------------------------------------------

BROADCAST_TOPIC = "JavaTierBroadcast"
BROADCAST_GROUP = "javatier_broadcast"


async def test_every_broadcasting_consumer_of_a_group_gets_every_message(
    java_driver: JavaDriver, quick_system: System, tmp_path: Path
) -> None:
    await make_topic(quick_system, BROADCAST_TOPIC, 4)
    messages = [OutgoingMessage(f"b{i}", None, {}, body=f"broadcast {i}") for i in range(8)]
    keys = sorted(m.keys for m in messages)
    async with java_clients(java_driver, tmp_path, quick_system.namesrv) as clients:
        consumers = [
            await clients.start(
                f"consumer{n}",
                "consume",
                BROADCAST_TOPIC,
                BROADCAST_GROUP,
                "model=BROADCASTING",
                f"expect={len(messages)}",
            )
            for n in (1, 2)
        ]
        sent = await clients.produce("producer", BROADCAST_TOPIC, messages)
        for consumer in consumers:
            await consumer.wait_event(("done",), STEP_TIMEOUT_S)
    by_key = {e["keys"]: e for e in sent}
    assert {e["queueId"] for e in sent} == {0, 1, 2, 3}  # the messages are spread out
    for consumer in consumers:
        consumed = consumer.of("consumed")
        # All of them, each once, in place, although the two share their group.
        assert sorted(e["keys"] for e in consumed) == keys, _dump(*consumers)
        for e in consumed:
            sent_as = by_key[e["keys"]]
            assert (e["msgId"], e["queueId"], e["queueOffset"]) == (
                sent_as["msgId"],
                sent_as["queueId"],
                sent_as["queueOffset"],
            ), e


# --- lite pull: assign, seek, poll, commitSync ---------------------------------------------------

LITE_TOPIC = "JavaTierLitePull"
LITE_GROUP = "javatier_lite"
LITE_QUEUE = 1
LITE_SEEK = 4
LITE_COUNT = 10
#: Messages the seeker polls after its seek (one per poll: the driver's batch size is 1).
LITE_TAKE = 3


async def test_a_lite_pull_consumer_polls_from_where_it_seeks_and_commits_what_it_polled(
    java_driver: JavaDriver, quick_system: System, tmp_path: Path
) -> None:
    await make_topic(quick_system, LITE_TOPIC, 2)
    messages = [
        OutgoingMessage(f"q{LITE_QUEUE}-{i}", None, {}, body=f"lite {i}", queue=LITE_QUEUE)
        for i in range(LITE_COUNT)
    ]
    messages += [OutgoingMessage(f"q0-{i}", None, {}, body=f"other {i}", queue=0) for i in range(3)]
    wanted = LITE_TAKE
    taken = range(LITE_SEEK, LITE_SEEK + LITE_TAKE)
    async with java_clients(java_driver, tmp_path, quick_system.namesrv) as clients:
        sent = await clients.produce("producer", LITE_TOPIC, messages)
        assert [e["queueOffset"] for e in sent[:LITE_COUNT]] == list(range(LITE_COUNT))
        # The group's offset at the queue's end first: a pull that assign() starts
        # before seek() then finds nothing. (The 4.9.4 client can otherwise hand over
        # what such a pull found, from before the seek; seen against RocketMQ.)
        await commit(quick_system.broker, LITE_GROUP, LITE_TOPIC, LITE_QUEUE, LITE_COUNT)
        first = await clients.spawn(
            "seeker", "litepull", LITE_TOPIC, LITE_GROUP,
            str(LITE_QUEUE), str(LITE_SEEK), str(wanted), str(STEP_TIMEOUT_S),
        )  # fmt: skip
        await first.wait_event(("done", "litepull_failed", "fatal"), STEP_TIMEOUT_S)
        assert await first.exit_code(STEP_TIMEOUT_S) == 0, first.diagnostics()
        # A new consumer of the group (nothing polled, nothing in memory): committed()
        # reads the offset the first one stored on the broker when it shut down.
        second = await clients.spawn(
            "resumer", "litepull", LITE_TOPIC, LITE_GROUP,
            str(LITE_QUEUE), "-1", "0", str(STEP_TIMEOUT_S),
        )  # fmt: skip
        await second.wait_event(("done", "litepull_failed", "fatal"), STEP_TIMEOUT_S)
        assert await second.exit_code(STEP_TIMEOUT_S) == 0, second.diagnostics()
    ours = [e for e in first.of("consumed") if e["queueId"] == LITE_QUEUE]
    # poll() after seek(mq, 4): offsets 4.. of that queue, in order, nothing before.
    assert [e["queueOffset"] for e in ours] == list(taken), _dump(first)
    assert [e["keys"] for e in ours] == [messages[i].keys for i in taken]
    assert [e["msgId"] for e in ours] == [sent[i]["msgId"] for i in taken]
    committed: list[Event] = first.of("committed")
    assert committed == [
        {"event": "committed", "when": "end", "queueId": LITE_QUEUE, "offset": taken.stop}
    ], _dump(first)
    assert second.of("committed")[0] == {
        "event": "committed",
        "when": "start",
        "queueId": LITE_QUEUE,
        "offset": taken.stop,  # what it polled, not the end set before it
    }, _dump(second)


async def commit(broker: str, group: str, topic: str, queue: int, offset: int) -> None:
    """Commit ``offset`` with a request, answered once the broker has it."""
    host, _, port = broker.rpartition(":")
    async with await open_connection(host, int(port)) as conn:
        answer = await conn.request(commit_offset(group, topic, queue, offset), 10)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
