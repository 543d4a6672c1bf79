"""The property names RocketMQ 4.9.4 reads from its configuration files (data only).

``BrokerStartup`` hands ``broker.conf`` to ``MixAll.properties2Object`` for four objects
(``BrokerConfig``, ``NettyServerConfig``, ``NettyClientConfig``, ``MessageStoreConfig``);
``NamesrvStartup`` does the same for ``NamesrvConfig`` and ``NettyServerConfig``. A key
is a public setter's name without ``set``, its first letter lower-cased, for setters
taking a number, a boolean or a string; Java ignores every other key without a word.
These sets list those names as the 4.9.4 release has them, so Rocklet can tell a key
it does not implement from a typo (:mod:`rocklet.broker.config_keys`).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BROKER_CONFIG_KEYS",
    "MESSAGE_STORE_CONFIG_KEYS",
    "NAMESRV_CONFIG_KEYS",
    "NETTY_CLIENT_CONFIG_KEYS",
    "NETTY_SERVER_CONFIG_KEYS",
    "ROCKETMQ_BROKER_KEYS",
    "ROCKETMQ_NAMESRV_KEYS",
]

#: ``BrokerConfig`` (80 keys).
BROKER_CONFIG_KEYS: Final = frozenset(
    {
        "aclEnable",
        "adminBrokerThreadPoolNums",
        "autoCreateSubscriptionGroup",
        "autoCreateTopicEnable",
        "autoDeleteUnusedStats",
        "brokerClusterName",
        "brokerFastFailureEnable",
        "brokerIP1",
        "brokerIP2",
        "brokerId",
        "brokerName",
        "brokerPermission",
        "brokerTopicEnable",
        "clientManageThreadPoolNums",
        "clientManagerThreadPoolQueueCapacity",
        "clusterTopicEnable",
        "commercialBaseCount",
        "commercialBigCount",
        "commercialEnable",
        "commercialTimerCount",
        "commercialTransCount",
        "compressedRegister",
        "consumerFallbehindThreshold",
        "consumerManageThreadPoolNums",
        "consumerManagerThreadPoolQueueCapacity",
        "defaultTopicQueueNums",
        "disableConsumeIfConsumerReadSlowly",
        "enableCalcFilterBitMap",
        "enableDetailStat",
        "enablePropertyFilter",
        "endTransactionPoolQueueCapacity",
        "endTransactionThreadPoolNums",
        "expectConsumerNumUseFilter",
        "fetchNamesrvAddrByAddressServer",
        "filterDataCleanTimeSpan",
        "filterServerNums",
        "filterSupportRetry",
        "flushConsumerOffsetHistoryInterval",
        "flushConsumerOffsetInterval",
        "forceRegister",
        "heartbeatThreadPoolNums",
        "heartbeatThreadPoolQueueCapacity",
        "highSpeedMode",
        "isolateLogEnable",
        "longPollingEnable",
        "maxDelayTime",
        "maxErrorRateOfBloomFilter",
        "messageStorePlugIn",
        "msgTraceTopicName",
        "namesrvAddr",
        "notifyConsumerIdsChangedEnable",
        "processReplyMessageThreadPoolNums",
        "pullMessageThreadPoolNums",
        "pullThreadPoolQueueCapacity",
        "putMessageFutureThreadPoolNums",
        "putThreadPoolQueueCapacity",
        "queryMessageThreadPoolNums",
        "queryThreadPoolQueueCapacity",
        "regionId",
        "registerBrokerTimeoutMills",
        "registerNameServerPeriod",
        "rejectTransactionMessage",
        "replyThreadPoolQueueCapacity",
        "rocketmqHome",
        "sendMessageThreadPoolNums",
        "sendThreadPoolQueueCapacity",
        "shortPollingTimeMills",
        "slaveReadEnable",
        "startAcceptSendRequestTimeStamp",
        "storeReplyMessageEnable",
        "traceOn",
        "traceTopicEnable",
        "transactionCheckInterval",
        "transactionCheckMax",
        "transactionTimeOut",
        "transferMsgByHeap",
        "waitTimeMillsInHeartbeatQueue",
        "waitTimeMillsInPullQueue",
        "waitTimeMillsInSendQueue",
        "waitTimeMillsInTransactionQueue",
    }
)

#: ``MessageStoreConfig`` (78 keys).
MESSAGE_STORE_CONFIG_KEYS: Final = frozenset(
    {
        "accessMessageInMemoryMaxRatio",
        "bitMapLengthConsumeQueueExt",
        "brokerRole",
        "checkCRCOnRecover",
        "cleanFileForciblyEnable",
        "cleanResourceInterval",
        "commitCommitLogLeastPages",
        "commitCommitLogThoroughInterval",
        "commitIntervalCommitLog",
        "dLegerGroup",
        "dLegerPeers",
        "dLegerSelfId",
        "debugLockEnable",
        "defaultQueryMaxNum",
        "deleteCommitLogFilesInterval",
        "deleteConsumeQueueFilesInterval",
        "deleteWhen",
        "destroyMapedFileIntervalForcibly",
        "diskFallRecorded",
        "diskMaxUsedSpaceRatio",
        "duplicationEnable",
        "enableBatchPush",
        "enableConsumeQueueExt",
        "enableDLegerCommitLog",
        "enableLmq",
        "enableMultiDispatch",
        "enableScheduleAsyncDeliver",
        "enableScheduleMessageStats",
        "fastFailIfNoBufferInStorePool",
        "fileReservedTime",
        "flushCommitLogLeastPages",
        "flushCommitLogThoroughInterval",
        "flushCommitLogTimed",
        "flushConsumeQueueLeastPages",
        "flushConsumeQueueThoroughInterval",
        "flushDelayOffsetInterval",
        "flushDiskType",
        "flushIntervalCommitLog",
        "flushIntervalConsumeQueue",
        "flushLeastPagesWhenWarmMapedFile",
        "haHousekeepingInterval",
        "haListenPort",
        "haMasterAddress",
        "haSendHeartbeatInterval",
        "haSlaveFallbehindMax",
        "haTransferBatchSize",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "mappedFileSizeConsumeQueueExt",
        "maxHashSlotNum",
        "maxIndexNum",
        "maxLmqConsumeQueueNum",
        "maxMessageSize",
        "maxMsgsNumBatch",
        "maxTransferBytesOnMessageInDisk",
        "maxTransferBytesOnMessageInMemory",
        "maxTransferCountOnMessageInDisk",
        "maxTransferCountOnMessageInMemory",
        "messageDelayLevel",
        "messageIndexEnable",
        "messageIndexSafe",
        "offsetCheckInSlave",
        "osPageCacheBusyTimeOutMills",
        "preferredLeaderId",
        "putMsgIndexHightWater",
        "readOnlyCommitLogStorePaths",
        "redeleteHangedFileInterval",
        "scheduleAsyncDeliverMaxPendingLimit",
        "scheduleAsyncDeliverMaxResendNum2Blocked",
        "slaveTimeout",
        "storePathCommitLog",
        "storePathDLedgerCommitLog",
        "storePathRootDir",
        "syncFlushTimeout",
        "transientStorePoolEnable",
        "transientStorePoolSize",
        "useReentrantLockWhenPutMessage",
        "warmMapedFileEnable",
    }
)

#: ``NettyServerConfig`` (14 keys).
NETTY_SERVER_CONFIG_KEYS: Final = frozenset(
    {
        "listenPort",
        "serverAsyncSemaphoreValue",
        "serverCallbackExecutorThreads",
        "serverChannelMaxIdleTimeSeconds",
        "serverOnewaySemaphoreValue",
        "serverPooledByteBufAllocatorEnable",
        "serverSelectorThreads",
        "serverSocketBacklog",
        "serverSocketRcvBufSize",
        "serverSocketSndBufSize",
        "serverWorkerThreads",
        "useEpollNativeSelector",
        "writeBufferHighWaterMark",
        "writeBufferLowWaterMark",
    }
)

#: ``NettyClientConfig`` (14 keys).
NETTY_CLIENT_CONFIG_KEYS: Final = frozenset(
    {
        "channelNotActiveInterval",
        "clientAsyncSemaphoreValue",
        "clientCallbackExecutorThreads",
        "clientChannelMaxIdleTimeSeconds",
        "clientCloseSocketIfTimeout",
        "clientOnewaySemaphoreValue",
        "clientPooledByteBufAllocatorEnable",
        "clientSocketRcvBufSize",
        "clientSocketSndBufSize",
        "clientWorkerThreads",
        "connectTimeoutMillis",
        "useTLS",
        "writeBufferHighWaterMark",
        "writeBufferLowWaterMark",
    }
)

#: ``NamesrvConfig`` (6 keys).
NAMESRV_CONFIG_KEYS: Final = frozenset(
    {
        "clusterTest",
        "configStorePath",
        "kvConfigPath",
        "orderMessageEnable",
        "productEnvName",
        "rocketmqHome",
    }
)

#: Every key a RocketMQ 4.9.4 broker reads from ``broker.conf``.
ROCKETMQ_BROKER_KEYS: Final = (
    BROKER_CONFIG_KEYS
    | MESSAGE_STORE_CONFIG_KEYS
    | NETTY_SERVER_CONFIG_KEYS
    | NETTY_CLIENT_CONFIG_KEYS
)
#: Every key a RocketMQ 4.9.4 name server reads from its properties file.
ROCKETMQ_NAMESRV_KEYS: Final = NAMESRV_CONFIG_KEYS | NETTY_SERVER_CONFIG_KEYS
