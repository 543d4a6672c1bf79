"""The remoting command: one request or response, as it travels in a frame."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from rocklet.protocol import compiled
from rocklet.protocol.codes import SerializeType

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "OUR_LANGUAGE",
    "OUR_VERSION",
    "RemotingCommand",
    "new_command",
]

#: ``flag`` bit 0: the command is a response (``RemotingCommand.RPC_TYPE``).
FLAG_RESPONSE: Final = 0b01
#: ``flag`` bit 1: the sender expects no answer (``RPC_ONEWAY``). The C++ 1.2 client
#: never sets it on the wire (docs/protocol.md), so servers must not rely on it.
FLAG_ONEWAY: Final = 0b10
#: What we put in ``language``. Java clients only check it for logging; "JAVA" is what
#: every client has seen from a real broker.
OUR_LANGUAGE: Final = "JAVA"
#: ``MQVersion.V4_9_4`` ordinal. Java clients refuse SQL92 subscriptions against brokers
#: reporting less than V4_1_0 (232), and name servers pick route JSON style by it.
OUR_VERSION: Final = 401

_EMPTY: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class RemotingCommand:
    """One remoting command.

    ``ext_fields`` always holds strings: decoders normalise the JSON numbers and
    booleans that some clients send (docs/protocol.md), and encoders emit
    strings because the C++ client reads nothing else. Typed views of the fields are
    the header classes in :mod:`rocklet.protocol.headers`.

    Attributes:
        code: Request code, or response code when ``flag`` has :data:`FLAG_RESPONSE`.
        opaque: Request id chosen by the requester's connection; responses echo it.
        flag: Bit field of :data:`FLAG_RESPONSE` and :data:`FLAG_ONEWAY`.
        remark: Free text, typically the reason for an error; ``None`` when absent.
        ext_fields: Custom header fields, name to string value.
        body: Payload bytes; meaning depends on the code.
        language: Sender's language name (``"JAVA"``, ``"CPP"``, ...).
        version: Sender's ``MQVersion`` ordinal.
        serialize_type: How the header was (or will be) serialized.
    """

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    body: bytes = b""
    language: str = OUR_LANGUAGE
    version: int = OUR_VERSION
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Whether this command answers an earlier request."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Whether the sender marked this request as expecting no answer."""
        return bool(self.flag & FLAG_ONEWAY)

    def make_response(
        self,
        code: int,
        *,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """Build the answer to this request.

        The answer echoes the opaque and uses the request's own serialization, because
        the C++ and Node clients cannot read a binary header (docs/protocol.md).

        Args:
            code: Response code.
            remark: Optional text; set it on every error so the user learns why.
            ext_fields: Response header fields (strings).
            body: Response body.

        Returns:
            The response command.
        """
        fields = _EMPTY if ext_fields is None else ext_fields
        if _build is not None:
            return _build(  # type: ignore[no-any-return]
                _new,
                RemotingCommand,
                _SLOTS,
                (code, self.opaque, FLAG_RESPONSE, remark, fields, body, OUR_LANGUAGE,
                 OUR_VERSION, self.serialize_type),
            )  # fmt: skip
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=fields,
            body=body,
            serialize_type=self.serialize_type,
        )


# A frozen dataclass's __init__ sets each field through object.__setattr__, ~2 us for a
# command; the compiled twin sets the same slots directly (~0.3 us). Same instance.
_speedups = compiled.load("rocklet.protocol._speedups")
_build = None if _speedups is None else _speedups.build
_new = object.__new__
_SLOTS = tuple(RemotingCommand.__dict__[name] for name in RemotingCommand.__dataclass_fields__)


def new_command(
    code: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: Mapping[str, str],
    body: bytes,
    language: str,
    version: int,
    serialize_type: SerializeType,
) -> RemotingCommand:
    """``RemotingCommand(...)`` with every field given, built the fastest way available.

    For decoders: the same instance as the constructor's, without ``__init__``'s cost.
    """
    values = (code, opaque, flag, remark, ext_fields, body, language, version, serialize_type)
    if _build is not None:
        return _build(_new, RemotingCommand, _SLOTS, values)  # type: ignore[no-any-return]
    return RemotingCommand(*values)
