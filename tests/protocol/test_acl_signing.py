"""ACL 1.0 signing (rocklet.protocol.acl) against independently computed HmacSHA1 values.

The expected signatures were computed with ``openssl dgst -sha1 -hmac 12345678 -binary |
base64`` over the concatenation RocketMQ's ``AclUtils.combineRequestContent`` builds.
"""

from __future__ import annotations

import pytest

from rocklet.protocol.acl import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    Credentials,
    sign,
    signature,
    signing_content,
)
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand

CREDS = Credentials("rocketmq2", "12345678")


def test_content_is_values_sorted_by_key_then_body() -> None:
    fields = {"topic": "TopicTest", ACCESS_KEY: "rocketmq2", "group": "groupA"}
    assert signing_content(fields, b"body") == b"rocketmq2groupATopicTestbody"


def test_signature_matches_openssl() -> None:
    fields = {"topic": "TopicTest", ACCESS_KEY: "rocketmq2", "group": "groupA"}
    assert signature(fields, b"body", "12345678") == "1y9wrrPArkneo3EV0IDNURemZHE="
    assert signature(fields, b"", "12345678") == "XX24CjeeKRz7QjUoiildiI+vrrU="


def test_signature_and_unique_key_flag_are_not_signed() -> None:
    fields = {"topic": "TopicTest", ACCESS_KEY: "rocketmq2", "group": "groupA"}
    noisy = {**fields, SIGNATURE: "anything", UNIQUE_KEY_QUERY: "true"}
    assert signature(noisy, b"body", "12345678") == signature(fields, b"body", "12345678")


def test_sign_adds_the_three_fields_and_keeps_the_request() -> None:
    cmd = RemotingCommand(
        RequestCode.SEND_MESSAGE, ext_fields={"topic": "TopicTest", "group": "groupA"}, body=b"body"
    )
    signed = sign(cmd, CREDS)
    assert signed.ext_fields[ACCESS_KEY] == "rocketmq2"
    assert signed.ext_fields[SIGNATURE] == "1y9wrrPArkneo3EV0IDNURemZHE="
    assert SECURITY_TOKEN not in signed.ext_fields
    assert ACCESS_KEY not in cmd.ext_fields  # the original is untouched
    assert (signed.code, signed.body) == (cmd.code, cmd.body)


def test_security_token_is_sent_and_signed() -> None:
    cmd = RemotingCommand(RequestCode.HEART_BEAT, ext_fields={})
    signed = sign(cmd, Credentials("rocketmq2", "12345678", security_token="tok"))
    assert signed.ext_fields[SECURITY_TOKEN] == "tok"
    fields = {ACCESS_KEY: "rocketmq2", SECURITY_TOKEN: "tok"}
    assert signed.ext_fields[SIGNATURE] == signature(fields, b"", "12345678")


def test_secret_never_in_repr() -> None:
    creds = Credentials("rocketmq2", "s3cr3t-value")
    assert "s3cr3t-value" not in repr(creds)
    assert "s3cr3t-value" not in str(creds)
    assert "rocketmq2" in repr(creds)


def test_credentials_need_both_keys() -> None:
    with pytest.raises(ValueError, match="required"):
        Credentials("", "12345678")
