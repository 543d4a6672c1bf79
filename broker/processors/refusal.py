"""An early answer from deep inside a processor: a response code and the reason."""

from __future__ import annotations

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.names import check_group_name, check_topic_name

__all__ = ["Refused", "refuse_bad_group", "refuse_bad_topic"]


class Refused(Exception):
    """Raised by a processor's checks; the processor answers with :meth:`answer`.

    Args:
        code: The response code (e.g. TOPIC_NOT_EXIST, NO_PERMISSION).
        remark: Why, in words a user can act on (RocketMQ's remark where one exists).
    """

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark

    def answer(self, request: RemotingCommand) -> RemotingCommand:
        """Build the response to ``request``."""
        return request.make_response(self.code, remark=self.remark)


def refuse_bad_group(
    request: RemotingCommand,
    group: str,
    code: ResponseCode = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
) -> RemotingCommand | None:
    """The answer to a request naming a group RocketMQ's name rules reject.

    RocketMQ 4.9.4's broker checks no group name (only its clients do), so a group no
    client could name would be stored, created or registered. Such a group cannot
    exist: SUBSCRIPTION_GROUP_NOT_EXIST by default, or the request family's refusal
    code; the remark is the rule (``check_group_name``, names shown escaped).

    Args:
        request: The request to answer.
        group: The group name it carries.
        code: The response code for this request family.

    Returns:
        The refusal, or ``None`` when the name is valid.
    """
    problem = check_group_name(group)
    return None if problem is None else request.make_response(code, remark=problem)


def refuse_bad_topic(
    request: RemotingCommand, topic: str, code: ResponseCode = ResponseCode.SYSTEM_ERROR
) -> RemotingCommand | None:
    """The answer to a request naming a topic RocketMQ's name rules reject.

    Such a topic cannot exist, since no request creates one. Where the request family
    answers a missing topic with TOPIC_NOT_EXIST (pulls, topic stats, routes, offset
    commits) that is the code; everywhere else it is ``TopicValidator.validateTopic``'s
    SYSTEM_ERROR. The remark is the rule (``check_topic_name``, names shown escaped).

    Args:
        request: The request to answer.
        topic: The topic it carries.
        code: The response code for this request family.

    Returns:
        The refusal, or ``None`` when the name is valid.
    """
    problem = check_topic_name(topic)
    return None if problem is None else request.make_response(code, remark=problem)
