"""``rocklet produce`` to a topic nothing takes writes for: the hint undoes the very cause.

A route shows ``perm`` 4 alike whether the topic's permission, the broker's own
``brokerPermission`` or the name servers' routes (``wipeWritePerm``) were lowered; each
needs another command. Every case runs the command the hint prints and checks that the
next send goes through and that the topic kept its queue counts (``updateTopic``
without ``-r``/``-w`` would have made them 8).

A broker's address given as the name server gets the same line from ``rocklet
produce`` and ``rocklet admin``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.test_cli_messages import Standalone, rocklet, running_standalone

TOPIC = "held"


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    async with running_standalone(tmp_path) as running:
        yield running


async def _ok(*argv: str) -> str:
    run = await rocklet(*argv)
    assert run.code == 0, (argv, run.err)
    return run.out


async def _refused_with_fix(ns: str, command: str) -> str:
    """Send, expect a refusal; return the hint's command (it must start ``command``)."""
    run = await rocklet("produce", "-n", ns, "-t", TOPIC, "--body", "x")
    assert (run.code, run.out) == (1, ""), run.err
    assert run.err.count("\n") == 1 and "Traceback" not in run.err, run.err
    found = re.search(rf"rocklet admin {command} [^;\n]*", run.err)
    assert found is not None, run.err
    return found.group(0)


async def _fix_and_send(ns: str, fix: str) -> None:
    await _ok(*fix.split()[1:])
    await _ok("produce", "-n", ns, "-t", TOPIC, "--body", "x")
    route = json.loads(await _ok("admin", "topicRoute", "-n", ns, "-t", TOPIC, "--json"))
    (queues,) = route["queueDatas"]
    assert (queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (2, 2, 6)


async def test_each_cause_gets_the_command_that_undoes_it(standalone: Standalone) -> None:
    ns, broker = standalone.namesrv, standalone.broker
    await _ok("admin", "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-r", "2",
              "-w", "2")  # fmt: skip
    await _ok("produce", "-n", ns, "-t", TOPIC, "--body", "x")

    # The broker's own permission: only updateBrokerConfig undoes it.
    await _ok("admin", "updateBrokerConfig", "-n", ns, "-c", "DefaultCluster", "-k",
              "brokerPermission", "-v", "4")  # fmt: skip
    fix = await _refused_with_fix(ns, "updateBrokerConfig")
    assert fix == f"rocklet admin updateBrokerConfig -n {ns} -b {broker} -k brokerPermission -v 6"
    await _fix_and_send(ns, fix)

    # The name servers' routes only (wipeWritePerm): addWritePerm.
    await _ok("admin", "wipeWritePerm", "-n", ns, "-b", "broker-a")
    fix = await _refused_with_fix(ns, "addWritePerm")
    assert fix == f"rocklet admin addWritePerm -n {ns} -b broker-a"
    await _fix_and_send(ns, fix)

    # The topic's own permission: updateTopicPerm, which keeps the queue counts.
    await _ok("admin", "updateTopicPerm", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-p", "4")
    fix = await _refused_with_fix(ns, "updateTopicPerm")
    assert fix == f"rocklet admin updateTopicPerm -n {ns} -c DefaultCluster -t {TOPIC} -p 6"
    await _fix_and_send(ns, fix)

    # addWritePerm over a read-only topic: the route says writable, the broker refuses the
    # send (NO_PERMISSION); updateTopicPerm would find the route's 6 and change nothing.
    await _ok("admin", "updateTopicPerm", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-p", "4")
    await _ok("admin", "addWritePerm", "-n", ns, "-b", "broker-a")
    fix = await _refused_with_fix(ns, "updateTopic")
    assert fix == f"rocklet admin updateTopic -n {ns} -b {broker} -t {TOPIC} -r 2 -w 2 -p 6"
    await _fix_and_send(ns, fix)

    # addWritePerm over a read-only broker: the broker refuses; updateBrokerConfig.
    await _ok("admin", "updateBrokerConfig", "-n", ns, "-b", broker, "-k", "brokerPermission",
              "-v", "4")  # fmt: skip
    await _ok("admin", "addWritePerm", "-n", ns, "-b", "broker-a")
    fix = await _refused_with_fix(ns, "updateBrokerConfig")
    assert fix == f"rocklet admin updateBrokerConfig -n {ns} -b {broker} -k brokerPermission -v 6"
    await _fix_and_send(ns, fix)


async def test_a_broker_as_name_server_reads_the_same_in_produce_and_admin(
    standalone: Standalone,
) -> None:
    broker = standalone.broker
    produce = await rocklet("produce", "-n", broker, "-t", TOPIC, "--body", "x")
    listed = await rocklet("admin", "clusterList", "-n", broker)
    why = f"{broker} is a broker, not a name server: give the name server's address"
    assert (listed.code, listed.out) == (1, "")
    assert listed.err.startswith(f"rocklet admin clusterList: {why}"), listed.err
    assert produce.code == 1
    assert listed.err == produce.err.replace("rocklet produce:", "rocklet admin clusterList:")
