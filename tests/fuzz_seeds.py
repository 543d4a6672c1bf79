"""Seeds for the frame fuzzer: a valid request for every code the two servers handle.

Built from the typed header classes (each field given a value that means something: a
topic that exists, an offset that is stored) with the bodies their processors read,
plus every request the official clients sent in the recorded captures (the C++
client's JSON lines, and the Java and Node clients' frames in the real-broker pcaps,
some with ROCKETMQ binary headers). :func:`seeded_codes` lets a test fail when a
registered request code has no seed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from rocklet.protocol.batch import BatchItem, encode_batch
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import ProtocolError
from rocklet.protocol.frame import FrameDecoder
from rocklet.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    GetTopicStatsInfoRequestHeader,
    Header,
    PullMessageRequestHeader,
    PutKVConfigRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryDataVersionRequestHeader,
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    RegisterBrokerRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    UnregisterBrokerRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from rocklet.protocol.headers.admin import QueryConsumeQueueRequestHeader
from rocklet.protocol.headers.namesrv import AddWritePermOfBrokerRequestHeader
from rocklet.protocol.headers.stats import (
    GetConsumeStatsInBrokerHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rocklet.protocol.properties import encode_properties
from tests.conftest import CAPTURES

__all__ = [
    "GROUPS",
    "KEEP_TOPIC",
    "TOPICS",
    "WITNESS_GROUP",
    "Seed",
    "Target",
    "seeded_codes",
    "seeds",
]

Target = Literal["broker", "namesrv"]

#: Topic and group of the well-behaved client; never in a pool.
KEEP_TOPIC: Final = "Keep"
WITNESS_GROUP: Final = "WitnessGroup"
#: The pools fuzzed requests draw names from: small, so side effects stay bounded.
TOPICS: Final = ("FuzzTopic", "FuzzTopic2", "%RETRY%FuzzGroup", "TBW102", "FuzzOrder")
GROUPS: Final = ("FuzzGroup", "FuzzGroup2", "CID_fuzz")


@dataclass(frozen=True)
class Seed:
    """A valid request and the server it is for."""

    target: Target
    cmd: RemotingCommand
    origin: str


# -- seeds ----------------------------------------------------------------------------

#: Wire key -> a value that means something on a fresh broker, for seeds.
_VALID: Final[dict[str, str]] = {
    "topic": "FuzzTopic",
    "b": "FuzzTopic",
    "defaultTopic": "TBW102",
    "c": "TBW102",
    "producerGroup": "FuzzProducer",
    "a": "FuzzProducer",
    "consumerGroup": "FuzzGroup",
    "group": "FuzzGroup",
    "groupName": "FuzzGroup",
    "clientID": "fuzz-client",
    "clientId": "fuzz-client",
    "key": "fuzz-key",
    "namespace": "FUZZ_NS",
    "value": "v",
    "cluster": "DefaultCluster",
    "clusterName": "DefaultCluster",
    "brokerName": "broker-fuzz",
    "brokerAddr": "127.0.0.1:1",
    "haServerAddr": "127.0.0.1:2",
    "subscription": "*",
    "expressionType": "TAG",
    "msgId": "0A00000100002A9F0000000000000000",
    "properties": "TAGS\x01TagA\x02KEYS\x01fuzz-key\x02",
    "i": "TAGS\x01TagA\x02KEYS\x01fuzz-key\x02",
    "topicFilterType": "SINGLE_TAG",
    "maxMsgNums": "32",
    "maxNum": "32",
    "d": "4",
    "defaultTopicQueueNums": "4",
    "readQueueNums": "4",
    "writeQueueNums": "4",
    "perm": "6",
    "sysFlag": "0",
    "suspendTimeoutMillis": "0",
    "endTimestamp": "9223372036854775807",
    "timestamp": "0",
    "isForce": "false",
    "compressed": "false",
}

_HEADERS: Final[dict[Target, dict[int, type[Header]]]] = {
    "broker": {
        RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
        RequestCode.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
        RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
        RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
        RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
        RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
        RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
        RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
        RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
        RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
        RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
        RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
        RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
        RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
        RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
        RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
        RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
        RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
        RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
        RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
        RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
        RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
        RequestCode.GET_BROKER_CONSUME_STATS: GetConsumeStatsInBrokerHeader,
        RequestCode.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    },
    "namesrv": {
        RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
        RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
        RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
        RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
        RequestCode.UNREGISTER_BROKER: UnregisterBrokerRequestHeader,
        RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER: WipeWritePermOfBrokerRequestHeader,
        RequestCode.ADD_WRITE_PERM_OF_BROKER: AddWritePermOfBrokerRequestHeader,
        RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
        RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
        RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
        RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    },
}
#: Codes whose request has no custom header.
_NO_HEADER: Final[dict[Target, tuple[int, ...]]] = {
    "broker": (
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_BROKER_CONFIG,
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.GET_ALL_CONSUMER_OFFSET,
        RequestCode.GET_ALL_DELAY_OFFSET,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.HEART_BEAT,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
        RequestCode.CHECK_CLIENT_CONFIG,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.ROCKLET_STORE_CHECK,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.GET_ALL_PRODUCER_INFO,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
    ),
    "namesrv": (
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_NAMESRV_CONFIG,
        RequestCode.UPDATE_NAMESRV_CONFIG,
    ),
}
_V2_CODES: Final = (
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE_V2,
)


def _header_ext(cls: type[Header]) -> dict[str, str]:
    ext = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = f.metadata["wire"]
        if key in _VALID:
            ext[key] = _VALID[key]
        elif f.default is None:
            continue
        elif f.default is dataclasses.MISSING:
            ext[key] = "0"
        else:
            default = f.default
            ext[key] = (
                ("true" if default else "false") if isinstance(default, bool) else str(default)
            )
    return ext


def _bodies() -> dict[int, bytes]:
    sub = SubscriptionData("FuzzTopic", "TagA || TagB", ("TagA", "TagB"))
    consumer = ConsumerData(
        "FuzzGroup",
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        (sub, SubscriptionData("%RETRY%FuzzGroup")),
    )
    heartbeat = HeartbeatData("fuzz-client", (ProducerData("FuzzProducer"),), (consumer,))
    mqs = [{"brokerName": "broker-a", "queueId": 0, "topic": "FuzzTopic"}]
    lock = {"clientId": "fuzz-client", "consumerGroup": "FuzzGroup", "mqSet": mqs}
    batch = encode_batch([BatchItem(0, b"one", b"TAGS\x01a"), BatchItem(0, b"two", b"KEYS\x01k")])
    return {
        RequestCode.SEND_MESSAGE: b"fuzz body",
        RequestCode.SEND_BATCH_MESSAGE: batch,
        RequestCode.HEART_BEAT: heartbeat.to_json(),
        RequestCode.LOCK_BATCH_MQ: json.dumps(lock).encode(),
        RequestCode.UNLOCK_BATCH_MQ: json.dumps(lock).encode(),
        RequestCode.CHECK_CLIENT_CONFIG: json.dumps(
            {"clientId": "fuzz-client", "group": "FuzzGroup", "subscriptionData": sub.to_dict()}
        ).encode(),
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: SubscriptionGroupConfig(
            "FuzzGroup"
        ).to_json(),
        RequestCode.UPDATE_BROKER_CONFIG: b"brokerName=broker-a\n",
        RequestCode.UPDATE_NAMESRV_CONFIG: b"productEnvName=fuzz\nserverWorkerThreads=8\n",
        RequestCode.REGISTER_BROKER: RegisterBrokerBody(
            TopicConfigSerializeWrapper(
                {"FuzzTopic": TopicConfig("FuzzTopic", 4, 4)}, DataVersion(1, 1)
            )
        ).to_json(),
        RequestCode.QUERY_DATA_VERSION: DataVersion(1, 1).to_json(),
    }


def _v2(ext: dict[str, str]) -> dict[str, str]:
    v1 = SendMessageRequestHeader.from_ext_fields(ext)
    return v1.to_v2().to_ext_fields()


def _captured() -> list[Seed]:
    """Requests the official clients sent (C++ JSON lines; Java and Node pcaps)."""
    out: list[Seed] = []
    for path in sorted(CAPTURES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("event") != "request":
                continue
            header = event["header"]
            body = event["body"].encode()
            ext = {k: str(v) for k, (_kind, v) in event["extFields"].items()}
            cmd = RemotingCommand(
                header["code"],
                flag=header["flag"],
                remark=header["remark"],
                ext_fields=ext,
                body=body if len(body) == event["body_len"] else b"\x00" * event["body_len"],
                language=header["language"],
                version=header["version"],
            )
            target: Target = "namesrv" if event["server"] == "ns" else "broker"
            out.append(Seed(target, cmd, f"{path.name}"))
    out += _from_pcaps()
    return out


def _from_pcaps() -> list[Seed]:
    from tests.protocol.pcap_streams import connections, read_segments

    out: list[Seed] = []
    for pcap in sorted((CAPTURES / "real-broker").glob("*.pcap")):
        for conn in connections(read_segments(pcap)):
            decoder = FrameDecoder()
            decoder.feed(conn.to_server)
            try:
                cmds = list(decoder.commands())
            except ProtocolError:
                continue
            target: Target = "namesrv" if conn.server.port == 9876 else "broker"
            out += [Seed(target, c, pcap.name) for c in cmds if not c.is_response]
    return out


def seeds() -> list[Seed]:
    """Valid requests for every code both servers handle, and the captured ones."""
    bodies = _bodies()
    out: list[Seed] = []
    for target, table in _HEADERS.items():
        for code, cls in table.items():
            cmd = RemotingCommand(code, ext_fields=_header_ext(cls), body=bodies.get(code, b""))
            out.append(Seed(target, cmd, "typed header"))
    send_ext = _header_ext(SendMessageRequestHeader)
    for code in _V2_CODES:
        body = bodies.get(code, bodies[RequestCode.SEND_MESSAGE])
        out.append(Seed("broker", RemotingCommand(code, ext_fields=_v2(send_ext), body=body), "V2"))
    for target, codes in _NO_HEADER.items():
        for code in codes:
            out.append(Seed(target, RemotingCommand(code, body=bodies.get(code, b"")), "no header"))
    # A half message, so that END_TRANSACTION and the check-back have something to find.
    half = {
        **send_ext,
        "sysFlag": "4",
        "properties": encode_properties({"TRAN_MSG": "true", "PGROUP": "FuzzProducer"}).decode(),
    }
    out.append(Seed("broker", RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=half), "half"))
    return out + _captured()


def seeded_codes(all_seeds: Iterable[Seed]) -> dict[Target, set[int]]:
    """The request codes the seeds cover, per server."""
    covered: dict[Target, set[int]] = {"broker": set(), "namesrv": set()}
    for seed in all_seeds:
        covered[seed.target].add(seed.cmd.code)
    return covered
