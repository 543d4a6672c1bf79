"""``rocklet admin`` exportMetadata and exportMetrics in process: what they refuse, how
masters merge, and the metrics against what was sent.

The files themselves are compared with the real mqadmin's in
tests/java/test_mqadmin_export.py.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import time
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rocklet.admin.run import run_admin_async
from rocklet.admin.verbs_export import merge_tables
from rocklet.broker.app import Broker
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.tls_config import TlsSettings
from rocklet.cli import build_parser
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.transaction import LocalTransactionState, TransactionProducer
from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.topic import DataVersion, TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.clock import ManualClock
from rocklet.transport.dial import open_connection
from tests.cluster import Cluster, running_cluster, small_broker_config

TIMEOUT_S = 20.0


async def _admin(namesrv: str, *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(["admin", *argv, "-n", namesrv])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.wait_for(run_admin_async(args, out, err, environ={}), TIMEOUT_S)
    return code, out.getvalue() + err.getvalue()


def test_masters_merge_as_mqadmin_merges_them() -> None:
    # What mqadmin 4.9.4 wrote for a topic on both masters of a cluster (4 + 4 queues),
    # one on a single master, and a group with 2 retry queues on each.
    topics: dict[str, dict[str, object]] = {}
    a = {"topicName": "both", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    b = {"topicName": "both", "readQueueNums": 4, "writeQueueNums": 4, "perm": 4}
    only = {"topicName": "only", "readQueueNums": 2, "writeQueueNums": 3, "perm": 6}
    merge_tables(topics, {"both": a, "only": only}, ("readQueueNums", "writeQueueNums"))
    merge_tables(topics, {"both": b}, ("readQueueNums", "writeQueueNums"))
    assert topics == {
        "both": {"topicName": "both", "readQueueNums": 8, "writeQueueNums": 8, "perm": 4},
        "only": only,
    }
    groups: dict[str, dict[str, object]] = {}
    group = {"groupName": "g", "retryQueueNums": 2}
    merge_tables(groups, {"g": group}, ("retryQueueNums",))
    merge_tables(groups, {"g": group}, ("retryQueueNums",))
    assert groups == {"g": {"groupName": "g", "retryQueueNums": 4}}


async def test_export_writes_whole_files_and_says_what_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "export"
    async with running_cluster(tmp_path / "store") as cluster:
        ns, broker = cluster.namesrv_addr, cluster.broker.addr
        code, text = await _admin(ns, "updateTopic", "-b", broker, "-t", "ExportT", "-r", "3")
        assert code == 0, text
        code, text = await _admin(ns, "updateSubGroup", "-b", broker, "-g", "ExportG")
        assert code == 0, text

        code, text = await _admin(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(out))
        assert code == 0 and f"export {out / 'metadata.json'} success" in text, text
        metadata = json.loads((out / "metadata.json").read_text())
        assert list(metadata) == ["exportTime", "topicConfigTable", "subscriptionGroupTable"]
        assert metadata["topicConfigTable"]["ExportT"]["readQueueNums"] == 3
        assert "TBW102" not in metadata["topicConfigTable"]  # a system topic
        assert list(metadata["subscriptionGroupTable"]) == ["ExportG"]  # no system group
        assert [p.name for p in out.iterdir()] == ["metadata.json"]  # no temporary left

        # mqadmin writes nothing for -b without -t or -g and says nothing; this says why.
        code, text = await _admin(ns, "exportMetadata", "-b", broker, "-f", str(out / "b"))
        assert code == 1 and "-t (topics) or -g (groups)" in text, text
        assert not (out / "b").exists()
        code, text = await _admin(ns, "exportMetadata", "-f", str(out / "n"))
        assert code == 1 and "-b" in text and "-c" in text, text
        code, text = await _admin(ns, "exportMetadata", "-c", "NoSuchCluster", "-f", str(out))
        assert code == 1 and "NoSuchCluster" in text, text
        # A directory that cannot be made: the reason, not a traceback.
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        code, text = await _admin(
            ns, "exportConfigs", "-c", "DefaultCluster", "-f", str(blocker / "sub")
        )
        assert code == 1 and f"cannot write {blocker / 'sub' / 'configs.json'}" in text, text


# -- exportMetrics -------------------------------------------------------------------------

METRICS_TOPIC, METRICS_GROUP, SENT = "MetricsT", "MetricsG", 6


@asynccontextmanager
async def _clocked_cluster(store: Path, clock: ManualClock) -> AsyncIterator[Cluster]:
    """A name server and a broker whose statistics move only with ``clock``."""
    tls = TlsSettings()
    namesrv = await NamesrvServer.start("127.0.0.1", 0, tls=tls)
    try:
        # Transaction checks stay out of the way: the test ends its transaction itself.
        config = small_broker_config(
            store, f"127.0.0.1:{namesrv.port}", transaction_check_interval_ms=3_600_000
        )
        broker = await Broker.start(config, host="127.0.0.1", tls=tls, clock=clock)
        try:
            yield Cluster(namesrv, broker)
        finally:
            await broker.stop()
    finally:
        await namesrv.stop()


def _sample_after(broker: Broker, clock: ManualClock, ms: int) -> None:
    clock.advance(ms)
    assert broker.stats_sampler is not None
    broker.stats_sampler.sample()


def _physical_kib() -> str:
    """The machine's memory as /proc/meminfo says (the broker asks sysconf)."""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        line = next(x for x in meminfo.read_text().splitlines() if x.startswith("MemTotal:"))
        return line.split()[1]
    return str(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024)


