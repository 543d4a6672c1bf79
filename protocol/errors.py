"""The protocol package's error tree.

Every way a peer can break the protocol raises a subclass of :class:`ProtocolError`,
never anything else (the codec's fuzz invariant). Each error says what was wrong and
carries the answer to give: a response code for a request we can still answer, or
``None`` when the only safe answer is to close the connection (a broken frame leaves
no trustworthy boundary to resume from).
"""

from __future__ import annotations

from rocklet.protocol.codes import ResponseCode

__all__ = ["BodyError", "FrameError", "HeaderError", "MessageFormatError", "ProtocolError"]


class ProtocolError(Exception):
    """Base class: the peer's bytes violate the remoting protocol.

    Attributes:
        response_code: What to answer the offending request with, or ``None`` when the
            connection must be closed instead.
    """

    response_code: ResponseCode | None = None

    def __init__(self, message: str, *, response_code: ResponseCode | None = None) -> None:
        super().__init__(message)
        if response_code is not None:
            self.response_code = response_code


class FrameError(ProtocolError):
    """A frame cannot be delimited or its header cannot be parsed; close the connection."""


class HeaderError(ProtocolError):
    """A request's header fields are missing, ill-typed or out of range.

    The frame itself was intact, so the request gets an answer (``SYSTEM_ERROR`` by
    default, as Java's ``RemotingCommandException`` does) and the connection stays open.
    """

    response_code: ResponseCode | None = ResponseCode.SYSTEM_ERROR


class MessageFormatError(ProtocolError):
    """Bytes that should hold a stored message, a batch body or a message id do not."""

    response_code: ResponseCode | None = ResponseCode.MESSAGE_ILLEGAL


class BodyError(ProtocolError):
    """A request's or response's JSON body is malformed or lacks a required member.

    Like :class:`HeaderError`, the frame was intact, so the request is answered with
    ``SYSTEM_ERROR`` (Java's fastjson throws inside the processor, which the remoting
    layer turns into ``SYSTEM_ERROR``) and the connection stays open.
    """

    response_code: ResponseCode | None = ResponseCode.SYSTEM_ERROR
