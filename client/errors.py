"""Errors raised by the SDK.

Three families, kept apart:

- :class:`TransportError` and its subclasses: the connection failed or an answer did
  not come in time. The request's outcome is unknown: it may still have run.
- :class:`BrokerError` and its subclasses: the broker (or name server) answered with a
  non-success response code. There is exactly one class per :class:`ResponseCode`,
  each declaring ``code`` and ``retriable``; :func:`error_for_code` builds the right one
  and falls back to :class:`UnknownBrokerError` for codes this SDK does not know.
- Client-side errors (:class:`NoRouteError`, :class:`ClientStateError`,
  :class:`RequestReplyTimeoutError`, :class:`InvalidMessageError`,
  :class:`NotANameServerError`): raised before or without a broker answer, or when
  the answer shows the client is set up wrong.

``retriable`` follows RocketMQ 4.9's producer: ``DefaultMQProducerImpl`` retries a send
on another broker for TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR,
NO_PERMISSION, NO_BUYER_ID and NOT_IN_CURRENT_UNIT. We add SYSTEM_BUSY and
FLOW_CONTROL, which say "this broker is overloaded right now" and are worth another
broker (RocketMQ 5 retries them too, with backoff).
"""

from __future__ import annotations

from typing import ClassVar, Final

from rocklet.protocol.codes import ResponseCode
from rocklet.transport.errors import (
    ConnectError,
    ConnectionClosedError,
    RemotingError,
    RequestTimeoutError,
    TlsHandshakeError,
    TransportError,
)

__all__ = [
    "TRANSIENT_ERRORS",
    "BrokerBusyError",
    "BrokerError",
    "BrokerSystemError",
    "ClientError",
    "ClientStateError",
    "ConnectError",
    "ConnectionClosedError",
    "ConsumeMessageTimeoutError",
    "ConsumerNotOnlineError",
    "DeleteAclConfigFailedError",
    "FilterDataNotExistError",
    "FilterDataNotLatestError",
    "FlowControlError",
    "FlushDiskTimeoutError",
    "FlushSlaveTimeoutError",
    "InvalidMessageError",
    "MessageIllegalError",
    "NoBuyerIdError",
    "NoMessageError",
    "NoPermissionError",
    "NoRouteError",
    "NotANameServerError",
    "NotInCurrentUnitError",
    "PullNotFoundError",
    "PullOffsetMovedError",
    "PullRetryImmediatelyError",
    "QueryNotFoundError",
    "RequestCodeNotSupportedError",
    "RequestReplyTimeoutError",
    "RequestTimeoutError",
    "ServiceNotAvailableError",
    "SlaveNotAvailableError",
    "SubscriptionError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "SystemBusyError",
    "TlsHandshakeError",
    "TopicExistAlreadyError",
    "TopicNotExistError",
    "TransactionError",
    "TransactionFailedError",
    "TransactionShouldCommitError",
    "TransactionShouldRollbackError",
    "TransactionStateGroupWrongError",
    "TransactionStateUnknownError",
    "TransportError",
    "UnknownBrokerError",
    "UpdateAclConfigFailedError",
    "UpdateGlobalWhiteAddrsConfigFailedError",
    "VersionNotSupportedError",
    "error_class_for_code",
    "error_for_code",
]


#: Base class of every error the SDK raises. It is the transport's root class, so the
#: transport's own failures (:class:`TransportError` and below: a closed connection, a
#: timeout) are client errors too and one ``except ClientError`` catches everything.
ClientError = RemotingError


# -- client-side ----------------------------------------------------------------------


class NoRouteError(ClientError):
    """No broker serves the topic (the name server knows no route, or no writable queue).

    Attributes:
        topic: The topic.
    """

    def __init__(self, topic: str, detail: str = "") -> None:
        super().__init__(f"no route for topic {topic!r}" + (f": {detail}" if detail else ""))
        self.topic = topic


class NotANameServerError(ClientError):
    """The address given as a name server is something else, usually a broker.

    A broker answers a route query (GET_ROUTEINFO_BY_TOPIC) with
    REQUEST_CODE_NOT_SUPPORTED; that answer means the client was pointed at the
    broker's port (10911 by default) instead of the name server's (9876).

    Attributes:
        addr: The address that answered.
    """

    def __init__(self, addr: str) -> None:
        super().__init__(
            f"{addr} is a broker, not a name server: pass the name server address "
            "(default port 9876) as namesrv"
        )
        self.addr = addr


class ClientStateError(ClientError):
    """The producer, consumer or client instance is not started, or already closed."""


class InvalidMessageError(ClientError, ValueError):
    """A message is rejected before sending (empty topic or body, body too large...)."""


