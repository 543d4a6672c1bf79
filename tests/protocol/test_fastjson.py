"""The fastjson dialect: standard JSON plus unquoted integer (and object) map keys."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocklet.protocol import fastjson
from rocklet.protocol.bodies import MessageQueue

longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
doubles = st.floats(allow_nan=False, allow_infinity=False)
queues = st.builds(MessageQueue, st.text(max_size=8), st.text(max_size=8), longs)
json_values = st.recursive(
    st.none() | st.booleans() | longs | doubles | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)

#: Fragments that break a naive rewrite when they appear inside string literals.
tricky_text = st.lists(
    st.sampled_from(['{0:"x"}', "0:", ":", "{", "}", "[", "]", ",", '"', "\\", '\\"', "12", " "])
    | st.text(max_size=3),
    max_size=6,
).map("".join)
fastjson_tables = st.recursive(
    st.none() | st.booleans() | longs | doubles | tricky_text,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(longs | tricky_text, inner, max_size=3)
    ),
    max_leaves=15,
)


def _stringify_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _stringify_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


@given(json_values)
def test_fastjson_standard_round_trip(value: Any) -> None:
    text = fastjson.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert fastjson.loads(text) == value
    assert fastjson.loads(text.encode()) == value


@given(fastjson_tables)
def test_fastjson_unquoted_int_keys_round_trip(value: Any) -> None:
    unquoted = fastjson.dumps(value, unquoted_int_keys=True)
    expected = _stringify_keys(value)
    assert fastjson.loads(unquoted) == expected
    assert fastjson.loads(fastjson.dumps(value)) == expected
    assert json.loads(fastjson.dumps(value)) == expected  # the quoted form is standard JSON


@given(st.dictionaries(st.integers(), tricky_text, min_size=1, max_size=4))
def test_fastjson_unquoted_form_is_what_fastjson_writes(table: dict[int, str]) -> None:
    text = fastjson.dumps({"brokerAddrs": table}, unquoted_int_keys=True)
    members = ",".join(f"{k}:{json.dumps(v, ensure_ascii=False)}" for k, v in table.items())
    assert text == '{"brokerAddrs":{' + members + "}}"


@given(st.dictionaries(queues, longs, max_size=4), tricky_text)
def test_fastjson_object_keys(table: dict[MessageQueue, int], note: str) -> None:
    text = fastjson.dumps({"note": note, "t": {mq.key_json(): v for mq, v in table.items()}})
    parsed = fastjson.loads(text, object_keys=True)
    assert parsed["note"] == note
    assert {MessageQueue.from_key(k): v for k, v in parsed["t"].items()} == table
    if table:
        with pytest.raises(ValueError):
            fastjson.loads(text)  # object keys only when asked


@pytest.mark.parametrize(
    "text",
    [
        "{a:1}",
        "{'a':1}",
        "[1,]",
        '{"a":1,}',
        '{"a":NaN}',
        "[Infinity]",
        "{01:2}",
        "{+1:2}",
        "{1.5:2}",
        '{"a":"unterminated}',
        "{0:}",
        '{"a" 1}',
        "",
        "[" * 100_000,
        b"\xff\xfe",
    ],
)
def test_fastjson_rejects_everything_else(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        fastjson.loads(text)


def test_fastjson_known_documents() -> None:
    offsets = fastjson.loads('{"offsetTable":{"T@G":{0:12,1:3}}}')
    assert offsets == {"offsetTable": {"T@G": {"0": 12, "1": 3}}}
    assert fastjson.loads('{"s":"{0:\\"x\\"}", 7 : [ { -1 :true} ]}') == {
        "s": '{0:"x"}',
        "7": [{"-1": True}],
    }
    with pytest.raises(TypeError):
        fastjson.dumps({(1, 2): 3})
    with pytest.raises(ValueError):
        fastjson.dumps([float("nan")])


@pytest.mark.parametrize(
    "text",
    [
        b'{"clientID":"\\ud800"}',  # a lone high surrogate
        b'{"a":["ok",{"b":"x\\uDFFFy"}]}',  # a lone low one, nested, upper case
        b'{"\\udc80":1}',  # in a key
        b'{"offsetTable":{0:"\\ud83d"}}',  # through the fastjson rewrite
        b'{"a":"\\ude00\\ud83d"}',  # a pair in the wrong order is two lone halves
        b'{"a":"\xff"}',  # bytes that are not UTF-8
    ],
)
def test_fastjson_refuses_text_without_a_utf8_form(text: bytes) -> None:
    with pytest.raises(ValueError):
        fastjson.loads(text)


def test_fastjson_keeps_escaped_pairs_and_escaped_backslashes() -> None:
    assert fastjson.loads(b'{"a":"\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    assert fastjson.loads(b'{"a":"\\\\ud800"}') == {"a": "\\ud800"}  # text, not an escape
