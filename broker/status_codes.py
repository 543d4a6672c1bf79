"""The one place where store outcomes become remoting response codes.

Mappings follow RocketMQ 4.9's ``SendMessageProcessor.handlePutMessageResult`` and
``PullMessageProcessor.processRequest``.
"""

from __future__ import annotations

from typing import Final

from rocklet.protocol.codes import ResponseCode
from rocklet.store.results import GetMessageStatus, PutMessageStatus

__all__ = ["PULL_STATUS_TO_RESPONSE", "PUT_STATUS_TO_RESPONSE", "pull_response_code"]

PUT_STATUS_TO_RESPONSE: Final[dict[PutMessageStatus, ResponseCode]] = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    # Stored, but not durable in time. The C++ client retries on it (§2.2), so only
    # SYNC_FLUSH with a disk slower than syncFlushTimeout ever answers it.
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutMessageStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}

PULL_STATUS_TO_RESPONSE: Final[dict[GetMessageStatus, ResponseCode]] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    # Refined by pull_response_code: these depend on the requested offset.
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: ResponseCode.PULL_NOT_FOUND,
}


def pull_response_code(status: GetMessageStatus, requested_offset: int) -> ResponseCode:
    """Map a read's status to a pull response code.

    An empty or unknown queue answers PULL_NOT_FOUND only to a pull from offset 0; any
    other offset is wrong for it, so the consumer is told to move (PULL_OFFSET_MOVED),
    as RocketMQ does.

    Args:
        status: The store's outcome.
        requested_offset: The offset the pull asked for.

    Returns:
        The response code.
    """
    if status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE):
        return (
            ResponseCode.PULL_NOT_FOUND if requested_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
        )
    return PULL_STATUS_TO_RESPONSE[status]
