"""``rocklet admin`` getConsumerStatus, consumerStatus -s and consumer, against a real
name server and broker with a running SDK push consumer (in-process, output captured
as in test_admin_cli.py)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rocklet.admin.verbs_running import report_file_name
from rocklet.client.message import MessageExt
from rocklet.client.push_consumer import PushConsumer
from tests.client.consumers import Collector, produce
from tests.cluster import Cluster, running_cluster
from tests.ops.test_admin_cli import admin, admin_json

GROUP = "VerbG"
TOPIC = "VerbT"
COUNT = 8


@asynccontextmanager
async def consuming(tmp_path: Path) -> AsyncIterator[tuple[Cluster, PushConsumer, Collector]]:
    """A cluster and a push consumer that consumed COUNT messages of TOPIC."""
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, TOPIC, [f"m{i}".encode() for i in range(COUNT)])
        collector = Collector()
        consumer = PushConsumer(GROUP, cluster.namesrv_addr, consume_from="first")
        consumer.subscribe(TOPIC, "*", collector)
        async with consumer:
            await collector.wait_for(lambda c: len(c.messages) >= COUNT)
            yield cluster, consumer, collector


def next_offsets(messages: list[MessageExt]) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in messages:
        out[m.queue_id] = max(out.get(m.queue_id, 0), m.queue_offset + 1)
    return out


async def test_get_consumer_status_prints_each_members_offsets(tmp_path: Path) -> None:
    async with consuming(tmp_path) as (cluster, consumer, collector):
        client_id = consumer.client_id
        assert client_id is not None
        expected = next_offsets(collector.messages)
        code, out, err = await admin(cluster, "getConsumerStatus", "-g", GROUP, "-t", TOPIC)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == (
            f"get consumer status from client. group={GROUP}, topic={TOPIC}, originClientId="
        )
        assert lines[1].split() == ["#clientId", "#brokerName", "#queueId", "#offset"]
        rows = {(f[0], f[1], int(f[2])): int(f[3]) for f in (line.split() for line in lines[2:])}
        # A queue with no message yet shows 0 once its first pull came back empty.
        assert {k: o for k, o in rows.items() if o} == {
            (client_id, "broker-a", q): o for q, o in expected.items()
        }

        data = await admin_json(
            cluster, "getConsumerStatus", "-g", GROUP, "-t", TOPIC, "-i", client_id
        )
        assert data["originClientId"] == client_id
        listed = data["consumerTable"][client_id]
        assert {e["queueId"]: e["offset"] for e in listed if e["offset"]} == expected
        other = await admin_json(cluster, "getConsumerStatus", "-g", GROUP, "-t", TOPIC, "-i", "x")
        assert other["consumerTable"] == {}

        code, _, err = await admin(cluster, "getConsumerStatus", "-g", "NobodyG", "-t", TOPIC)
        assert code == 1
        assert "No Any Consumer online in the consumer group: [NobodyG]" in err, err


async def test_consumer_status_with_s_prints_the_stacks(tmp_path: Path) -> None:
    async with consuming(tmp_path) as (cluster, consumer, _):
        addr = cluster.broker.addr
        code, out, err = await admin(cluster, "consumerStatus", "-g", GROUP, "-s", "-b", addr)
        assert code == 0, err
        # The running info, then its stacks: the pull loops' tasks among them.
        assert out.index(f"Consumer {consumer.client_id}") < out.index("#Consumer jstack#")
        stacks = out[out.index("#Consumer jstack#") :]
        assert "Python stacks of pid " in stacks
        assert re.search(r'--- asyncio task "rocklet-VerbG-pull-VerbT-broker-a-\d"', stacks)
        assert "Subscriptions: the same in every member of the group" in out
        assert "Rebalance: OK" in out

        (member,) = await admin_json(cluster, "consumerStatus", "-g", GROUP, "-s")
        assert "PullLoop.run" in member["jstack"]
        (plain,) = await admin_json(cluster, "consumerStatus", "-g", GROUP)
        assert "jstack" not in plain
        code, out, _ = await admin(cluster, "consumerStatus", "-g", GROUP)
        assert code == 0 and "#Consumer jstack#" not in out


async def test_consumer_writes_each_members_report_to_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with consuming(tmp_path / "cluster") as (cluster, consumer, _):
        client_id = consumer.client_id
        assert client_id is not None
        reports = tmp_path / "reports"
        data = await admin_json(cluster, "consumer", "-g", GROUP, "-s", "-f", str(reports))
        (listed,) = data["members"]
        assert listed["index"] == 1 and listed["clientId"] == client_id
        assert listed["version"] == "V4_9_4"
        path = Path(listed["file"])
        assert path == reports / Path(data["dir"]).name / report_file_name(client_id)
        assert re.fullmatch(r"\d{13}", path.parent.name)
        text = await asyncio.to_thread(path.read_text)
        assert f"Consumer {client_id}" in text and "#Consumer jstack#" in text
        assert data["analysis"]["sameSubscription"] is True
        assert data["analysis"]["rebalanceOK"] is True

        # Without -f, under the working directory, as mqadmin: <now-ms>/<clientId>.
        here = tmp_path / "cwd"
        here.mkdir()
        monkeypatch.chdir(here)
        code, out, err = await admin(cluster, "consumer", "-g", GROUP)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
        index, cid, version, relative = lines[1].split()
        assert (index, cid, version) == ("001", client_id, "V4_9_4")
        assert not Path(relative).is_absolute()
        written = await asyncio.to_thread((here / relative).read_text)
        assert "#Consumer jstack#" not in written and TOPIC in written
        assert "Rebalance: OK" in lines

        # -i: that member's report, printed.
        code, out, err = await admin(cluster, "consumer", "-g", GROUP, "-i", client_id)
        assert code == 0 and f"Consumer {client_id}" in out, err

        code, _, err = await admin(cluster, "consumer", "-g", "NeverConsumedG")
        assert code == 1 and "consumer group 'NeverConsumedG' is unknown" in err, err


def test_a_client_id_cannot_leave_the_report_folder() -> None:
    assert report_file_name("10.0.0.1@1234#DEFAULT") == "10.0.0.1@1234#DEFAULT"
    assert report_file_name("../../etc/passwd") == ".._.._etc_passwd"
    assert report_file_name("..") == "_.."
    assert report_file_name("") == "_"
    assert "/" not in report_file_name("a/b\\c\x00d")
