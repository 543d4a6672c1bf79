"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25) against a real broker.

RocketMQ 4.9.4 applies an update to its live config objects and rewrites its config
file (``AdminBrokerProcessor.updateBrokerConfig``, ``Configuration.update``); a new
``brokerPermission`` is registered with the name servers before the answer. Rocklet
does the same for the settings it can change live, saves every accepted key to the
broker's config file (keeping its comments), and refuses a value that does not parse.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import pytest

from rocklet.broker.app import Broker
from rocklet.broker.config import load_broker_config
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.tls_config import TlsSettings
from rocklet.client.admin import Admin
from rocklet.client.instance import ClientInstance
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.properties_text import parse_properties, rewrite_properties
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.acl_helpers import ADMIN, PRODUCER, acl_document, raw_request, write_acl
from tests.broker.test_admin import send
from tests.cluster import running_cluster
from tests.compat.harness import route_of

TIMEOUT_S: Final = 10.0
#: The keys a RocketMQ 4.9.4 broker prints for getBrokerConfig (read from the 4.9.4
#: sources: the non-null fields of BrokerConfig, NettyServerConfig, NettyClientConfig and
#: MessageStoreConfig of a broker started with -c; confirmed against a running 4.9.4).
ROCKETMQ_KEYS: Final = frozenset(
    """
    accessMessageInMemoryMaxRatio aclEnable adminBrokerThreadPoolNums
    autoCreateSubscriptionGroup autoCreateTopicEnable autoDeleteUnusedStats
    bitMapLengthConsumeQueueExt brokerClusterName brokerFastFailureEnable brokerIP1
    brokerIP2 brokerId brokerName brokerPermission brokerRole brokerTopicEnable
    channelNotActiveInterval checkCRCOnRecover cleanFileForciblyEnable
    cleanResourceInterval clientAsyncSemaphoreValue clientCallbackExecutorThreads
    clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout clientManageThreadPoolNums
    clientManagerThreadPoolQueueCapacity clientOnewaySemaphoreValue
    clientPooledByteBufAllocatorEnable clientSocketRcvBufSize clientSocketSndBufSize
    clientWorkerThreads clusterTopicEnable commercialBaseCount commercialBigCount
    commercialEnable commercialTimerCount commercialTransCount commitCommitLogLeastPages
    commitCommitLogThoroughInterval commitIntervalCommitLog compressedRegister
    connectTimeoutMillis consumerFallbehindThreshold consumerManageThreadPoolNums
    consumerManagerThreadPoolQueueCapacity debugLockEnable defaultQueryMaxNum
    defaultTopicQueueNums deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval
    deleteWhen destroyMapedFileIntervalForcibly disableConsumeIfConsumerReadSlowly
    diskFallRecorded diskMaxUsedSpaceRatio duplicationEnable enableCalcFilterBitMap
    enableConsumeQueueExt enableDLegerCommitLog enableDetailStat enableLmq
    enableMultiDispatch enablePropertyFilter enableScheduleAsyncDeliver
    enableScheduleMessageStats endTransactionPoolQueueCapacity
    endTransactionThreadPoolNums expectConsumerNumUseFilter fastFailIfNoBufferInStorePool
    fetchNamesrvAddrByAddressServer fileReservedTime filterDataCleanTimeSpan
    filterServerNums filterSupportRetry flushCommitLogLeastPages
    flushCommitLogThoroughInterval flushCommitLogTimed flushConsumeQueueLeastPages
    flushConsumeQueueThoroughInterval flushConsumerOffsetHistoryInterval
    flushConsumerOffsetInterval flushDelayOffsetInterval flushDiskType
    flushIntervalCommitLog flushIntervalConsumeQueue flushLeastPagesWhenWarmMapedFile
    forceRegister haHousekeepingInterval haListenPort haSendHeartbeatInterval
    haSlaveFallbehindMax haTransferBatchSize heartbeatThreadPoolNums
    heartbeatThreadPoolQueueCapacity highSpeedMode isEnableBatchPush isolateLogEnable
    listenPort longPollingEnable mappedFileSizeCommitLog mappedFileSizeConsumeQueue
    mappedFileSizeConsumeQueueExt maxDelayTime maxErrorRateOfBloomFilter maxHashSlotNum
    maxIndexNum maxLmqConsumeQueueNum maxMessageSize maxMsgsNumBatch
    maxTransferBytesOnMessageInDisk maxTransferBytesOnMessageInMemory
    maxTransferCountOnMessageInDisk maxTransferCountOnMessageInMemory messageDelayLevel
    messageIndexEnable messageIndexSafe messageStorePlugIn msgTraceTopicName namesrvAddr
    notifyConsumerIdsChangedEnable offsetCheckInSlave osPageCacheBusyTimeOutMills
    processReplyMessageThreadPoolNums pullMessageThreadPoolNums pullThreadPoolQueueCapacity
    putMessageFutureThreadPoolNums putMsgIndexHightWater putThreadPoolQueueCapacity
    queryMessageThreadPoolNums queryThreadPoolQueueCapacity redeleteHangedFileInterval
    regionId registerBrokerTimeoutMills registerNameServerPeriod rejectTransactionMessage
    replyThreadPoolQueueCapacity rocketmqHome scheduleAsyncDeliverMaxPendingLimit
    scheduleAsyncDeliverMaxResendNum2Blocked sendMessageThreadPoolNums
    sendThreadPoolQueueCapacity serverAsyncSemaphoreValue serverCallbackExecutorThreads
    serverChannelMaxIdleTimeSeconds serverOnewaySemaphoreValue
    serverPooledByteBufAllocatorEnable serverSelectorThreads serverSocketBacklog
    serverSocketRcvBufSize serverSocketSndBufSize serverWorkerThreads
    shortPollingTimeMills slaveReadEnable slaveTimeout startAcceptSendRequestTimeStamp
    storePathCommitLog storePathRootDir storeReplyMessageEnable syncFlushTimeout traceOn
    traceTopicEnable transactionCheckInterval transactionCheckMax transactionTimeOut
    transferMsgByHeap transientStorePoolEnable transientStorePoolSize
    useEpollNativeSelector useReentrantLockWhenPutMessage useTLS
    waitTimeMillsInHeartbeatQueue waitTimeMillsInPullQueue waitTimeMillsInSendQueue
    waitTimeMillsInTransactionQueue warmMapedFileEnable writeBufferHighWaterMark
    writeBufferLowWaterMark
    """.split()  # noqa: SIM905 - a word list reads better than 177 quoted strings
)
NO_PERMISSION: Final = 16


