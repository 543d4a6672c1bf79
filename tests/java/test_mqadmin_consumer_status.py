"""The real 4.9.4 ``mqadmin`` asking consumers about themselves through the broker:
``getConsumerStatus`` (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, 223, relayed as 221) and
``consumerStatus -s`` / ``consumer -s`` (GET_CONSUMER_RUNNING_INFO, 307, with
``jstackEnable``). ``getConsumerStatus`` and ``consumer`` ship in the 4.9.4 tools jar but
are missing from ``MQAdminStartup``'s list; the driver adds them (AdminDriver.java).

Against Rocklet and, as the other parameter, a real RocketMQ 4.9.4, with the same
expectations (the RocketMQ runs prove them): for the seeded Java push consumer that
stays online (admin_seed.py), and for a Rocklet SDK push consumer the test runs, whose
answers a RocketMQ broker and mqadmin must read as well as a Java client's. Rocklet's
own ``rocklet admin`` verbs are run against both systems too, for the Java consumer.
"""

from __future__ import annotations

import argparse
import io
import json
import re
from typing import Any

from rocklet.admin.run import run_admin_async
from rocklet.cli import build_parser
from rocklet.client.push_consumer import PushConsumer
from tests.client.consumers import Collector
from tests.java.admin_seed import BROKER, COUNT, ONLINE, QUEUES, TOPIC, Seeded
from tests.java.javatier import tier_marks

pytestmark = tier_marks()

#: The Rocklet SDK consumer's group, of this module only.
PY_GROUP = "AdmPyStatus"
#: Each queue of the seeded topic holds COUNT / QUEUES messages, all consumed.
PER_QUEUE = COUNT // QUEUES
#: A line of UtilAll.jstack: a Java thread's heading.
JAVA_THREAD = re.compile(r"TID: \d+ STATE: [A-Z_]+")


def java_client_id(seeded: Seeded) -> str:
    """The client id of the seeded online Java consumer (consumerConnection's first row)."""
    output = seeded.run("consumerConnection", "-g", ONLINE)
    return output.splitlines()[1].split()[0]


def status_rows(output: str) -> dict[tuple[str, str, int], int]:
    """getConsumerStatus's rows: (clientId, brokerName, queueId) -> offset."""
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#clientId"))
    assert lines[header].split() == ["#clientId", "#brokerName", "#queueId", "#offset"], output
    rows = {}
    for line in lines[header + 1 :]:
        f = line.split()
        if len(f) == 4 and f[2].isdigit():
            rows[(f[0], f[1], int(f[2]))] = int(f[3])
    return rows


async def rocklet_admin(seeded: Seeded, *argv: str) -> Any:
    """``rocklet admin ARGV --json`` against the seeded system's name server."""
    args: argparse.Namespace = build_parser().parse_args(
        ["admin", *argv, "-n", seeded.system.namesrv, "--json"]
    )
    out, err = io.StringIO(), io.StringIO()
    code = await run_admin_async(args, out, err, environ={})
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_get_consumer_status_of_the_java_consumer(seeded: Seeded) -> None:
    client_id = java_client_id(seeded)
    output = seeded.run("getConsumerStatus", "-g", ONLINE, "-t", TOPIC)
    assert output.splitlines()[0] == (
        f"get consumer status from client. group={ONLINE}, topic={TOPIC}, originClientId="
    ), output
    # The offsets the client holds: every message consumed, retry queues not included.
    expected = {(client_id, BROKER, q): PER_QUEUE for q in range(QUEUES)}
    assert status_rows(output) == expected, output
    named = seeded.run("getConsumerStatus", "-g", ONLINE, "-t", TOPIC, "-i", client_id)
    assert status_rows(named) == expected, named
    # No member online: SYSTEM_ERROR on both; RocketMQ's remark is a NullPointerException's
    # text (its group entry is gone with the last member), Rocklet's says what happened.
    nobody = seeded.run("getConsumerStatus", "-g", "AdmNobodyStatus", "-t", TOPIC)
    assert "CODE: 1  DESC: " in nobody, nobody
    if seeded.system.name == "rocklet":
        assert "No Any Consumer online in the consumer group: [AdmNobodyStatus]" in nobody


def test_consumer_status_s_shows_the_java_consumers_threads(seeded: Seeded) -> None:
    client_id = java_client_id(seeded)
    one = seeded.run("consumerStatus", "-g", ONLINE, "-s", "-i", client_id)
    assert "#Consumer Properties#" in one, one
    jstack = one[one.index("#Consumer jstack#") :]
    assert JAVA_THREAD.search(jstack), jstack[:2000]
    # Every member, each one's report written to a file (mqadmin's working directory).
    listing = seeded.run("consumerStatus", "-g", ONLINE, "-s")
    row = listing.splitlines()[1].split()
    assert row[1] == client_id, listing
    written = (seeded.admin.home / row[3]).read_text()
    assert "#Consumer jstack#" in written and JAVA_THREAD.search(written), written[:2000]
    # mqadmin's consumer (shipped, not listed in 4.9.4: see AdminDriver.java) alike.
    listed = seeded.run("consumer", "-g", ONLINE, "-s")
    index, cid, version, path = listed.splitlines()[0].split()
    assert (index, cid, version) == ("001", client_id, "V4_9_4"), listed
    assert JAVA_THREAD.search((seeded.admin.home / path).read_text())


async def test_rocklet_admin_reads_the_java_consumer(seeded: Seeded) -> None:
    client_id = java_client_id(seeded)
    status = await rocklet_admin(seeded, "getConsumerStatus", "-g", ONLINE, "-t", TOPIC)
    offsets = {e["queueId"]: e["offset"] for e in status["consumerTable"][client_id]}
    assert offsets == {q: PER_QUEUE for q in range(QUEUES)}, status
    (member,) = await rocklet_admin(seeded, "consumerStatus", "-g", ONLINE, "-s")
    assert member["clientId"] == client_id
    assert JAVA_THREAD.search(member["jstack"]), member["jstack"][:2000]


async def test_mqadmin_reads_a_rocklet_consumer(seeded: Seeded) -> None:
    collector = Collector()
    consumer = PushConsumer(PY_GROUP, seeded.system.namesrv, consume_from="first")
    consumer.subscribe(TOPIC, "*", collector)
    async with consumer:
        await collector.wait_for(lambda c: len(c.bodies) >= COUNT, 60)
        client_id = consumer.client_id
        assert client_id is not None
        # The group's retry topic reaches the name server's routes in time (RocketMQ's
        # broker creates it at the first heartbeat): mqadmin finds the brokers by it.
        one = await seeded.admin.await_output(
            lambda out: "#Consumer jstack#" in out,
            "the Rocklet consumer's running info",
            "consumerStatus", "-g", PY_GROUP, "-s", "-i", client_id,
        )  # fmt: skip
        jstack = one[one.index("#Consumer jstack#") :]
        assert "Python stacks of pid " in jstack, jstack[:2000]
        assert re.search(rf'--- asyncio task "rocklet-{PY_GROUP}-pull-{TOPIC}-', jstack), jstack
        assert "PROP_CONSUME_TYPE" in one and "CONSUME_PASSIVELY" in one, one

        output = await seeded.admin.arun("getConsumerStatus", "-g", PY_GROUP, "-t", TOPIC)
        rows = status_rows(output)
        # Each queue: every message consumed (fastjson read our unquoted-key maps).
        assert rows == {(client_id, BROKER, q): PER_QUEUE for q in range(QUEUES)}, output
