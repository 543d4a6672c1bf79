"""The real 4.9.4 ``mqadmin`` on broker configuration: updateBrokerConfig, getBrokerConfig,
exportConfigs, against Rocklet and, as the other parameter, a real RocketMQ 4.9.4.

The verbs run in the session's ``mqadmin`` JVM (:class:`MqAdmin`) against the shared
system (``admin_system``); the broker-wide settings the test changes are set back in a
``finally``. mqadmin exits 0 whether a verb worked or not and prints the exception
instead, so the printed text is judged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from rocklet.broker.rocketmq_keys import ROCKETMQ_BROKER_KEYS
from tests.compat.harness import route_of
from tests.java.javatier import System, tier_marks
from tests.java.mqadmin import MqAdmin

pytestmark = tier_marks()

CLUSTER: Final = "DefaultCluster"
BROKER: Final = "broker-a"
#: The keys a RocketMQ 4.9.4 broker prints for getBrokerConfig: every key it reads but the
#: fields that are null unless set (``Configuration`` leaves them out), and the flag whose
#: field is ``isEnableBatchPush`` (printed by field name, read by setter name).
PRINTED_KEYS: Final = (
    ROCKETMQ_BROKER_KEYS
    - {
        "dLegerGroup",
        "dLegerPeers",
        "dLegerSelfId",
        "haMasterAddress",
        "preferredLeaderId",
        "readOnlyCommitLogStorePaths",
        "storePathDLedgerCommitLog",
        "enableBatchPush",
    }
) | {"isEnableBatchPush"}


def printed_config(output: str) -> dict[str, str]:
    """getBrokerConfig's ``key<spaces>=  value`` lines."""
    props = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=  ")
        if sep and key.strip() and " " not in key.strip():
            props[key.strip()] = value.strip()
    return props


def test_the_printed_keys_are_rocketmqs_177() -> None:
    assert len(PRINTED_KEYS) == 177


async def test_update_then_get_and_export(
    admin_system: System, admin_tool: MqAdmin, tmp_path: Path
) -> None:
    broker = ("-b", admin_system.broker)

    async def update(key: str, value: str) -> None:
        out = await admin_tool.arun("updateBrokerConfig", *broker, "-k", key, "-v", value)
        assert out == f"update broker config success, {admin_system.broker}\n", out

    async def tbw102_perms() -> set[int]:
        route = await route_of(admin_system.namesrv, "TBW102")
        assert route is not None
        return {q.perm for q in route.queue_datas}

    before = printed_config(await admin_tool.arun("getBrokerConfig", *broker))
    assert (before["brokerPermission"], before["slaveReadEnable"]) == ("6", "false"), before
    try:
        await update("brokerPermission", "4")
        props = printed_config(await admin_tool.arun("getBrokerConfig", *broker))
        assert props["brokerPermission"] == "4"
        # Registered with the name server before the answer.
        assert await tbw102_perms() == {4}
        await update("brokerPermission", "6")
        await update("noSuchKeyXyz", "1")
        await update("slaveReadEnable", "true")

        props = printed_config(await admin_tool.arun("getBrokerConfig", *broker))
        assert props["brokerPermission"] == "6" and props["slaveReadEnable"] == "true"
        # Neither system keeps a key it does not know (Configuration.mergeIfExist).
        assert "noSuchKeyXyz" not in props
        missing_keys = PRINTED_KEYS - set(props)
        assert not missing_keys, sorted(missing_keys)
        assert {p & 6 for p in await tbw102_perms()} == {6}
    finally:
        await update("brokerPermission", before["brokerPermission"])
        await update("slaveReadEnable", before["slaveReadEnable"])

    export = tmp_path / "export"
    out = await admin_tool.arun("exportConfigs", "-c", CLUSTER, "-f", str(export))
    assert out == f"export {export}/configs.json success", out
    configs = json.loads((export / "configs.json").read_text())
    assert configs["clusterScale"] == {
        "namesrvSize": 1,
        "slaveBrokerSize": 0,
        "masterBrokerSize": 1,
    }, configs
    exported = configs["brokerConfigs"][BROKER]
    # The tool's selection of keys, with the broker's values (as getBrokerConfig's).
    assert set(exported) == {
        "brokerClusterName", "brokerId", "brokerName", "brokerRole", "flushDiskType",
        "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "slaveReadEnable",
        "traceOn", "traceTopicEnable", "msgTraceTopicName", "messageDelayLevel",
        "fileReservedTime", "filterServerNums", "maxMessageSize", "useTLS",
    }, configs  # fmt: skip
    props = printed_config(await admin_tool.arun("getBrokerConfig", *broker))
    assert {k: props[k] for k in exported} == exported, configs
    assert (exported["brokerName"], exported["traceTopicEnable"]) == (BROKER, "true"), configs
