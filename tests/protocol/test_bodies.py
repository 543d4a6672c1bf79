"""JSON bodies: round trips, real client and broker bodies, and malformed input."""

from __future__ import annotations

import contextlib
import json
import struct
import zlib
from collections.abc import Iterator
from functools import cache
from typing import Any, Protocol, Self

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode, fastjson
from rocklet.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerData,
    ConsumerListBody,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatus,
    ConsumeType,
    DataVersion,
    GetConsumerStatusBody,
    GroupList,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
    Perm,
    ProcessQueueInfo,
    ProducerConnection,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    RemoteConnection,
    ResetOffsetBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
    UnlockBatchRequestBody,
)
from rocklet.protocol.codes import LanguageCode
from rocklet.protocol.errors import BodyError, ProtocolError
from rocklet.protocol.headers import RegisterBrokerRequestHeader
from tests.conftest import CAPTURES
from tests.protocol.helpers import decode_all
from tests.protocol.listing import parse_listing
from tests.protocol.pcap_streams import connections, read_segments

REAL_BROKER = CAPTURES / "real-broker"


class Body(Protocol):
    def to_json(self) -> bytes: ...

    @classmethod
    def from_json(cls, data: bytes) -> Self: ...


# --- strategies ---------------------------------------------------------------------------

names = st.text(max_size=12)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
doubles = st.floats(allow_nan=False, allow_infinity=False)
queues = st.builds(MessageQueue, names, names, ints)
subscriptions = st.builds(
    SubscriptionData,
    topic=names,
    sub_string=names,
    tags_set=st.lists(names, max_size=3).map(tuple),
    code_set=st.lists(ints, max_size=3).map(tuple),
    sub_version=longs,
    expression_type=st.sampled_from(["TAG", "SQL92"]),
    class_filter_mode=st.booleans(),
    filter_class_source=st.none() | names,
)
consumers = st.builds(
    ConsumerData,
    names,
    st.sampled_from(ConsumeType),
    st.sampled_from(MessageModel),
    st.sampled_from(ConsumeFromWhere),
    st.lists(subscriptions, max_size=3).map(tuple),
    st.booleans(),
)
heartbeats = st.builds(
    HeartbeatData,
    names,
    st.lists(st.builds(ProducerData, names), max_size=3).map(tuple),
    st.lists(consumers, max_size=2).map(tuple),
)
broker_datas = st.builds(
    BrokerData, names, names, st.dictionaries(st.integers(0, 2**40), names, max_size=3)
)
routes = st.builds(
    TopicRouteData,
    st.lists(st.builds(QueueData, names, ints, ints, ints, ints), max_size=3).map(tuple),
    st.lists(broker_datas, max_size=3).map(tuple),
    st.none() | names,
    st.dictionaries(names, st.lists(names, max_size=2).map(tuple), max_size=2),
)
# Space-free names and real filter types: the compressed form is space-separated.
topic_names = st.text(
    st.characters(blacklist_characters=" ", blacklist_categories=["Cs"]), min_size=1
)
topic_configs = st.builds(
    TopicConfig,
    topic_names,
    ints,
    ints,
    st.integers(0, 15),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    ints,
    st.booleans(),
)
versions = st.builds(DataVersion, longs, longs)
wrappers = st.builds(
    TopicConfigSerializeWrapper,
    st.lists(topic_configs, max_size=4).map(lambda cs: {c.topic_name: c for c in cs}),
    versions,
)
register_bodies = st.builds(RegisterBrokerBody, wrappers, st.lists(names, max_size=2).map(tuple))
offset_wrappers = st.builds(OffsetWrapper, longs, longs, longs)
connections_ = st.builds(
    RemoteConnection, names, names, st.sampled_from([m.name for m in LanguageCode]), ints
)
process_queues = st.builds(
    ProcessQueueInfo,
    **{
        name: (st.booleans() if name in ("locked", "dropped") else longs)
        for name in ProcessQueueInfo.__dataclass_fields__
    },
)
statuses = st.builds(ConsumeStatus, doubles, doubles, doubles, doubles, doubles, longs)
group_configs = st.builds(
    SubscriptionGroupConfig,
    names,
    st.booleans(),
    st.booleans(),
    st.booleans(),
    ints,
    ints,
    longs,
    longs,
    st.booleans(),
)

