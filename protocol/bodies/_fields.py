"""Checked readers for JSON body members, shared by the body classes.

Every reader raises :class:`~rocklet.protocol.errors.BodyError` naming the member and the body
instead of letting a ``KeyError`` or ``TypeError`` escape. Numbers are read leniently
the way fastjson reads them into Java fields: a JSON number or a decimal string (the
C++ client writes ``subVersion`` and ``ProcessQueueInfo`` offsets as strings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Final, TypeVar

from rocklet.protocol import fastjson
from rocklet.protocol.errors import BodyError

__all__ = [
    "REQUIRED",
    "ScalarSpec",
    "as_object",
    "encode",
    "get_bool",
    "get_enum",
    "get_float",
    "get_int",
    "get_list",
    "get_map",
    "get_opt_str",
    "get_str",
    "get_str_list",
    "parse_object",
    "read_scalars",
    "to_int",
    "to_str",
    "write_scalars",
]

E = TypeVar("E", bound=IntEnum)

#: Sentinel default meaning "the member must be present".
REQUIRED: Final[Any] = object()

#: A decimal integer as Java's ``Long.parseLong`` reads it (ASCII digits, optional sign).
_DECIMAL: Final = re.compile(r"[-+]?[0-9]+")
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0", ""})


def parse_object(data: bytes | str, what: str, *, object_keys: bool = False) -> dict[str, Any]:
    """Parse a body that must be one JSON object.

    Args:
        data: The body.
        what: The body's name, for error messages.
        object_keys: Accept fastjson's object-valued map keys
            (see :mod:`rocklet.protocol.fastjson`).

    Returns:
        The object.

    Raises:
        BodyError: The body is not JSON or not an object.
    """
    try:
        obj = fastjson.loads(data, object_keys=object_keys)
    except ValueError as exc:
        raise BodyError(f"{what} body is not valid JSON: {exc}") from None
    return as_object(obj, what)


def as_object(obj: object, what: str) -> dict[str, Any]:
    """Check that a decoded value is a JSON object.

    Args:
        obj: The value.
        what: What it should be, for error messages.

    Returns:
        The object.

    Raises:
        BodyError: It is not.
    """
    if not isinstance(obj, dict):
        raise BodyError(f"{what} must be a JSON object, got {_kind(obj)}")
    return obj


#: A surrogate code point; in text that failed to encode, always a lone one.
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def encode(obj: object, *, unquoted_int_keys: bool = False) -> bytes:
    r"""Serialize a body as compact UTF-8 JSON.

    Args:
        obj: The JSON-ready value.
        unquoted_int_keys: Write integer map keys unquoted (fastjson's default).

    Returns:
        The body bytes. A lone surrogate (no input reaches a table with one: headers
        and bodies refuse them) is written as its ``\uXXXX`` escape rather than
        failing the answer.
    """
    text = fastjson.dumps(obj, unquoted_int_keys=unquoted_int_keys)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


T = TypeVar("T")


def _missing(key: str, what: str, default: T) -> T:
    if default is REQUIRED:
        raise BodyError(f"{what} lacks the required member {key!r}")
    return default


def get_str(obj: Mapping[str, Any], key: str, what: str, default: str = REQUIRED) -> str:
    """Read a string member; numbers are accepted as their decimal text.

    Args:
        obj: The JSON object.
        key: The member name.
        what: The object's name, for error messages.
        default: Value when absent or null; omit to make the member required.

    Returns:
        The string.

    Raises:
        BodyError: Missing (when required) or not a string.
    """
    value = obj.get(key)
    if value is None:
        return _missing(key, what, default)
    return to_str(value, f"{what} member {key!r}")


def to_str(value: object, where: str) -> str:
    """Accept a JSON string, or an integer as its decimal text.

    Args:
        value: The decoded value.
        where: What it is, for error messages.

    Returns:
        The string.

    Raises:
        BodyError: It is neither.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise BodyError(f"{where} must be a string, got {_kind(value)}")


def get_opt_str(obj: Mapping[str, Any], key: str, what: str) -> str | None:
    """Read an optional string member (``None`` when absent or null)."""
    return get_str(obj, key, what) if obj.get(key) is not None else None


def get_int(obj: Mapping[str, Any], key: str, what: str, default: int = REQUIRED) -> int:
    """Read an integer member: a JSON integer or a decimal string.

    Args:
        obj: The JSON object.
        key: The member name.
        what: The object's name, for error messages.
        default: Value when absent or null; omit to make the member required.

    Returns:
        The integer.

    Raises:
        BodyError: Missing (when required) or not an integer.
    """
    value = obj.get(key)
    if value is None:
        return _missing(key, what, default)
    return to_int(value, f"{what} member {key!r}")


def to_int(value: object, where: str) -> int:
    """Convert a JSON integer, integral float or decimal string to ``int``.

    Args:
        value: The decoded value.
        where: What it is, for error messages.

    Returns:
        The integer.

    Raises:
        BodyError: It is none of those.
    """
    if isinstance(value, bool):
        raise BodyError(f"{where} must be an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return int(value)
    raise BodyError(f"{where} must be an integer, got {value!r}")


def get_float(obj: Mapping[str, Any], key: str, what: str, default: float = REQUIRED) -> float:
    """Read a number member as ``float`` (a JSON number or a numeric string)."""
    value = obj.get(key)
    if value is None:
        return _missing(key, what, default)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise BodyError(f"{what} member {key!r} must be a number, got {value!r}")


def get_bool(obj: Mapping[str, Any], key: str, what: str, default: bool = REQUIRED) -> bool:
    """Read a boolean member: ``true``/``false``, 0/1, or their string forms."""
    value = obj.get(key)
    if value is None:
        return _missing(key, what, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
    raise BodyError(f"{what} member {key!r} must be a boolean, got {value!r}")


def get_enum(
    obj: Mapping[str, Any], key: str, what: str, enum: type[E], default: E = REQUIRED
) -> E:
    """Read an enum member given by name (Java, ali-ons) or by ordinal (C++).

    Args:
        obj: The JSON object.
        key: The member name.
        what: The object's name, for error messages.
        enum: The enum type; member values are the Java ordinals.
        default: Value when absent or null; omit to make the member required.

    Returns:
        The enum member.

    Raises:
        BodyError: Missing (when required) or not a known name or ordinal.
    """
    value = obj.get(key)
    if value is None:
        return _missing(key, what, default)
    try:
        if isinstance(value, str) and not _DECIMAL.fullmatch(value.strip()):
            return enum[value]
        return enum(to_int(value, key))
    except (KeyError, ValueError, BodyError):
        raise BodyError(f"{what} member {key!r} is not a {enum.__name__}: {value!r}") from None


def get_list(obj: Mapping[str, Any], key: str, what: str) -> list[Any]:
    """Read an array member; absent or null means empty (C++ omits empty sets)."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{what} member {key!r} must be an array, got {_kind(value)}")
    return value


def get_str_list(obj: Mapping[str, Any], key: str, what: str) -> tuple[str, ...]:
    """Read an array of strings; absent or null means empty."""
    items = get_list(obj, key, what)
    for item in items:
        if not isinstance(item, str):
            raise BodyError(f"{what} member {key!r} must hold strings, got {_kind(item)}")
    return tuple(items)


def get_map(obj: Mapping[str, Any], key: str, what: str) -> dict[str, Any]:
    """Read an object member; absent or null means empty."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BodyError(f"{what} member {key!r} must be an object, got {_kind(value)}")
    return value


#: (attribute, JSON member, type) of a plain numeric/boolean bean member.
ScalarSpec = tuple[str, str, type]


def read_scalars(obj: object, what: str, specs: tuple[ScalarSpec, ...]) -> dict[str, Any]:
    """Read bean members that are zero/false when absent or null (Java primitives).

    Args:
        obj: The JSON object.
        what: Its name, for error messages.
        specs: The members to read.

    Returns:
        Attribute name to value, ready for the dataclass constructor.

    Raises:
        BodyError: Not an object, or a member of the wrong type.
    """
    data = as_object(obj, what)
    readers = {int: get_int, float: get_float, bool: get_bool}
    return {attr: readers[kind](data, key, what, kind()) for attr, key, kind in specs}


def write_scalars(bean: object, specs: tuple[ScalarSpec, ...]) -> dict[str, Any]:
    """Write bean members in fastjson's (alphabetical) member order.

    Args:
        bean: The dataclass instance.
        specs: Its members.

    Returns:
        The JSON-ready object.
    """
    return {key: getattr(bean, attr) for attr, key, _ in sorted(specs, key=lambda s: s[1])}
