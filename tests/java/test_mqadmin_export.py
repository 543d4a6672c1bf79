"""``rocklet admin`` exportMetadata, exportConfigs and exportMetrics write the files the
real ``mqadmin`` (4.9.4) writes, against Rocklet and against RocketMQ 4.9.4 (the seeded
session system: its topic, retry topics, groups and online consumers)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.transaction import LocalTransactionState, TransactionProducer
from tests.java.admin_seed import BROKER, CLUSTER, TOPIC, Seeded
from tests.java.javatier import make_topic, tier_marks

pytestmark = tier_marks()


def _tables(path: Path) -> dict[str, Any]:
    """The file's tables: the export time and the table's version stamp differ per run."""
    content: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    content.pop("exportTime", None)
    content.pop("dataVersion", None)
    return content


@pytest.mark.parametrize(
    ("flags", "file"),
    [
        (("-c", CLUSTER), "metadata.json"),
        (("-c", CLUSTER, "-s"), "metadata.json"),
        (("-c", CLUSTER, "-g"), "subscriptionGroup.json"),
        (("-b", "BROKER", "-t", "-s"), "topic.json"),
    ],
    ids=["cluster", "cluster-special", "cluster-groups", "broker-topics-special"],
)
def test_export_metadata_writes_what_mqadmin_writes(
    seeded: Seeded, tmp_path: Path, flags: tuple[str, ...], file: str
) -> None:
    argv = [seeded.system.broker if f == "BROKER" else f for f in flags]
    theirs, ours = tmp_path / "mqadmin", tmp_path / "rocklet"
    printed = seeded.run("exportMetadata", *argv, "-f", str(theirs))
    assert f"export {theirs / file} success" in printed, printed
    command = [sys.executable, "-m", "rocklet", "admin", "exportMetadata"]
    command += ["-n", seeded.system.namesrv, *argv, "-f", str(ours)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"export {ours / file} success"
    expected = _tables(theirs / file)
    assert _tables(ours / file) == expected
    if "-t" not in argv:
        assert expected["subscriptionGroupTable"]
    if "-g" not in argv:
        assert TOPIC in expected["topicConfigTable"]  # the comparison compared something
        retry = any(t.startswith("%RETRY%") for t in expected["topicConfigTable"])
        assert retry == ("-s" in argv)
    # fastjson's pretty layout: tabs, no space after a colon.
    assert (ours / file).read_text(encoding="utf-8").startswith('{\n\t"')


def test_export_configs_writes_what_mqadmin_writes(seeded: Seeded, tmp_path: Path) -> None:
    theirs, ours = tmp_path / "mqadmin", tmp_path / "rocklet"
    printed = seeded.run("exportConfigs", "-c", CLUSTER, "-f", str(theirs))
    assert f"export {theirs / 'configs.json'} success" in printed, printed
    command = [sys.executable, "-m", "rocklet", "admin", "exportConfigs"]
    command += ["-n", seeded.system.namesrv, "-c", CLUSTER, "-f", str(ours)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    expected = json.loads((theirs / "configs.json").read_text(encoding="utf-8"))
    assert json.loads((ours / "configs.json").read_text(encoding="utf-8")) == expected
    assert expected["clusterScale"]["masterBrokerSize"] == 1
    (config,) = expected["brokerConfigs"].values()
    assert len(config) == 16  # every key mqadmin picks was there to compare


def _shape(value: Any) -> Any:
    """The JSON's structure: every object's keys down to the type of each leaf."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return sorted({type(item).__name__ for item in value}) or ["empty"]
    return type(value).__name__


_RATES = ("normalInTps", "normalOutTps", "transInTps", "scheduleInTps")
_DAY_COUNTS = ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum")


def _metrics_shape(system: str) -> dict[str, Any]:
    """What mqadmin 4.9.4 writes against either system (our broker adds totalMemKBytes)."""
    env = {"cpuNum": "str"} | ({"totalMemKBytes": "str"} if system == "rocklet" else {})
    quota = {
        "diskRatio": {"commitLogDiskRatio": "str", "consumeQueueDiskRatio": "str"},
        "tps": dict.fromkeys(_RATES, "float"),
        "oneDayNum": dict.fromkeys(_DAY_COUNTS, "int"),
        "messageAverageSize": "str",
        "topicSize": "int",
        "groupSize": "int",
    }
    version = {"rocketmqVersion": "str", "clientInfo": ["str"]}
    broker = {"runtimeEnv": env, "runtimeQuota": quota, "runtimeVersion": version}
    total_tps = {"total" + rate[0].upper() + rate[1:]: "float" for rate in _RATES}
    return {
        "evaluateReport": {BROKER: broker},
        "totalData": {"totalTps": total_tps, "totalOneDayNum": dict.fromkeys(_DAY_COUNTS, "int")},
    }


