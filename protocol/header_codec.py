r"""Header serialization: JSON (type 0), ROCKETMQ binary (type 1) and msgpack (Rocklet).

Layout of the ROCKETMQ binary header (``RocketMQSerializable.java``), big-endian:

    ======  =======  ==========================================
    offset  size     field
    ======  =======  ==========================================
    0       2        code (int16)
    2       1        language code (int8)
    3       2        version (int16)
    5       4        opaque (int32)
    9       4        flag (int32)
    13      4        remark length R (0 = no remark)
    17      R        remark, UTF-8
    17+R    4        ext length E
    21+R    E        entries: int16 key length, key, int32 value length, value
    ======  =======  ==========================================

Decoders accept what the official clients send: numbers, booleans and strings as
extFields values, which are normalised to strings the way Java's fastjson does
(docs/protocol.md). Encoders always emit an ``extFields`` object of strings.

Text that is not UTF-8 (a binary or msgpack string, or a JSON header with such bytes
inside a string) is decoded with ``surrogateescape``: each bad byte becomes a lone
surrogate, exactly like the ``\ud800`` escapes a JSON header may carry. The frame
stays intact, so the request is answered; the typed headers refuse such values
(:mod:`rocklet.protocol.headers.base`). Encoders write any such text back without
failing: JSON as ``\u`` escapes, binary and msgpack with the bad bytes restored or,
for other lone surrogates, as ``\uDCxx`` text.

Integer ranges: ``opaque``, ``flag`` and (in JSON and msgpack) ``code`` and ``version``
are Java ``int`` fields, so every type carries them as int32; the binary layout narrows
``code`` and ``version`` to int16. Encoders refuse values outside those ranges with a
``ValueError`` (a caller bug, never a peer's) instead of emitting a header that Java
would truncate and our own decoder would refuse.
"""

from __future__ import annotations

import json
import json.decoder
import json.encoder
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgpack

from rocklet.protocol import compiled
from rocklet.protocol.codes import LanguageCode, SerializeType
from rocklet.protocol.command import RemotingCommand, new_command
from rocklet.protocol.errors import FrameError

__all__ = ["decode_header", "encode_header", "normalize_ext_value"]

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_INT16_MIN: Final = -(2**15)
_INT16_MAX: Final = 2**15 - 1
_BIN_FIXED = struct.Struct(">hbhii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_LANG_BY_NUMBER: Final = {m.value: m.name for m in LanguageCode}
_LANG_BY_NAME: Final = {m.name: m.value for m in LanguageCode}
_OTHER: Final = int(LanguageCode.OTHER)
# The compiled twins of _decode_binary/_encode_binary (None: the Python ones serve).
_speedups = compiled.load("rocklet.protocol._speedups")
_STR_ONLY: Final = frozenset({str})
_JSON: Final = int(SerializeType.JSON)
#: What JSON allows around a value (json.loads accepts exactly these).
_JSON_SPACE: Final = " \t\n\r"
#: The error handler that keeps bytes that are not UTF-8 as lone surrogates.
_KEEP: Final = "surrogateescape"

# Every request and answer has a JSON header, so the stdlib's C scanner and encoder
# are called directly: ``json.loads`` and ``json.dumps`` wrap them in Python layers
# (encoding detection, a new encoder object per call with our separators) that cost
# more than the parsing itself. The results are the same; anything unusual (a BOM, an
# encoding other than UTF-8, trailing whitespace, a malformed header) takes the
# ``json.loads`` path, so errors read exactly as before.
# (typeshed does not list these undocumented but long-standing attributes.)
_scan_json: Callable[[str, int], tuple[Any, int]]
_scan_json = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
_c_make_encoder: Callable[..., Callable[[Any, int], list[str]]] | None
_c_make_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]
_encode_json: Callable[[Any], str]
if _c_make_encoder is not None:
    _c_encoder = _c_make_encoder(
        None,  # no circular-reference bookkeeping: headers are flat
        json.JSONEncoder().default,  # the TypeError json.dumps raises for odd values
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,
        ":",
        ",",
        False,
        False,
        True,
    )

    def _encode_json(obj: Any) -> str:
        return "".join(_c_encoder(obj, 0))

