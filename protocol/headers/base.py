"""Typed custom headers: one dataclass per request or response header.

A header class declares its fields with :func:`wire`, naming the extFields key each
attribute travels as. Field types are ``str``, ``int`` or ``bool``, optionally
``| None``; a field without a default is required. Conversion follows Java's
``RemotingCommand.decodeCommandCustomHeader``: a missing required field is an error
("the custom field <x> is null"), numbers are parsed as decimal, and booleans accept
``"true"``/``"false"`` and the C++ client's ``"1"``/``"0"`` (remoting-protocol.md §1.6).
Everything leaves as strings, because the C++ client reads nothing else.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from protocol.errors import HeaderError

__all__ = ["Header", "wire"]

_MISSING: Any = dataclasses.MISSING


def wire(name: str, default: Any = _MISSING) -> Any:
    """Declare a header field travelling as extFields key ``name``.

    Args:
        name: The key on the wire.
        default: Default when the key is absent; omit it for a required field.

    Returns:
        A dataclass field.
    """
    return dataclasses.field(default=default, metadata={"wire": name})


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise HeaderError(f"the custom field <{name}> is not a number: {text!r}") from None


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0", ""):
        return False
    raise HeaderError(f"the custom field <{name}> is not a boolean: {text!r}")


def _fmt_bool(value: bool) -> str:
    return "true" if value else "false"


_PARSERS: dict[type, Callable[[str, str], Any]] = {
    str: lambda _name, text: text,
    int: _parse_int,
    bool: _parse_bool,
}
_FORMATTERS: dict[type, Callable[[Any], str]] = {str: str, int: str, bool: _fmt_bool}


class _Spec(typing.NamedTuple):
    attr: str
    key: str
    parse: Callable[[str, str], Any]
    fmt: Callable[[Any], str]
    required: bool


def _base_type(hint: Any) -> type:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0]
    if hint not in _PARSERS:
        raise TypeError(f"unsupported header field type {hint!r}")
    return typing.cast(type, hint)


class Header:
    """Base of typed headers; subclasses are frozen, slotted dataclasses."""

    # Empty slots so that slotted subclasses really have no per-instance __dict__.
    __slots__ = ()

    _specs: ClassVar[tuple[_Spec, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._specs = ()  # resolved lazily: dataclass() runs after __init_subclass__

    @classmethod
    def _resolve(cls) -> tuple[_Spec, ...]:
        if not cls._specs:
            hints = typing.get_type_hints(cls)
            specs = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                base = _base_type(hints[f.name])
                required = f.default is _MISSING and f.default_factory is _MISSING
                specs.append(
                    _Spec(f.name, f.metadata["wire"], _PARSERS[base], _FORMATTERS[base], required)
                )
            cls._specs = tuple(specs)
        return cls._specs

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        """Build the header from a command's extFields.

        Args:
            ext: The (string-normalised) extFields.

        Returns:
            The typed header; unknown keys are ignored.

        Raises:
            HeaderError: A required field is missing or a value has the wrong type.
        """
        kwargs: dict[str, Any] = {}
        for spec in cls._resolve():
            text = ext.get(spec.key)
            if text is None:
                if spec.required:
                    raise HeaderError(f"the custom field <{spec.key}> is null")
                continue
            kwargs[spec.attr] = spec.parse(spec.key, text)
        return cls(**kwargs)

    def to_ext_fields(self) -> dict[str, str]:
        """Render the header as extFields strings, leaving out ``None`` values.

        Returns:
            Key to string value.
        """
        out: dict[str, str] = {}
        for spec in self._resolve():
            value = getattr(self, spec.attr)
            if value is not None:
                out[spec.key] = spec.fmt(value)
        return out
