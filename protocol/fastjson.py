r"""JSON as RocketMQ's fastjson writes it: standard JSON plus unquoted non-string map keys.

fastjson serializes a ``Map`` whose keys are not strings by writing each key as its
own JSON text, unquoted:

* integer keys, e.g. ``BrokerData.brokerAddrs`` (``HashMap<Long, String>``) becomes
  ``{"brokerAddrs":{0:"10.0.0.5:10911"}}``, and ``consumerOffset.json`` becomes
  ``{"offsetTable":{"T@G":{0:12,1:3}}}`` (docs/protocol.md; apache/rocketmq
  issues #1445, #1506, #3369);
* object keys, e.g. ``ConsumeStats.offsetTable`` (``HashMap<MessageQueue, ...>``)
  becomes ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}``.
  The C++ client writes its ``ConsumerRunningInfo.mqTable`` the same way.

:func:`loads` accepts standard JSON plus unquoted integer keys, which become string
keys (``"0"``), and, only when asked with ``object_keys=True``, object or array keys,
which become string keys holding the key's compact JSON text. Nothing else
non-standard is accepted (no single quotes, trailing commas, bare words or NaN).
:func:`dumps` writes compact JSON, optionally in fastjson's unquoted-integer-key
style; keys wrapped in :class:`RawJson` are written verbatim, which is how object
keys are produced.

The rewrite works on tokens (strings, punctuation, everything else), so braces,
colons, digits and escapes inside string literals are never touched.

:func:`loads` refuses text without a UTF-8 form: bytes that are not UTF-8, and a
``\ud800``-``\udfff`` escape that is not half of a pair (Python's ``json`` would
return a lone surrogate, which no file, store record or answer can encode later).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, Final

__all__ = ["RawJson", "dumps", "loads"]

# A JSON string literal, one punctuation character, a run of anything else, or a stray
# quote (an unterminated string) so that the tokens always cover the whole text.
_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^"{}\[\],:]+|"', re.DOTALL)
# What fastjson writes for an Integer/Long key: no leading zeros, no sign but minus.
_INT_KEY: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_OPEN: Final = frozenset("{[")
# Where a lone surrogate can come from in valid UTF-8 text: a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_CLOSE: Final = frozenset("}]")


class RawJson(str):
    """A string that already holds JSON text; :func:`dumps` writes it verbatim.

    As a map key it produces fastjson's unquoted object keys, e.g. a ``MessageQueue``.
    """

    __slots__ = ()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_standard(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("JSON nests too deeply") from None


def _matching_close(tokens: list[str], start: int) -> int:
    """Index of the token closing the container opened at ``start``, or -1."""
    depth = 0
    for index in range(start, len(tokens)):
        token = tokens[index]
        if token in _OPEN:
            depth += 1
        elif token in _CLOSE:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _object_key(tokens: list[str], start: int) -> tuple[str, int] | None:
    """Quote the object/array key starting at ``start``; returns it and its last index."""
    end = _matching_close(tokens, start)
    if end < 0:
        return None
    inner = _rewrite("".join(tokens[start : end + 1]), object_keys=True)
    try:
        canonical = json.dumps(
            _parse_standard(inner), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except ValueError:
        return None  # leave it; the final parse reports the error
    return encode_basestring(canonical), end


def _rewrite(text: str, *, object_keys: bool) -> str:
    """Quote every bare integer (and, if asked, object) key outside string literals."""
    tokens = _TOKEN.findall(text)
    out: list[str] = []
    stack: list[str] = []
    expect_key = False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if expect_key:
            stripped = token.strip()
            if not stripped:  # whitespace before the key
                out.append(token)
                index += 1
                continue
            expect_key = False
            if _INT_KEY.fullmatch(stripped):
                out.append(f'"{stripped}"')
                index += 1
                continue
            if object_keys and token in _OPEN:
                quoted = _object_key(tokens, index)
                if quoted is not None:
                    out.append(quoted[0])
                    index = quoted[1] + 1
                    continue
        if token in _OPEN:
            stack.append(token)
            expect_key = token == "{"
        elif token in _CLOSE:
            if stack:
                stack.pop()
        elif token == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        out.append(token)
        index += 1
    return "".join(out)


def loads(data: str | bytes, *, object_keys: bool = False) -> Any:
    """Parse JSON that may use fastjson's unquoted integer map keys.

    Args:
        data: The JSON text (bytes are decoded as UTF-8).
        object_keys: Also accept object or array map keys (fastjson's form for maps
            keyed by beans such as ``MessageQueue``); each becomes a string key holding
            the key's compact JSON text.

    Returns:
        The parsed value; integer keys come back as strings (``"0"``).

    Raises:
        ValueError: The text is not JSON in this dialect (``json.JSONDecodeError``,
            ``UnicodeDecodeError`` and nesting too deep are all ``ValueError``).
    """
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    try:
        value = _parse_standard(text)
    except json.JSONDecodeError:
        try:
            rewritten = _rewrite(text, object_keys=object_keys)
        except RecursionError:  # object keys nested inside object keys, absurdly deep
            raise ValueError("JSON nests too deeply") from None
        value = _parse_standard(rewritten)
    # Escaped pairs (an emoji) also match; only then is every string looked at.
    if _SURROGATE_ESCAPE.search(text) is not None:
        _refuse_lone_surrogates(value)
    return value


def _refuse_lone_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    raise ValueError(
                        f"a string is not valid UTF-8 text (a lone surrogate): {item[:64]!a}"
                    ) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _key(key: object, unquoted_int_keys: bool) -> str:
    if isinstance(key, RawJson):
        return str.__str__(key)
    if isinstance(key, str):
        return encode_basestring(key)
    if isinstance(key, bool):  # before int: json writes True as "true"
        return '"true"' if key else '"false"'
    if isinstance(key, int):
        text = int.__repr__(key)
        return text if unquoted_int_keys else f'"{text}"'
    if key is None:
        return '"null"'
    if isinstance(key, float):
        return f'"{_float(key)}"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _float(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"out of range float value {value!r} is not JSON compliant")
    return float.__repr__(value)


def _write(obj: object, out: list[str], unquoted_int_keys: bool) -> None:
    if isinstance(obj, RawJson):
        out.append(str.__str__(obj))
    elif isinstance(obj, str):
        out.append(encode_basestring(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))  # IntEnum/IntFlag members as plain numbers
    elif isinstance(obj, float):
        out.append(_float(obj))
    elif isinstance(obj, Mapping):
        out.append("{")
        for position, (key, value) in enumerate(obj.items()):
            if position:
                out.append(",")
            out.append(_key(key, unquoted_int_keys))
            out.append(":")
            _write(value, out, unquoted_int_keys)
        out.append("}")
    elif isinstance(obj, list | tuple | set | frozenset):
        out.append("[")
        for position, item in enumerate(obj):
            if position:
                out.append(",")
            _write(item, out, unquoted_int_keys)
        out.append("]")
    else:
        raise TypeError(f"object of type {type(obj).__name__} is not JSON serializable")


def dumps(obj: object, *, unquoted_int_keys: bool = False) -> str:
    """Write compact JSON (no spaces, non-ASCII kept), optionally in fastjson style.

    Args:
        obj: Nested dicts, lists, tuples, sets, strings, numbers, booleans and None.
            Map keys may be str, int, float, bool, None or :class:`RawJson`.
        unquoted_int_keys: Write integer map keys bare (``{0:"a"}``), as fastjson does
            by default; otherwise quote them (``{"0":"a"}``), which is standard JSON.

    Returns:
        The JSON text.

    Raises:
        TypeError: A value or key of an unsupported type.
        ValueError: A NaN or infinite float.
    """
    out: list[str] = []
    _write(obj, out, unquoted_int_keys)
    return "".join(out)