def update(body: str) -> RemotingCommand:
    return RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=body.encode())


async def get_config(conn: Connection) -> tuple[dict[str, str], int]:
    answer = await conn.request(RemotingCommand(RequestCode.GET_BROKER_CONFIG), TIMEOUT_S)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    lines = answer.body.decode().splitlines()
    props = dict(line.split("=", 1) for line in lines)
    assert len(props) == len(lines)  # one key per line, none twice
    return props, json.loads(answer.ext_fields["version"])["counter"]


@asynccontextmanager
async def connected(addr: str) -> AsyncIterator[Connection]:
    host, _, port = addr.rpartition(":")
    conn = await open_connection(host, int(port))
    try:
        yield conn
    finally:
        await conn.close()


def test_the_key_list_is_rocketmqs_177() -> None:
    assert len(ROCKETMQ_KEYS) == 177


async def test_get_prints_every_rocketmq_key_and_rocklets_own(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path / "store", trace_topic_enable=True) as cluster,
        connected(cluster.broker.addr) as conn,
    ):
        props, counter = await get_config(conn)
    missing = ROCKETMQ_KEYS - set(props)
    assert not missing, sorted(missing)
    assert counter == 0
    # Rocklet's real values where it has the setting, RocketMQ's default otherwise.
    assert props["listenPort"] == str(cluster.broker.port)
    assert props["storePathRootDir"] == str(tmp_path / "store")
    assert props["storePathCommitLog"] == str(tmp_path / "store" / "commitlog")
    assert props["traceTopicEnable"] == "true"
    assert props["msgTraceTopicName"] == "RMQ_SYS_TRACE_TOPIC"
    assert props["mappedFileSizeCommitLog"] == str(4 * 1024 * 1024)
    assert props["filterServerNums"] == "0" and props["traceOn"] == "true"
    assert props["useTLS"] == "false" and props["regionId"] == "DefaultRegion"
    assert int(props["clientCallbackExecutorThreads"]) >= 1
    assert props["maxRequestsPerReadTurn"]  # a Rocklet-only key stays


async def test_broker_permission_applies_live_and_sends_follow_it(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "store") as cluster:
        async with Admin(cluster.namesrv_addr, instance_name="cfg") as admin:
            await admin.create_topic("PermT", queue_nums=2)
        async with connected(cluster.broker.addr) as conn:
            assert (await conn.request(send("PermT", 0, b"a"), TIMEOUT_S)).code == 0

            answer = await conn.request(update("brokerPermission=4\n"), TIMEOUT_S)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            # Registered before the answer, as RocketMQ's registerBrokerAll.
            route = await route_of(cluster.namesrv_addr, "PermT")
            assert route is not None and [q.perm for q in route.queue_datas] == [4]
            refused = await conn.request(send("PermT", 0, b"b"), TIMEOUT_S)
            assert refused.code == NO_PERMISSION
            assert "sending message is forbidden" in (refused.remark or "")
            props, counter = await get_config(conn)
            assert props["brokerPermission"] == "4" and counter == 1

            answer = await conn.request(update("brokerPermission=6\n"), TIMEOUT_S)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            route = await route_of(cluster.namesrv_addr, "PermT")
            assert route is not None and [q.perm for q in route.queue_datas] == [6]
            assert (await conn.request(send("PermT", 0, b"c"), TIMEOUT_S)).code == 0
        # No -c file: saved where RocketMQ saves then, the store's config directory.
        saved = tmp_path / "store" / "config" / "broker.properties"
        assert parse_properties(saved.read_text()) == {"brokerPermission": "6"}


