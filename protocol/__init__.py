"""Sans-IO implementation of RocketMQ 4.x's remoting protocol.

No networking, threads or files: bytes in, typed values out, and back. The broker,
name server and SDK drive it over asyncio; the store uses its stored-message codec.
"""

from rocklet.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rocklet.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from rocklet.protocol.errors import (
    BodyError,
    FrameError,
    HeaderError,
    MessageFormatError,
    ProtocolError,
)
from rocklet.protocol.frame import FrameDecoder, encode_command, encode_command_parts

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "BodyError",
    "FrameDecoder",
    "FrameError",
    "HeaderError",
    "LanguageCode",
    "MessageFormatError",
    "ProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "encode_command",
    "encode_command_parts",
]
