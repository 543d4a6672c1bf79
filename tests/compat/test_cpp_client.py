"""The official C++ client (PyPI ``rocketmq==0.4.4``) against ``rocklet standalone``.

One standalone process (name server + broker on free loopback ports, a broker.conf
with a fast delay-level table) serves the whole module; each test uses its own topics
and groups. The client runs in ``cpp_driver.py`` children (see harness.py).

The C++ client's timers are slow (rebalance every 10 s, routes every 30 s), so the
tests are arranged to never wait for them:

* consumers of a new group start after the messages exist: the broker answers
  QUERY_CONSUMER_OFFSET with "0" for a new group, so they read from the start
  (docs/protocol.md) instead of asking GET_MAX_OFFSET;
* consumers start only once the name server routes their topic (and the retry topic
  when a retry is expected), because the client fetches routes once at start;
* when consumers must be running before the messages are sent (broadcasting, whose
  consumers keep offsets locally and start at the end of each queue; two consumers
  sharing a group, which settle only after the broker's NOTIFY_CONSUMER_IDS_CHANGED),
  a long-lived producer sends probe messages to every queue until the consumers'
  deliveries show they are in place, and only then the real messages.

Broker-side tag filtering is not visible here (the C++ client filters again itself);
tests/broker/test_java_capture_replay.py checks it against the real broker's answers.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.harness import (
    Driver,
    DriverPool,
    Standalone,
    create_topic,
    driver_pool,
    running_standalone,
    stored_record,
    wait_for_route,
)

pytestmark = pytest.mark.compat

#: RocketMQ's 18 delay levels, each one second, so delay and retry tests stay short.
FAST_DELAYS = " ".join(["1s"] * 18)
AUTO_QUEUES = 4  # the C++ producer asks for 4 queues when a topic is auto-created
CONSUME_TIMEOUT_S = 30.0
Event = dict[str, Any]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    root = tmp_path_factory.mktemp("standalone")
    properties = {
        "brokerIP1": "127.0.0.1",
        "messageDelayLevel": FAST_DELAYS,
        "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
        "maxHashSlotNum": "5000",
        "maxIndexNum": "20000",
    }
    with running_standalone(root, properties) as broker:
        yield broker


@pytest.fixture
async def pool(standalone: Standalone, tmp_path: Path) -> AsyncIterator[DriverPool]:
    async with driver_pool(tmp_path / "home", standalone.namesrv_addr) as drivers:
        yield drivers


def keys_of(events: list[Event]) -> Counter[str]:
    return Counter(e["keys"] for e in events)


def successful(consumer: Driver) -> list[Event]:
    return [e for e in consumer.of("consumed") if not e["failed"]]


async def consume_all(
    pool: DriverPool, name: str, topic: str, count: int, **options: Any
) -> list[Event]:
    """Run a push consumer until it has acknowledged ``count`` deliveries."""
    consumer = await pool.spawn(
        name, "push", topic=topic, expect_count=count, timeout_s=CONSUME_TIMEOUT_S, **options
    )
    summary = await consumer.finish(CONSUME_TIMEOUT_S + 15)
    assert summary["stopped"] == "signal", f"only {summary}:\n{consumer.diagnostics()}"
    return successful(consumer)


def big_body() -> str:
    # 5000 bytes: over the 4 KiB threshold above which the C++ producer zlib-compresses.
    return "".join(chr(ord("A") + (i * 7 + i // 26) % 26) for i in range(5000))


async def test_every_kind_of_send_reaches_a_push_consumer_exactly_once(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic = "CompatSends"
    tags = ["TagA", "TagB", "TagC"]
    sends: list[Event] = [
        {"mode": "sync", "tags": tags[i % 3], "keys": f"sync-{i}", "body": f"sync {i}"}
        for i in range(6)
    ]
    sends += [{"mode": "oneway", "keys": f"oneway-{i}", "body": f"oneway {i}"} for i in range(3)]
    sends += [
        {"mode": "orderly", "shard": i, "keys": f"orderly-{i}", "body": f"orderly {i}"}
        for i in range(4)
    ]
    batch = [{"tags": "TagB", "keys": f"batch-{i}", "body": f"batch {i}"} for i in range(3)]
    sends.append({"mode": "batch", "messages": batch})
    sends.append({"mode": "sync", "keys": "big", "body": big_body()})
    sent = await pool.produce("producer", topic, sends)

    assert [e["status"] for e in sent if e["mode"] in ("sync", "orderly", "batch")] == ["OK"] * 12
    assert [e["queue"] for e in sent if e["mode"] == "orderly"] == [0, 1, 2, 3]
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)

    expected = {s["keys"]: s["body"] for s in [*sends, *batch] if "keys" in s}
    got = await consume_all(pool, "consumer", topic, len(expected), group="CG_sends")
    assert keys_of(got) == Counter(expected.keys()), "each message exactly once"
    by_key = {e["keys"]: e for e in got}
    for key, body in expected.items():
        if key != "big":
            assert by_key[key]["body"] == body, key
    big = by_key["big"]
    assert big["body_len"] == 5000
    assert big["body_sha256"] == hashlib.sha256(big_body().encode()).hexdigest()
    # The client compressed it (zlib, sysFlag bit 0) and the broker kept those bytes.
    stored = await stored_record(
        standalone.broker_addr, topic, big["queue_id"], big["queue_offset"]
    )
    assert stored.sys_flag & 1 and stored.body[:1] == b"\x78" and len(stored.body) < 5000
    assert stored.payload() == big_body().encode()
    assert [by_key[f"orderly-{i}"]["queue_id"] for i in range(4)] == [0, 1, 2, 3]
    # A batch is stored as its messages, one after another in one queue.
    batch_got = [by_key[f"batch-{i}"] for i in range(3)]
    assert {e["tags"] for e in batch_got} == {"TagB"}
    assert len({e["queue_id"] for e in batch_got}) == 1
    offsets = [e["queue_offset"] for e in batch_got]
    assert offsets == list(range(offsets[0], offsets[0] + 3))
    assert {e["topic"] for e in got} == {topic}
    assert {e["reconsume_times"] for e in got} == {0}
    assert len({e["msg_id"] for e in got}) == len(got)


async def test_tag_expressions_filter_push_and_pull_consumers(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic = "CompatTags"
    tags = ["TagA", "TagB", "TagC"]
    sends = [
        {"tags": tags[i % 3], "keys": f"t{i}-{tags[i % 3]}", "body": f"b{i}"} for i in range(12)
    ]
    await pool.produce("producer", topic, sends)
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)
    wanted = {s["keys"] for s in sends if s["tags"] in ("TagA", "TagB")}

    pushed = await consume_all(
        pool, "push", topic, len(wanted), group="CG_tags", expression="TagA || TagB"
    )
    assert keys_of(pushed) == Counter(wanted)

    everything = await pool.spawn("pull-all", "pull", topic=topic, group="CG_pull_all")
    assert (await everything.finish(CONSUME_TIMEOUT_S))["consumed"] == len(sends)
    assert keys_of(everything.of("consumed")) == Counter(s["keys"] for s in sends)

    only_a = await pool.spawn("pull-a", "pull", topic=topic, group="CG_pull_a", expression="TagA")
    await only_a.finish(CONSUME_TIMEOUT_S)
    assert keys_of(only_a.of("consumed")) == Counter(
        s["keys"] for s in sends if s["tags"] == "TagA"
    )


async def test_restarted_consumer_resumes_from_its_committed_offsets(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic, group = "CompatResume", "CG_resume"
    first = [{"keys": f"first-{i}", "body": f"1.{i}"} for i in range(8)]
    await pool.produce("producer1", topic, first)
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)
    got = await consume_all(pool, "consumer1", topic, len(first), group=group)
    assert keys_of(got) == Counter(s["keys"] for s in first)

    # The client commits its offsets when it shuts down; a new consumer of the group
    # must start there (QUERY_CONSUMER_OFFSET), not at the beginning.
    second = [{"keys": f"second-{i}", "body": f"2.{i}"} for i in range(8)]
    await pool.produce("producer2", topic, second)
    got = await consume_all(pool, "consumer2", topic, len(second), group=group)
    assert keys_of(got) == Counter(s["keys"] for s in second)


async def test_orderly_consumer_sees_each_queue_in_order(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic = "CompatOrderly"
    shards, per_shard = 8, 6
    sends = [
        {"mode": "orderly", "shard": shard, "keys": f"s{shard}-{seq}", "body": f"{shard}:{seq}"}
        for seq in range(per_shard)
        for shard in range(shards)
    ]
    sent = await pool.produce("producer", topic, sends)
    assert {e["queue"] for e in sent} == set(range(AUTO_QUEUES))
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)

    got = await consume_all(pool, "consumer", topic, len(sends), group="CG_orderly", orderly=True)
    assert keys_of(got) == Counter(s["keys"] for s in sends)
    per_queue: dict[int, list[int]] = defaultdict(list)
    per_shard_seen: dict[int, list[int]] = defaultdict(list)
    for event in got:  # in delivery order
        per_queue[event["queue_id"]].append(event["queue_offset"])
        shard, seq = map(int, event["body"].split(":"))
        assert event["queue_id"] == shard % AUTO_QUEUES
        per_shard_seen[shard].append(seq)
    for queue, offsets in per_queue.items():
        assert offsets == list(range(len(offsets))), f"queue {queue} out of order: {offsets}"
    assert all(seqs == list(range(per_shard)) for seqs in per_shard_seen.values())


async def test_broadcasting_delivers_every_message_to_every_consumer(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic, group = "CompatBroadcast", "CG_broadcast"
    producer = await pool.spawn(
        "producer", "produce", topic=topic, control=True, sends=[{"keys": "seed", "body": "s"}]
    )
    await producer.wait_event("ready", 15)
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)
    consumers = [
        await pool.spawn(
            f"consumer{i}",
            "push",
            topic=topic,
            group=group,
            model="broadcasting",
            instance=f"b{i}",
            control=True,
            timeout_s=120,
        )
        for i in range(2)
    ]
    for consumer in consumers:
        await consumer.wait_event("started", 15)
    await _probe_until_ready(producer, consumers)

    keys = [f"bc-{i}" for i in range(12)]
    await producer.tell(_sends([{"keys": k, "body": k} for k in keys]))
    for consumer in consumers:
        await consumer.wait_for(
            lambda d: True if set(keys) <= set(keys_of(d.of("consumed"))) else None,
            CONSUME_TIMEOUT_S,
            "every broadcast message",
        )
        await consumer.tell("stop")
    for consumer in consumers:
        await consumer.finish(CONSUME_TIMEOUT_S)
        counts = keys_of(consumer.of("consumed"))
        assert {k: counts[k] for k in keys} == dict.fromkeys(keys, 1), consumer.name
        assert "seed" not in counts, "broadcasting consumers start at the end of each queue"
    await producer.tell("stop")
    await producer.finish(15)


def _sends(specs: list[Event]) -> str:
    return json.dumps({"sends": specs})


async def _probe_until_ready(producer: Driver, consumers: list[Driver], rounds: int = 10) -> None:
    """Send a probe to every queue until each consumer has seen one on each queue.

    A broadcasting consumer positions itself at the end of each queue when it starts;
    a probe it receives proves the position was taken before the probe was stored.
    """

    def missing() -> set[int]:
        out: set[int] = set()
        for consumer in consumers:
            seen = {e["queue_id"] for e in consumer.of("consumed") if e["keys"].startswith("probe")}
            out |= set(range(AUTO_QUEUES)) - seen
        return out

    for attempt in range(rounds):
        queues = sorted(missing())
        if not queues:
            return
        probes = [
            {"mode": "orderly", "shard": q, "keys": f"probe-{attempt}-{q}", "body": "p"}
            for q in queues
        ]
        await producer.tell(_sends(probes))
        for consumer in consumers:
            try:
                await consumer.wait_for(
                    lambda d: True if not missing() else None, 1.0, "probes on every queue"
                )
            except AssertionError:
                break  # some probe was missed: send another round
    assert not missing(), f"consumers never saw probes on queues {sorted(missing())}"


async def test_clustering_consumers_share_the_queues_and_each_message_once(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic, group = "CompatShare", "CG_share"
    producer = await pool.spawn(
        "producer", "produce", topic=topic, control=True, sends=[{"keys": "seed", "body": "s"}]
    )
    await producer.wait_event("ready", 15)
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)
    consumers = [
        await pool.spawn(
            f"consumer{i}", "push", topic=topic, group=group, control=True, timeout_s=120
        )
        for i in range(2)
    ]
    for consumer in consumers:
        await consumer.wait_event("started", 15)
    # The second consumer's heartbeat makes the broker notify both; each then takes
    # half the queues. Probe every queue until each probe reaches exactly one of them.
    await _probe_until_shared(producer, consumers)

    keys = [f"share-{i}" for i in range(16)]
    await producer.tell(_sends([{"keys": k, "body": k} for k in keys]))

    def all_delivered(_d: Driver) -> bool | None:
        seen = sum((keys_of(c.of("consumed")) for c in consumers), Counter())
        return True if set(keys) <= set(seen) else None

    await consumers[0].wait_for(all_delivered, CONSUME_TIMEOUT_S, "every message")
    for consumer in consumers:
        await consumer.tell("stop")
    for consumer in consumers:
        await consumer.finish(CONSUME_TIMEOUT_S)
    per_consumer = [
        {k: n for k, n in keys_of(c.of("consumed")).items() if k in keys} for c in consumers
    ]
    assert all(per_consumer), "both consumers got a share"
    assert sum((Counter(p) for p in per_consumer), Counter()) == Counter(keys), "each once"
    await producer.tell("stop")
    await producer.finish(15)


async def _probe_until_shared(producer: Driver, consumers: list[Driver], rounds: int = 15) -> None:
    def takers(attempt: int) -> dict[int, list[str]]:
        out: dict[int, list[str]] = defaultdict(list)
        for consumer in consumers:
            for e in consumer.of("consumed"):
                if e["keys"].startswith(f"probe-{attempt}-"):
                    out[e["queue_id"]].append(consumer.name)
        return out

    for attempt in range(rounds):
        probes = [
            {"mode": "orderly", "shard": q, "keys": f"probe-{attempt}-{q}", "body": "p"}
            for q in range(AUTO_QUEUES)
        ]
        await producer.tell(_sends(probes))

        def all_taken(_d: Driver, n: int = attempt) -> bool | None:
            return True if len(takers(n)) == AUTO_QUEUES else None

        try:
            await consumers[0].wait_for(all_taken, 1.0, "every probe taken")
        except AssertionError:
            continue  # a queue was between owners: try again
        owners = takers(attempt)
        each_once = all(len(names) == 1 for names in owners.values())
        per_consumer = Counter(names[0] for names in owners.values())
        if each_once and sorted(per_consumer.values()) == [2, 2]:
            return
    raise AssertionError(f"the queues never settled between the consumers: {takers(attempt)}")


async def test_delayed_message_arrives_no_earlier_than_its_level(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic = "CompatDelay"
    sends: list[Event] = [
        {"keys": "delayed", "body": "later", "delay_level": 3},
        {"keys": "plain", "body": "now"},
    ]
    sent = {e["keys"]: e for e in await pool.produce("producer", topic, sends)}
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)

    got = {e["keys"]: e for e in await consume_all(pool, "consumer", topic, 2, group="CG_delay")}
    assert got.keys() == {"plain", "delayed"}
    delayed = got["delayed"]
    assert delayed["topic"] == topic and delayed["body"] == "later"
    # Level 3 is one second in this broker's table; the clock is shared with the child.
    assert delayed["t"] >= sent["delayed"]["t_start"] + 1.0 - 0.002
    assert delayed["store_timestamp"] - delayed["born_timestamp"] >= 1000


async def test_failed_delivery_is_retried_with_reconsume_times_incremented(
    pool: DriverPool, standalone: Standalone
) -> None:
    topic, group = "CompatRetry", "CG_retry"
    # The client fetches the retry topic's route once at start (then every 30 s).
    await create_topic(standalone.broker_addr, f"%RETRY%{group}", 1)
    await wait_for_route(standalone.namesrv_addr, f"%RETRY%{group}", 1)
    sends = [{"keys": f"r{i}", "tags": "TagR", "body": f"retry body {i}"} for i in range(3)]
    await pool.produce("producer", topic, sends)
    await wait_for_route(standalone.namesrv_addr, topic, AUTO_QUEUES)

    consumer = await pool.spawn(
        "consumer",
        "push",
        topic=topic,
        group=group,
        expect_count=3,
        fail_first_keys=["r1"],
        timeout_s=CONSUME_TIMEOUT_S,
    )
    summary = await consumer.finish(CONSUME_TIMEOUT_S + 15)
    assert summary["stopped"] == "signal", consumer.diagnostics()
    deliveries = [e for e in consumer.of("consumed") if e["keys"] == "r1"]
    assert [(e["failed"], e["reconsume_times"]) for e in deliveries] == [(True, 0), (False, 1)]
    first, retried = deliveries
    assert retried["topic"] == topic, "the client restores the topic from RETRY_TOPIC"
    assert retried["retry_topic"] == topic
    assert (retried["body"], retried["tags"]) == ("retry body 1", "TagR")
    assert retried["t"] >= first["t"] + 1.0 - 0.002, "send-back level 3 is one second here"
    others = [e for e in consumer.of("consumed") if e["keys"] != "r1"]
    assert sorted((e["keys"], e["reconsume_times"], e["failed"]) for e in others) == [
        ("r0", 0, False),
        ("r2", 0, False),
    ]