async def test_live_switches_and_restart_keys(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path / "store") as cluster,
        connected(cluster.broker.addr) as conn,
    ):
        # enablePropertyFilter is read per request: a SQL92 subscription is refused, then
        # passes once the switch is on.
        check = _sql92_check()
        assert (await conn.request(check, TIMEOUT_S)).code == ResponseCode.SYSTEM_ERROR
        body = "slaveReadEnable=true\nenablePropertyFilter=true\ndefaultTopicQueueNums=3\n"
        answer = await conn.request(update(body), TIMEOUT_S)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert "takes effect after a restart: defaultTopicQueueNums" in (answer.remark or "")
        props, _ = await get_config(conn)
        assert props["slaveReadEnable"] == "true" and props["enablePropertyFilter"] == "true"
        assert props["defaultTopicQueueNums"] == "3"
        assert (await conn.request(check, TIMEOUT_S)).code == ResponseCode.SUCCESS
        assert cluster.broker.ctx.config.slave_read_enable is False  # the start's config


def _sql92_check() -> RemotingCommand:
    subscription = {
        "topic": "T",
        "subString": "a > 1",
        "expressionType": "SQL92",
        "tagsSet": [],
        "codeSet": [],
        "classFilterMode": False,
        "subVersion": 1,
    }
    body = json.dumps({"group": "G", "subscriptionData": subscription}).encode()
    return RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=body)


async def test_bad_values_are_refused_with_the_key_and_nothing_changes(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path / "store") as cluster,
        connected(cluster.broker.addr) as conn,
    ):
        for body, key in [
            ("slaveReadEnable=true\nbrokerPermission=lots\n", "brokerPermission"),
            ("listenPort=70000\n", "listenPort"),
            ("sendMessageThreadPoolNums=two\n", "sendMessageThreadPoolNums"),
            ("traceOn=maybe\n", "traceOn"),
        ]:
            answer = await conn.request(update(body), TIMEOUT_S)
            assert answer.code == ResponseCode.SYSTEM_ERROR, body
            assert key in (answer.remark or ""), answer.remark
        # Paths are never changed remotely, even with other keys beside them.
        for body in (
            "storePathRootDir=/tmp/elsewhere\n",
            "slaveReadEnable=true\naclFile=/etc/passwd\n",
            "tls.server.keyPath=/root/key.pem\n",
        ):
            answer = await conn.request(update(body), TIMEOUT_S)
            assert answer.code == ResponseCode.NO_PERMISSION, body
            assert answer.remark == "Can not update config path"
        props, counter = await get_config(conn)
        assert props["slaveReadEnable"] == "false" and counter == 0
        assert props["storePathRootDir"] == str(tmp_path / "store")
        assert not (tmp_path / "store" / "config" / "broker.properties").exists()


def _conf(path: Path, store: Path) -> None:
    path.write_text(
        "# the test broker\n"
        f"storePathRootDir={store}\n"
        "listenPort=0\n"
        "brokerIP1=127.0.0.1\n"
        "mappedFileSizeCommitLog=4194304\n"
        "mappedFileSizeConsumeQueue=20000\n"
        "# kept from an older setup\n"
        "myOwnKey=old\n"
    )


