"""One line saying what went wrong and what to do, for ``rocklet produce`` / ``consume``.

The SDK's errors are precise but terse (``CODE: 26 DESC: ...``); a first-time user
needs the name involved and the command that fixes it. ``rocklet admin`` words a
broker's refusal and a broker given as the name server the same way
(:func:`refusal`, :func:`not_a_name_server`).
"""

from __future__ import annotations

import ssl

from rocklet.client.admin import Admin
from rocklet.client.errors import (
    BrokerError,
    ClientError,
    ConnectError,
    NoRouteError,
    NotANameServerError,
    RequestTimeoutError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rocklet.protocol.codes import ResponseCode
from rocklet.transport.errors import TlsHandshakeError
from rocklet.write_perm_hint import read_only_hint, refused_send_hint

__all__ = ["describe_error", "not_a_name_server", "refusal", "topic_missing"]


async def _cluster_name(namesrv: str, tls: ssl.SSLContext | None) -> str:
    """The cluster to name in a command: the only one the name server knows, if so."""
    try:
        async with Admin(namesrv, instance_name="rocklet-explain", timeout_s=3.0, tls=tls) as admin:
            clusters = sorted((await admin.cluster_info()).cluster_addr_table)
    except ClientError:
        return "<clusterName>"
    return clusters[0] if len(clusters) == 1 else "<clusterName>"


async def topic_missing(
    namesrv: str, topic: str, *, sending: bool, tls: ssl.SSLContext | None = None
) -> str:
    """Say that ``topic`` does not exist, and how to create it.

    Args:
        namesrv: The name server asked.
        topic: The topic.
        sending: A send failed (the broker did not create the topic on first use).
        tls: The TLS context the command connects with.

    Returns:
        The message.
    """
    cluster = await _cluster_name(namesrv, tls)
    create = f"rocklet admin updateTopic -n {namesrv} -c {cluster} -t {topic}"
    if sending:
        return (
            f"topic {topic!r} does not exist and the broker does not create topics on first "
            f"send (autoCreateTopicEnable=false): create it with: {create}"
        )
    return (
        f"topic {topic!r} does not exist on name server {namesrv}: check the name, send to it "
        f"(rocklet produce -n {namesrv} -t {topic}), or create it with: {create}"
    )


async def describe_error(
    exc: ClientError,
    namesrv: str,
    *,
    topic: str,
    group: str,
    sending: bool,
    tls: ssl.SSLContext | None = None,
) -> str:
    """Describe an SDK error for the user of ``rocklet produce`` or ``consume``.

    Args:
        exc: The error.
        namesrv: The name server address(es) in use.
        topic: The topic of the command.
        group: The group the command used.
        sending: ``produce`` (True) or ``consume`` (False).
        tls: The TLS context the command connects with.

    Returns:
        One line (no trailing newline).
    """
    if isinstance(exc, TlsHandshakeError):
        return (
            f"{exc} (--tls-ca-file names the CA that signed the server's certificate; the "
            "certificate must carry the address connected to)"
        )
    if isinstance(exc, ConnectError):
        peer = exc.peer or "?"
        if peer in namesrv.replace(",", ";").split(";"):
            return (
                f"cannot reach the name server at {peer}: is it running (rocklet standalone)? "
                "Give its address with -n or NAMESRV_ADDR"
            )
        return (
            f"cannot reach the broker at {peer}, the address it registered (brokerIP1 and "
            f"listenPort in its config): {exc}"
        )
    if isinstance(exc, RequestTimeoutError):
        return f"{exc.peer or 'a server'} did not answer in time: {exc}"
    if isinstance(exc, NoRouteError | TopicNotExistError):
        if sending and (read_only := await read_only_hint(namesrv, topic, tls)):
            return read_only
        if (routed := await _routed_but_unserved(exc, namesrv, topic, sending, tls)) is not None:
            return routed
        return await topic_missing(namesrv, topic, sending=sending, tls=tls)
    if isinstance(exc, NotANameServerError):
        return not_a_name_server(exc)
    if isinstance(exc, SubscriptionGroupNotExistError):
        where = exc.addr or "<brokerAddr>"
        return (
            f"consumer group {group!r} does not exist on broker {where}, which does not create "
            "groups on first use (autoCreateSubscriptionGroup=false): create it with: "
            f"rocklet admin updateSubGroup -n {namesrv} -b {where} -g {group}"
        )
    if isinstance(exc, BrokerError):
        if sending and (hint := await refused_send_hint(exc, namesrv, tls)):
            return hint
        return refusal(exc)
    return str(exc)


async def _routed_but_unserved(
    exc: ClientError, namesrv: str, topic: str, sending: bool, tls: ssl.SSLContext | None
) -> str | None:
    """Why a topic the name server routes cannot be used, when that is the case.

    Two cases look like a missing topic to the SDK: every broker group of the route has
    lost its master (a slave takes no sends), and a broker that the route names does
    not have the topic (a slave that had not synced it from its master yet).
    """
    try:
        async with Admin(namesrv, instance_name="rocklet-explain", timeout_s=3.0, tls=tls) as admin:
            route = await admin.topic_route(topic)
    except ClientError:
        return None  # no route: the topic is missing indeed
    groups = sorted(bd.broker_name for bd in route.broker_datas)
    if sending and groups and not any(bd.master_addr for bd in route.broker_datas):
        return (
            f"topic {topic!r} is routed to {', '.join(groups)}, but no master (brokerId 0) is "
            "registered there: a slave takes no sends. Start the master, or wait for it to "
            "register again"
        )
    if isinstance(exc, TopicNotExistError) and exc.addr:
        return (
            f"broker {exc.addr} does not have topic {topic!r}, though name server {namesrv} "
            "routes it there. A slave learns topics from its master every 10 s, so a topic "
            "created just before the master stopped is not on the slave: start the master"
        )
    return None


def not_a_name_server(exc: NotANameServerError) -> str:
    """Say that the address given as the name server is a broker's (every command's wording)."""
    return (
        f"{exc.addr} is a broker, not a name server: give the name server's address "
        "(default port 9876) with -n or NAMESRV_ADDR"
    )


def refusal(exc: BrokerError) -> str:
    """A server's error answer: who refused, the response code's name and the remark."""
    try:
        code = ResponseCode(exc.response_code).name
    except ValueError:
        code = str(exc.response_code)
    where = f"{exc.addr} " if exc.addr else ""
    return f"{where}refused the request: {code}: {exc.remark or '(no reason given)'}"
