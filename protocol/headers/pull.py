"""PULL_MESSAGE (11) headers (docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntFlag
from typing import Final

from rocklet.protocol.headers.base import (
    INT32,
    NON_NEGATIVE_INT64,
    POSITIVE_INT32,
    Header,
    wire,
)

__all__ = [
    "PULL_SYS_FLAG_BITS",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PullSysFlag",
    "pull_request_fields",
    "pull_response_fields",
]


class PullSysFlag(IntFlag):
    """``sysFlag`` bits of a pull (``common/sysflag/PullSysFlag.java``)."""

    COMMIT_OFFSET = 1  #: store ``commitOffset`` for the group (master only)
    SUSPEND = 2  #: the broker may hold the request until a message arrives (long poll)
    SUBSCRIPTION = 4  #: use this request's ``subscription``, not the heartbeat's
    CLASS_FILTER = 8  #: filter-server class filter (obsolete)
    LITE_PULL = 16  #: 4.9 lite pull consumer


#: Every :class:`PullSysFlag` bit (RocketMQ 5 defines no more).
PULL_SYS_FLAG_BITS: Final = 0x1F


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader(Header):
    """``PullMessageRequestHeader``: read up to ``max_msg_nums`` messages from a queue.

    Java marks every field but ``subscription`` and ``expressionType`` as required;
    we only require what locates the read, and default the rest the way a client
    that sent nothing would mean it (no commit, no suspend, Java's batch size).
    """

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    #: Checked against the topic's read queues by the broker (RocketMQ's remark).
    queue_id: int = wire("queueId", bounds=INT32)
    #: Java's pull consumers refuse a negative offset before sending ("offset < 0").
    queue_offset: int = wire("queueOffset", bounds=NON_NEGATIVE_INT64)
    #: Java's pull consumers refuse ``maxNums <= 0``; the broker caps it.
    max_msg_nums: int = wire("maxMsgNums", 32, bounds=POSITIVE_INT32)
    sys_flag: int = wire("sysFlag", 0, bounds=(0, PULL_SYS_FLAG_BITS))
    #: Java sends -1 (nothing in memory) with the commit bit clear.
    commit_offset: int = wire("commitOffset", 0)
    suspend_timeout_millis: int = wire("suspendTimeoutMillis", 0, bounds=NON_NEGATIVE_INT64)
    subscription: str | None = wire("subscription", None)
    sub_version: int = wire("subVersion", 0)
    #: ``TAG`` or ``SQL92``; only Java sends it, ``None`` means TAG.
    expression_type: str | None = wire("expressionType", None)

    @property
    def flags(self) -> PullSysFlag:
        """``sys_flag`` as :class:`PullSysFlag` bits."""
        return PullSysFlag(self.sys_flag & 0x1F)


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader(Header):
    """``PullMessageResponseHeader``: all four are required by Java and C++ clients."""

    suggest_which_broker_id: int = wire("suggestWhichBrokerId")
    next_begin_offset: int = wire("nextBeginOffset")
    min_offset: int = wire("minOffset")
    max_offset: int = wire("maxOffset")


# The two headers of every pull, built straight as the dicts their classes render:
# a consumer sends one request, and the broker one answer, per 32 messages or fewer.


def pull_request_fields(
    consumer_group: str,
    topic: str,
    queue_id: int,
    queue_offset: int,
    max_msg_nums: int,
    sys_flag: int,
    commit_offset: int,
    suspend_timeout_millis: int,
    subscription: str,
    sub_version: int,
) -> dict[str, str]:
    """The extFields of :class:`PullMessageRequestHeader` with these values.

    The same dict as the header's ``to_ext_fields()`` (no ``expressionType``).

    Returns:
        Key to string value.
    """
    return {
        "consumerGroup": consumer_group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "maxMsgNums": str(max_msg_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": str(suspend_timeout_millis),
        "subscription": subscription,
        "subVersion": str(sub_version),
    }


def pull_response_fields(
    next_begin_offset: int, min_offset: int, max_offset: int
) -> dict[str, str]:
    """The extFields of a :class:`PullMessageResponseHeader` suggesting the master (0).

    Returns:
        Key to string value, as the header's ``to_ext_fields()``.
    """
    return {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": str(next_begin_offset),
        "minOffset": str(min_offset),
        "maxOffset": str(max_offset),
    }
