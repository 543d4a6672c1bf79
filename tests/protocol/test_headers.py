"""Typed headers: round trips, required fields, client value styles and golden captures."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rocklet.protocol.headers as headers_pkg
from rocklet.protocol import HeaderError, RemotingCommand, RequestCode, ResponseCode, SerializeType
from rocklet.protocol.header_codec import decode_header
from rocklet.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    Header,
    NotifyConsumerIdsChangedRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    RegisterBrokerRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    TransactionType,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    parse_send_header,
)
from rocklet.protocol.headers.base import INT32, INT64
from tests.conftest import CAPTURES
from tests.protocol.listing import ListedFrame, parse_listing

HEADER_CLASSES: list[type[Header]] = sorted(
    (
        obj
        for name in headers_pkg.__all__
        if isinstance(obj := getattr(headers_pkg, name), type)
        and issubclass(obj, Header)
        and obj is not Header
    ),
    key=lambda cls: cls.__name__,
)
#: ACL signing fields every C++ request carries (docs/protocol.md); no header has them.
ACL_KEYS = {"AccessKey", "OnsChannel", "Signature"}


class FieldInfo(typing.NamedTuple):
    attr: str
    key: str
    base: type
    optional: bool
    required: bool
    bounds: tuple[int, int]


def field_infos(cls: type[Header]) -> list[FieldInfo]:
    """What each field of a header class is, read from its dataclass declaration."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = next(a for a in args if a is not type(None))
        required = f.default is dataclasses.MISSING
        bounds = f.metadata.get("bounds", INT64)
        out.append(
            FieldInfo(f.name, f.metadata["wire"], base, type(None) in args, required, bounds)
        )
    return out


def header_strategy(cls: type[Header]) -> st.SearchStrategy[Header]:
    def values(info: FieldInfo) -> st.SearchStrategy[Any]:
        if info.base is int:
            return st.integers(*info.bounds)
        return st.text() if info.base is str else st.booleans()  # text(): no surrogates

    fields = {
        info.attr: (st.none() | values(info)) if info.optional else values(info)
        for info in field_infos(cls)
    }
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def example_ext(cls: type[Header]) -> dict[str, str]:
    values = {str: "x", bool: "true"}
    return {
        info.key: str(max(7, info.bounds[0])) if info.base is int else values[info.base]
        for info in field_infos(cls)
    }


# --- every header class -------------------------------------------------------------------


