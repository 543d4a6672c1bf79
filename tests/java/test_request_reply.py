"""Request-reply (``DefaultMQProducer.request``) with the Java client.

Each scenario runs against Rocklet and, as the other parameter, against a real
RocketMQ 4.9.4 with the same expectations: the RocketMQ runs prove them. A replier
(a push consumer of the request topic) answers each request with
``MessageUtil.createReplyMessage(request, "reply:" + body)`` sent by a producer of its
own; the broker pushes that reply (PUSH_REPLY_MESSAGE_TO_CLIENT) to the requester named
by the request's ``REPLY_TO_CLIENT``.

The 4.9.4 client itself has two known quirks, which both systems show the same way
(they are the client's, not the broker's) and which the tests state explicitly:

* ``request(msg, timeout)`` returns the request message itself, as soon as the
  request is sent, not the reply (apache/rocketmq#4841, fixed after 4.9.4).
* ``request(msg, RequestCallback, timeout)`` calls ``onSuccess(null)`` once the request
  is sent, and ``onSuccess(reply)`` again when the reply comes (apache/rocketmq#6555).
  The reply does come: this form is the one that proves the round trip.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from unittest.mock import ANY

from tests.java.javatier import (
    Event,
    JavaClient,
    JavaClients,
    JavaDriver,
    System,
    java_clients,
    make_topic,
    tier_marks,
)

pytestmark = tier_marks()

#: A client's start, a round trip: generous for a busy two-core machine.
STEP_TIMEOUT_S = 90
#: What the requester gives request(): the reply's time to live, in ms.
REQUEST_TIMEOUT_MS = 30_000
#: RocketMQ's reply topic: "<cluster>_REPLY_TOPIC", created by the broker.
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def _dump(*clients: JavaClient) -> str:
    return "\n".join(f"-- {c.name}\n" + "\n".join(json.dumps(e) for e in c.events) for c in clients)


@asynccontextmanager
async def _replying(
    driver: JavaDriver, system: System, home: Path, topic: str, group: str
) -> AsyncIterator[tuple[JavaClients, JavaClient]]:
    """The request topic and a replier consuming it (its group's own)."""
    await make_topic(system, topic, 2)
    async with java_clients(driver, home, system.namesrv) as clients:
        replier = await clients.start("replier", "consume", topic, group, "reply=true")
        yield clients, replier


async def _request(clients: JavaClients, topic: str, mode: str, body: str) -> JavaClient:
    requester = await clients.spawn(
        "requester", "request", topic, mode, body, str(REQUEST_TIMEOUT_MS)
    )
    await requester.wait_event(("done", "fatal"), STEP_TIMEOUT_S)
    assert await requester.exit_code(STEP_TIMEOUT_S) == 0, requester.diagnostics()
    return requester


async def _asked(replier: JavaClient, body: str) -> Event:
    """The replier's delivery of the request with ``body``."""

    def delivered(client: JavaClient) -> Event | None:
        return next((e for e in client.of("consumed") if e["body"] == body), None)

    return await replier.wait_for(delivered, STEP_TIMEOUT_S, f"the request {body!r}")


async def test_request_with_a_callback_gets_the_reply(
    java_driver: JavaDriver, quick_system: System, tmp_path: Path
) -> None:
    topic, body = "JavaTierRequestCallback", "ping"
    async with _replying(java_driver, quick_system, tmp_path, topic, "javatier_replier_cb") as (
        clients,
        replier,
    ):
        requester = await _request(clients, topic, "callback", body)
        request = await _asked(replier, body)
        (replied,) = await replier.wait_for(
            lambda c: c.of("replied") or c.of("reply_failed") or None, STEP_TIMEOUT_S, "a reply"
        )
    dump = _dump(requester, replier)
    callbacks = requester.of("callback")
    assert requester.of("request_failed") == [], dump
    # 4.9.4: onSuccess(null) when the request is sent (#6555), then onSuccess(reply).
    assert [e["kind"] for e in callbacks] == ["success", "success"], dump
    assert [e for e in callbacks if "message" in e] == [
        {"message": None, "event": "callback", "kind": "success", "isRequest": False}
    ], dump
    (reply,) = [e for e in callbacks if "message" not in e]
    asked = request["allProps"]
    assert (reply["topic"], reply["body"], reply["isRequest"]) == (
        REPLY_TOPIC,
        f"reply:{body}",
        False,
    ), dump
    assert (replied["event"], replied.get("status"), replied.get("topic")) == (
        "replied",
        "SEND_OK",
        REPLY_TOPIC,
    ), dump
    # The request carried its correlation, its requester and a time to live; the reply
    # carries them back, marked as a reply, with the broker's push and arrival times.
    assert asked["TTL"] == str(REQUEST_TIMEOUT_MS), dump
    assert reply["allProps"] == {
        "ARRIVE_TIME": ANY,
        "CORRELATION_ID": asked["CORRELATION_ID"],
        "MSG_TYPE": "reply",
        "PUSH_REPLY_TIME": ANY,
        "REPLY_TO_CLIENT": asked["REPLY_TO_CLIENT"],
        "TTL": asked["TTL"],
        "UNIQ_KEY": ANY,
    }, dump


async def test_a_sync_request_returns_the_request_itself_in_4_9_4(
    java_driver: JavaDriver, quick_system: System, tmp_path: Path
) -> None:
    """apache/rocketmq#4841: the 4.9.4 client's request(msg, timeout) completes its
    future with the request when the send succeeds. It is the client's doing: RocketMQ
    and Rocklet both show it, and the replier is asked all the same (its reply may find
    the requester gone: it is not looked at)."""
    topic, body = "JavaTierRequestSync", "ping sync"
    async with _replying(java_driver, quick_system, tmp_path, topic, "javatier_replier_sync") as (
        clients,
        replier,
    ):
        requester = await _request(clients, topic, "sync", body)
        request = await _asked(replier, body)
    dump = _dump(requester, replier)
    responses = requester.of("response")
    assert len(responses) == 1, dump
    (response,) = responses
    assert (response["isRequest"], response["topic"], response["body"]) == (True, topic, body)
    assert response["allProps"]["CORRELATION_ID"] == request["allProps"]["CORRELATION_ID"], dump
