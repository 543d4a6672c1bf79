"""Topic and group names: RocketMQ's system names and its rules for valid names.

One home for the names every layer uses (the store's schedule topic, the broker's
transaction and template topics, the SDK's retry topics) and for the check of a name
that arrives from a user or from the wire.

The rules are RocketMQ 4.9's ``TopicValidator`` / ``Validators``: letters, digits,
``%``, ``|``, ``-`` and ``_``; a topic at most 127 characters (the stored record keeps
its length in one signed byte), a group at most 255. The whole name must match, as
Java's ``Matcher.matches`` requires (a ``re.match`` with ``$`` would let a trailing
newline through and store a topic no client can name).

The checks run on many requests (offsets, queue metadata, locks), so the verdicts on
names of legal length are remembered (a bounded cache: clients use a few names again
and again); a longer name is refused at once and never kept.
"""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = [
    "ADMIN_SYSTEM_GROUPS",
    "AUTO_CREATE_TOPIC",
    "BROKER_SYSTEM_GROUPS",
    "DLQ_PREFIX",
    "MAX_GROUP_LENGTH",
    "MAX_TOPIC_LENGTH",
    "OFFSET_MOVED_EVENT",
    "ORDER_TOPIC_CONFIG",
    "RETRY_PREFIX",
    "SCHEDULE_TOPIC",
    "SELF_TEST_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "VALID_NAME_PATTERN",
    "check_group_name",
    "check_topic_name",
    "dlq_topic",
    "is_retry_topic",
    "retry_topic",
]

#: The template topic auto-created topics copy (``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC``).
AUTO_CREATE_TOPIC: Final = "TBW102"
#: Where delayed messages wait for their delivery time.
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
#: Transaction half messages, and the op records that end them.
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
#: A consumer group's retry topic is ``%RETRY%<group>``, its dead-letter topic ``%DLQ%<group>``.
RETRY_PREFIX: Final = "%RETRY%"
DLQ_PREFIX: Final = "%DLQ%"
#: The name server's KV namespace of ordered topics' ``brokerName:queueNums`` lists
#: (``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``).
ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
#: Groups a broker has from its first start (``SubscriptionGroupManager.init``).
BROKER_SYSTEM_GROUPS: Final = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
)
#: Groups mqadmin never treats as a user's (``DefaultMQAdminExtImpl.SYSTEM_GROUP_SET``):
#: the broker's own and the clients' built-in ones.
ADMIN_SYSTEM_GROUPS: Final = frozenset(
    {
        *BROKER_SYSTEM_GROUPS,
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
    }
)

#: The characters RocketMQ allows, as its remarks quote them.
VALID_NAME_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"
MAX_TOPIC_LENGTH: Final = 127
MAX_GROUP_LENGTH: Final = 255
_VALID: Final = re.compile(r"[%|a-zA-Z0-9_-]+")


def retry_topic(group: str) -> str:
    """Return the retry topic of a consumer group."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """Return the dead-letter topic of a consumer group."""
    return DLQ_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """Whether ``topic`` is some group's retry topic."""
    return topic.startswith(RETRY_PREFIX)


def check_topic_name(topic: str) -> str | None:
    """Validate a topic name with RocketMQ's rules and remarks.

    Args:
        topic: The name, as received.

    Returns:
        ``None`` when valid, else the reason (RocketMQ's remark text).
    """
    if len(topic) > MAX_TOPIC_LENGTH:
        return _too_long("topic", MAX_TOPIC_LENGTH)
    return _check_topic(topic)


def check_group_name(group: str) -> str | None:
    """Validate a producer or consumer group name with RocketMQ's rules and remarks.

    Args:
        group: The name, as received.

    Returns:
        ``None`` when valid, else the reason (RocketMQ's remark text).
    """
    if len(group) > MAX_GROUP_LENGTH:
        return _too_long("group", MAX_GROUP_LENGTH)
    return _check_group(group)


def _too_long(what: str, max_length: int) -> str:
    return f"the specified {what} is longer than {what} max length {max_length}"


@functools.lru_cache(maxsize=4096)
def _check_topic(name: str) -> str | None:
    return _check(name, "topic")


@functools.lru_cache(maxsize=4096)
def _check_group(name: str) -> str | None:
    return _check(name, "group")


def _check(name: str, what: str) -> str | None:
    if not name or name.isspace():
        return f"the specified {what} is blank"
    if _VALID.fullmatch(name) is None:
        # ascii(): a lone surrogate or control character shows as its escape, and the
        # remark always has a UTF-8 form.
        return (
            f"the specified {what}[{name!a}] contains illegal characters, "
            f"allowing only {VALID_NAME_PATTERN}"
        )
    return None
