"""Wire vocabulary of the remoting protocol: request, response, language and serialize codes.

Numbers follow Apache RocketMQ 4.9.x ``RequestCode.java``, ``ResponseCode.java``,
``RemotingSysResponseCode.java``, ``LanguageCode.java`` and ``SerializeType.java``.
A command carries its code as a plain ``int`` because peers may send codes we do not
know; these enums name the ones we do.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["LanguageCode", "RequestCode", "ResponseCode", "SerializeType"]


class SerializeType(IntEnum):
    """How a frame's header is serialized (the high byte of the header-length word)."""

    #: fastjson-style JSON; the only type the C++ and Node clients understand.
    JSON = 0
    #: RocketMQ's compact binary layout (``RocketMQSerializable``); Java can send it.
    ROCKETMQ = 1
    #: Rocklet extension: the JSON header's fields as a msgpack map. Only Rocklet's own
    #: SDK sends it, and a broker answers in the request's type, so official clients
    #: never see it.
    MSGPACK = 2


class LanguageCode(IntEnum):
    """The sender's language; JSON headers carry the name, binary headers the number."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class RequestCode(IntEnum):
    """Request codes (``RequestCode.java``)."""

    SEND_MESSAGE = 10  #: single send; C++ also sends batches with ``batch="1"``
    PULL_MESSAGE = 11  #: pull, optionally long-polling
    QUERY_MESSAGE = 12  #: look messages up by key through the index
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14  #: a group's committed offset for a queue
    UPDATE_CONSUMER_OFFSET = 15  #: commit a group's offset for a queue
    UPDATE_AND_CREATE_TOPIC = 17  #: admin: create or update a topic
    GET_ALL_TOPIC_CONFIG = 21  #: admin: every topic config of a broker
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28  #: admin: broker runtime key/values
    SEARCH_OFFSET_BY_TIMESTAMP = 29  #: queue offset for a store timestamp
    GET_MAX_OFFSET = 30  #: next queue offset to be written
    GET_MIN_OFFSET = 31  #: smallest queue offset still stored
    GET_EARLIEST_MSG_STORETIME = 32  #: store time of a queue's first message
    VIEW_MESSAGE_BY_ID = 33  #: one stored message by commitlog offset
    HEART_BEAT = 34  #: client registration (producers, consumers, subscriptions)
    UNREGISTER_CLIENT = 35  #: client leaves a group
    CONSUMER_SEND_MSG_BACK = 36  #: a failed message goes to the retry topic or DLQ
    END_TRANSACTION = 37  #: commit or roll back a half message
    GET_CONSUMER_LIST_BY_GROUP = 38  #: client ids of a consumer group
    CHECK_TRANSACTION_STATE = 39  #: broker asks a producer about a half message
    NOTIFY_CONSUMER_IDS_CHANGED = 40  #: broker tells consumers to rebalance
    LOCK_BATCH_MQ = 41  #: orderly consumers lock queues
    UNLOCK_BATCH_MQ = 42  #: orderly consumers unlock queues
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50  #: ACL: add or change an account
    DELETE_ACL_CONFIG = 51  #: ACL: remove an account
    GET_BROKER_CLUSTER_ACL_INFO = 52  #: ACL: the ACL files' data versions
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53  #: ACL: replace the global white list
    GET_BROKER_CLUSTER_ACL_CONFIG = 54  #: ACL: every account and the white list
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103  #: broker -> name server
    UNREGISTER_BROKER = 104  #: broker -> name server
    GET_ROUTEINFO_BY_TOPIC = 105  #: client -> name server: a topic's route
    GET_BROKER_CLUSTER_INFO = 106  #: admin -> name server
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305  #: admin: the broker's system topic names
    CLEAN_EXPIRED_CONSUMEQUEUE = 306  #: admin: drop queues pointing at deleted data
    GET_CONSUMER_RUNNING_INFO = 307  #: broker -> client: running info snapshot
    CONSUME_MESSAGE_DIRECTLY = 309  #: admin -> broker -> client: consume one message
    SEND_MESSAGE_V2 = 310  #: send with single-letter header keys (Java, ali-ons)
    VIEW_BROKER_STATS_DATA = 315  #: admin: one statistic's minute/hour/day figures
    CLEAN_UNUSED_TOPIC = 316  #: admin: drop queues of topics the broker no longer has
    GET_BROKER_CONSUME_STATS = 317  #: admin: every group's progress on the broker
    UPDATE_NAMESRV_CONFIG = 318  #: admin -> name server: properties text in the body
    GET_NAMESRV_CONFIG = 319  #: admin -> name server: its configuration as properties text
    SEND_BATCH_MESSAGE = 320  #: batch send with the V2 header (Java)
    QUERY_CONSUME_QUEUE = 321  #: admin: raw consume-queue entries
    QUERY_DATA_VERSION = 322
    SEND_REPLY_MESSAGE = 324  #: request-reply: the replier's send
    SEND_REPLY_MESSAGE_V2 = 325  #: the same with the V2 header
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326  #: broker -> requesting client
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328  #: admin: every producer channel by group
    DELETE_EXPIRED_COMMITLOG = 329  #: admin: run commitlog retention now
    #: Rocklet only: check the broker's store files (``rocklet admin storeCheck``).
    #: Rocklet's own codes are 40000-40999, a range RocketMQ does not use (4.9.4 ends
    #: at 329; 5.x adds 1001-1018, 2001-2004, 3001-3010 and 200050-200151).
    ROCKLET_STORE_CHECK = 40001


class ResponseCode(IntEnum):
    """Response codes (``ResponseCode.java`` and ``RemotingSysResponseCode.java``)."""

    SUCCESS = 0  #: the request did what it asked
    SYSTEM_ERROR = 1  #: a failure with a remark saying why
    SYSTEM_BUSY = 2  #: flow control; the client may retry later
    REQUEST_CODE_NOT_SUPPORTED = 3  #: unknown request code
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10  #: stored, but not durable within the timeout
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13  #: topic, body or properties rejected
    SERVICE_NOT_AVAILABLE = 14  #: broker cannot serve (e.g. shutting down, read-only)
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16  #: topic or broker permission forbids the operation
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19  #: no new message (after the long-poll hold)
    PULL_RETRY_IMMEDIATELY = 20  #: every scanned message was filtered out
    PULL_OFFSET_MOVED = 21  #: requested offset is outside the queue
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215
