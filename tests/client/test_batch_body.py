"""The producer's batch body: the compiled encoder against the Python loop."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.client import send_wire
from rocklet.client.message import Message, UniqKeyGenerator
from rocklet.protocol.batch import decode_batch
from rocklet.protocol.properties import decode_properties
from tests.speedups_support import compiled_module

_C = compiled_module("rocklet.protocol._speedups")
_MAX = 400

_TEXT = st.text(alphabet="ab Kt1é😀\ud800", max_size=6)


@st.composite
def _messages(draw: st.DrawFn) -> tuple[list[Message], bool]:
    """A batch, and whether it is plain (the compiled encoder must take it)."""
    plain = True
    msgs = []
    for _ in range(draw(st.integers(1, 5))):
        odd = draw(st.integers(0, 7)) == 0
        body = draw(st.binary(min_size=1, max_size=_MAX + 20 if odd else _MAX))
        tags = draw(st.none() | (_TEXT if odd else st.text(alphabet="abT1", max_size=6)))
        keys = draw(st.lists(_TEXT if odd else st.text(alphabet="kK2 ", max_size=5), max_size=3))
        msg = Message(
            draw(st.sampled_from(["T", "U"])) if odd else "T",
            body,
            tags=tags,
            keys=keys,
            properties=draw(st.sampled_from([None, {}, {"a": "b"}])) if odd else None,
            delay_level=draw(st.sampled_from([0, 0, 2, -1])) if odd else 0,
            flag=draw(st.integers(-(2**31), 2**31 - 1) | st.sampled_from([2**31])),
        )
        plain = plain and msg.topic == "T" and len(body) <= _MAX and not msg.properties
        plain = plain and msg.delay_level == 0 and -(2**31) <= msg.flag < 2**31
        plain = plain and all(("\ud800" not in t) for t in (tags or "", *keys))
        msgs.append(msg)
    return msgs, plain


def _outcome(msgs: list[Message], module: Any) -> tuple[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        # The same random part of the prefix for both encoders.
        patch.setattr(os, "urandom", lambda n: b"\x5a" * n)
        ids = UniqKeyGenerator("10.1.2.3", now_ms=1_700_000_000_000)
        patch.setattr(send_wire, "_speedups", module)
        try:
            out: tuple[str, Any] = ("ok", send_wire.encode_batch(msgs, ids, _MAX * 3))
        except Exception as exc:  # the same error either way
            out = (type(exc).__name__, str(exc))
    # Both draw the same numbers from the counter: the next id agrees too.
    return out[0], (out[1], ids.next()[-12:])


@settings(max_examples=300, deadline=None)
@given(_messages())
def test_compiled_batch_body_matches_the_python_loop(case: tuple[list[Message], bool]) -> None:
    msgs, plain = case
    compiled, python = _outcome(msgs, _C), _outcome(msgs, None)
    if plain:
        # The compiled encoder took it: it had no reason to hand it back.
        assert _C.encode_send_batch(msgs, "T", "AB", iter(range(9)), _MAX) is not None
    assert compiled == python


def test_the_body_decodes_to_the_messages_with_their_keys() -> None:
    msgs = [Message("T", b"x" * 5, tags="tg", keys=("k1", "k2"), flag=7), Message("T", b"y")]
    ids = UniqKeyGenerator("10.1.2.3")
    body, uniqs = send_wire.encode_batch(msgs, ids, 1000)
    items = decode_batch(body)
    assert [(i.flag, i.body) for i in items] == [(7, b"x" * 5), (0, b"y")]
    props = [decode_properties(i.properties) for i in items]
    assert props[0] == {"UNIQ_KEY": uniqs[0], "WAIT": "true", "TAGS": "tg", "KEYS": "k1 k2"}
    assert props[1] == {"UNIQ_KEY": uniqs[1], "WAIT": "true"}
    assert len(set(uniqs)) == 2 and all(len(u) == 32 for u in uniqs)


@pytest.mark.parametrize("n", [1, 2, 300])
def test_reserved_keys_are_the_generators_next_keys(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "urandom", lambda k: b"\x5a" * k)
    reserved, called = (UniqKeyGenerator("10.1.2.3", now_ms=1_700_000_000_000) for _ in range(2))
    prefix, first = send_wire.reserve_uniq_keys(reserved, n)
    assert [send_wire.uniq_key(prefix, first + i) for i in range(n)] == [
        called.next() for _ in range(n)
    ]
    assert reserved.next() == called.next()  # exactly n numbers taken
    with pytest.raises(ValueError, match="at least one"):
        send_wire.reserve_uniq_keys(reserved, 0)
