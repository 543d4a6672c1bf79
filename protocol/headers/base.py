r"""Typed custom headers: one dataclass per request or response header.

A header class declares its fields with :func:`wire`, naming the extFields key each
attribute travels as. Field types are ``str``, ``int`` or ``bool``, optionally
``| None``; a field without a default is required. Conversion follows Java's
``RemotingCommand.decodeCommandCustomHeader``: a missing required field is an error
("the custom field <x> is null"), numbers are parsed as decimal, and booleans accept
``"true"``/``"false"`` and the C++ client's ``"1"``/``"0"`` (docs/protocol.md).
Everything leaves as strings, because the C++ client reads nothing else.

Every parser also enforces what a field may hold, so no processor sees a value it
would have to check again:

* an ``int`` field is within its declared ``bounds`` (default: Java's ``long``; the
  header classes narrow each to its Java type, ``int`` or ``long``, and to the values
  that mean something, e.g. offsets >= 0);
* a ``str`` field is text that has a UTF-8 form: the header codecs turn bytes that are
  not UTF-8 into lone surrogates (``surrogateescape``), and a JSON header may carry
  ``\ud800`` escapes; a value with a lone surrogate is refused here, so no name,
  key or property without a UTF-8 form reaches a store, a file or a route table.

Both refusals are :class:`HeaderError` (SYSTEM_ERROR, the field named in the remark).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Self

from rocklet.protocol import compiled
from rocklet.protocol.errors import HeaderError

__all__ = [
    "INT32",
    "INT64",
    "NON_NEGATIVE_INT32",
    "NON_NEGATIVE_INT64",
    "POSITIVE_INT32",
    "Header",
    "shown",
    "wire",
]

_MISSING: Any = dataclasses.MISSING

#: Java ``int`` / ``Integer``.
INT32: Final = (-(2**31), 2**31 - 1)
#: Java ``long`` / ``Long``: the default bounds of an ``int`` field.
INT64: Final = (-(2**63), 2**63 - 1)
#: Counts and ids that cannot be negative, as Java ``int``.
NON_NEGATIVE_INT32: Final = (0, 2**31 - 1)
#: Offsets and other positions, as Java ``long``.
NON_NEGATIVE_INT64: Final = (0, 2**63 - 1)
#: Counts that must ask for at least one.
POSITIVE_INT32: Final = (1, 2**31 - 1)
# The compiled twin of the generated parsers (None: the generated Python serves alone).
_speedups = compiled.load("rocklet.protocol._speedups")
_KIND_STR, _KIND_INT, _KIND_BOOL = 0, 1, 2
#: How much of a refused value a remark shows.
_SHOWN_CHARS: Final = 64


def wire(name: str, default: Any = _MISSING, *, bounds: tuple[int, int] | None = None) -> Any:
    """Declare a header field travelling as extFields key ``name``.

    Args:
        name: The key on the wire.
        default: Default when the key is absent; omit it for a required field.
        bounds: For an ``int`` field, the lowest and highest value accepted (both
            included). Default: :data:`INT64`.

    Returns:
        A dataclass field.
    """
    metadata: dict[str, Any] = {"wire": name}
    if bounds is not None:
        metadata["bounds"] = bounds
    return dataclasses.field(default=default, metadata=metadata)


def shown(value: str) -> str:
    """A received value as a remark or log shows it: escaped, quoted and cut short.

    Escaped with ``ascii()``, so a lone surrogate, a newline or a control character
    is visible and the remark always has a UTF-8 form; cut at 64 characters, so a
    huge value does not become a huge answer.

    Args:
        value: The text as received.

    Returns:
        Printable ASCII.
    """
    escaped = ascii(value[:_SHOWN_CHARS])
    # Escapes are up to 10 characters each: cut the escaped form, not only the value.
    if len(value) > _SHOWN_CHARS or len(escaped) > _SHOWN_CHARS + 2:
        return f"{escaped[: _SHOWN_CHARS + 1]}...{escaped[0]} ({len(value)} characters)"
    return escaped


def _parse_str(name: str, text: str) -> str:
    """Only called for non-ASCII text: refuse it when it has no UTF-8 form."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise HeaderError(
            f"the custom field <{name}> is not valid UTF-8 text: {shown(text)}"
        ) from None
    return text


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise HeaderError(f"the custom field <{name}> is not a number: {shown(text)}") from None


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0", ""):
        return False
    raise HeaderError(f"the custom field <{name}> is not a boolean: {shown(text)}")


def _fmt_bool(value: bool) -> str:
    return "true" if value else "false"


