"""Whether brokers take a consumer's SQL92 selectors, asked at start and read from pulls.

Two questions both push and lite pull consumers need answered the same way:

- :func:`check_selectors`, at start (Java's ``checkClientInBroker``): CHECK_CLIENT_CONFIG
  to a master of each topic subscribed with a non-tag selector. A broker without
  ``enablePropertyFilter`` answers SYSTEM_ERROR, one that cannot compile the selector
  SUBSCRIPTION_PARSE_FAILED; either fails the start, instead of a consumer that starts
  and then receives nothing.
- :func:`is_selector_refusal`, for a pull's error: whether the broker refused the
  selector itself, which pulling again cannot fix (unlike a busy broker or a lost
  connection), so the consumer must tell the application rather than only log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from rocklet.client.errors import (
    BrokerError,
    BrokerSystemError,
    NoRouteError,
    SubscriptionParseFailedError,
    TransportError,
    error_for_code,
)
from rocklet.client.instance import ClientInstance
from rocklet.client.selector import MessageSelector
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.heartbeat import SubscriptionData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.sql92 import is_tag_type

__all__ = ["FILTER_UNSUPPORTED_REMARK", "check_selectors", "is_selector_refusal"]

#: How RocketMQ's broker (and Rocklet's) begins its SYSTEM_ERROR remark when
#: ``enablePropertyFilter`` is off: ``"... by " + expressionType`` (``PullMessageProcessor``
#: and ``ClientManageProcessor.checkClientConfig``). SYSTEM_ERROR alone also stands for
#: passing store failures, so the remark is what tells this refusal apart.
FILTER_UNSUPPORTED_REMARK: Final = "does not support consumer to filter message by"


async def check_selectors(
    instance: ClientInstance, group: str, subscriptions: Iterable[SubscriptionData]
) -> None:
    """Ask a master of each topic subscribed with a non-tag selector whether it takes it.

    Topics with no route or no master yet are skipped: their pulls will meet the
    refusal instead (consumers report it then).

    Args:
        instance: The started client instance.
        group: The consumer group.
        subscriptions: The group's subscriptions; tag subscriptions are not asked about.

    Raises:
        BrokerError: A broker refused a subscription (SYSTEM_ERROR when it does not
            filter by properties, SUBSCRIPTION_PARSE_FAILED when the selector does not
            compile).
        TransportError: The chosen master could not be reached.
    """
    for sub in list(subscriptions):
        if is_tag_type(sub.expression_type):
            continue
        try:
            route = await instance.routes.topic_route(sub.topic)
        except (TransportError, BrokerError, NoRouteError):
            continue  # no route yet (the consumer logs it): the pulls will say it
        masters = [bd.master_addr for bd in route.broker_datas] if route else []
        addr = next((a for a in masters if a), None)
        if addr is None:
            continue  # no broker yet: the pulls will say it
        body = {"clientId": instance.client_id, "group": group, "subscriptionData": sub.to_dict()}
        cmd = RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=fastjson.dumps(body).encode())
        answer = await instance.invoke(addr, cmd)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)


def is_selector_refusal(exc: BaseException, selector: MessageSelector) -> bool:
    """Whether a pull failed because the broker refuses ``selector`` itself.

    Such a refusal comes back on every pull until the broker is reconfigured (or the
    subscription changed), so it is worth reporting, not only retrying.

    Args:
        exc: What the pull raised.
        selector: The selector the pull carried.

    Returns:
        ``True`` for SUBSCRIPTION_PARSE_FAILED, and for the SYSTEM_ERROR a broker
        without property filtering answers a non-tag selector with; ``False`` for
        anything else (transport errors, busy brokers, missing routes...).
    """
    if isinstance(exc, SubscriptionParseFailedError):
        return True
    if is_tag_type(selector.expression_type) or not isinstance(exc, BrokerSystemError):
        return False
    # Compared loosely: other brokers may differ in case or spacing.
    remark = " ".join((exc.remark or "").lower().split())
    return FILTER_UNSUPPORTED_REMARK in remark
