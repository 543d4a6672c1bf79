"""Pure producer components: queue lists from routes, latency-fault avoidance, the hash
selector, reconnect backoff and UNIQ_KEY generation."""

from __future__ import annotations

import random
import re

import pytest

from rocklet.client.backoff import Backoff, BackoffState
from rocklet.client.errors import InvalidMessageError
from rocklet.client.fault import LatencyFaultTolerance
from rocklet.client.message import Message, UniqKeyGenerator, send_properties, validate_message
from rocklet.client.producer import hash_selector
from rocklet.client.routes import publish_queues, subscribe_queues
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import BrokerData, Perm, QueueData, TopicRouteData
from rocklet.protocol.message import java_string_hash
from rocklet.protocol.properties import decode_properties


def route(*queues: QueueData, masters: tuple[str, ...] = ("a", "b")) -> TopicRouteData:
    brokers = tuple(BrokerData("C", n, {0: f"10.0.0.{i}:10911"}) for i, n in enumerate(masters))
    return TopicRouteData(queues, brokers)


def test_publish_queues_follow_write_permission_masters_and_sorting() -> None:
    r = route(
        QueueData("b", 4, 2),
        QueueData("a", 4, 3),
        QueueData("c", 4, 4),  # no master registered: skipped
        QueueData("d", 4, 4, perm=Perm.READ),
        masters=("a", "b", "d"),
    )
    got = publish_queues("T", r)
    assert got == [MessageQueue("T", "a", i) for i in range(3)] + [
        MessageQueue("T", "b", i) for i in range(2)
    ]
    # Through the TBW102 template, each broker gives at most defaultTopicQueueNums.
    assert len(publish_queues("T", route(QueueData("a", 8, 8)), max_queues=4)) == 4
    read = subscribe_queues("T", r)
    assert [(q.broker_name, q.queue_id) for q in read][:4] == [("a", i) for i in range(4)]
    assert {q.broker_name for q in read} == {"a", "b", "c", "d"}


def test_order_topic_conf_decides_the_publish_queues() -> None:
    r = TopicRouteData((QueueData("a", 8, 8),), (BrokerData("C", "a", {0: "x:1"}),), "b:2;a:1")
    assert publish_queues("T", r) == [
        MessageQueue("T", "b", 0),
        MessageQueue("T", "b", 1),
        MessageQueue("T", "a", 0),
    ]


QUEUES = [MessageQueue("T", b, i) for b in ("a", "b", "c") for i in range(2)]


def test_fault_tolerance_round_robins_when_all_is_well() -> None:
    fault = LatencyFaultTolerance()
    fault.update("a", 5, 0.0, failed=False)  # fast: not even recorded
    picks = [fault.select(QUEUES, i, 0.0) for i in range(len(QUEUES))]
    assert picks == QUEUES


def test_slow_or_failed_broker_is_avoided_for_its_duration_then_used_again() -> None:
    fault = LatencyFaultTolerance()
    fault.update("a", 600, 100.0, failed=False)  # >= 550 ms: 30 s out
    fault.update("b", 0, 100.0, failed=True)  # failure: 30 s out (Java: 600 s)
    for i in range(12):
        assert fault.select(QUEUES, i, 100.0).broker_name == "c"
    assert not fault.is_available("a", 129.9)
    assert fault.is_available("a", 130.0)
    assert fault.select(QUEUES, 0, 130.0).broker_name == "a"
    assert not fault.is_available("b", 129.9) and fault.is_available("b", 130.0)
    # A fast call afterwards clears the record at once.
    fault.update("b", 3000, 200.0, failed=False)  # 3 s: 180 s out
    assert not fault.is_available("b", 200.0)
    fault.update("b", 3, 200.0, failed=False)
    assert fault.is_available("b", 200.0)


def test_when_every_broker_is_out_the_one_back_soonest_is_used() -> None:
    fault = LatencyFaultTolerance()
    fault.update("a", 0, 0.0, failed=True)  # out until 30
    fault.update("b", 2000, 0.0, failed=False)  # out until 120
    fault.update("c", 3000, 0.0, failed=False)  # out until 180
    assert fault.select(QUEUES, 0, 1.0).broker_name == "a"


def test_avoid_skips_the_broker_just_failed_on_unless_it_is_the_only_one() -> None:
    fault = LatencyFaultTolerance()
    assert all(fault.select(QUEUES, i, 0.0, avoid="a").broker_name != "a" for i in range(6))
    only_a = [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1)]
    assert fault.select(only_a, 0, 0.0, avoid="a").broker_name == "a"


def test_hash_selector_matches_javas_select_message_queue_by_hash() -> None:
    queues = [MessageQueue("T", "a", i) for i in range(7)]
    for key in ("order-1", "order-2", "ä€", "x" * 40):
        # Java: value = key.hashCode() % size; if (value < 0) value = Math.abs(value)
        h = java_string_hash(key)
        java = abs(int(h - 7 * int(h / 7)))
        assert hash_selector(queues, Message("T", b"x"), key).queue_id == java
    assert hash_selector(queues, Message("T", b"x"), 12).queue_id == 5
    assert hash_selector(queues, Message("T", b"x"), -12).queue_id == 5


def test_backoff_grows_caps_and_jitters_within_half_to_full() -> None:
    policy = Backoff(base_s=0.1, factor=2.0, max_s=1.0)
    rng = random.Random(7)
    assert policy.delay_s(0) == 0.0
    for failures, nominal in ((1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (500, 1.0)):
        for _ in range(20):
            assert nominal / 2 <= policy.delay_s(failures, rng) <= nominal
    state = BackoffState(policy)
    until = state.failed(10.0, rng)
    assert not state.may_attempt(10.0) and state.may_attempt(until)
    state.succeeded()
    assert state.may_attempt(10.0) and state.failures == 0
    with pytest.raises(ValueError):
        Backoff(base_s=2.0, max_s=1.0)


def test_uniq_keys_are_32_hex_unique_and_distinct_between_generators() -> None:
    one, two = UniqKeyGenerator("10.1.2.3"), UniqKeyGenerator("10.1.2.3")
    keys = [one.next() for _ in range(50_000)] + [two.next() for _ in range(50_000)]
    assert len(set(keys)) == len(keys)
    assert all(re.fullmatch(r"[0-9A-F]{32}", k) for k in keys[:100])
    assert keys[0].startswith("0A010203")  # the IPv4 address leads, as in Java's layout


def test_send_properties_and_validation() -> None:
    msg = Message("T", b"hi", tags="TagA", keys=["k1", "k2"], properties={"p": "v"}, delay_level=3)
    props = decode_properties(send_properties(msg, "U1", {"CORRELATION_ID": "c"}))
    assert props == {
        "UNIQ_KEY": "U1",
        "WAIT": "true",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "DELAY": "3",
        "p": "v",
        "CORRELATION_ID": "c",
    }
    assert msg.body == b"hi" and Message("T", b"x", keys="one").keys == ("one",)
    for bad in (
        Message("", b"x"),
        Message("bad topic", b"x"),
        Message("T" * 128, b"x"),
        Message("T", b""),
        Message("T", b"x", properties={"UNIQ_KEY": "mine"}),
        Message("TBW102", b"x"),
    ):
        with pytest.raises(InvalidMessageError):
            validate_message(bad)
    with pytest.raises(InvalidMessageError):
        validate_message(Message("T", b"123456"), max_size=5)