class RequestReplyTimeoutError(ClientError, TimeoutError):
    """A request-reply request got no reply within its timeout.

    Attributes:
        correlation_id: The request's CORRELATION_ID.
        timeout_ms: The timeout that elapsed.
    """

    def __init__(self, correlation_id: str, timeout_ms: int) -> None:
        super().__init__(f"no reply to request {correlation_id} within {timeout_ms} ms")
        self.correlation_id = correlation_id
        self.timeout_ms = timeout_ms


# -- broker answers -------------------------------------------------------------------


class BrokerError(ClientError):
    """The broker or name server answered with a non-success response code.

    Subclasses declare the :class:`ResponseCode` they stand for and whether a producer
    may retry the request on another broker.

    Attributes:
        code: Class-level: the response code this class stands for.
        retriable: Class-level: whether retrying elsewhere can help.
        response_code: The code actually received (differs from ``code`` only for
            :class:`UnknownBrokerError`).
        remark: The answer's remark (the broker's reason), if any.
        addr: ``"host:port"`` of the peer that answered, if known.
    """

    code: ClassVar[int] = -1
    retriable: ClassVar[bool] = False

    def __init__(
        self, remark: str | None = None, *, addr: str | None = None, code: int | None = None
    ) -> None:
        self.response_code = self.code if code is None else code
        self.remark = remark
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"CODE: {self.response_code} DESC: {remark or ''}{where}")


class UnknownBrokerError(BrokerError):
    """A response code this SDK does not know; ``response_code`` holds it."""

    code = -1


class BrokerSystemError(BrokerError):
    """SYSTEM_ERROR (1): a broker-side failure; the remark says why."""

    code = ResponseCode.SYSTEM_ERROR
    retriable = True


class BrokerBusyError(BrokerError):
    """Family: the broker is overloaded right now; another broker may take it."""

    code = -1
    retriable = True


class SystemBusyError(BrokerBusyError):
    """SYSTEM_BUSY (2): the broker sheds load (page cache busy, queue full)."""

    code = ResponseCode.SYSTEM_BUSY


class FlowControlError(BrokerBusyError):
    """FLOW_CONTROL (215)."""

    code = ResponseCode.FLOW_CONTROL


class RequestCodeNotSupportedError(BrokerError):
    """REQUEST_CODE_NOT_SUPPORTED (3): the peer does not implement this request."""

    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class TransactionFailedError(BrokerError):
    """TRANSACTION_FAILED (4)."""

    code = ResponseCode.TRANSACTION_FAILED


class FlushDiskTimeoutError(BrokerError):
    """FLUSH_DISK_TIMEOUT (10): stored but not durable in time (a send reports a status)."""

    code = ResponseCode.FLUSH_DISK_TIMEOUT


class SlaveNotAvailableError(BrokerError):
    """SLAVE_NOT_AVAILABLE (11) (a send reports a status)."""

    code = ResponseCode.SLAVE_NOT_AVAILABLE


class FlushSlaveTimeoutError(BrokerError):
    """FLUSH_SLAVE_TIMEOUT (12) (a send reports a status)."""

    code = ResponseCode.FLUSH_SLAVE_TIMEOUT