def test_every_request_family_has_headers() -> None:
    names = {cls.__name__ for cls in HEADER_CLASSES}
    assert len(names) >= 50
    assert {
        "SendMessageRequestHeader",
        "PullMessageRequestHeader",
        "CreateTopicRequestHeader",
    } <= names


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=30)
@given(data=st.data())
def test_round_trip(cls: type[Header], data: st.DataObject) -> None:
    header = data.draw(header_strategy(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    infos = field_infos(cls)
    assert set(ext) == {i.key for i in infos if getattr(header, i.attr) is not None}
    assert cls.from_ext_fields(ext) == header


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_headers_are_frozen_and_slotted(cls: type[Header]) -> None:
    header = cls.from_ext_fields(example_ext(cls))
    assert not hasattr(header, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(header, field_infos(cls)[0].attr, None)


REQUIRED_FIELDS = [
    (cls, info.key) for cls in HEADER_CLASSES for info in field_infos(cls) if info.required
]


@pytest.mark.parametrize(("cls", "key"), REQUIRED_FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_missing_required_field_is_named(cls: type[Header], key: str) -> None:
    ext = example_ext(cls)
    cls.from_ext_fields(ext)  # complete: fine
    del ext[key]
    with pytest.raises(HeaderError, match=f"<{key}> is null"):
        cls.from_ext_fields(ext)


def test_optional_fields_take_java_defaults() -> None:
    minimal = {"producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102"}
    minimal |= {"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0"}
    minimal |= {"bornTimestamp": "1", "flag": "0"}
    header = SendMessageRequestHeader.from_ext_fields(minimal)
    assert header.properties is None
    assert (header.reconsume_times, header.unit_mode, header.batch) == (0, False, False)
    assert header.max_reconsume_times is None
    unregister = UnregisterClientRequestHeader.from_ext_fields({"clientID": "c"})
    assert unregister.producer_group is None and unregister.consumer_group is None


@pytest.mark.parametrize(
    ("cls", "key", "value"),
    [
        (PullMessageRequestHeader, "queueOffset", "ten"),
        (PullMessageRequestHeader, "queueId", "1.5"),
        (ResetOffsetRequestHeader, "isForce", "maybe"),
        (EndTransactionRequestHeader, "fromTransactionCheck", "yes"),
    ],
)
def test_ill_typed_values_are_header_errors(cls: type[Header], key: str, value: str) -> None:
    ext = example_ext(cls) | {key: value}
    with pytest.raises(HeaderError, match=f"<{key}>"):
        cls.from_ext_fields(ext)


INT_FIELDS = [
    (cls, info) for cls in HEADER_CLASSES for info in field_infos(cls) if info.base is int
]
STR_FIELDS = [
    (cls, info) for cls in HEADER_CLASSES for info in field_infos(cls) if info.base is str
]


def _field_id(value: object) -> str:
    return value.key if isinstance(value, FieldInfo) else str(getattr(value, "__name__", ""))


@pytest.mark.parametrize(("cls", "info"), INT_FIELDS, ids=_field_id)
def test_every_number_is_held_to_its_bounds(cls: type[Header], info: FieldInfo) -> None:
    low, high = info.bounds
    assert INT64[0] <= low < high <= INT64[1]  # nothing wider than Java's long
    for edge in (low, high):
        parsed = cls.from_ext_fields(example_ext(cls) | {info.key: str(edge)})
        assert getattr(parsed, info.attr) == edge
    for outside in (low - 1, high + 1, 10**30):
        if low <= outside <= high:
            continue
        with pytest.raises(HeaderError, match=f"<{info.key}>.*{outside}") as raised:
            cls.from_ext_fields(example_ext(cls) | {info.key: str(outside)})
        assert raised.value.response_code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize(("cls", "info"), STR_FIELDS, ids=_field_id)
def test_every_text_field_refuses_text_without_a_utf8_form(
    cls: type[Header], info: FieldInfo
) -> None:
    # A JSON "\ud800" escape, and a byte that is not UTF-8 as the codecs keep it.
    for bad in ("\ud800", "ab\udcff"):
        with pytest.raises(HeaderError, match=f"<{info.key}> is not valid UTF-8") as raised:
            cls.from_ext_fields(example_ext(cls) | {info.key: bad})
        assert ascii(bad) in str(raised.value)  # shown escaped: the remark encodes
    text = "Grüße-順序-\U0001f600"  # any real text still passes
    assert getattr(cls.from_ext_fields(example_ext(cls) | {info.key: text}), info.attr) == text


def test_bounds_match_the_java_types_of_the_hot_fields() -> None:
    pull = {i.key: i.bounds for i in field_infos(PullMessageRequestHeader)}
    assert pull["queueId"] == INT32 and pull["queueOffset"] == (0, 2**63 - 1)
    assert pull["maxMsgNums"] == (1, 2**31 - 1) and pull["sysFlag"] == (0, 0x1F)
    send = {i.key: i.bounds for i in field_infos(SendMessageRequestHeader)}
    assert send["queueId"] == INT32 and send["sysFlag"] == (0, 0x7FF)
    assert send["reconsumeTimes"] == (0, 2**31 - 1)
    # The V2 spelling reads into the V1 class with the same bounds.
    v2 = SendMessageRequestHeader("PG", "T", "TBW102", 4, 0, 0, 1, 0).to_v2().to_ext_fields() | {
        "e": str(2**31)
    }
    with pytest.raises(HeaderError, match="<e> is out of the range"):
        parse_send_header(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=v2))


def test_header_errors_answer_system_error() -> None:
    with pytest.raises(HeaderError) as info:
        GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T"})
    assert info.value.response_code == ResponseCode.SYSTEM_ERROR


# --- what clients really send -------------------------------------------------------------


def decode_json_request(code: int, ext: Mapping[str, object]) -> RemotingCommand:
    """A request as a client frames it (JSON types kept), through the real header codec."""
    header = {"code": code, "extFields": dict(ext), "flag": 0, "language": "CPP"}
    header |= {"opaque": 1, "remark": "", "version": 63}
    return decode_header(SerializeType.JSON, (json.dumps(header) + "\n").encode(), b"")


CPP_SEND: dict[str, object] = {
    "batch": "1",
    "bornTimestamp": "1795252771171",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": 4,
    "flag": 0,
    "producerGroup": "PG_TEST",
    "properties": "WAIT\u0001true\u0002",
    "queueId": 3,
    "reconsumeTimes": "0",
    "sysFlag": 0,
    "topic": "TestTopic",
    "unitMode": "0",
}


def test_cpp_send_numbers_and_string_booleans() -> None:
    header = parse_send_header(decode_json_request(RequestCode.SEND_MESSAGE, CPP_SEND))
    assert header.queue_id == 3 and header.default_topic_queue_nums == 4
    assert header.born_timestamp == 1795252771171
    assert header.batch is True and header.unit_mode is False
    assert header.properties == "WAIT\x01true\x02"


@pytest.mark.parametrize(
    ("raw", "batch"),
    [("1", True), ("true", True), ("TRUE", True), ("True", True), ("0", False), ("false", False)],
)
def test_batch_flag_accepts_cpp_and_java_spellings(raw: str, batch: bool) -> None:
    cmd = decode_json_request(RequestCode.SEND_MESSAGE, CPP_SEND | {"batch": raw})
    assert parse_send_header(cmd).batch is batch


def test_ali_ons_v2_with_raw_js_types() -> None:
    ext = {"a": "PID", "b": "T", "c": "TBW102", "d": 4, "e": 3, "f": 0, "g": 1795252804452}
    ext |= {"h": 0, "i": "TAGS\u0001tagA\u0002", "j": 0, "k": False}
    header = parse_send_header(decode_json_request(RequestCode.SEND_MESSAGE_V2, ext))
    expected = SendMessageRequestHeader("PID", "T", "TBW102", 4, 3, 0, 1795252804452, 0)
    assert header == dataclasses.replace(expected, properties="TAGS\x01tagA\x02")


def test_end_transaction_from_cpp() -> None:
    ext: dict[str, object] = {"producerGroup": "PG", "tranStateTableOffset": "5"}
    ext |= {
        "commitLogOffset": "1234",
        "commitOrRollback": 8,
        "fromTransactionCheck": "1",
        "msgId": "UNIQ",
    }
    header = EndTransactionRequestHeader.from_ext_fields(
        decode_json_request(RequestCode.END_TRANSACTION, ext).ext_fields
    )
    assert header.from_transaction_check is True
    assert header.transaction_type is TransactionType.COMMIT
    assert header.transaction_id is None
    unknown = dataclasses.replace(header, commit_or_rollback=3)
    assert unknown.transaction_type is None


def test_pull_sys_flag_bits() -> None:
    ext = {"consumerGroup": "G", "topic": "T", "queueId": 0, "queueOffset": "2", "sysFlag": 7}
    header = PullMessageRequestHeader.from_ext_fields(
        decode_json_request(RequestCode.PULL_MESSAGE, ext).ext_fields
    )
    assert (
        header.flags == PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    )
    assert header.subscription is None and header.expression_type is None
    assert header.max_msg_nums == 32


def test_query_message_unique_key_flag() -> None:
    ext = {"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0"}
    ext |= {"endTimestamp": "9", "_UNIQUE_KEY_QUERY": "true"}
    header = QueryMessageRequestHeader.from_ext_fields(ext)
    assert header.unique_key_query is True
    assert header.to_ext_fields()["_UNIQUE_KEY_QUERY"] == "true"


def test_send_response_emitted_as_java_does() -> None:
    ext = SendMessageResponseHeader("7F00000100002A9F0000000000000000", 0, 0).to_ext_fields()
    assert ext == {
        "msgId": "7F00000100002A9F0000000000000000",
        "queueId": "0",
        "queueOffset": "0",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }


# --- V1 <-> V2 ----------------------------------------------------------------------------


@given(header_strategy(SendMessageRequestHeader))
def test_v1_v2_conversion_round_trips(header: Header) -> None:
    assert isinstance(header, SendMessageRequestHeader)
    v2 = header.to_v2()
    assert v2 == SendMessageRequestHeaderV2.from_v1(header)
    assert v2.to_v1() == header
    assert set(v2.to_ext_fields()) <= set("abcdefghijklmn")
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_REPLY_MESSAGE_V2):
        cmd = RemotingCommand(code=code, ext_fields=v2.to_ext_fields())
        assert parse_send_header(cmd) == header
    v1_cmd = RemotingCommand(code=RequestCode.SEND_MESSAGE, ext_fields=header.to_ext_fields())
    assert parse_send_header(v1_cmd) == header


def test_v2_letters_map_to_v1_fields() -> None:
    v2 = SendMessageRequestHeaderV2("a", "b", "c", 4, 5, 6, 7, 8, "i", 10, True, 12, True, "n")
    assert v2.to_v1() == SendMessageRequestHeader(
        producer_group="a",
        topic="b",
        default_topic="c",
        default_topic_queue_nums=4,
        queue_id=5,
        sys_flag=6,
        born_timestamp=7,
        flag=8,
        properties="i",
        reconsume_times=10,
        unit_mode=True,
        max_reconsume_times=12,
        batch=True,
        broker_name="n",
    )


def test_batch_code_is_always_a_batch() -> None:
    v2 = SendMessageRequestHeaderV2("PG", "T", "TBW102", 4, 0, 0, 1, 0)
    cmd = RemotingCommand(code=RequestCode.SEND_BATCH_MESSAGE, ext_fields=v2.to_ext_fields())
    assert parse_send_header(cmd).batch is True


@pytest.mark.parametrize("code", [RequestCode.PULL_MESSAGE, 9999])
def test_parse_send_header_refuses_other_codes(code: int) -> None:
    cmd = RemotingCommand(code=code, ext_fields=example_ext(SendMessageRequestHeader))
    with pytest.raises(HeaderError, match=f"request code {int(code)}"):
        parse_send_header(cmd)


def test_v1_keys_under_a_v2_code_are_refused() -> None:
    cmd = decode_json_request(RequestCode.SEND_MESSAGE_V2, CPP_SEND)
    with pytest.raises(HeaderError, match="<a> is null"):
        parse_send_header(cmd)


# --- golden: every recorded request and response ------------------------------------------

REQUEST_HEADERS: dict[int, type[Header]] = {
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
}
#: Response headers by the request code they answer (success and pull statuses).
RESPONSE_HEADERS: dict[int, type[Header]] = {
    RequestCode.SEND_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.PULL_MESSAGE: PullMessageResponseHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
}
NO_HEADER_CODES = {RequestCode.HEART_BEAT}


def expected_value(raw: object, base: type) -> object:
    """What a field should hold, from the JSON value the client put on the wire."""
    if base is bool:
        return raw if isinstance(raw, bool) else str(raw).lower() in ("true", "1")
    if base is int:
        return int(str(raw))
    return raw if isinstance(raw, str) else json.dumps(raw)


def check_typed_header(
    cls: type[Header], ext_as_sent: Mapping[str, object], ext: Mapping[str, str]
) -> None:
    header = cls.from_ext_fields(ext)
    infos = {info.key: info for info in field_infos(cls)}
    unknown = set(ext_as_sent) - set(infos) - ACL_KEYS
    assert not unknown, f"{cls.__name__} drops recorded fields {unknown}"
    for key, raw in ext_as_sent.items():
        if key in infos:
            info = infos[key]
            assert getattr(header, info.attr) == expected_value(raw, info.base), key
    if cls in (SendMessageRequestHeader, SendMessageRequestHeaderV2):
        code = RequestCode.SEND_MESSAGE if cls is SendMessageRequestHeader else 310
        converted = parse_send_header(RemotingCommand(code=code, ext_fields=ext))
        assert converted.topic and converted.producer_group


def jsonl_requests(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["event"] == "request":
            yield event["header"]["code"], {k: typed[1] for k, typed in event["extFields"].items()}


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.jsonl")), ids=lambda p: p.stem)
def test_golden_cpp_capture_requests(path: Path) -> None:
    checked = 0
    for code, ext in jsonl_requests(path):
        cmd = decode_json_request(code, ext)
        if code not in NO_HEADER_CODES:
            check_typed_header(REQUEST_HEADERS[code], ext, cmd.ext_fields)
            checked += 1
    assert checked > 0


def listed_frames(path: Path) -> Iterator[tuple[ListedFrame, ListedFrame | None]]:
    """Every listed request, and every response with the request it answers."""
    listing = parse_listing(path)
    requests: dict[tuple[int, int], ListedFrame] = {}
    for (port, _direction), frames in listing.streams.items():
        for frame in frames:
            if frame.kind == "REQ":
                requests[(port, frame.opaque)] = frame
                yield frame, None
    for (port, _direction), frames in listing.streams.items():
        for frame in frames:
            if frame.kind == "RESP" and (port, frame.opaque) in requests:
                yield frame, requests[(port, frame.opaque)]


LISTINGS = sorted((CAPTURES / "real-broker").glob("*.decoded.txt"))


@pytest.mark.parametrize("path", LISTINGS, ids=lambda p: p.stem)
def test_golden_real_broker_frames(path: Path) -> None:
    requests: set[int] = set()
    answered: set[int] = set()
    for frame, answers in listed_frames(path):
        cmd = decode_json_request(frame.code, frame.ext)
        if answers is None and frame.code not in NO_HEADER_CODES:
            check_typed_header(REQUEST_HEADERS[frame.code], frame.ext, cmd.ext_fields)
            requests.add(frame.code)
        elif answers is not None and frame.ext and answers.code in RESPONSE_HEADERS:
            check_typed_header(RESPONSE_HEADERS[answers.code], frame.ext, cmd.ext_fields)
            answered.add(answers.code)
    # Every listing has routes, pulls and offsets, and answers to pulls and offset queries.
    assert {11, 14, 105} <= requests
    assert {11, 14} <= answered


def test_golden_values_spot_check() -> None:
    """A few values read straight off the listings, independent of the generic check."""
    folder = CAPTURES / "real-broker"
    pulls = [
        PullMessageRequestHeader.from_ext_fields(decode_json_request(11, f.ext).ext_fields)
        for f, a in listed_frames(folder / "cpp-client-smoke.decoded.txt")
        if a is None and f.code == 11
    ]
    assert {p.sys_flag for p in pulls} >= {4, 6, 7}
    assert {p.suspend_timeout_millis for p in pulls} == {15000, 20000}
    java = folder / "java-client-smoke.decoded.txt"
    java_pulls = [f for f, a in listed_frames(java) if a is None and f.code == 11]
    header = PullMessageRequestHeader.from_ext_fields(
        decode_json_request(11, java_pulls[0].ext).ext_fields
    )
    assert header.expression_type == "TAG" and header.subscription is None
    assert header.flags == PullSysFlag.SUSPEND


@pytest.mark.parametrize("value", ["9" * 4000, "x" * 100_000, "\ud800" * 1000])
def test_a_refused_value_is_shown_short_and_escaped(value: str) -> None:
    # The remark echoes the value: a peer's megabyte must not come back as one.
    with pytest.raises(HeaderError) as raised:
        PullMessageRequestHeader.from_ext_fields(
            example_ext(PullMessageRequestHeader) | {"queueOffset": value}
        )
    remark = str(raised.value)
    assert "<queueOffset>" in remark and len(remark) < 200 and remark.isascii()