else:  # pragma: no cover - CPython always has the C encoder

    def _encode_json(obj: Any) -> str:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _utf8(text: str) -> bytes:
    """UTF-8 of text that may hold lone surrogates (see the module docstring)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape")  # bytes we decoded: as they were
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace")


def _text(data: bytes) -> str:
    return data.decode("utf-8", _KEEP)


def normalize_ext_value(value: object) -> str | None:
    """Turn one received extFields value into the string Java would have seen.

    Args:
        value: A decoded JSON or msgpack value.

    Returns:
        The string form, or ``None`` for a null (the field is then absent).

    Raises:
        FrameError: The value has no JSON text form (msgpack binary or extension
            types, or containers holding them).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value))
    # fastjson coerces nested values to their JSON text; do the same rather than fail.
    # Only msgpack can hand us values JSON cannot express (bin, ext, bytes keys).
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        raise FrameError(f"header value of type {type(value).__name__} is unsupported") from None


def _ext_from(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise FrameError(f"extFields must be an object, got {type(raw).__name__}")
    # Java, Node-with-strings and our own SDK send only string keys and values: then the
    # freshly decoded dict is already what we want, and building a copy is wasted work.
    if all(type(k) is str and type(v) is str for k, v in raw.items()):
        return raw
    return _normalized(raw)


def _normalized(raw: dict[Any, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw.items():
        # Strings and ints (the C++ client sends four numbers per send) without a
        # call each; normalize_ext_value for the rest. type() excludes bool.
        if type(value) is str:
            text = value
        elif type(value) is int:
            text = str(value)
        else:
            normalized = normalize_ext_value(value)
            if normalized is None:
                continue
            text = normalized
        out[key if type(key) is str else str(key)] = text
    return out


def _int_field(obj: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = obj.get(name)
    if value is None:  # absent or null: fastjson leaves the int field at its default
        value = default
    if isinstance(value, str):  # fastjson would coerce "10" to 10; so do we
        try:
            value = int(value)
        except ValueError:
            raise FrameError(f"header field {name!r} is not an integer: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FrameError(f"header field {name!r} must be an integer, got {value!r}")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise FrameError(f"header field {name!r} is out of the int32 range: {value}")
    return value


def _from_mapping(obj: object, stype: SerializeType, body: bytes) -> RemotingCommand:
    if type(obj) is dict:
        # What every client sends: int fields, a string remark and language, and
        # extFields of strings. Checked in one pass and built without conversions.
        get = obj.get
        code, opaque, flag, version = get("code"), get("opaque"), get("flag"), get("version")
        ext, remark, language = get("extFields"), get("remark"), get("language")
        if (
            type(code) is int
            and type(opaque) is int
            and type(flag) is int
            and type(version) is int
            and _INT32_MIN <= code <= _INT32_MAX
            and _INT32_MIN <= opaque <= _INT32_MAX
            and _INT32_MIN <= flag <= _INT32_MAX
            and _INT32_MIN <= version <= _INT32_MAX
            and type(ext) is dict
            and (remark is None or type(remark) is str)
            and type(language) is str
        ):
            if not (
                _STR_ONLY.issuperset(map(type, ext.values()))
                and (stype == SerializeType.JSON or _STR_ONLY.issuperset(map(type, ext)))
            ):
                ext = _normalized(ext)  # e.g. the C++ client's numbers
            return RemotingCommand(code, opaque, flag, remark, ext, body, language, version, stype)
    return _from_mapping_checked(obj, stype, body)


def _from_mapping_checked(obj: object, stype: SerializeType, body: bytes) -> RemotingCommand:
    if not isinstance(obj, dict):
        raise FrameError("header is not an object")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = normalize_ext_value(remark)
    language = obj.get("language", "OTHER")
    return new_command(
        _int_field(obj, "code"),
        _int_field(obj, "opaque", 0),
        _int_field(obj, "flag", 0),
        remark,
        _ext_from(obj.get("extFields")),
        body,
        language if isinstance(language, str) else "OTHER",
        _int_field(obj, "version", 0),
        stype,
    )


def _decode_binary_py(data: bytes, body: bytes) -> RemotingCommand:
    size = len(data)
    if size < _BIN_FIXED.size + 8:
        raise FrameError(f"binary header of {size} bytes is shorter than the minimum 21")
    code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(data, 0)
    pos = _BIN_FIXED.size
    (remark_len,) = _I32.unpack_from(data, pos)
    pos += 4
    if remark_len < 0 or pos + remark_len + 4 > size:
        raise FrameError(f"binary header remark length {remark_len} overruns the header")
    # Inline decodes (not _text): this runs for every string of every binary header.
    remark = data[pos : pos + remark_len].decode("utf-8", "surrogateescape") if remark_len else None
    pos += remark_len
    (ext_len,) = _I32.unpack_from(data, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != size:
        raise FrameError(f"binary header ext length {ext_len} does not match the header size")
    ext: dict[str, str] = {}
    while pos < size:
        if pos + 2 > size:
            raise FrameError("binary header ext entry is truncated")
        (klen,) = _I16.unpack_from(data, pos)
        pos += 2
        if klen < 0 or pos + klen + 4 > size:
            raise FrameError(f"binary header ext key length {klen} overruns the header")
        key = data[pos : pos + klen].decode("utf-8", "surrogateescape")
        pos += klen
        (vlen,) = _I32.unpack_from(data, pos)
        pos += 4
        if vlen < 0 or pos + vlen > size:
            raise FrameError(f"binary header ext value length {vlen} overruns the header")
        ext[key] = data[pos : pos + vlen].decode("utf-8", "surrogateescape")
        pos += vlen
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        language=_LANG_BY_NUMBER.get(lang, "OTHER"),
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _decode_binary_c(data: bytes, body: bytes) -> RemotingCommand:
    assert _speedups is not None
    code, lang, version, opaque, flag, remark, ext = _speedups.decode_binary(data)
    language = _LANG_BY_NUMBER.get(lang, "OTHER")
    return new_command(
        code, opaque, flag, remark, ext, body, language, version, SerializeType.ROCKETMQ
    )


_decode_binary = _decode_binary_py if _speedups is None else _decode_binary_c


def _json_slow(data: bytes) -> object:
    """``json.loads`` for a header the fast path did not take (BOM, UTF-16, bad bytes)."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        pass  # bytes that are not UTF-8 inside a string value: kept as surrogates below
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"JSON header does not parse: {exc}") from None
    try:
        return json.loads(_text(data))
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"JSON header does not parse: {exc}") from None


def decode_header(stype: int, data: bytes, body: bytes) -> RemotingCommand:
    """Decode one header of the given serialization and attach the body.

    Args:
        stype: The serialize type from the frame's header-length word.
        data: The header bytes.
        body: The frame's body bytes.

    Returns:
        The command.

    Raises:
        FrameError: The header cannot be parsed; the connection should be closed.
    """
    if stype == _JSON:
        # json.loads(data), straight to the C scanner for the usual header (see
        # _scan_json); anything else goes through json.loads itself.
        obj: object = None
        try:
            text = data.decode()
            if text.startswith("{"):
                obj, end = _scan_json(text, 0)
                # The C++ client's JSON writer ends its headers with a newline.
                if end != len(text) and text[end:].strip(_JSON_SPACE):
                    obj = None
        except (StopIteration, ValueError, RecursionError):
            obj = None
        if obj is None:
            obj = _json_slow(data)
        return _from_mapping(obj, SerializeType.JSON, body)
    if stype == SerializeType.ROCKETMQ:
        return _decode_binary(data, body)
    if stype == SerializeType.MSGPACK:
        try:
            obj = msgpack.unpackb(
                data, raw=False, strict_map_key=False, unicode_errors="surrogateescape"
            )
        except (
            ValueError,
            TypeError,
            msgpack.ExtraData,
            msgpack.FormatError,
            msgpack.StackError,
        ) as exc:
            raise FrameError(f"msgpack header does not parse: {exc}") from None
        return _from_mapping(obj, SerializeType.MSGPACK, body)
    raise FrameError(f"unknown serialize type {stype}")


def _as_mapping(cmd: RemotingCommand, rpc_type: str | None) -> dict[str, Any]:
    # Keys in fastjson's (alphabetical) order, so our frames look like a Java broker's.
    ext = cmd.ext_fields
    out: dict[str, Any] = {
        "code": cmd.code,
        "extFields": ext if type(ext) is dict else dict(ext),
        "flag": cmd.flag,
    }
    out["language"] = cmd.language
    out["opaque"] = cmd.opaque
    if cmd.remark is not None:
        out["remark"] = cmd.remark
    if rpc_type is not None:  # Java writes it and every reader ignores it
        out["serializeTypeCurrentRPC"] = rpc_type
    out["version"] = cmd.version
    return out


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"header field {name!r} = {value} does not fit in [{low}, {high}]")


def _encode_binary_py(cmd: RemotingCommand) -> bytes:
    # RocketMQSerializable narrows code and version to int16 (Java casts silently; we
    # refuse, so a response code never turns into another one on the wire).
    _check_range("code", cmd.code, _INT16_MIN, _INT16_MAX)
    _check_range("version", cmd.version, _INT16_MIN, _INT16_MAX)
    parts = [
        _BIN_FIXED.pack(
            cmd.code,
            _LANG_BY_NAME.get(cmd.language, LanguageCode.OTHER),
            cmd.version,
            cmd.opaque,
            cmd.flag,
        )
    ]
    # A zero length means "no remark", so an empty remark travels as None, exactly as
    # Java 4.9.7's readStr turns a zero-length string into null.
    remark = _utf8(cmd.remark) if cmd.remark else b""
    parts += [_I32.pack(len(remark)), remark]
    ext = bytearray()
    for key, value in cmd.ext_fields.items():
        k, v = _utf8(key), _utf8(value)
        _check_range("extFields key length", len(k), 0, _INT16_MAX)
        ext += _I16.pack(len(k)) + k + _I32.pack(len(v)) + v
    parts += [_I32.pack(len(ext)), bytes(ext)]
    return b"".join(parts)


def _encode_binary_c(cmd: RemotingCommand) -> bytes:
    assert _speedups is not None
    code, version = cmd.code, cmd.version
    if not (_INT16_MIN <= code <= _INT16_MAX and _INT16_MIN <= version <= _INT16_MAX):
        _check_range("code", code, _INT16_MIN, _INT16_MAX)
        _check_range("version", version, _INT16_MIN, _INT16_MAX)
    data: bytes = _speedups.encode_binary(
        code,
        _LANG_BY_NAME.get(cmd.language, _OTHER),
        version,
        cmd.opaque,
        cmd.flag,
        cmd.remark,
        cmd.ext_fields,
    )
    return data


_encode_binary = _encode_binary_py if _speedups is None else _encode_binary_c


def encode_header(cmd: RemotingCommand) -> bytes:
    """Serialize a command's header in its own ``serialize_type``.

    Args:
        cmd: The command.

    Returns:
        The header bytes (without the length words).

    Raises:
        ValueError: A field does not fit its wire type (see the module docstring), or
            the serialize type is not one we can write.
    """
    code, opaque, flag, version = cmd.code, cmd.opaque, cmd.flag, cmd.version
    if not (
        _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):
        for name, value in (("code", code), ("opaque", opaque), ("flag", flag)):
            _check_range(name, value, _INT32_MIN, _INT32_MAX)
    stype = cmd.serialize_type
    if stype == _JSON:
        if not _INT32_MIN <= version <= _INT32_MAX:
            _check_range("version", version, _INT32_MIN, _INT32_MAX)
        # _as_mapping inlined: this runs for every request and answer.
        ext = cmd.ext_fields
        out: dict[str, Any] = {
            "code": code,
            "extFields": ext if type(ext) is dict else dict(ext),
            "flag": flag,
            "language": cmd.language,
            "opaque": opaque,
        }
        if cmd.remark is not None:
            out["remark"] = cmd.remark
        out["serializeTypeCurrentRPC"] = "JSON"
        out["version"] = version
        text = _encode_json(out)
        try:
            return text.encode()
        except UnicodeEncodeError:
            # A lone surrogate (a peer may send "\ud800" escaped, and a remark may echo
            # it) has no UTF-8 form; JSON's \u escapes carry it exactly. Only such a
            # header pays for the second encoding.
            return json.dumps(out, separators=(",", ":"), ensure_ascii=True).encode()
    if stype == SerializeType.ROCKETMQ:
        return _encode_binary(cmd)
    if stype == SerializeType.MSGPACK:
        _check_range("version", version, _INT32_MIN, _INT32_MAX)
        mapping = _as_mapping(cmd, None)
        try:
            packed: bytes = msgpack.packb(mapping, use_bin_type=True)
        except UnicodeEncodeError:  # lone surrogates: as _utf8 writes them
            try:
                packed = msgpack.packb(mapping, use_bin_type=True, unicode_errors="surrogateescape")
            except UnicodeEncodeError:
                packed = msgpack.packb(
                    mapping, use_bin_type=True, unicode_errors="backslashreplace"
                )
        return packed
    raise ValueError(f"cannot encode serialize type {stype!r}")
