"""What a RocketMQ 4.9.4 broker reports for each configuration key (data only).

GET_BROKER_CONFIG answers with every non-null field of the four objects
``BrokerStartup`` configures (``BrokerConfig``, ``NettyServerConfig``,
``NettyClientConfig``, ``MessageStoreConfig``; ``Configuration.getAllConfigsFormatString``):
177 keys for a broker started from a ``broker.conf``. Tools read some of them without a
check (``mqadmin exportConfigs`` reads ``filterServerNums``, ``msgTraceTopicName``,
``traceOn``, ``traceTopicEnable`` and ``useTLS``; ``exportMetrics`` reads
``clientCallbackExecutorThreads``), so Rocklet reports them all: its own value where it
has the setting, else the value below, which is what a 4.9.4 broker reports by default
(a few are sized from the processor count, as in Java). Those keys have no effect in
Rocklet.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["ROCKETMQ_REPORTED_KEYS", "rocketmq_defaults"]

#: Defaults that depend on nothing but the release.
_FIXED: Final[dict[str, str]] = {
    "accessMessageInMemoryMaxRatio": "40",
    "aclEnable": "false",
    "adminBrokerThreadPoolNums": "16",
    "autoCreateSubscriptionGroup": "true",
    "autoCreateTopicEnable": "true",
    "autoDeleteUnusedStats": "false",
    "bitMapLengthConsumeQueueExt": "112",
    "brokerClusterName": "DefaultCluster",
    "brokerFastFailureEnable": "true",
    "brokerId": "0",
    "brokerPermission": "6",
    "brokerRole": "ASYNC_MASTER",
    "brokerTopicEnable": "true",
    "channelNotActiveInterval": "60000",
    "checkCRCOnRecover": "true",
    "cleanFileForciblyEnable": "true",
    "cleanResourceInterval": "10000",
    "clientAsyncSemaphoreValue": "65535",
    "clientChannelMaxIdleTimeSeconds": "120",
    "clientCloseSocketIfTimeout": "true",
    "clientManageThreadPoolNums": "32",
    "clientManagerThreadPoolQueueCapacity": "1000000",
    "clientOnewaySemaphoreValue": "65535",
    "clientPooledByteBufAllocatorEnable": "false",
    "clientSocketRcvBufSize": "0",
    "clientSocketSndBufSize": "0",
    "clientWorkerThreads": "4",
    "clusterTopicEnable": "true",
    "commercialBaseCount": "1",
    "commercialBigCount": "1",
    "commercialEnable": "true",
    "commercialTimerCount": "1",
    "commercialTransCount": "1",
    "commitCommitLogLeastPages": "4",
    "commitCommitLogThoroughInterval": "200",
    "commitIntervalCommitLog": "200",
    "compressedRegister": "false",
    "connectTimeoutMillis": "3000",
    "consumerFallbehindThreshold": "17179869184",
    "consumerManageThreadPoolNums": "32",
    "consumerManagerThreadPoolQueueCapacity": "1000000",
    "debugLockEnable": "false",
    "defaultQueryMaxNum": "32",
    "defaultTopicQueueNums": "8",
    "deleteCommitLogFilesInterval": "100",
    "deleteConsumeQueueFilesInterval": "100",
    "deleteWhen": "04",
    "destroyMapedFileIntervalForcibly": "120000",
    "disableConsumeIfConsumerReadSlowly": "false",
    "diskFallRecorded": "true",
    "diskMaxUsedSpaceRatio": "75",
    "duplicationEnable": "false",
    "enableCalcFilterBitMap": "false",
    "enableConsumeQueueExt": "false",
    "enableDLegerCommitLog": "false",
    "enableDetailStat": "true",
    "enableLmq": "false",
    "enableMultiDispatch": "false",
    "enablePropertyFilter": "false",
    "enableScheduleAsyncDeliver": "false",
    "enableScheduleMessageStats": "true",
    "endTransactionPoolQueueCapacity": "100000",
    "expectConsumerNumUseFilter": "32",
    "fastFailIfNoBufferInStorePool": "false",
    "fetchNamesrvAddrByAddressServer": "false",
    "fileReservedTime": "72",
    "filterDataCleanTimeSpan": "86400000",
    "filterServerNums": "0",
    "filterSupportRetry": "false",
    "flushCommitLogLeastPages": "4",
    "flushCommitLogThoroughInterval": "10000",
    "flushCommitLogTimed": "true",
    "flushConsumeQueueLeastPages": "2",
    "flushConsumeQueueThoroughInterval": "60000",
    "flushConsumerOffsetHistoryInterval": "60000",
    "flushConsumerOffsetInterval": "5000",
    "flushDelayOffsetInterval": "10000",
    "flushDiskType": "ASYNC_FLUSH",
    "flushIntervalCommitLog": "500",
    "flushIntervalConsumeQueue": "1000",
    "flushLeastPagesWhenWarmMapedFile": "4096",
    "forceRegister": "true",
    "haHousekeepingInterval": "20000",
    "haSendHeartbeatInterval": "5000",
    "haSlaveFallbehindMax": "268435456",
    "haTransferBatchSize": "32768",
    "heartbeatThreadPoolQueueCapacity": "50000",
    "highSpeedMode": "false",
    "isEnableBatchPush": "false",
    "isolateLogEnable": "false",
    "longPollingEnable": "true",
    "mappedFileSizeCommitLog": "1073741824",
    "mappedFileSizeConsumeQueue": "6000000",
    "mappedFileSizeConsumeQueueExt": "50331648",
    "maxDelayTime": "40",
    "maxErrorRateOfBloomFilter": "20",
    "maxHashSlotNum": "5000000",
    "maxIndexNum": "20000000",
    "maxLmqConsumeQueueNum": "20000",
    "maxMessageSize": "4194304",
    "maxMsgsNumBatch": "64",
    "maxTransferBytesOnMessageInDisk": "65536",
    "maxTransferBytesOnMessageInMemory": "262144",
    "maxTransferCountOnMessageInDisk": "8",
    "maxTransferCountOnMessageInMemory": "32",
    "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    "messageIndexEnable": "true",
    "messageIndexSafe": "false",
    "messageStorePlugIn": "",
    "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC",
    "notifyConsumerIdsChangedEnable": "true",
    "offsetCheckInSlave": "false",
    "osPageCacheBusyTimeOutMills": "1000",
    "pullThreadPoolQueueCapacity": "100000",
    "putMsgIndexHightWater": "600000",
    "putThreadPoolQueueCapacity": "10000",
    "queryThreadPoolQueueCapacity": "20000",
    "redeleteHangedFileInterval": "120000",
    "regionId": "DefaultRegion",
    "registerBrokerTimeoutMills": "6000",
    "registerNameServerPeriod": "30000",
    "rejectTransactionMessage": "false",
    "replyThreadPoolQueueCapacity": "10000",
    "scheduleAsyncDeliverMaxPendingLimit": "2000",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "sendThreadPoolQueueCapacity": "10000",
    "serverAsyncSemaphoreValue": "64",
    "serverCallbackExecutorThreads": "0",
    "serverChannelMaxIdleTimeSeconds": "120",
    "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true",
    "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0",
    "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8",
    "shortPollingTimeMills": "1000",
    "slaveReadEnable": "false",
    "slaveTimeout": "3000",
    "startAcceptSendRequestTimeStamp": "0",
    "storeReplyMessageEnable": "true",
    "syncFlushTimeout": "5000",
    "traceOn": "true",
    "traceTopicEnable": "false",
    "transactionCheckInterval": "60000",
    "transactionCheckMax": "15",
    "transactionTimeOut": "6000",
    "transferMsgByHeap": "true",
    "transientStorePoolEnable": "false",
    "transientStorePoolSize": "5",
    "useEpollNativeSelector": "false",
    "useReentrantLockWhenPutMessage": "true",
    "useTLS": "false",
    "waitTimeMillsInHeartbeatQueue": "31000",
    "waitTimeMillsInPullQueue": "5000",
    "waitTimeMillsInSendQueue": "200",
    "waitTimeMillsInTransactionQueue": "3000",
    "warmMapedFileEnable": "false",
    "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}

#: Keys a 4.9.4 broker reports whose value comes from the host or the start: Rocklet
#: always has its own value for these (address, name, paths, ports).
_FROM_THE_BROKER: Final = frozenset(
    {
        "brokerIP1",
        "brokerIP2",
        "brokerName",
        "haListenPort",
        "listenPort",
        "namesrvAddr",
        "rocketmqHome",
        "storePathCommitLog",
        "storePathRootDir",
    }
)
#: Thread counts Java sizes from ``Runtime.availableProcessors()``.
_BY_CPU: Final = (
    "clientCallbackExecutorThreads",
    "endTransactionThreadPoolNums",
    "heartbeatThreadPoolNums",
    "processReplyMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "putMessageFutureThreadPoolNums",
    "queryMessageThreadPoolNums",
    "sendMessageThreadPoolNums",
)
#: Every key a 4.9.4 broker reports (177).
ROCKETMQ_REPORTED_KEYS: Final = frozenset(_FIXED) | _FROM_THE_BROKER | frozenset(_BY_CPU)


def rocketmq_defaults(cpus: int | None = None) -> dict[str, str]:
    """The values a 4.9.4 broker reports for the keys Rocklet has no setting of its own for.

    Args:
        cpus: ``availableProcessors()``; ``None``: this machine's.

    Returns:
        Key to value text, for every key of :data:`ROCKETMQ_REPORTED_KEYS` but the
        host-dependent ones (:data:`_FROM_THE_BROKER`).
    """
    n = cpus or os.cpu_count() or 1
    send = min(n, 4)
    sized = {
        "clientCallbackExecutorThreads": n,
        "endTransactionThreadPoolNums": max(8 + n * 2, send * 4),
        "heartbeatThreadPoolNums": min(32, n),
        "processReplyMessageThreadPoolNums": 16 + n * 2,
        "pullMessageThreadPoolNums": 16 + n * 2,
        "putMessageFutureThreadPoolNums": send,
        "queryMessageThreadPoolNums": 8 + n,
        "sendMessageThreadPoolNums": send,
    }
    return {**_FIXED, **{k: str(v) for k, v in sized.items()}}