class MessageIllegalError(BrokerError):
    """MESSAGE_ILLEGAL (13): topic, body or properties rejected; retrying cannot help."""

    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(BrokerError):
    """SERVICE_NOT_AVAILABLE (14): shutting down, read-only, or disk full."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class VersionNotSupportedError(BrokerError):
    """VERSION_NOT_SUPPORTED (15)."""

    code = ResponseCode.VERSION_NOT_SUPPORTED


class NoPermissionError(BrokerError):
    """NO_PERMISSION (16): the topic or broker forbids it (e.g. write permission wiped)."""

    code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExistError(BrokerError):
    """TOPIC_NOT_EXIST (17)."""

    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class TopicExistAlreadyError(BrokerError):
    """TOPIC_EXIST_ALREADY (18)."""

    code = ResponseCode.TOPIC_EXIST_ALREADY


class PullNotFoundError(BrokerError):
    """PULL_NOT_FOUND (19): no new message (pull consumers treat it as a status)."""

    code = ResponseCode.PULL_NOT_FOUND


class PullRetryImmediatelyError(BrokerError):
    """PULL_RETRY_IMMEDIATELY (20) (pull consumers treat it as a status)."""

    code = ResponseCode.PULL_RETRY_IMMEDIATELY


class PullOffsetMovedError(BrokerError):
    """PULL_OFFSET_MOVED (21) (pull consumers treat it as a status)."""

    code = ResponseCode.PULL_OFFSET_MOVED


class QueryNotFoundError(BrokerError):
    """QUERY_NOT_FOUND (22): nothing matched (no message, no stored offset)."""

    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionError(BrokerError):
    """Family: a subscription or filter problem."""

    code = -1


class SubscriptionParseFailedError(SubscriptionError):
    """SUBSCRIPTION_PARSE_FAILED (23)."""

    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(SubscriptionError):
    """SUBSCRIPTION_NOT_EXIST (24)."""

    code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatestError(SubscriptionError):
    """SUBSCRIPTION_NOT_LATEST (25)."""

    code = ResponseCode.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExistError(SubscriptionError):
    """SUBSCRIPTION_GROUP_NOT_EXIST (26)."""

    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class FilterDataNotExistError(SubscriptionError):
    """FILTER_DATA_NOT_EXIST (27)."""

    code = ResponseCode.FILTER_DATA_NOT_EXIST


class FilterDataNotLatestError(SubscriptionError):
    """FILTER_DATA_NOT_LATEST (28)."""

    code = ResponseCode.FILTER_DATA_NOT_LATEST


class TransactionError(BrokerError):
    """Family: transaction state answers."""

    code = -1


class TransactionShouldCommitError(TransactionError):
    """TRANSACTION_SHOULD_COMMIT (200)."""

    code = ResponseCode.TRANSACTION_SHOULD_COMMIT


class TransactionShouldRollbackError(TransactionError):
    """TRANSACTION_SHOULD_ROLLBACK (201)."""

    code = ResponseCode.TRANSACTION_SHOULD_ROLLBACK


class TransactionStateUnknownError(TransactionError):
    """TRANSACTION_STATE_UNKNOW (202)."""

    code = ResponseCode.TRANSACTION_STATE_UNKNOW


class TransactionStateGroupWrongError(TransactionError):
    """TRANSACTION_STATE_GROUP_WRONG (203)."""

    code = ResponseCode.TRANSACTION_STATE_GROUP_WRONG


class NoBuyerIdError(BrokerError):
    """NO_BUYER_ID (204)."""

    code = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnitError(BrokerError):
    """NOT_IN_CURRENT_UNIT (205)."""

    code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


class ConsumerNotOnlineError(BrokerError):
    """CONSUMER_NOT_ONLINE (206): the consumer asked about is not connected."""

    code = ResponseCode.CONSUMER_NOT_ONLINE


class ConsumeMessageTimeoutError(BrokerError):
    """CONSUME_MSG_TIMEOUT (207)."""

    code = ResponseCode.CONSUME_MSG_TIMEOUT


class NoMessageError(BrokerError):
    """NO_MESSAGE (208)."""

    code = ResponseCode.NO_MESSAGE


class UpdateAclConfigFailedError(BrokerError):
    """UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209)."""

    code = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED


class DeleteAclConfigFailedError(BrokerError):
    """DELETE_ACL_CONFIG_FAILED (210)."""

    code = ResponseCode.DELETE_ACL_CONFIG_FAILED


class UpdateGlobalWhiteAddrsConfigFailedError(BrokerError):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211)."""

    code = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED


def _build_table() -> dict[int, type[BrokerError]]:
    table: dict[int, type[BrokerError]] = {}
    pending: list[type[BrokerError]] = list(BrokerError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.code < 0:
            continue  # a family base or the unknown fallback
        # asyncpg checks for duplicates the same way: two classes for one code is a bug.
        if cls.code in table:
            raise RuntimeError(f"two error classes for code {cls.code}: {table[cls.code]}, {cls}")
        table[cls.code] = cls
    return table


_BY_CODE: Final = _build_table()


def error_class_for_code(code: int) -> type[BrokerError]:
    """The error class for a response code.

    Args:
        code: A non-success response code.

    Returns:
        Its class, or :class:`UnknownBrokerError` for a code this SDK does not know.
    """
    return _BY_CODE.get(code, UnknownBrokerError)


def error_for_code(code: int, remark: str | None = None, *, addr: str | None = None) -> BrokerError:
    """Build the error for a broker's non-success answer.

    Args:
        code: The response code.
        remark: The answer's remark.
        addr: ``"host:port"`` of the peer that answered.

    Returns:
        An instance of the code's class (:class:`UnknownBrokerError` when unknown, with
        ``response_code`` set to ``code``).
    """
    return error_class_for_code(code)(remark, addr=addr, code=code)


#: What a background job of the SDK (a heartbeat, a route refresh, a rebalance) may
#: meet in normal operation, e.g. while a broker restarts: logged, and tried again at
#: the next tick, never reported as a failure.
TRANSIENT_ERRORS: Final[tuple[type[Exception], ...]] = (TransportError, BrokerError, NoRouteError)
