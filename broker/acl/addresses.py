"""White-list address patterns, as RocketMQ 4.9's ``RemoteAddressStrategyFactory`` reads them.

=======================================  =========================================
pattern                                  matches
=======================================  =========================================
blank / absent                           nothing
``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``  every address
``192.168.0.{1,2}``, ``2001:db8::{1,2}``  the listed last parts
``192.168.0.1,192.168.0.2``              the listed addresses
``192.168.1.*``, ``192.168.1.1-5``       the first ``*`` or ``a-b`` part is a range;
                                         the parts before it must be equal and the
                                         parts after it are not looked at (as Java)
``2001:db8::1-ff``, ``2001:db8::1-ff:*``  the same for IPv6 (hex ranges; a ``*`` only
                                         last; a range in the last group, or the one
                                         before a final ``*``)
``192.168.0.1``, ``::1``                 that address (IPv6 compared expanded)
=======================================  =========================================

Rocklet also accepts a shortened IPv4 wildcard, ``192.168.*`` for ``192.168.*.*``,
which RocketMQ 4.9.4 refuses ("Netaddress examine scope Exception"). A peer connected
over IPv6 with an IPv4-mapped address (``::ffff:10.0.0.1``) is matched as IPv4.

An invalid pattern raises :class:`AddressPatternError` when the file is loaded.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final, Protocol

__all__ = ["ANY_ADDRESS", "NO_ADDRESS", "AddressPattern", "AddressPatternError", "parse_pattern"]


class AddressPatternError(ValueError):
    """A white-list pattern RocketMQ would refuse."""


class AddressPattern(Protocol):
    """A parsed pattern: tells whether a peer's IP address (text) matches."""

    def matches(self, ip: str) -> bool:
        """Whether ``ip`` (as :func:`normalise_ip` gives it) is in the pattern."""
        ...


@dataclass(frozen=True, slots=True)
class _Constant:
    value: bool

    def matches(self, ip: str) -> bool:
        return self.value


#: Java's ``NullRemoteAddressStrategy`` (``*``).
ANY_ADDRESS: Final[AddressPattern] = _Constant(True)
#: Java's ``BlankRemoteAddressStrategy`` (no pattern).
NO_ADDRESS: Final[AddressPattern] = _Constant(False)
_WILDCARDS: Final = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


@dataclass(frozen=True, slots=True)
class _Set:
    addresses: frozenset[str]  #: IPv4 as written, IPv6 exploded upper-case

    def matches(self, ip: str) -> bool:
        return _canonical(ip) in self.addresses


@dataclass(frozen=True, slots=True)
class _Range:
    """``head`` parts equal, then part number ``len(head)`` within ``[start, end]``."""

    v6: bool
    head: tuple[str, ...]
    start: int
    end: int

    def matches(self, ip: str) -> bool:
        if self.v6:
            if ":" not in ip:
                return False
            parts = _explode(ip).split(":")
            base = 16
        else:
            if ":" in ip:
                return False
            parts = ip.split(".")
            base = 10
        n = len(self.head)
        if len(parts) <= n or tuple(parts[:n]) != self.head:
            return False
        try:
            value = int(parts[n], base)
        except ValueError:
            return False
        return self.start <= value <= self.end


def normalise_ip(host: str) -> str:
    """A peer's host as patterns compare it: IPv4-mapped IPv6 becomes IPv4.

    Args:
        host: The peer address without port (``"127.0.0.1"``, ``"::1"``).

    Returns:
        The address to match.
    """
    if ":" in host:
        try:
            mapped = ipaddress.IPv6Address(host.split("%", 1)[0]).ipv4_mapped
        except ValueError:
            return host
        if mapped is not None:
            return str(mapped)
    return host


def _explode(ip: str) -> str:
    try:
        return ipaddress.IPv6Address(ip).exploded.upper()
    except ValueError:
        return ip.upper()


def _canonical(ip: str) -> str:
    return _explode(ip) if ":" in ip else ip


def _one_address(text: str) -> str:
    text = text.strip()
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise AddressPatternError(f"Netaddress examine Exception netaddress is {text}") from None
    return address.exploded.upper() if address.version == 6 else text


