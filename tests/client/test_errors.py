"""The broker-error tree: one class per response code, retriable flags, the fallback."""

from __future__ import annotations

import pytest

from rocklet.client import errors
from rocklet.client.errors import (
    BrokerError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
    TransportError,
    UnknownBrokerError,
    error_class_for_code,
    error_for_code,
)
from rocklet.protocol.codes import ResponseCode


def test_every_non_success_code_maps_to_exactly_one_class() -> None:
    seen: dict[type[BrokerError], ResponseCode] = {}
    for code in ResponseCode:
        if code is ResponseCode.SUCCESS:
            continue
        cls = error_class_for_code(code)
        assert cls is not UnknownBrokerError, f"{code.name} has no class"
        assert cls.code == code
        assert cls not in seen, f"{cls.__name__} serves {seen[cls].name} and {code.name}"
        seen[cls] = code
    # Every concrete class is reachable from a code (no orphan declaring a wrong code).
    concrete = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, BrokerError) and obj.code >= 0
    }
    assert concrete == set(seen)


def test_unknown_code_falls_back_and_keeps_the_code() -> None:
    assert error_class_for_code(99999) is UnknownBrokerError
    err = error_for_code(99999, "odd", addr="10.0.0.1:10911")
    assert type(err) is UnknownBrokerError
    assert (err.response_code, err.remark, err.addr) == (99999, "odd", "10.0.0.1:10911")
    assert "99999" in str(err) and "odd" in str(err)


@pytest.mark.parametrize(
    ("code", "retriable"),
    [
        # DefaultMQProducerImpl's retryResponseCodes, plus the two "busy" answers.
        (ResponseCode.TOPIC_NOT_EXIST, True),
        (ResponseCode.SERVICE_NOT_AVAILABLE, True),
        (ResponseCode.SYSTEM_ERROR, True),
        (ResponseCode.NO_PERMISSION, True),
        (ResponseCode.NO_BUYER_ID, True),
        (ResponseCode.NOT_IN_CURRENT_UNIT, True),
        (ResponseCode.SYSTEM_BUSY, True),
        (ResponseCode.FLOW_CONTROL, True),
        (ResponseCode.MESSAGE_ILLEGAL, False),
        (ResponseCode.SUBSCRIPTION_PARSE_FAILED, False),
        (ResponseCode.QUERY_NOT_FOUND, False),
    ],
)
def test_retriable_follows_rocketmq(code: ResponseCode, retriable: bool) -> None:
    err = error_for_code(code, "why")
    assert err.retriable is retriable
    assert err.response_code == code


def test_connection_errors_are_apart_from_broker_errors() -> None:
    assert not issubclass(TransportError, BrokerError)
    assert not issubclass(BrokerError, TransportError)
    assert issubclass(ConnectionClosedError, TransportError)
    timeout = RequestTimeoutError(code=10, opaque=3, timeout_s=1.5, peer="h:1")
    assert isinstance(timeout, TimeoutError) and isinstance(timeout, ClientError)
