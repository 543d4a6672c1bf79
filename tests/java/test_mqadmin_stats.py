"""The real 4.9.4 ``mqadmin`` reading a broker's statistics: statsAll, brokerConsumeStats,
clusterList -m, against Rocklet and, as the other parameter, a real RocketMQ 4.9.4.

Messages are sent and pulled with Rocklet's SDK, on a topic and group of the test's own,
then the verbs run in the session's ``mqadmin`` JVM on the shared system
(``admin_system``), where other tests' messages count too: the numbers checked are the
topic's and the group's, and the broker's totals are read before and after. mqadmin
exits 0 whether a verb worked or not, so the printed text is judged. The broker samples
its statistics every 10 s on the real clock: the test asks statsAll again (bounded)
until the first sample that holds the sends and the pulls.
"""

from __future__ import annotations

from typing import Final

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import PullConsumer
from tests.java.javatier import System, make_topic, tier_marks
from tests.java.mqadmin import MqAdmin

pytestmark = tier_marks(120)

#: The first 10-second sample comes at most this long after the sends.
SAMPLE_TIMEOUT_S: Final = 30.0
TOPIC, GROUP, SENT, QUEUES = "MqStatsT", "MqStatsG", 5, 4
CLUSTER: Final = "DefaultCluster"


def today_totals(output: str) -> tuple[int, int]:
    """clusterList -m's #InTotalToday and #OutTotalToday of the broker."""
    # #Cluster Name #Broker Name #InTotalYest #OutTotalYest #InTotalToday #OutTotalToday
    row = next(line.split() for line in output.splitlines() if line.startswith(CLUSTER))
    return int(row[-2]), int(row[-1])


def topic_rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.split()[:1] == [TOPIC]]


def sampled(output: str) -> bool:
    """statsAll's row of the topic shows the sends and the pulls (a sample was taken)."""
    rows = topic_rows(output)
    return len(rows) == 1 and rows[0][5:] == [str(SENT), str(SENT)]


async def test_stats_verbs_print_real_numbers(admin_system: System, admin_tool: MqAdmin) -> None:
    await make_topic(admin_system, TOPIC, QUEUES)
    in_before, out_before = today_totals(await admin_tool.arun("clusterList", "-m"))
    async with Producer("MqStatsPG", admin_system.namesrv) as producer:
        for i in range(SENT):
            await producer.send(Message(TOPIC, f"m{i}".encode()))
    consumed = 0
    async with PullConsumer(GROUP, admin_system.namesrv) as consumer:
        for mq in await consumer.fetch_queues(TOPIC):
            result = await consumer.pull(mq, 0)
            # Commit past the first message: brokerConsumeStats lists only queues
            # with a consumed message (its store time is printed).
            await consumer.commit(mq, 1 if result.messages else 0)
            consumed += 1 if result.messages else 0

    out = await admin_tool.await_output(
        sampled, "a statistics sample of the sends and pulls", "statsAll", "-t", TOPIC,
        timeout_s=SAMPLE_TIMEOUT_S,
    )  # fmt: skip
    # #Topic #Consumer Group #Accumulation #InTPS #OutTPS #InMsg24Hour #OutMsg24Hour
    ((topic, group, accumulation, in_tps, out_tps, in_24h, out_24h),) = topic_rows(out)
    assert (topic, group) == (TOPIC, GROUP), out
    assert int(accumulation) == SENT - consumed, out
    assert int(in_24h) == SENT and int(out_24h) == SENT, out
    assert float(in_tps) > 0 and float(out_tps) > 0, out

    out = await admin_tool.arun("brokerConsumeStats", "-b", admin_system.broker)
    assert "not supported" not in out, out
    # #Topic #Group #Broker Name #QID #Broker Offset #Consumer Offset #Diff #LastTime
    listed = topic_rows(out)
    assert len(listed) == consumed and all(row[1] == GROUP for row in listed), out
    assert sum(int(row[6]) for row in listed) == SENT - consumed, out
    assert "Diff Total: " in out, out

    # The broker's totals of today: this test's messages in and out, nothing else ran.
    in_after, out_after = today_totals(await admin_tool.arun("clusterList", "-m"))
    assert (in_after - in_before, out_after - out_before) == (SENT, SENT), (in_after, out_after)