_PARSERS: dict[type, Callable[[str, str], Any]] = {
    str: _parse_str,
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
    #: ``(low, high)`` of an ``int`` field; ``None`` for other types.
    bounds: tuple[int, int] | None = None


def _out_of_bounds(name: str, value: int, bounds: tuple[int, int]) -> HeaderError:
    low, high = bounds
    if low == 1 and value < 1:
        why = "must be at least 1"
    elif low == 0 and value < 0:
        why = "must not be negative"
    else:
        why = f"is out of the range [{low}, {high}]"
    digits = str(value)
    if len(digits) > _SHOWN_CHARS:  # up to 4300 digits parse; the remark stays short
        digits = f"{digits[:20]}... ({len(digits)} digits)"
    return HeaderError(f"the custom field <{name}> {why}: {digits}")


def _base_type(hint: Any) -> type:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0]
    if hint not in _PARSERS:
        raise TypeError(f"unsupported header field type {hint!r}")
    return typing.cast(type, hint)


def _slot_setters(cls: type, specs: tuple[_Spec, ...]) -> list[Callable[[Any, Any], None]] | None:
    """The slot descriptors' setters of a slotted header class without ``__post_init__``."""
    if hasattr(cls, "__post_init__"):
        return None
    setters = []
    for spec in specs:
        slot = cls.__dict__.get(spec.attr)
        if not isinstance(slot, types.MemberDescriptorType):
            return None
        setters.append(slot.__set__)
    return setters


def _compile_parser(
    cls: type, specs: tuple[_Spec, ...], defaults: tuple[Any, ...]
) -> Callable[..., Any]:
    """Generate ``parse(cls, ext)`` for one header class.

    Headers are parsed on every request; a straight-line function per class (the
    technique ``dataclasses`` itself uses) costs a fraction of a generic loop over specs.
    Numbers are converted with ``int`` inline and booleans compared with their usual
    spellings inline; only an unusual value goes through the converter function, which
    also raises the error (the ``except`` re-runs it on the value that failed). The
    instance is filled through its slots: a frozen dataclass's ``__init__`` goes through
    ``object.__setattr__`` per field, half the cost of a parse; every value is already
    converted and defaulted here, so skipping it changes nothing else.

    The checks cost little on the usual header: a string goes to :func:`_parse_str`
    only when it is not ASCII (``str.isascii`` reads a flag), and bounds are literals
    in one chained comparison.
    """
    ns: dict[str, Any] = {
        "HeaderError": HeaderError,
        "new": object.__new__,
        "C": cls,
        "oob": _out_of_bounds,
    }
    lines = ["def parse(cls, ext):", "    get = ext.get"]
    for i, spec in enumerate(specs):
        ns[f"p{i}"], ns[f"d{i}"] = spec.parse, defaults[i]
        if spec.parse is _parse_str:
            value = f"(v if v.isascii() else p{i}({spec.key!r}, v))"
        elif spec.parse is _parse_int:
            value = "int(v)"
        elif spec.parse is _parse_bool:
            # "1"/"0": the C++ client's spelling (docs/protocol.md).
            value = (
                f'(True if v == "true" or v == "1" else False if v == "false" or v == "0"'
                f" else p{i}({spec.key!r}, v))"
            )
        else:
            value = f"p{i}({spec.key!r}, v)"
        lines.append(f"    v = get({spec.key!r})")
        if spec.required:
            message = f"the custom field <{spec.key}> is null"
            lines.append(f"    if v is None: raise HeaderError({message!r})")
            conversion = f"    a{i} = {value}"
        else:
            conversion = f"    a{i} = d{i} if v is None else {value}"
        if spec.parse is _parse_int:
            # int() raises ValueError (text) or TypeError (a non-string value): let the
            # converter raise HeaderError with the field's name instead.
            lines += [
                "    try:",
                "    " + conversion,
                "    except (TypeError, ValueError):",
                f"        a{i} = p{i}({spec.key!r}, v)",
            ]
            low, high = spec.bounds or INT64
            ns[f"b{i}"] = (low, high)
            # A default (possibly None) is ours, not the peer's: only received values.
            received = "" if spec.required else "v is not None and "
            lines.append(
                f"    if {received}not {low} <= a{i} <= {high}: raise oob({spec.key!r}, a{i}, b{i})"
            )
        else:
            lines.append(conversion)
    setters = _slot_setters(cls, specs)
    if setters is None:
        lines.append(f"    return cls({', '.join(f'a{i}' for i in range(len(specs)))})")
    else:
        lines.append("    o = new(C)")
        for i, setter in enumerate(setters):
            ns[f"s{i}"] = setter
            lines.append(f"    s{i}(o, a{i})")
        lines.append("    return o")
    exec("\n".join(lines), ns)  # the source is built from our own field specs only
    python_parse = typing.cast(Callable[..., Any], ns["parse"])
    if _speedups is None or setters is None:
        return python_parse
    return _with_compiled_twin(cls, specs, defaults, python_parse)