def _read_metrics(directory: Path) -> dict[str, Any]:
    assert [p.name for p in directory.iterdir()] == ["metrics.json"]  # no temporary left
    raw = (directory / "metrics.json").read_text(encoding="utf-8")
    assert raw.startswith('{\n\t"')  # fastjson's pretty layout, as mqadmin writes it
    content: dict[str, Any] = json.loads(raw)
    return content


async def _export_metrics(namesrv: str, directory: Path) -> dict[str, Any]:
    code, text = await _admin(
        namesrv, "exportMetrics", "-c", "DefaultCluster", "-f", str(directory)
    )
    assert code == 0 and text.strip() == f"export {directory / 'metrics.json'} success", text
    return _read_metrics(directory)


async def _runtime(broker: Broker) -> Mapping[str, str]:
    async with await open_connection("127.0.0.1", broker.port) as conn:
        answer = await conn.request(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    return KVTable.from_json(answer.body).table


async def test_export_metrics_follows_what_was_sent(tmp_path: Path) -> None:
    # One minute before a local midnight: the broker records its "morning" totals then.
    midnight_ms = int(time.mktime((2023, 11, 15, 0, 0, 0, 0, 0, -1)) * 1000)
    clock = ManualClock(midnight_ms - 60_000)
    async with _clocked_cluster(tmp_path / "store", clock) as cluster:
        ns, broker = cluster.namesrv_addr, cluster.broker
        code, text = await _admin(ns, "updateTopic", "-c", "DefaultCluster", "-t", METRICS_TOPIC)
        assert code == 0, text
        async with Producer("MetricsPG", ns) as producer:
            for i in range(SENT):
                await producer.send(Message(METRICS_TOPIC, f"body-{i:04d}".encode()))
        # The group stays online (its connection is what clientInfo lists).
        async with PullConsumer(METRICS_GROUP, ns) as consumer:
            pulled = 0
            for mq in await consumer.fetch_queues(METRICS_TOPIC):
                pulled += len((await consumer.pull(mq, 0)).messages)
            assert pulled == SENT

            before = await _export_metrics(ns, tmp_path / "before")
            kv = await _runtime(broker)
            assert list(before) == ["evaluateReport", "totalData"]
            assert list(before["evaluateReport"]) == ["broker-a"]
            report = before["evaluateReport"]["broker-a"]
            assert report["runtimeEnv"] == {
                "cpuNum": str(os.cpu_count()),  # the callback threads: one per processor
                "totalMemKBytes": _physical_kib(),
            }
            quota = report["runtimeQuota"]
            # Only the sent messages are in the commit log: its bytes over their count.
            assert kv["commitLogMinOffset"] == "0"
            assert float(quota["messageAverageSize"]) == int(kv["commitLogMaxOffset"]) / SENT
            assert quota["messageAverageSize"] == kv["putMessageAverageSize"]
            assert (quota["topicSize"], quota["groupSize"]) == (1, 1)
            assert set(quota["diskRatio"]) == {"commitLogDiskRatio", "consumeQueueDiskRatio"}
            assert 0.0 <= float(quota["diskRatio"]["commitLogDiskRatio"]) <= 1.0
            # No midnight passed yet; no transaction or delayed message sent.
            assert quota["oneDayNum"] == dict.fromkeys(
                ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum",
                 "scheduleOneDayInNum"), 0,
            )  # fmt: skip
            assert quota["tps"]["transInTps"] == quota["tps"]["scheduleInTps"] == 0.0
            assert report["runtimeVersion"] == {
                "rocketmqVersion": "V4_9_4",
                "clientInfo": ["JAVA%V4_9_4"],  # what this SDK says it is, as Java's does
            }

            # Past midnight the sent and pulled totals become this morning's.
            _sample_after(broker, clock, 61_000)
            async with TransactionProducer(
                "MetricsTxPG", ns, check_listener=lambda _m: LocalTransactionState.ROLLBACK
            ) as tx:
                done = await tx.send_in_transaction(
                    Message(METRICS_TOPIC, b"half"), lambda _m, _a: LocalTransactionState.ROLLBACK
                )
                assert done.local_state is LocalTransactionState.ROLLBACK
            async with Producer("MetricsPG", ns) as producer:
                for _ in range(2):  # two hours: never due while the clock is moved by hand
                    await producer.send(Message(METRICS_TOPIC, b"later", delay_level=18))
            _sample_after(broker, clock, 10_000)  # one 10-second snapshot of each

            after = await _export_metrics(ns, tmp_path / "after")
            kv = await _runtime(broker)
        report = after["evaluateReport"]["broker-a"]
        quota = report["runtimeQuota"]
        assert quota["oneDayNum"] == {
            "normalOneDayInNum": SENT,  # this morning's total minus yesterday's (none)
            "normalOneDayOutNum": SENT,
            "transOneDayInNum": 1,  # the half message, under RMQ_SYS_TRANS_HALF_TOPIC
            "scheduleOneDayInNum": 2,  # the delayed ones wait in SCHEDULE_TOPIC_XXXX
        }
        tps = quota["tps"]
        assert (tps["transInTps"], tps["scheduleInTps"]) == (1 / 10, 2 / 10)  # per 10 s
        assert tps["normalInTps"] == float(kv["putTps"].split()[0]) > 0
        assert tps["normalOutTps"] == float(kv["getTransferedTps"].split()[0])
        assert quota["messageAverageSize"] == kv["putMessageAverageSize"]
        totals = after["totalData"]  # one broker: its own figures
        assert totals["totalOneDayNum"] == quota["oneDayNum"]
        assert totals["totalTps"] == {
            "totalNormalInTps": tps["normalInTps"],
            "totalNormalOutTps": tps["normalOutTps"],
            "totalTransInTps": tps["transInTps"],
            "totalScheduleInTps": tps["scheduleInTps"],
        }
        # The producers' groups are no consumer groups; the system topics are left out.
        assert (quota["topicSize"], quota["groupSize"]) == (1, 1)