def _stable(content: dict[str, Any]) -> dict[str, Any]:
    """What two runs a moment apart agree on: rates, windowed counts and disk use move."""
    broker = content["evaluateReport"][BROKER]
    quota = broker["runtimeQuota"]
    return {
        "runtimeEnv": broker["runtimeEnv"],
        "sizes": (quota["topicSize"], quota["groupSize"]),
        # The morning totals move only at midnight.
        "normal": {k: v for k, v in quota["oneDayNum"].items() if k.startswith("normal")},
        "version": broker["runtimeVersion"]["rocketmqVersion"],
        "clients": set(broker["runtimeVersion"]["clientInfo"]),
    }


def test_export_metrics_writes_what_mqadmin_writes(seeded: Seeded, tmp_path: Path) -> None:
    theirs, ours = tmp_path / "mqadmin", tmp_path / "rocklet"
    printed = seeded.run("exportMetrics", "-c", CLUSTER, "-f", str(theirs))
    assert f"export {theirs / 'metrics.json'} success" in printed, printed
    command = [sys.executable, "-m", "rocklet", "admin", "exportMetrics"]
    command += ["-n", seeded.system.namesrv, "-c", CLUSTER, "-f", str(ours)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"export {ours / 'metrics.json'} success"
    expected = json.loads((theirs / "metrics.json").read_text(encoding="utf-8"))
    written = json.loads((ours / "metrics.json").read_text(encoding="utf-8"))
    # The same structure from both tools, and on both systems.
    shape = _metrics_shape(seeded.system.name)
    assert _shape(expected) == shape, expected
    assert _shape(written) == shape, written
    assert _stable(written) == _stable(expected)
    stable = _stable(expected)
    assert stable["version"] == "V4_9_4"
    assert "JAVA%V4_9_4" in stable["clients"]  # the seeded push consumers
    assert stable["sizes"][0] >= 1 and stable["sizes"][1] >= 3  # AdmT; the seeded groups
    for content in (expected, written):
        quota = content["evaluateReport"][BROKER]["runtimeQuota"]
        assert all(rate >= 0.0 for rate in quota["tps"].values()), content
        assert 0.0 <= float(quota["diskRatio"]["commitLogDiskRatio"]) <= 1.0, content
        assert float(quota["messageAverageSize"]) > 0, content  # the seeded messages
    assert (ours / "metrics.json").read_text(encoding="utf-8").startswith('{\n\t"')


#: The topic of the half and delayed messages the special-rates test sends.
SPECIAL_TOPIC = "AdmMetricsT"


def _special_seen(path: Path) -> bool:
    """Whether the file's broker shows transaction and delayed messages this minute."""
    if not path.exists():
        return False
    tps = json.loads(path.read_text(encoding="utf-8"))["evaluateReport"][BROKER]
    rates = tps["runtimeQuota"]["tps"]
    return bool(rates["transInTps"] > 0 and rates["scheduleInTps"] > 0)


def test_export_metrics_counts_half_and_delayed_messages(seeded: Seeded, tmp_path: Path) -> None:
    namesrv = seeded.system.namesrv

    async def send() -> None:
        await make_topic(seeded.system, SPECIAL_TOPIC, 1)
        async with TransactionProducer(
            "AdmMetricsTxPG", namesrv, check_listener=lambda _m: LocalTransactionState.ROLLBACK
        ) as tx:
            done = await tx.send_in_transaction(
                Message(SPECIAL_TOPIC, b"half"), lambda _m, _a: LocalTransactionState.ROLLBACK
            )
            assert done.local_state is LocalTransactionState.ROLLBACK
        async with Producer("AdmMetricsPG", namesrv) as producer:
            # Level 1 is 1 s on this system: delivered to the test's own topic at once.
            await producer.send(Message(SPECIAL_TOPIC, b"later", delay_level=1))

    asyncio.run(send())
    # Either broker counts the half message under RMQ_SYS_TRANS_HALF_TOPIC and the delayed
    # one under SCHEDULE_TOPIC_XXXX; the rate shows from the next 10-second snapshot on,
    # for about a minute.
    theirs, ours = tmp_path / "mqadmin", tmp_path / "rocklet"
    seeded.wait_output(
        lambda _out: _special_seen(theirs / "metrics.json"),
        "the half and delayed messages in mqadmin's metrics",
        "exportMetrics", "-c", CLUSTER, "-f", str(theirs),
    )  # fmt: skip
    command = [sys.executable, "-m", "rocklet", "admin", "exportMetrics"]
    command += ["-n", namesrv, "-c", CLUSTER, "-f", str(ours)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert _special_seen(ours / "metrics.json"), (ours / "metrics.json").read_text()
    for path in (theirs, ours):
        content = json.loads((path / "metrics.json").read_text(encoding="utf-8"))
        day = content["evaluateReport"][BROKER]["runtimeQuota"]["oneDayNum"]
        assert day["transOneDayInNum"] >= 1 and day["scheduleOneDayInNum"] >= 1, content
        assert content["totalData"]["totalOneDayNum"] == day, content  # one broker
