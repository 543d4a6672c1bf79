"""An early answer from deep inside a processor: a response code and the reason."""

from __future__ import annotations

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand

__all__ = ["Refused"]


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
