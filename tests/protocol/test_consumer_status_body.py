"""GetConsumerStatusBody (codes 221 and 223): Java's form, and the numbers it must hold.

Round trips and arbitrary input are covered with the other bodies (test_bodies.py).
"""

from __future__ import annotations

import pytest

from rocklet.protocol.bodies import GetConsumerStatusBody, MessageQueue
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.errors import BodyError

_MQ = b'{"brokerName":"b","queueId":0,"topic":"T"}'


def test_the_form_a_4_9_4_broker_answers_223_with() -> None:
    """One client's offsets under its id, MessageQueue keys unquoted (fastjson)."""
    mq = MessageQueue("T", "broker-a", 1)
    java = (
        b'{"consumerTable":{"10.0.0.1@123":{{"brokerName":"broker-a","queueId":1,"topic":"T"}'
        b':5}},"messageQueueTable":{}}'
    )
    body = GetConsumerStatusBody.from_json(java)
    assert body == GetConsumerStatusBody({}, {"10.0.0.1@123": {mq: 5}})
    assert body.to_json() == java


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b'{"consumerTable":{"c":[]}}', "must be a JSON object"),
        (b'{"consumerTable":{"c":{' + _MQ + b':"x"}}}', "offset must be an integer"),
        (b'{"messageQueueTable":{' + _MQ + b":9223372036854775808}}", "does not fit a long"),
        (b'{"messageQueueTable":{' + _MQ + b":-9223372036854775809}}", "does not fit a long"),
        (
            b'{"messageQueueTable":{{"brokerName":"b","queueId":2147483648,"topic":"T"}:1}}',
            "does not fit an int",
        ),
        (b'{"messageQueueTable":{"T":1}}', "not a MessageQueue"),
    ],
)
def test_bad_numbers_and_shapes_raise_body_error(data: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match) as info:
        GetConsumerStatusBody.from_json(data)
    assert info.value.response_code == ResponseCode.SYSTEM_ERROR
