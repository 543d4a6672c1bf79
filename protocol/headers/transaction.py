"""Transaction and request-reply headers (docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from rocklet.protocol.headers.base import (
    INT32,
    NON_NEGATIVE_INT32,
    NON_NEGATIVE_INT64,
    Header,
    wire,
)

__all__ = [
    "CheckTransactionStateRequestHeader",
    "EndTransactionRequestHeader",
    "ReplyMessageRequestHeader",
    "TransactionType",
]


class TransactionType(IntEnum):
    """``commitOrRollback`` values (``MessageSysFlag.TRANSACTION_*_TYPE``)."""

    NOT_TYPE = 0  #: state unknown: keep the half message for a later check
    COMMIT = 8  #: deliver the half message to its real topic
    ROLLBACK = 12  #: discard the half message


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37): resolve a half message.

    ``tranStateTableOffset`` is the half message's queue offset and ``commitLogOffset``
    its commit-log offset (the C++ client takes it from the offset msgId returned by
    the send). ``fromTransactionCheck`` arrives as "0"/"1" from C++.
    """

    producer_group: str = wire("producerGroup")
    tran_state_table_offset: int = wire("tranStateTableOffset", bounds=NON_NEGATIVE_INT64)
    commit_log_offset: int = wire("commitLogOffset", bounds=NON_NEGATIVE_INT64)
    commit_or_rollback: int = wire("commitOrRollback", bounds=INT32)
    msg_id: str = wire("msgId")  #: the message's UNIQ_KEY
    from_transaction_check: bool = wire("fromTransactionCheck", False)
    transaction_id: str | None = wire("transactionId", None)

    @property
    def transaction_type(self) -> TransactionType | None:
        """``commit_or_rollback`` as :class:`TransactionType`, ``None`` if unknown."""
        try:
            return TransactionType(self.commit_or_rollback)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker to producer: what became of this half message?"""

    tran_state_table_offset: int = wire("tranStateTableOffset", bounds=NON_NEGATIVE_INT64)
    commit_log_offset: int = wire("commitLogOffset", bounds=NON_NEGATIVE_INT64)
    msg_id: str | None = wire("msgId", None)  #: UNIQ_KEY
    transaction_id: str | None = wire("transactionId", None)  #: UNIQ_KEY as well
    offset_msg_id: str | None = wire("offsetMsgId", None)


@dataclass(frozen=True, slots=True)
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the send fields plus where the reply was stored."""

    producer_group: str = wire("producerGroup")
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    default_topic_queue_nums: int = wire("defaultTopicQueueNums", bounds=INT32)
    queue_id: int = wire("queueId", bounds=INT32)
    sys_flag: int = wire("sysFlag", bounds=INT32)
    born_timestamp: int = wire("bornTimestamp")
    flag: int = wire("flag", bounds=INT32)
    born_host: str = wire("bornHost")  #: ``ip:port`` of the replier
    store_host: str = wire("storeHost")  #: ``ip:port`` of this broker
    store_timestamp: int = wire("storeTimestamp")
    properties: str | None = wire("properties", None)
    reconsume_times: int = wire("reconsumeTimes", 0, bounds=NON_NEGATIVE_INT32)
    unit_mode: bool = wire("unitMode", False)
