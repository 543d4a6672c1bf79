"""What a message may hold, checked before it is sent, against a real broker on loopback.

Properties travel as ``name 0x01 value`` pairs joined by ``0x02``: a separator inside a
property, a tag or a key would cut it or add properties (a TAGS that the reserved-name
check never saw). Fields of the wrong type fail with a TypeError that names them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.client.errors import InvalidMessageError
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from tests.client.producer_support import stored_all
from tests.cluster import running_cluster

TOPIC = "Checked"

#: (message, the field the error must name): each must be refused.
INJECTED: list[tuple[Message, str]] = [
    (Message(TOPIC, b"x", properties={"a": "b\x02TAGS\x01evil"}), "value of property 'a'"),
    (Message(TOPIC, b"x", properties={"a\x02TAGS": "evil"}), "name of property"),
    (Message(TOPIC, b"x", properties={"a\x01b": "c"}), "name of property"),
    (Message(TOPIC, b"x", properties={"a": "b\x01c"}), "value of property 'a'"),
    (Message(TOPIC, b"x", keys=("k1", "k2\x02TAGS\x01evil")), "key"),
    (Message(TOPIC, b"x", keys="k\x01"), "key"),
    (Message(TOPIC, b"x", tags="Tag\x02KEYS\x01forged"), "tags"),
    (Message(TOPIC, b"x", tags="Tag\x01"), "tags"),
]


async def test_separators_in_properties_tags_and_keys_are_refused(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        for msg, field in INJECTED:
            with pytest.raises(InvalidMessageError, match=field):
                await p.send(msg)
            with pytest.raises(InvalidMessageError, match=field):
                await p.send_oneway(msg)
            with pytest.raises(InvalidMessageError, match=field):
                await p.send_orderly(msg, 1)
        # What was refused was never stored: only the plain message is.
        await p.send(Message(TOPIC, b"plain", tags="T", properties={"a": "b"}))
        (got,) = stored_all(cluster.broker, TOPIC)
        assert (got.body, got.tags, got.properties["a"]) == (b"plain", "T", "b")


async def test_separators_anywhere_in_a_batch_are_refused(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        plain = [Message(TOPIC, b"%d" % i, tags="T", keys=(f"k{i}",)) for i in range(50)]
        for msg, field in INJECTED:
            for at in (0, 25, 50):  # first, middle, last
                batch = [*plain[:at], msg, *plain[at:]]
                with pytest.raises(InvalidMessageError, match=field):
                    await p.send(batch)
        # A tag or key changed after the message was made is checked too.
        late = Message(TOPIC, b"late", tags="T")
        late.tags = "T\x02KEYS\x01forged"
        with pytest.raises(InvalidMessageError, match="tags"):
            await p.send([*plain, late])
        late.tags, late.keys = "T", ("k\x01",)
        with pytest.raises(InvalidMessageError, match="key"):
            await p.send([*plain, late])
        assert stored_all(cluster.broker, TOPIC) == []
        result = await p.send(plain)
        assert len(result.msg_id.split(",")) == 50
        got: list[MessageExt] = stored_all(cluster.broker, TOPIC)
        assert sorted(m.keys for m in got) == sorted((f"k{i}",) for i in range(50))
        assert {m.tags for m in got} == {"T"}


def test_fields_of_the_wrong_type_fail_when_the_message_is_made() -> None:
    with pytest.raises(TypeError, match="body"):
        Message(TOPIC, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="body"):
        Message(TOPIC, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delay_level"):
        Message(TOPIC, b"x", delay_level="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delay_level"):
        Message(TOPIC, b"x", delay_level=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys"):
        Message(TOPIC, b"x", keys=("a", 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys"):
        Message(TOPIC, b"x", keys=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tags"):
        Message(TOPIC, b"x", tags=b"T")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="flag"):
        Message(TOPIC, b"x", flag="1")  # type: ignore[arg-type]
    # What the annotations allow, and bytes-like bodies, still make messages.
    assert Message(TOPIC, "text").body == b"text"  # type: ignore[arg-type]
    assert Message(TOPIC, bytearray(b"ba")).body == b"ba"  # type: ignore[arg-type]
    assert Message(TOPIC, memoryview(b"mv")).body == b"mv"  # type: ignore[arg-type]
    assert Message(TOPIC, b"x", keys=["a", "b"]).keys == ("a", "b")
    assert Message(TOPIC, b"x", keys=None).keys == ()  # type: ignore[arg-type]


async def test_send_names_what_it_takes(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        for wrong in ("hello", b"hello", 42, None, {"topic": TOPIC}):
            with pytest.raises(TypeError, match="send takes a Message or a list of Messages"):
                await p.send(wrong)  # type: ignore[arg-type]
        for wrong_item in ("hello", None):
            with pytest.raises(TypeError, match="send takes a Message or a list of Messages"):
                await p.send([Message(TOPIC, b"ok"), wrong_item])  # type: ignore[list-item]
            with pytest.raises(TypeError, match="send takes a Message or a list of Messages"):
                await p.send([wrong_item, Message(TOPIC, b"ok")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="send takes a Message"):
            await p.send_oneway("hello")  # type: ignore[arg-type]
        # A field changed to a wrong type after the message was made.
        msg = Message(TOPIC, b"x")
        msg.delay_level = "3"  # type: ignore[assignment]
        with pytest.raises(TypeError, match="delay_level"):
            await p.send(msg)
        msg.delay_level, msg.body = 0, 7  # type: ignore[assignment]
        with pytest.raises(TypeError, match="body"):
            await p.send(msg)
        assert stored_all(cluster.broker, TOPIC) == []
