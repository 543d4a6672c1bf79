"""ACL rules without a server: address patterns, permissions, the request-to-resource map."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.broker.acl.accounts import (
    DENY,
    PUB,
    SUB,
    AclConfigError,
    build_table,
    check_permission,
    parse_acl_document,
    parse_perm,
)
from rocklet.broker.acl.addresses import AddressPatternError, normalise_ip, parse_pattern
from rocklet.broker.acl.validator import AccessValidator, needed_perms
from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from tests.broker.wire_clients import consumer_heartbeat_body


@pytest.mark.parametrize(
    ("pattern", "ip", "expected"),
    [
        ("*", "10.1.2.3", True),
        ("*.*.*.*", "10.1.2.3", True),
        ("", "10.1.2.3", False),
        (None, "10.1.2.3", False),
        ("192.168.0.{1,2}", "192.168.0.2", True),
        ("192.168.0.{1,2}", "192.168.0.3", False),
        ("192.168.0.1,192.168.0.7", "192.168.0.7", True),
        ("192.168.1.1-5", "192.168.1.5", True),
        ("192.168.1.1-5", "192.168.1.6", False),
        ("192.168.1.*", "192.168.1.200", True),
        ("192.168.1.*", "192.168.2.1", False),
        ("192.168.*.*", "192.168.77.1", True),
        ("192.168.*", "192.168.77.1", True),  # Rocklet's short form
        ("192.168.1-3.*", "192.168.2.9", True),
        ("192.168.1-3.*", "192.168.4.9", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "127.0.0.2", False),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("2001:db8::{1,2}", "2001:db8::2", True),
        ("2001:db8::1-ff", "2001:db8::fe", True),
        ("2001:db8::1-ff", "2001:db8::1ff", False),
        ("2001:db8::*", "2001:db8::abcd", True),
        ("2001:db8::5:1-ff:*", "2001:db8::5:7:1", True),
        ("192.168.1.*", "::1", False),
    ],
)
def test_address_patterns(pattern: str | None, ip: str, expected: bool) -> None:
    assert parse_pattern(pattern).matches(ip) is expected


@pytest.mark.parametrize(
    "pattern", ["192.168.1", "300.1.1.1", "192.168.1.-5", "192.168.1.9-2", "1.2.3.4.{1", "abc"]
)
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AddressPatternError):
        parse_pattern(pattern)


def test_ipv4_mapped_peers_match_as_ipv4() -> None:
    assert normalise_ip("::ffff:10.0.0.1") == "10.0.0.1"
    assert normalise_ip("::1") == "::1"


def test_permission_bits() -> None:
    assert parse_perm("PUB|SUB") == PUB | SUB == parse_perm("SUB|PUB")
    assert parse_perm(None) == DENY == parse_perm("nonsense")
    assert check_permission(PUB, PUB | SUB)
    assert not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)


def _heartbeat(group: str, topics: list[str]) -> bytes:
    return consumer_heartbeat_body("c", group, *topics)


@pytest.mark.parametrize(
    ("code", "ext", "body", "expected"),
    [
        (RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "P"}, b"", {"T": PUB}),
        (RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}, b"", {"T": PUB}),
        (RequestCode.SEND_MESSAGE, {"topic": "%RETRY%G", "group": "G"}, b"", {"%RETRY%G": SUB}),
        (RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G", "a": "G"}, b"", {"%RETRY%G": SUB}),
        (RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"}, b"", {"%RETRY%G": SUB}),
        (
            RequestCode.PULL_MESSAGE,
            {"topic": "T", "consumerGroup": "G"},
            b"",
            {"T": SUB, "%RETRY%G": SUB},
        ),
        (RequestCode.QUERY_MESSAGE, {"topic": "T"}, b"", {"T": SUB}),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"topic": "T", "consumerGroup": "G"},
            b"",
            {"T": SUB, "%RETRY%G": SUB},
        ),
        (RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "G"}, b"", {"%RETRY%G": SUB}),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, b"", {"%RETRY%G": SUB}),
        (RequestCode.HEART_BEAT, {}, None, {"%RETRY%G": SUB, "T1": SUB, "T2": SUB}),
        # A batch is checked like a V2 send (RocketMQ 4.9.4 checks only its signature).
        (RequestCode.SEND_BATCH_MESSAGE, {"b": "T", "a": "P"}, b"", {"T": PUB}),
        (RequestCode.SEND_BATCH_MESSAGE, {"b": "%RETRY%G", "a": "G"}, b"", {"%RETRY%G": SUB}),
        (RequestCode.END_TRANSACTION, {}, b"", {}),
    ],
)
def test_needed_perms(
    code: int, ext: dict[str, str], body: bytes | None, expected: dict[str, int]
) -> None:
    payload = _heartbeat("G", ["T1", "T2"]) if body is None else body
    cmd = RemotingCommand(code, ext_fields=ext, body=payload)
    assert needed_perms(cmd) == expected


_DOC = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {
            "accessKey": "RocketMQ",
            "secretKey": 12345678,  # YAML reads it as a number; Java as text
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"],
            "groupPerms": ["groupA=DENY"],
        },
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}


def _validator() -> AccessValidator:
    table = build_table([parse_acl_document(_DOC, Path("/x/plain_acl.yml"))])
    return AccessValidator(lambda: table)


def _send(topic: str, creds: Credentials | None) -> RemotingCommand:
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields={"a": "P", "b": topic})
    return cmd if creds is None else sign(cmd, creds)


def test_validate_order_and_remarks() -> None:
    v = _validator()
    user = Credentials("RocketMQ", "12345678")
    assert v.refusal("10.10.103.5", _send("topicA", None)) is None  # globally white
    assert "No accessKey is configured" in (v.refusal("1.2.3.4", _send("topicB", None)) or "")
    stranger = Credentials("stranger1", "12345678")
    assert "No acl config for stranger1" in (v.refusal("1.2.3.4", _send("topicB", stranger)) or "")
    forged = Credentials("RocketMQ", "wrong-secret")
    remark = v.refusal("1.2.3.4", _send("topicB", forged)) or ""
    assert remark == (
        "org.apache.rocketmq.acl.common.AclException: Check signature failed for "
        "accessKey=RocketMQ, org.apache.rocketmq.acl.plain.PlainPermissionManager.validate"
        "(PlainPermissionManager.java:683)"
    )
    assert v.refusal("1.2.3.4", _send("topicB", user)) is None
    assert "No default permission for topic:topicA" in (
        v.refusal("1.2.3.4", _send("topicA", user)) or ""
    )
    assert "No default permission for topic:other" in (
        v.refusal("1.2.3.4", _send("other", user)) or ""
    )
    assert v.refusal("1.2.3.4", _send("RMQ_SYS_TRACE_TOPIC", user)) is None  # traces pass
    delete = sign(
        RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": "T"}), user
    )
    assert "Need admin permission for request code=215, but accessKey=RocketMQ is not" in (
        v.refusal("1.2.3.4", delete) or ""
    )
    admin = Credentials("rocketmq2", "12345678")
    assert v.refusal("1.2.3.4", sign(delete, admin)) is None
    assert v.refusal("1.2.3.4", _send("anything", admin)) is None  # admin without a map


def test_an_account_white_address_replaces_the_signature_not_the_rights() -> None:
    doc = {
        "globalWhiteRemoteAddresses": ["10.10.103.*"],
        "accounts": [
            {
                "accessKey": "whiteuser",
                "secretKey": "white-secret",
                "whiteRemoteAddress": "192.168.7.*",
                "defaultTopicPerm": "PUB",
            }
        ],
    }
    table = build_table([parse_acl_document(doc, Path("/x/plain_acl.yml"))])
    v = AccessValidator(lambda: table)
    forged = Credentials("whiteuser", "wrong-secret")
    assert v.refusal("192.168.7.9", _send("anything", forged)) is None  # no signature needed
    assert "Check signature failed" in (v.refusal("10.0.0.1", _send("anything", forged)) or "")
    for code in (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, RequestCode.UPDATE_AND_CREATE_TOPIC):
        request = sign(RemotingCommand(code, ext_fields={"topic": "T"}), forged)
        assert f"Need admin permission for request code={int(code)}" in (
            v.refusal("192.168.7.9", request) or ""
        )
    pull = sign(
        RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields={"topic": "T", "consumerGroup": "G"}),
        forged,
    )
    assert "No default permission for topic:T" in (v.refusal("192.168.7.9", pull) or "")
    # The global white list passes anything but the ACL admin requests unsigned.
    unsigned_acl = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    assert "No accessKey is configured" in (v.refusal("10.10.103.5", unsigned_acl) or "")
    delete = RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": "T"})
    assert v.refusal("10.10.103.5", delete) is None


def test_tampered_body_fails_the_signature() -> None:
    v = _validator()
    signed = sign(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields={"b": "topicB"}, body=b"x"),
        Credentials("RocketMQ", "12345678"),
    )
    tampered = RemotingCommand(signed.code, ext_fields=signed.ext_fields, body=b"y")
    assert "Check signature failed" in (v.refusal("1.2.3.4", tampered) or "")


@pytest.mark.parametrize(
    "account",
    [
        {"accessKey": "short", "secretKey": "12345678"},
        {"accessKey": "longenough", "secretKey": "short"},
        {"accessKey": "longenough", "secretKey": "12345678", "topicPerms": ["noequals"]},
        {"accessKey": "longenough", "secretKey": "12345678", "whiteRemoteAddress": "1.2.3"},
    ],
)
def test_bad_accounts_are_refused_without_showing_the_secret(account: dict[str, str]) -> None:
    with pytest.raises(AclConfigError) as info:
        build_table([parse_acl_document({"accounts": [account]}, Path("/x/plain_acl.yml"))])
    assert "12345678" not in str(info.value)


def test_the_sample_file_loads() -> None:
    import yaml

    sample = Path(__file__).resolve().parents[2] / "conf" / "plain_acl.yml"
    table = build_table([parse_acl_document(yaml.safe_load(sample.read_text()), sample)])
    assert set(table.accounts) == {"app-orders", "ops-admin"}
    assert table.accounts["ops-admin"].admin
