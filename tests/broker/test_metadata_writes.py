"""Metadata is on disk when it is answered, and bursts share writes (a real broker).

The files are read straight from ``<store>/config/`` the moment the answer arrives:
whatever is not there would be lost by a crash at that moment. The write counts are
the cost figures quoted in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocklet.broker.json_file import load_json
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_admin import create_topic
from tests.broker.test_client_manage import cpp_heartbeat, cpp_request
from tests.broker.test_consumer_manage import query_offset, update_offset
from tests.broker.test_send_pull import cpp_send
from tests.cluster import Cluster, running_cluster


async def connect(cluster: Cluster) -> Connection:
    return await open_connection("127.0.0.1", cluster.broker.port)


def topics_on_disk(root: Path) -> dict[str, object]:
    obj = load_json(root / "config" / "topics.json")
    assert isinstance(obj, dict)
    table = obj["topicConfigTable"]
    assert isinstance(table, dict)
    return table


def groups_on_disk(root: Path) -> dict[str, object]:
    obj = load_json(root / "config" / "subscriptionGroup.json")
    assert isinstance(obj, dict)
    table = obj["subscriptionGroupTable"]
    assert isinstance(table, dict)
    return table


def offsets_on_disk(root: Path) -> dict[str, dict[str, int]]:
    obj = load_json(root / "config" / "consumerOffset.json")
    assert isinstance(obj, dict)
    table = obj["offsetTable"]
    assert isinstance(table, dict)
    return table


async def test_topics_and_groups_are_on_disk_when_answered(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        sent = await conn.request(cpp_send("AutoTopic", b"x"), 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert "AutoTopic" in topics_on_disk(tmp_path)

        create = cpp_request(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": "AdminTopic",
                "defaultTopic": "TBW102",
                "readQueueNums": "2",
                "writeQueueNums": "2",
                "perm": "6",
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0",
                "order": "false",
            },
        )
        assert (await conn.request(create, 5)).code == ResponseCode.SUCCESS
        assert "AdminTopic" in topics_on_disk(tmp_path)
        delete = cpp_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminTopic"})
        assert (await conn.request(delete, 5)).code == ResponseCode.SUCCESS
        assert "AdminTopic" not in topics_on_disk(tmp_path)

        group = SubscriptionGroupConfig("AdminGroup", retry_max_times=3)
        update = cpp_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group.to_json())
        assert (await conn.request(update, 5)).code == ResponseCode.SUCCESS
        assert "AdminGroup" in groups_on_disk(tmp_path)
        ext = {"groupName": "AdminGroup", "removeOffset": "true"}
        drop = cpp_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
        assert (await conn.request(drop, 5)).code == ResponseCode.SUCCESS
        assert "AdminGroup" not in groups_on_disk(tmp_path)


async def test_a_heartbeat_storm_shares_its_writes(tmp_path: Path) -> None:
    """200 consumers of 200 new groups at once: every group and retry topic is on disk
    when its heartbeat is answered, for a handful of writes instead of 400."""
    async with running_cluster(tmp_path) as cluster:
        broker = cluster.broker.ctx
        conns = [await connect(cluster) for _ in range(20)]
        try:
            topic_writes, group_writes = broker.topics.writer.writes, broker.groups.writer.writes

            async def beat(n: int) -> None:
                cmd = cpp_heartbeat(client_id=f"c{n}", group=f"StormGroup{n}")
                answer = await conns[n % len(conns)].request(cmd, 10)
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                assert f"StormGroup{n}" in groups_on_disk(tmp_path)
                assert f"%RETRY%StormGroup{n}" in topics_on_disk(tmp_path)

            await asyncio.gather(*(beat(n) for n in range(200)))
            topic_writes = broker.topics.writer.writes - topic_writes
            group_writes = broker.groups.writer.writes - group_writes
            print(f"200 new groups by heartbeat: {group_writes} group, {topic_writes} topic writes")
            assert 1 <= group_writes < 50 and 1 <= topic_writes < 50
        finally:
            for conn in conns:
                await conn.close()


async def test_an_offset_commit_storm_costs_a_few_writes(tmp_path: Path) -> None:
    """Answered commits are on disk when answered and share writes; oneway commits
    (Java's) wait for the next write."""
    async with running_cluster(tmp_path) as cluster:
        writer = cluster.broker.ctx.offsets.writer
        conns = [await connect(cluster) for _ in range(4)]
        try:
            before = writer.writes

            async def commit(n: int) -> None:
                cmd = update_offset("StormG", "StormT", n % 8, n)
                answer = await conns[n % len(conns)].request(cmd, 10)
                assert answer.code == ResponseCode.SUCCESS, answer.remark

            await asyncio.gather(*(commit(n) for n in range(2000)))
            answered_writes = writer.writes - before
            on_disk = offsets_on_disk(tmp_path)["StormT@StormG"]
            # Each queue's last commit (1992..1999) is on disk.
            assert {int(q): o for q, o in on_disk.items()} == {q: 1992 + q for q in range(8)}

            before = writer.writes
            for n in range(2000):
                cmd = update_offset("OnewayG", "StormT", n % 8, n)
                await conns[0].send_oneway(cmd, 10)
            # Answered on the same connection after the commits: they were all applied.
            last = await conns[0].request(query_offset("OnewayG", "StormT", 7), 10)
            assert last.ext_fields["offset"] == "1999"
            oneway_writes = writer.writes - before
            # The next answered commit carries them to disk.
            await conns[1].request(update_offset("StormG", "StormT", 0, 5000), 10)
            on_disk = offsets_on_disk(tmp_path)["StormT@OnewayG"]
            assert {int(q): o for q, o in on_disk.items()} == {q: 1992 + q for q in range(8)}
            print(
                f"2000 answered commits: {answered_writes} writes; "
                f"2000 oneway commits: {oneway_writes} writes until the next answered one"
            )
            assert 1 <= answered_writes < 100
            assert oneway_writes == 0
        finally:
            for conn in conns:
                await conn.close()


async def test_a_topic_that_cannot_be_saved_refuses_the_send(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        # A directory where topics.json's temp file goes: every write fails (EISDIR).
        blocker = tmp_path / "config" / "topics.json.tmp"
        blocker.mkdir(parents=True)
        answer = await conn.request(cpp_send("Unsaved", b"x"), 5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark is not None
        assert "topics.json could not be saved" in answer.remark
        assert "not stored" in answer.remark
        assert cluster.broker.ctx.store.max_offset("Unsaved", 0) == 0
        # Not kept either: a restart would not have it (before, the broker listed it
        # in topicList and served its route until one).
        answer = await conn.request(create_topic("Created", 4, 4), 5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "topics.json could not be saved" in (answer.remark or "")
        for topic in ("Unsaved", "Created"):
            assert cluster.broker.ctx.topics.find(topic) is None
        # A change to a topic that exists is undone back to what the file holds.
        answer = await conn.request(create_topic("Unsaved", 2, 2), 5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        blocker.rmdir()
        answer = await conn.request(create_topic("Kept", 4, 4), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        blocker.mkdir()
        answer = await conn.request(create_topic("Kept", 1, 1), 5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        kept = cluster.broker.ctx.topics.find("Kept")
        assert kept is not None and kept.read_queue_nums == 4
        blocker.rmdir()
        answer = await conn.request(cpp_send("Unsaved", b"x"), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert "Unsaved" in topics_on_disk(tmp_path)
