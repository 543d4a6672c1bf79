"""SQL92 property filters (``MessageSelector.bySql``) with the official Java client.

Each scenario runs against Rocklet and, as the other parameter, against a real
RocketMQ 4.9.4 with the same expectations: the RocketMQ runs prove them. The brokers
have ``enablePropertyFilter=true`` unless a scenario says otherwise.

One 4-queue topic per system holds a table of messages with tags TagA/TagB/TagC (some
none) and user properties ``a`` (digits, some messages without it) and ``s`` (words,
some without it). The last message of every queue is a sentinel the push selector
accepts, so a push consumer that has delivered the four sentinels has read every queue
to its end (it consumes with one thread, in the order it pulled). What each selector
should deliver is worked out here from the same table, with SQL's rule that a
comparison with a missing property is unknown (neither true nor false, also under NOT).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.compat.harness import create_topic, wait_for_route
from tests.java.javatier import (
    Event,
    JavaClient,
    JavaDriver,
    OutgoingMessage,
    System,
    java_clients,
    tier_marks,
)

pytestmark = tier_marks()

TOPIC = "JavaTierSql92"
QUEUES = 4
#: A client's start, a scenario's deliveries: generous for a busy two-core machine.
STEP_TIMEOUT_S = 90
PUSH_SELECTOR = (
    "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)"
)
#: RocketMQ's CHECK_CLIENT_CONFIG remark when the broker has no property filters.
NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"
SYSTEM_ERROR = 1
SUBSCRIPTION_PARSE_FAILED = 23


def _a(m: OutgoingMessage) -> int | None:
    return int(m.props["a"]) if "a" in m.props else None


def table() -> list[OutgoingMessage]:
    """The messages, in sending order: 30 of the producer's choice, then the sentinels."""
    words = ("x", "y", "z", "x y")
    rows = []
    for i in range(30):
        props = {}
        if i % 7 != 3:
            props["a"] = str(i % 10)
        if i % 5 != 4:
            props["s"] = words[i % 4]
        tags = None if i % 11 == 10 else ("TagA", "TagB", "TagC")[i % 3]
        rows.append(OutgoingMessage(f"m{i:02d}", tags, props, body=f"message {i}"))
    sentinels = [
        OutgoingMessage(f"end{q}", "TagA", {"a": "0", "s": "end"}, body="last", queue=q)
        for q in range(QUEUES)
    ]
    return rows + sentinels


def push_wants(m: OutgoingMessage) -> bool:
    a = _a(m)
    return m.tags in ("TagA", "TagB") and a is not None and 0 <= a <= 3


#: The pull path's selectors and what each accepts.
PULL_SELECTORS: dict[str, Callable[[OutgoingMessage], bool]] = {
    "a > 5": lambda m: (a := _a(m)) is not None and a > 5,
    "s IN ('x', 'y')": lambda m: m.props.get("s") in ("x", "y"),
    "NOT (a < 3)": lambda m: (a := _a(m)) is not None and not a < 3,
    "a IS NULL": lambda m: _a(m) is None,
}


@dataclass(frozen=True)
class DataSet:
    """The topic on one system, as sent: messages by key and their ``sent`` events."""

    system: System
    messages: dict[str, OutgoingMessage]
    sent: dict[str, Event]

    def keys_where(self, wanted: Callable[[OutgoingMessage], bool]) -> list[str]:
        return sorted(k for k, m in self.messages.items() if wanted(m))


async def _prepare(driver: JavaDriver, system: System, home: Path, topic: str) -> DataSet:
    await create_topic(system.broker, topic, QUEUES)
    await wait_for_route(system.namesrv, topic, QUEUES, STEP_TIMEOUT_S)
    rows = table()
    async with java_clients(driver, home, system.namesrv) as clients:
        sent = await clients.produce("producer", topic, rows)
    by_key = {e["keys"]: e for e in sent}
    for q in range(QUEUES):
        assert by_key[f"end{q}"]["queueId"] == q  # the selector honoured the queue column
    return DataSet(system, {m.keys: m for m in rows}, by_key)


@pytest.fixture(scope="module")
def dataset(
    java_driver: JavaDriver,
    filtering_system: System,
    tmp_path_factory: pytest.TempPathFactory,
) -> DataSet:
    """The table sent once per system (a module's fixture: its own short event loop)."""
    home = tmp_path_factory.mktemp(f"{filtering_system.name}-producer")
    return asyncio.run(_prepare(java_driver, filtering_system, home, TOPIC))


def _check_delivered(data: DataSet, consumed: list[Event], expected: list[str]) -> None:
    """Exactly ``expected`` once each, with the tags, properties and place they were sent with."""
    assert sorted(e["keys"] for e in consumed) == expected
    for e in consumed:
        m = data.messages[e["keys"]]
        sent = data.sent[e["keys"]]
        assert (e["tags"], e["props"], e["body"]) == (m.tags, m.props, m.body)
        assert (e["queueId"], e["queueOffset"]) == (sent["queueId"], sent["queueOffset"])