async def test_export_metrics_names_what_fails(tmp_path: Path) -> None:
    out = tmp_path / "export"
    async with running_cluster(tmp_path / "store") as cluster:
        ns = cluster.namesrv_addr
        code, text = await _admin(ns, "exportMetrics", "-c", "NoSuchCluster", "-f", str(out))
        assert code == 1 and "'NoSuchCluster' is unknown" in text and "DefaultCluster" in text
        assert "Traceback" not in text and not out.exists()

        # A broker the name server lists but nobody answers at.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ghost = f"127.0.0.1:{probe.getsockname()[1]}"
        table = TopicConfigSerializeWrapper({}, DataVersion(1, 1_700_000_000_000))
        body = RegisterBrokerBody(table).to_json()
        register = RemotingCommand(
            RequestCode.REGISTER_BROKER,
            ext_fields={
                "brokerName": "broker-ghost",
                "brokerAddr": ghost,
                "clusterName": "GhostCluster",
                "haServerAddr": ghost,
                "brokerId": "0",
                "compressed": "false",
                "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
            },
            body=body,
        )
        # The registration lives as long as its connection: kept open while exporting.
        async with await open_connection("127.0.0.1", cluster.namesrv.port) as conn:
            assert (await conn.request(register, 5)).code == ResponseCode.SUCCESS
            code, text = await _admin(ns, "exportMetrics", "-c", "GhostCluster", "-f", str(out))
        assert code == 1, text
        assert f"cannot export the metrics of broker broker-ghost ({ghost}):" in text, text
        assert "Traceback" not in text and not out.exists()
