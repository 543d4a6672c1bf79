"""Why a topic takes no writes, and the command that undoes that very cause.

A route shows a topic's queues on a broker without WRITE (``perm`` 4) for three
causes that look the same there, each undone by a different command:

- the topic's own permission on the broker was lowered (``updateTopicPerm -p 4``, or
  ``updateTopic -p 4``): ``updateTopicPerm -p 6`` undoes it and keeps the queue counts
  (``updateTopic`` would also set them, to 8 unless ``-r``/``-w`` say otherwise);
- the broker's own permission was lowered (``updateBrokerConfig -k brokerPermission
  -v 4``): the broker then registers every topic with that permission (RocketMQ's
  rule) and refuses sends whatever a route says, so only ``updateBrokerConfig -k
  brokerPermission -v 6`` undoes it (``addWritePerm`` would fix the route, not the
  broker);
- the name servers' routes were made read-only (``wipeWritePerm -b BROKER_NAME``), the
  broker untouched: ``addWritePerm -b BROKER_NAME`` undoes it.

The broker's configuration (GET_BROKER_CONFIG ``brokerPermission``) and its topic table
(GET_ALL_TOPIC_CONFIG) tell which: the first that lacks WRITE is the cause, and when
both have it the name servers' routes are.

A send that reached the broker and was refused with NO_PERMISSION names its cause in
the remark (``the broker[NAME] sending message is forbidden`` or ``the topic[TOPIC]
...``), which :func:`refused_send_hint` reads. That happens when the name servers'
route gives WRITE that the broker does not (``addWritePerm`` over a read-only topic or
broker).
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Final

from rocklet.admin.tool import AdminTool
from rocklet.client.errors import BrokerError, ClientError
from rocklet.protocol.bodies.route import Perm, TopicRouteData
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.errors import ProtocolError
from rocklet.protocol.properties_text import parse_properties

__all__ = ["read_only_hint", "refused_send_hint"]

#: How long each look-up of the diagnosis may take.
_TIMEOUT_S: Final = 3.0
#: The NO_PERMISSION remarks of a refused send (``SendMessageProcessor``).
_BROKER_REFUSED: Final = re.compile(r"the broker\[(?P<name>[^\]]*)\] sending message is forbidden")
_TOPIC_REFUSED: Final = re.compile(r"the topic\[(?P<name>[^\]]*)\] sending message is forbidden")


@dataclass(frozen=True, slots=True)
class _Cause:
    """Why one broker takes no writes to the topic."""

    kind: str  #: "broker", "topic", "namesrv" or "unknown"
    perm: int | None = None  #: the permission found without WRITE


def broker_perm_fix(namesrv: str, addr: str) -> str:
    """The command that gives a broker its write permission back."""
    return f"rocklet admin updateBrokerConfig -n {namesrv} -b {addr} -k brokerPermission -v 6"


def topic_perm_fix(namesrv: str, cluster: str, topic: str) -> str:
    """The command that gives a topic its write permission back (queue counts kept)."""
    return f"rocklet admin updateTopicPerm -n {namesrv} -c {cluster} -t {topic} -p 6"


def route_perm_fix(namesrv: str, broker_name: str) -> str:
    """The command that undoes ``wipeWritePerm`` in the name servers."""
    return f"rocklet admin addWritePerm -n {namesrv} -b {broker_name}"


async def _cause(tool: AdminTool, addr: str | None, topic: str) -> _Cause:
    if addr is None:
        return _Cause("unknown")
    try:
        config = await tool.call(addr, RequestCode.GET_BROKER_CONFIG)
        props = parse_properties(config.body.decode("utf-8", "replace"))
        broker_perm = int(props.get("brokerPermission", "6"))
        if not broker_perm & Perm.WRITE:
            return _Cause("broker", broker_perm)
        table = await tool.call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        topics = TopicConfigSerializeWrapper.from_json(table.body).topic_config_table
    except (ClientError, ProtocolError, ValueError):
        return _Cause("unknown")
    found = topics.get(topic)
    if found is not None and not found.perm & Perm.WRITE:
        return _Cause("topic", int(found.perm))
    return _Cause("namesrv")


def _hints(causes: dict[str, _Cause], route: TopicRouteData, namesrv: str, topic: str) -> list[str]:
    masters = {b.broker_name: b.master_addr for b in route.broker_datas}
    clusters = sorted({b.cluster for b in route.broker_datas if b.broker_name in causes})
    cluster = clusters[0] if len(clusters) == 1 else "<clusterName>"
    hints: list[str] = []
    for name, cause in sorted(causes.items()):
        addr = masters.get(name) or "<brokerAddr>"
        if cause.kind == "broker":
            hints.append(
                f"broker {name} itself is read-only (brokerPermission={cause.perm}), which "
                f"refuses every send to it: {broker_perm_fix(namesrv, addr)}"
            )
        elif cause.kind == "namesrv":
            hints.append(
                f"the name servers' routes of broker {name} were made read-only "
                f"(wipeWritePerm): {route_perm_fix(namesrv, name)}"
            )
        elif cause.kind == "unknown":
            hints.append(
                f"broker {name} could not be asked why: if the topic's permission was "
                f"lowered, {topic_perm_fix(namesrv, cluster, topic)}; if the broker's "
                f"(brokerPermission), {broker_perm_fix(namesrv, addr)}; if wipeWritePerm "
                f"drained it, {route_perm_fix(namesrv, name)}"
            )
    topic_perms = {n: c.perm for n, c in causes.items() if c.kind == "topic"}
    if topic_perms:
        perms = ", ".join(f"{p} on {n}" for n, p in sorted(topic_perms.items()))
        hints.append(
            f"the topic's own permission is {perms}: {topic_perm_fix(namesrv, cluster, topic)}"
        )
    return hints


async def read_only_hint(namesrv: str, topic: str, tls: ssl.SSLContext | None) -> str | None:
    """Say why ``topic`` takes no writes and how to undo it, when its route shows why.

    Args:
        namesrv: The name server(s) the command uses.
        topic: The topic a send failed for.
        tls: The TLS context the command connects with.

    Returns:
        One line (no trailing newline), or ``None`` when the route has no read-only
        queue (the topic is missing, or the name server cannot be asked).
    """
    try:
        async with AdminTool(namesrv, _TIMEOUT_S, tls) as tool:
            route = await tool.admin.topic_route(topic)
            read_only = sorted(
                {q.broker_name for q in route.queue_datas if not q.perm & Perm.WRITE}
            )
            if not read_only:
                return None
            masters = {b.broker_name: b.master_addr for b in route.broker_datas}
            causes = {n: await _cause(tool, masters.get(n), topic) for n in read_only}
    except ClientError:
        return None
    hints = "; ".join(_hints(causes, route, namesrv, topic))
    return f"topic {topic!r} exists but no broker takes writes to it: {hints}"


async def refused_send_hint(
    exc: BrokerError, namesrv: str, tls: ssl.SSLContext | None
) -> str | None:
    """The fix for a send the broker refused with NO_PERMISSION, from its remark.

    The producer sent there because the route gave the queue WRITE, so the name
    servers and the broker disagree (``addWritePerm`` sets every route to 6 whatever
    the broker holds). For the broker's own permission ``updateBrokerConfig`` is the
    fix; for the topic's, ``updateTopic`` with the queue counts of the route (and
    ``-b``): ``updateTopicPerm`` compares with the route's permission, finds it 6
    already and changes nothing.

    Args:
        exc: The broker's refusal.
        namesrv: The name server(s) the command uses.
        tls: The TLS context the command connects with.

    Returns:
        One line, or ``None`` when the refusal is not for want of write permission.
    """
    if exc.response_code != ResponseCode.NO_PERMISSION:
        return None
    remark = exc.remark or ""
    where = exc.addr or "<brokerAddr>"
    if match := _BROKER_REFUSED.search(remark):
        return (
            f"broker {match['name']} ({where}) is read-only (its brokerPermission has no "
            f"write bit) and refuses sends: {broker_perm_fix(namesrv, where)}"
        )
    if not (match := _TOPIC_REFUSED.search(remark)):
        return None
    topic = match["name"]
    counts = "-r <readQueueNums> -w <writeQueueNums>"
    try:
        async with AdminTool(namesrv, _TIMEOUT_S, tls) as tool:
            route = await tool.admin.topic_route(topic)
    except ClientError:
        pass
    else:
        names = {b.broker_name for b in route.broker_datas if b.master_addr == where}
        for q in route.queue_datas:
            if q.broker_name in names:
                counts = f"-r {q.read_queue_nums} -w {q.write_queue_nums}"
    return (
        f"topic {topic!r} has no write permission on broker {where}, though the name "
        f"servers' route gives it one (addWritePerm): rocklet admin updateTopic -n "
        f"{namesrv} -b {where} -t {topic} {counts} -p 6"
    )