def parse_pattern(text: str | None) -> AddressPattern:
    """Parse one ``whiteRemoteAddress`` or ``globalWhiteRemoteAddresses`` entry.

    Args:
        text: The pattern, as written in the file (``None`` or blank: matches nothing).

    Returns:
        The pattern.

    Raises:
        AddressPatternError: The pattern is malformed.
    """
    if text is None or not text.strip():
        return NO_ADDRESS
    text = text.strip()
    if text in _WILDCARDS:
        return ANY_ADDRESS
    if text.endswith("}"):
        head, brace, listed = text.rpartition("{")
        sep = ":" if ":" in text else "."
        if not brace or not head.endswith(sep) or (sep == "." and head.count(".") != 3):
            raise AddressPatternError(f"MultipleRemoteAddressStrategy has a wrong format: {text}")
        items = [item for item in listed[:-1].split(",") if item.strip()]
        return _Set(frozenset(_one_address(head + item.strip()) for item in items))
    if "," in text:
        return _Set(frozenset(_one_address(item) for item in text.split(",") if item.strip()))
    if "*" in text or "-" in text:
        return _v6_range(text) if ":" in text else _v4_range(text)
    return _Set(frozenset({_one_address(text)}))


def _bounds(value: str, base: int, top: int, text: str) -> tuple[int, int] | None:
    """``*`` or ``a-b`` as a range; ``None`` for a plain part."""
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AddressPatternError(f"RangeRemoteAddressStrategy wrong range {value} in {text}")
    low_text, _, high_text = value.partition("-")
    try:
        low, high = int(low_text, base), int(high_text, base)
    except ValueError:
        raise AddressPatternError(f"RangeRemoteAddressStrategy wrong range in {text}") from None
    if not 0 <= low <= high <= top:
        raise AddressPatternError(
            f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {low} , "
            f"end is {high}"
        )
    return low, high


def _v4_range(text: str) -> AddressPattern:
    parts = [part.strip() for part in text.split(".") if part.strip()]
    if parts and parts[-1] == "*":  # Rocklet: "192.168.*" means "192.168.*.*"
        parts += ["*"] * (4 - len(parts))
    if len(parts) != 4:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {text}")
    for index in (1, 2, 3):
        found = _bounds(parts[index], 10, 255, text)
        # Java moves on past a range ending at 0 ("0-0"); so do we.
        if found is not None and found[1] > 0:
            head = tuple(parts[:index])
            if not all(p.isdigit() and 0 <= int(p) <= 255 for p in head):
                raise AddressPatternError(
                    f"Netaddress examine scope Exception netaddress is {text}"
                )
            return _Range(False, head, *found)
    raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {text}")


def _v6_range(text: str) -> AddressPattern:
    star = text.find("*")
    if star not in (-1, len(text) - 1):
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {text}")
    groups = text.split(":")
    if groups[-1] == "*" and len(groups) > 1 and "-" in groups[-2]:
        cut, found, width = 2, _bounds(groups[-2], 16, 0xFFFF, text), 6
    elif "-" in groups[-1] or groups[-1] == "*":
        cut, found, width = 1, _bounds(groups[-1], 16, 0xFFFF, text), 7
    else:
        raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {text}")
    assert found is not None
    prefix = ":".join(groups[:-cut])
    if prefix.endswith(":"):
        # "2001:db8::1-ff": the range follows "::". Java cuts the "::" in half and never
        # matches such a pattern; Rocklet reads it as written.
        prefix += ":"
    head = _expand_prefix(prefix, width, text)
    return _Range(True, head, *found)


def _expand_prefix(prefix: str, width: int, text: str) -> tuple[str, ...]:
    if "::" in prefix:
        left, _, right = prefix.partition("::")
        first = [g for g in left.split(":") if g]
        last = [g for g in right.split(":") if g]
        groups = first + ["0"] * (width - len(first) - len(last)) + last
    else:
        groups = [g for g in prefix.split(":") if g]
    out = []
    for group in groups:
        try:
            value = int(group, 16)
        except ValueError:
            value = -1
        if not 0 <= value <= 0xFFFF or len(group) > 4:
            raise AddressPatternError(f"Netaddress examine scope Exception netaddress is {text}")
        out.append(f"{value:04X}")
    return tuple(out)