def _with_compiled_twin(
    cls: type, specs: tuple[_Spec, ...], defaults: tuple[Any, ...], python_parse: Callable[..., Any]
) -> Callable[..., Any]:
    """``parse`` that tries the compiled twin first and lets Python decide the rest.

    The twin takes only values already in their usual form (see
    ``_speedups.parse_header``); for anything else it returns None and the generated
    Python parser runs, so errors and unusual spellings have one implementation.
    """
    assert _speedups is not None
    kinds: dict[Callable[[str, str], Any], int] = {
        _parse_str: _KIND_STR,
        _parse_int: _KIND_INT,
        _parse_bool: _KIND_BOOL,
    }
    plan = []
    for spec, default in zip(specs, defaults, strict=True):
        low, high = spec.bounds or INT64
        plan.append((spec.key, kinds[spec.parse], spec.required, default, low, high))
    slots = tuple(cls.__dict__[spec.attr] for spec in specs)
    twin, new, frozen_plan = _speedups.parse_header, object.__new__, tuple(plan)

    def parse(header_cls: type, ext: Mapping[str, str]) -> Any:
        header = twin(ext, new, cls, frozen_plan, slots)
        return python_parse(header_cls, ext) if header is None else header

    return parse


def _compile_formatter(specs: tuple[_Spec, ...]) -> Callable[[Any], dict[str, str]]:
    """Generate ``fmt(self) -> dict`` for one header class (see :func:`_compile_parser`)."""
    ns: dict[str, Any] = {}
    lines = ["def fmt(self):", "    out = {}"]
    for i, spec in enumerate(specs):
        ns[f"f{i}"] = spec.fmt
        rendered = "v" if spec.fmt is str and spec.parse is _parse_str else f"f{i}(v)"
        lines.append(f"    v = self.{spec.attr}")
        lines.append(f"    if v is not None: out[{spec.key!r}] = {rendered}")
    lines.append("    return out")
    exec("\n".join(lines), ns)  # the source is built from our own field specs only
    return typing.cast(Callable[[Any], dict[str, str]], ns["fmt"])


class Header:
    """Base of typed headers; subclasses are frozen, slotted dataclasses."""

    # Empty slots so that slotted subclasses really have no per-instance __dict__.
    __slots__ = ()

    _specs: ClassVar[tuple[_Spec, ...]] = ()
    _parse: ClassVar[Callable[..., Any] | None] = None
    _format: ClassVar[Callable[[Any], dict[str, str]] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Resolved lazily: dataclass() runs after __init_subclass__.
        cls._specs = ()
        cls._parse = None
        cls._format = None

    @classmethod
    def _resolve(cls) -> tuple[_Spec, ...]:
        if not cls._specs:
            hints = typing.get_type_hints(cls)
            specs = []
            defaults = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                base = _base_type(hints[f.name])
                required = f.default is _MISSING and f.default_factory is _MISSING
                bounds = f.metadata.get("bounds")
                if bounds is not None and base is not int:
                    raise TypeError(f"{cls.__name__}.{f.name}: bounds only apply to int fields")
                if base is int and bounds is None:
                    bounds = INT64
                specs.append(
                    _Spec(
                        f.name,
                        f.metadata["wire"],
                        _PARSERS[base],
                        _FORMATTERS[base],
                        required,
                        bounds,
                    )
                )
                defaults.append(None if required else f.default)
            cls._specs = tuple(specs)
            cls._parse = _compile_parser(cls, cls._specs, tuple(defaults))
            cls._format = _compile_formatter(cls._specs)
        return cls._specs

    @classmethod
    def parser_for_keys(cls, keys: Mapping[str, str]) -> Callable[[Mapping[str, str]], Self]:
        """Return a parser that reads this header from other wire keys.

        SEND_MESSAGE_V2 carries the V1 send header under one-letter keys; this reads it
        straight into the V1 class instead of building a V2 object and converting.

        Args:
            keys: Attribute name to the wire key to read it from (every field).

        Returns:
            ``parse(ext) -> header``, raising :class:`HeaderError` like
            :meth:`from_ext_fields`.
        """
        cls._resolve()
        specs = tuple(spec._replace(key=keys[spec.attr]) for spec in cls._specs)
        defaults = tuple(
            None if f.default is _MISSING else f.default
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        )
        parse = _compile_parser(cls, specs, defaults)
        # A partial, not a lambda around typing.cast: two Python calls less per request.
        return typing.cast(Callable[[Mapping[str, str]], Self], functools.partial(parse, cls))

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
        parse = cls._parse
        if parse is None:
            cls._resolve()
            parse = cls._parse
            assert parse is not None
        return typing.cast(Self, parse(cls, ext))

    def to_ext_fields(self) -> dict[str, str]:
        """Render the header as extFields strings, leaving out ``None`` values.

        Returns:
            Key to string value.
        """
        cls = type(self)  # through the class: a plain function, not a bound method
        fmt = cls._format
        if fmt is None:
            cls._resolve()
            fmt = cls._format
            assert fmt is not None
        return fmt(self)