async def test_updates_are_saved_to_the_c_file_and_survive_a_restart(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    _conf(conf, tmp_path / "store")
    tls = TlsSettings()
    namesrv = await NamesrvServer.start("127.0.0.1", 0, tls=tls)
    overrides = {"namesrvAddr": f"127.0.0.1:{namesrv.port}"}
    try:
        config = load_broker_config(conf, overrides)
        assert config.config_file == conf
        async with (
            await Broker.start(config, host="127.0.0.1", tls=tls) as broker,
            connected(broker.addr) as conn,
        ):
            body = (
                "brokerPermission=4\nfileReservedTime=12\ntraceOn=false\n"
                "myOwnKey=new\nnoSuchKeyXyz=1\n"
            )
            answer = await conn.request(update(body), TIMEOUT_S)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert "unknown, ignored: noSuchKeyXyz" in (answer.remark or "")
            props, _ = await get_config(conn)
            assert props["traceOn"] == "false" and props["myOwnKey"] == "new"
            assert "noSuchKeyXyz" not in props  # RocketMQ keeps only keys it has
        text = conf.read_text()
        assert text.startswith("# the test broker\n") and "# kept from an older setup\n" in text
        saved = parse_properties(text)
        assert saved["brokerPermission"] == "4" and saved["fileReservedTime"] == "12"
        assert saved["traceOn"] == "false" and saved["myOwnKey"] == "new"
        assert "noSuchKeyXyz" not in saved

        again = load_broker_config(conf, overrides)
        assert again.broker_permission == 4 and again.file_reserved_time_hours == 12
        async with await Broker.start(again, host="127.0.0.1", tls=tls) as broker:
            assert broker.ctx.identity.permission == 4
            async with connected(broker.addr) as conn:
                props, _ = await get_config(conn)
                assert props["brokerPermission"] == "4" and props["traceOn"] == "false"
    finally:
        await namesrv.stop()


async def test_secrets_are_saved_but_never_answered_nor_logged(tmp_path: Path) -> None:
    import structlog

    conf = tmp_path / "broker.conf"
    _conf(conf, tmp_path / "store")
    config = dataclasses.replace(load_broker_config(conf), namesrv_addr=None)
    mode = conf.stat().st_mode
    with structlog.testing.capture_logs() as events:
        async with (
            await Broker.start(config, host="127.0.0.1", tls=TlsSettings()) as broker,
            connected(broker.addr) as conn,
        ):
            body = (
                "accessKey=rocketmq2\nsecretKey=top-secret-9\n"
                "tls.server.keyPassword=key-pass-7\nslaveReadEnable=true\n"
            )
            answer = await conn.request(update(body), TIMEOUT_S)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            got = await conn.request(RemotingCommand(RequestCode.GET_BROKER_CONFIG), TIMEOUT_S)
            shown = got.body.decode() + (answer.remark or "")
    assert any(e.get("event") == "broker config updated" for e in events)
    logged = repr(events)
    for secret in ("top-secret-9", "key-pass-7"):
        assert secret not in shown and secret not in logged
    saved = parse_properties(conf.read_text())
    assert saved["secretKey"] == "top-secret-9"
    assert conf.stat().st_mode == mode  # the file keeps its permission bits


async def test_acl_refuses_updates_from_non_admins(tmp_path: Path) -> None:
    acl_file = tmp_path / "home" / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(tmp_path / "store", acl_enable=True, acl_file=acl_file) as cluster:
        async with ClientInstance(cluster.namesrv_addr, credentials=PRODUCER) as producer:
            answer = await raw_request(
                producer,
                cluster.broker.addr,
                RequestCode.UPDATE_BROKER_CONFIG,
                body=b"brokerPermission=4",
            )
            assert "Need admin permission for request code=25" in (answer.remark or "")
        assert cluster.broker.ctx.identity.permission == 6
        async with ClientInstance(cluster.namesrv_addr, credentials=ADMIN) as admin:
            answer = await raw_request(
                admin,
                cluster.broker.addr,
                RequestCode.UPDATE_BROKER_CONFIG,
                body=b"brokerPermission=4",
            )
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert cluster.broker.ctx.identity.permission == 4


@pytest.mark.parametrize(
    ("text", "updates", "expected"),
    [
        ("", {"a": "1"}, "a=1\n"),
        ("# c\na = 1\nb=2\n", {"a": "3"}, "# c\na=3\nb=2\n"),
        ("a=x\\\n  y\nb=2\n", {"a": "z", "c": "w v"}, "a=z\nb=2\nc=w v\n"),
        ("a=1\n", {"k y": "C:\\dir"}, "a=1\nk\\ y=C:\\\\dir\n"),
    ],
)
def test_rewrite_keeps_the_rest_of_the_file(
    text: str, updates: dict[str, str], expected: str
) -> None:
    out = rewrite_properties(text, updates)
    assert out == expected
    assert {k: v for k, v in parse_properties(out).items() if k in updates} == updates


async def test_concurrent_updates_are_serialised(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path / "store") as cluster,
        connected(cluster.broker.addr) as conn,
    ):
        answers = await asyncio.gather(
            *(conn.request(update(f"transactionCheckMax={n}\n"), TIMEOUT_S) for n in range(5))
        )
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        props, counter = await get_config(conn)
        assert counter == 5 and props["transactionCheckMax"] == "4"
    saved = parse_properties((tmp_path / "store" / "config" / "broker.properties").read_text())
    assert saved == {"transactionCheckMax": "4"}