# --- a: a push consumer with an SQL92 selector ------------------------------------------------


async def test_push_consumer_gets_exactly_the_messages_its_selector_accepts(
    java_driver: JavaDriver, dataset: DataSet, tmp_path: Path
) -> None:
    expected = dataset.keys_where(push_wants)
    sentinels = {f"end{q}" for q in range(QUEUES)}
    assert sentinels <= set(expected) and len(expected) > len(sentinels) + 3
    async with java_clients(java_driver, tmp_path, dataset.system.namesrv) as clients:
        push = await clients.spawn(
            "push", "push", TOPIC, "javatier_push", PUSH_SELECTOR, "0", str(2 * STEP_TIMEOUT_S)
        )
        start = await push.wait_event(("started", "start_failed", "fatal"), STEP_TIMEOUT_S)
        assert start["event"] == "started", push.diagnostics()

        def read_to_the_end(client: JavaClient) -> bool | None:
            keys = {e["keys"] for e in client.of("consumed")}
            return True if sentinels <= keys and set(expected) <= keys else None

        await push.wait_for(read_to_the_end, STEP_TIMEOUT_S, f"{expected} delivered")
        await push.close_stdin()
        assert await push.exit_code(STEP_TIMEOUT_S) == 0, push.diagnostics()
    _check_delivered(dataset, push.of("consumed"), expected)


# --- b: pull consumers with SQL92 selectors -----------------------------------------------------


@pytest.mark.parametrize("selector", list(PULL_SELECTORS))
async def test_pull_consumer_reads_what_its_selector_accepts(
    java_driver: JavaDriver, dataset: DataSet, tmp_path: Path, selector: str
) -> None:
    expected = dataset.keys_where(PULL_SELECTORS[selector])
    assert expected  # each selector accepts some messages and refuses others
    assert len(expected) < len(dataset.messages)
    group = f"javatier_pull_{list(PULL_SELECTORS).index(selector)}"
    async with java_clients(java_driver, tmp_path, dataset.system.namesrv) as clients:
        pull = await clients.spawn("pull", "pull", TOPIC, group, selector)
        end = await pull.wait_event(("done", "pull_failed", "fatal"), STEP_TIMEOUT_S)
        assert end["event"] == "done", pull.diagnostics()
        assert await pull.exit_code(STEP_TIMEOUT_S) == 0, pull.diagnostics()
    ends = {e["queueId"]: e["maxOffset"] for e in pull.of("queue_done")}
    assert sorted(ends) == list(range(QUEUES))
    for q, max_offset in ends.items():  # every queue read to the end of what was sent
        assert max_offset == 1 + max(
            s["queueOffset"] for s in dataset.sent.values() if s["queueId"] == q
        )
    _check_delivered(dataset, pull.of("consumed"), expected)


# --- c, d: consumers the broker refuses at start -------------------------------------------------


async def _failed_start(
    driver: JavaDriver, system: System, home: Path, topic: str, selector: str
) -> Event:
    """Start a push consumer with ``selector``: its ``start()`` must throw."""
    async with java_clients(driver, home, system.namesrv) as clients:
        push = await clients.spawn(
            "push", "push", topic, "javatier_refused", selector, "0", str(STEP_TIMEOUT_S)
        )
        event = await push.wait_event(("started", "start_failed", "fatal"), STEP_TIMEOUT_S)
        assert event["event"] == "start_failed", push.diagnostics()
        assert await push.exit_code(STEP_TIMEOUT_S) == 3, push.diagnostics()
    return event


@pytest.fixture(scope="module")
def default_topic(default_system: System) -> Iterator[System]:
    """A 4-queue topic on the system without property filters, routed by its name server."""

    async def make() -> None:
        await create_topic(default_system.broker, TOPIC, QUEUES)
        await wait_for_route(default_system.namesrv, TOPIC, QUEUES, STEP_TIMEOUT_S)

    asyncio.run(make())
    yield default_system


async def test_a_broker_without_property_filters_refuses_an_sql92_consumer(
    java_driver: JavaDriver, default_topic: System, tmp_path: Path
) -> None:
    event = await _failed_start(java_driver, default_topic, tmp_path, TOPIC, "a > 1")
    assert event.get("code") == SYSTEM_ERROR, event
    assert NOT_SUPPORTED in event["error"], event


async def test_a_selector_that_does_not_compile_is_refused_at_start(
    java_driver: JavaDriver, dataset: DataSet, tmp_path: Path
) -> None:
    event = await _failed_start(java_driver, dataset.system, tmp_path, TOPIC, "a >")
    assert event.get("code") == SUBSCRIPTION_PARSE_FAILED, event
    assert f"CODE: {SUBSCRIPTION_PARSE_FAILED}" in event["error"], event