BODY_STRATEGIES: dict[type[Any], st.SearchStrategy[Any]] = {
    HeartbeatData: heartbeats,
    TopicRouteData: routes,
    TopicConfigSerializeWrapper: wrappers,
    DataVersion: versions,
    RegisterBrokerBody: register_bodies,
    ClusterInfo: st.builds(
        ClusterInfo,
        st.dictionaries(names, broker_datas, max_size=2),
        st.dictionaries(names, st.lists(names, max_size=2).map(tuple), max_size=2),
    ),
    TopicList: st.builds(TopicList, st.lists(names, max_size=3).map(tuple), st.none() | names),
    KVTable: st.builds(KVTable, st.dictionaries(names, names, max_size=3)),
    GroupList: st.builds(GroupList, st.lists(names, max_size=3).map(tuple)),
    ConsumerListBody: st.builds(ConsumerListBody, st.lists(names, max_size=3).map(tuple)),
    LockBatchRequestBody: st.builds(
        LockBatchRequestBody, names, names, st.lists(queues, max_size=3).map(tuple)
    ),
    UnlockBatchRequestBody: st.builds(
        UnlockBatchRequestBody, names, names, st.lists(queues, max_size=3).map(tuple)
    ),
    LockBatchResponseBody: st.builds(
        LockBatchResponseBody, st.lists(queues, max_size=3).map(tuple)
    ),
    ResetOffsetBody: st.builds(ResetOffsetBody, st.dictionaries(queues, longs, max_size=3)),
    GetConsumerStatusBody: st.builds(
        GetConsumerStatusBody,
        st.dictionaries(queues, longs, max_size=3),
        st.dictionaries(names, st.dictionaries(queues, longs, max_size=2), max_size=2),
    ),
    ConsumeStats: st.builds(
        ConsumeStats, st.dictionaries(queues, offset_wrappers, max_size=3), doubles
    ),
    TopicStatsTable: st.builds(
        TopicStatsTable,
        st.dictionaries(queues, st.builds(TopicOffset, longs, longs, longs), max_size=3),
    ),
    ProducerConnection: st.builds(
        ProducerConnection, st.lists(connections_, max_size=2).map(tuple)
    ),
    ConsumerConnection: st.builds(
        ConsumerConnection,
        st.lists(connections_, max_size=2).map(tuple),
        st.dictionaries(names, subscriptions, max_size=2),
        st.sampled_from(ConsumeType),
        st.sampled_from(MessageModel),
        st.sampled_from(ConsumeFromWhere),
    ),
    ConsumerRunningInfo: st.builds(
        ConsumerRunningInfo,
        st.dictionaries(names, names, max_size=3),
        st.lists(subscriptions, max_size=2).map(tuple),
        st.dictionaries(queues, process_queues, max_size=2),
        st.dictionaries(names, statuses, max_size=2),
        st.none() | names,
    ),
    SubscriptionGroupConfig: group_configs,
    SubscriptionGroupWrapper: st.builds(
        SubscriptionGroupWrapper,
        st.lists(group_configs, max_size=3).map(lambda gs: {g.group_name: g for g in gs}),
        versions,
    ),
}
BODY_CLASSES = sorted(BODY_STRATEGIES, key=lambda c: c.__name__)
#: Bodies with maps keyed by MessageQueue, which fastjson writes with object keys.
MQ_KEYED = {
    ResetOffsetBody,
    ConsumeStats,
    TopicStatsTable,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
}
json_values = st.recursive(
    st.none() | st.booleans() | longs | doubles | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


# --- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40)
@given(data=st.data())
def test_round_trip(cls: type[Body], data: st.DataObject) -> None:
    body = data.draw(BODY_STRATEGIES[cls])
    encoded = body.to_json()
    if cls not in MQ_KEYED:
        json.loads(encoded)  # standard JSON, not only our dialect
    assert cls.from_json(encoded) == body


@given(routes)
def test_route_round_trips_in_both_key_styles(route: TopicRouteData) -> None:
    quoted, bare = route.to_json(), route.to_json(unquoted_int_keys=True)
    assert TopicRouteData.from_json(quoted) == route == TopicRouteData.from_json(bare)
    assert json.loads(quoted) == json.loads(_quote_int_keys(bare))


def _quote_int_keys(data: bytes) -> bytes:
    return fastjson.dumps(fastjson.loads(data)).encode()


@given(BODY_STRATEGIES[ClusterInfo])
def test_cluster_info_round_trips_unquoted(info: ClusterInfo) -> None:
    assert ClusterInfo.from_json(info.to_json(unquoted_int_keys=True)) == info


@given(BODY_STRATEGIES[ResetOffsetBody])
def test_reset_offset_list_form_round_trips(body: ResetOffsetBody) -> None:
    listed = body.to_json(list_form=True)
    assert isinstance(json.loads(listed)["offsetTable"], list)
    assert ResetOffsetBody.from_json(listed) == body


@given(register_bodies)
def test_compressed_register_body_round_trips(body: RegisterBrokerBody) -> None:
    decoded = RegisterBrokerBody.decode(body.encode_compressed(), compressed=True)
    table = body.topic_config_serialize_wrapper.topic_config_table
    # The compressed form carries neither topicSysFlag nor order (TopicConfig.encode).
    expected = {
        name: TopicConfig(
            c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, c.topic_filter_type
        )
        for name, c in table.items()
    }
    assert decoded.topic_config_serialize_wrapper.topic_config_table == expected
    assert (
        decoded.topic_config_serialize_wrapper.data_version
        == body.topic_config_serialize_wrapper.data_version
    )
    assert decoded.filter_server_list == body.filter_server_list
    assert RegisterBrokerBody.decode(body.to_json(), compressed=False) == body


# --- exact Java output --------------------------------------------------------------------


def test_route_json_is_exactly_the_reference_form() -> None:
    route = TopicRouteData(
        queue_datas=(QueueData("broker-a", 4, 4, Perm.READ | Perm.WRITE, 0),),
        broker_datas=(BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.5:10911"}),),
        order_topic_conf="broker-a:4",
    )
    assert route.to_json() == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"orderTopicConf":"broker-a:4",'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4}]}'
    )
    assert b'"brokerAddrs":{0:"10.0.0.5:10911"}' in route.to_json(unquoted_int_keys=True)


def test_topic_config_wrapper_is_the_reference_form() -> None:
    wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", 4, 4)}, DataVersion(3, 1700))
    assert wrapper.to_json() == (
        b'{"dataVersion":{"counter":3,"timestamp":1700},"topicConfigTable":{"T":{"order":false,'
        b'"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T",'
        b'"topicSysFlag":0,"writeQueueNums":4}}}'
    )
    assert TopicConfig("T", 4, 4).encode() == "T 4 4 6 SINGLE_TAG"
    assert DataVersion(3, 1700).next_version(1800) == DataVersion(4, 1800)


def test_cluster_info_in_java_name_server_form() -> None:
    # No capture holds a 106 answer; this is docs/protocol.md's, which a Java
    # name server always writes with unquoted broker ids.
    body = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"}},'
        b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    info = ClusterInfo.from_json(body)
    broker = info.broker_addr_table["broker-a"]
    assert broker.broker_addrs == {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"}
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
    assert info.to_json(unquoted_int_keys=True) == body
    assert b'{"0":"10.0.0.5:10911","1":' in info.to_json()


def test_mq_keyed_maps_use_fastjson_object_keys() -> None:
    stats = ConsumeStats({MessageQueue("T", "b", 0): OffsetWrapper(10, 7, 99)}, 2.5)
    assert stats.to_json() == (
        b'{"consumeTps":2.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
        b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":99}}}'
    )
    assert stats.total_diff == 3
    # The standard-JSON variant (keys are strings holding the JSON text) reads the same.
    quoted = json.dumps(
        {
            "consumeTps": 2.5,
            "offsetTable": {
                '{"brokerName":"b","queueId":0,"topic":"T"}': {
                    "brokerOffset": 10,
                    "consumerOffset": 7,
                    "lastTimestamp": 99,
                }
            },
        }
    ).encode()
    assert ConsumeStats.from_json(quoted) == stats


# --- real bodies from the captures --------------------------------------------------------


def test_cpp_heartbeat_from_capture() -> None:
    lines = (CAPTURES / "capture.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    (event,) = [e for e in events if e["event"] == "request" and e["header"]["code"] == 34][:1]
    body = event["body"].encode()
    assert len(body) == event["body_len"]
    heartbeat = HeartbeatData.from_json(body)
    assert heartbeat.client_id == "24420-127.0.0.1@DEFAULT"
    assert heartbeat.producer_data_set == (ProducerData("PG_TEST"),)
    (consumer,) = heartbeat.consumer_data_set
    assert consumer.group_name == "CG_TEST"
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    retry, topic = consumer.subscription_data_set
    assert (retry.topic, retry.sub_string, retry.tags_set) == ("%RETRY%CG_TEST", "*", ())
    assert (topic.topic, topic.sub_string) == ("TestTopic", "TagA || TagB")
    assert topic.tags_set == ("TagA", "TagB") and topic.code_set == (0, 0)
    assert topic.sub_version == 1795252771173 and topic.expression_type == "TAG"


def test_cpp_heartbeats_with_omitted_sets_and_newline() -> None:
    bodies = [
        b'{"clientID":"18948-127.0.0.1@DEFAULT","producerDataSet":[{"groupName":"PID_anchor_smoke"}]}\n',
        b'{"clientID":"18948-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,'
        b'"consumeType":0,"groupName":"CID_anchor_smoke_pull","messageModel":1}]}\n',
    ]
    producer, puller = (HeartbeatData.from_json(b) for b in bodies)
    assert (
        producer.consumer_data_set == ()
        and producer.producer_data_set[0].group_name == "PID_anchor_smoke"
    )
    (consumer,) = puller.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert consumer.subscription_data_set == ()


def _listed_route_bodies(name: str) -> list[bytes]:
    listing = parse_listing(REAL_BROKER / f"{name}.decoded.txt")
    out = []
    for frames in listing.streams.values():
        for frame in frames:
            if frame.kind == "RESP" and frame.body_preview.startswith('{"brokerDatas"'):
                assert len(frame.body_preview) == frame.body_len  # listed in full
                out.append(frame.body_preview.encode())
    return out


@pytest.mark.parametrize(
    ("name", "unquoted"),
    [("cpp-client-smoke", True), ("ali-ons-smoke", True), ("java-client-smoke", False)],
)
def test_real_broker_route_answers(name: str, unquoted: bool) -> None:
    bodies = _listed_route_bodies(name)
    assert bodies
    for body in bodies:
        assert (b'{0:"' in body) is unquoted
        route = TopicRouteData.from_json(body)
        (broker,) = route.broker_datas
        assert broker.master_addr == "127.0.0.1:10911" and broker.cluster == "DefaultCluster"
        (queues_,) = route.queue_datas
        assert queues_.broker_name == "broker-a" and queues_.read_queue_nums in (1, 4, 8)
        assert route.to_json(unquoted_int_keys=unquoted) == body  # byte for byte


@cache
def _pcap_exchanges(name: str) -> list[tuple[RemotingCommand, RemotingCommand | None]]:
    """Each request of a capture with its response (None for oneway or unanswered)."""
    out = []
    for conn in connections(read_segments(REAL_BROKER / f"{name}.pcap")):
        up, down = decode_all(conn.to_server), decode_all(conn.to_client)
        answers = {c.opaque: c for c in down if c.is_response}
        out += [(c, answers.get(c.opaque)) for c in up if not c.is_response]
    return out


def _requests(name: str, code: int) -> Iterator[tuple[RemotingCommand, RemotingCommand | None]]:
    return ((req, resp) for req, resp in _pcap_exchanges(name) if req.code == code)


def test_java_heartbeat_from_pcap() -> None:
    (request, _), *_ = _requests("java-client-smoke", RequestCode.HEART_BEAT)
    heartbeat = HeartbeatData.from_json(request.body)
    assert heartbeat.client_id == "192.0.2.2@1795252948619"
    assert ProducerData("CLIENT_INNER_PRODUCER") in heartbeat.producer_data_set
    consumer = next(c for c in heartbeat.consumer_data_set if c.group_name == "CID_java_smoke")
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    sub = next(s for s in consumer.subscription_data_set if s.topic == "AnchorJava")
    assert sub.sub_string == "*" and sub.expression_type == "TAG" and sub.sub_version > 0
    assert HeartbeatData.from_json(heartbeat.to_json()) == heartbeat


def test_ali_ons_heartbeat_from_pcap() -> None:
    (request, _), *_ = _requests("ali-ons-smoke", RequestCode.HEART_BEAT)
    heartbeat = HeartbeatData.from_json(request.body)
    assert heartbeat.client_id == "127.0.0.1@24742"
    consumer = next(c for c in heartbeat.consumer_data_set if c.group_name == "CID_anchor_node")
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert {s.topic for s in consumer.subscription_data_set} >= {"AnchorNode"}


@pytest.mark.parametrize("name", ["cpp-client-smoke", "java-client-smoke"])
def test_real_register_broker_bodies(name: str) -> None:
    registrations = list(_requests(name, RequestCode.REGISTER_BROKER))
    assert registrations
    for request, _ in registrations:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        assert header.body_crc32 == zlib.crc32(request.body) & 0x7FFFFFFF  # UtilAll.crc32
        body = RegisterBrokerBody.decode(request.body, compressed=header.compressed)
        table = body.topic_config_serialize_wrapper.topic_config_table
        assert table["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18
        assert table["TBW102"].perm == Perm.READ | Perm.WRITE | Perm.INHERIT
        assert body.to_json() == request.body  # byte for byte, table order kept
        assert (
            RegisterBrokerBody.decode_compressed(body.encode_compressed()).filter_server_list == ()
        )


@pytest.mark.parametrize("name", ["cpp-client-smoke", "java-client-smoke", "ali-ons-smoke"])
def test_real_answers_from_pcap(name: str) -> None:
    lists = [
        ConsumerListBody.from_json(resp.body)
        for _, resp in _requests(name, RequestCode.GET_CONSUMER_LIST_BY_GROUP)
        if resp is not None and resp.code == ResponseCode.SUCCESS
    ]
    assert lists and all(len(cl.consumer_id_list) == 1 for cl in lists)
    routes_ = [
        TopicRouteData.from_json(resp.body)
        for _, resp in _requests(name, RequestCode.GET_ROUTEINFO_BY_TOPIC)
        if resp is not None and resp.code == ResponseCode.SUCCESS
    ]
    assert routes_ and all(r.broker_datas[0].broker_name == "broker-a" for r in routes_)


# --- C++ dialect details ------------------------------------------------------------------


def test_cpp_consumer_running_info() -> None:
    # ConsumerRunningInfo::encode: styled (multi-line) MessageQueue keys, offsets as strings.
    body = (
        b'{"mqTable":{{\n   "brokerName" : "broker-a",\n   "queueId" : 1,\n   "topic" : "T"\n}:'
        b'{\n   "cachedMsgCount" : 2,\n   "commitOffset" : "12",\n   "droped" : false,\n'
        b'   "lastPullTimestamp" : "1700",\n   "locked" : true\n}\n},"jstack":"",'
        b'"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_THREADPOOL_CORE_SIZE":"20"},'
        b'"subscriptionSet":[{"subString":"*","subVersion":"123","topic":"T"}]}\n'
    )
    info = ConsumerRunningInfo.from_json(body)
    pqi = info.mq_table[MessageQueue("T", "broker-a", 1)]
    assert (pqi.commit_offset, pqi.cached_msg_count, pqi.last_pull_timestamp) == (12, 2, 1700)
    assert pqi.locked and not pqi.dropped
    assert info.properties["PROP_THREADPOOL_CORE_SIZE"] == "20"
    assert info.subscription_set == (SubscriptionData("T", "*", sub_version=123),)
    assert info.jstack == ""
    empty = b'{"mqTable":},"jstack":"","properties":{},"subscriptionSet":[]}\n'
    assert ConsumerRunningInfo.from_json(empty).mq_table == {}


def test_cpp_lock_body_and_reset_offset_list() -> None:
    lock = LockBatchRequestBody.from_json(
        b'{"clientId":"c","consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":2,"topic":"T"}]}\n'
    )
    assert lock.mq_set == (MessageQueue("T", "b", 2),)
    reset = ResetOffsetBody.from_json(
        b'{"offsetTable":[{"brokerName":"b","offset":42,"queueId":"2","topic":"T"}]}'
    )
    assert reset.offset_table == {MessageQueue("T", "b", 2): 42}


# --- compressed registration layout -------------------------------------------------------


def _layout(*chunks: bytes | int) -> bytes:
    out = b""
    for chunk in chunks:
        out += (
            struct.pack(">i", chunk)
            if isinstance(chunk, int)
            else struct.pack(">i", len(chunk)) + chunk
        )
    return out


def test_compressed_register_body_layout() -> None:
    raw = _layout(
        b'{"counter":5,"timestamp":77}',
        2,
        b"A 4 4 6 SINGLE_TAG",
        b"B 1 2 7 SINGLE_TAG",
        b'["fs:1"]',
    )
    body = RegisterBrokerBody.decode_compressed(zlib.compress(raw, 9))
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.data_version == DataVersion(5, 77)
    assert wrapper.topic_config_table == {
        "A": TopicConfig("A", 4, 4, 6),
        "B": TopicConfig("B", 1, 2, 7),
    }
    assert body.filter_server_list == ("fs:1",)
    assert zlib.decompress(body.encode_compressed()) == raw


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"not zlib at all", "does not inflate"),
        (zlib.compress(b"\x00\x00"), "truncated"),
        (zlib.compress(_layout(b"{}", -1)), "negative topic count"),
        (zlib.compress(_layout(b"{}", 1, b"A 4 4")), "5 space-separated"),
        (zlib.compress(_layout(b"{}", 1, b"A x 4 6 SINGLE_TAG")), "non-numeric"),
        (zlib.compress(_layout(b"{}", 1, b"A 4 4 6 NO_TAG")), "filter type"),
        (zlib.compress(_layout(b"{}", 2, b"A 4 4 6 SINGLE_TAG")), "truncated"),
        (zlib.compress(_layout(b"[]", 0, b"[]")), "DataVersion must be a JSON object"),
        (zlib.compress(_layout(b"{}", 0, b"{oops")), "filterServerList"),
        (zlib.compress(struct.pack(">i", 99) + b"{}"), "overruns"),
    ],
)
def test_bad_compressed_register_bodies(raw: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        RegisterBrokerBody.decode_compressed(raw)


# --- malformed bodies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "body", "match"),
    [
        (HeartbeatData, b"", "not valid JSON"),
        (HeartbeatData, b"[1]", "must be a JSON object"),
        (HeartbeatData, b'{"producerDataSet":[]}', "'clientID'"),
        (HeartbeatData, b'{"clientID":"c","consumerDataSet":{}}', "must be an array"),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":7,'
            b'"messageModel":1,"consumeFromWhere":0}]}',
            "not a ConsumeType",
        ),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":"PUSH",'
            b'"messageModel":1,"consumeFromWhere":0}]}',
            "not a ConsumeType",
        ),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":1,'
            b'"messageModel":1,"consumeFromWhere":0,"subscriptionDataSet":[{"topic":"T",'
            b'"subVersion":"soon"}]}]}',
            "'subVersion' must be an integer",
        ),
        (
            TopicRouteData,
            b'{"brokerDatas":[{"brokerAddrs":{"m":"x"},"brokerName":"b"}]}',
            "brokerAddrs key",
        ),
        (
            TopicRouteData,
            b'{"queueDatas":[{"brokerName":"b","perm":true,"readQueueNums":1,"writeQueueNums":1}]}',
            "'perm' must be an integer",
        ),
        (TopicRouteData, b'{"queueDatas":[{"brokerName":"b"}]}', "'readQueueNums'"),
        (ClusterInfo, b'{"clusterAddrTable":{"c":"broker-a"}}', "must be an array"),
        (ConsumeStats, b'{"offsetTable":{"T":{}}}', "not a MessageQueue"),
        (ConsumeStats, b'{"offsetTable":{{"topic":"T"}:{}}}', "'brokerName'"),
        (
            ResetOffsetBody,
            b'{"offsetTable":[{"brokerName":"b","queueId":0,"topic":"T"}]}',
            "'offset'",
        ),
        (KVTable, b'{"table":{"k":[1]}}', "must be a string"),
        (ConsumerListBody, b'{"consumerIdList":[1]}', "must hold strings"),
        (ConsumerRunningInfo, b'{"properties":{"k":{}}}', "property 'k'"),
        (TopicConfigSerializeWrapper, b'{"topicConfigTable":{"T":{"perm":6}}}', "'topicName'"),
        (RegisterBrokerBody, b'{"topicConfigSerializeWrapper":[]}', "must be an object"),
    ],
)
def test_bad_bodies_raise_body_error(cls: type[Body], body: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match) as info:
        cls.from_json(body)
    assert info.value.response_code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40)
@given(data=st.one_of(st.binary(max_size=64), json_values.map(lambda v: json.dumps(v).encode())))
def test_any_input_parses_or_raises_body_error(cls: type[Body], data: bytes) -> None:
    with contextlib.suppress(BodyError):  # anything else fails the test
        cls.from_json(data)


@settings(max_examples=60)
@given(body=heartbeats, data=st.data())
def test_structurally_damaged_bodies_raise_body_error(
    body: HeartbeatData, data: st.DataObject
) -> None:
    """Replace one member of a valid body with a value of another kind."""
    obj = json.loads(body.to_json())
    key = data.draw(st.sampled_from(sorted(obj)))
    obj[key] = data.draw(json_values.filter(lambda v: type(v) is not type(obj[key])))
    with contextlib.suppress(BodyError):  # anything else fails the test
        HeartbeatData.from_json(json.dumps(obj).encode())


def test_body_error_is_a_protocol_error() -> None:
    assert issubclass(BodyError, ProtocolError)
    assert BodyError("x").response_code == ResponseCode.SYSTEM_ERROR
