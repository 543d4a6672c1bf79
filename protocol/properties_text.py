"""Java properties text (``java.util.Properties.load`` rules): read, write, edit.

One implementation for every side: the broker and name server read their files,
``tls.properties`` and the bodies of UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG with
:func:`parse_properties`, and write GET_BROKER_CONFIG / GET_NAMESRV_CONFIG answers with
:func:`format_properties`; ``rocklet admin`` reads those answers and writes the update
bodies with the same two. :func:`rewrite_properties` sets keys in an existing file's
text, keeping its comments, blank lines and order (RocketMQ rewrites the whole file
from its in-memory table instead; the broker and the name server save their files
with it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ["format_properties", "format_property", "parse_properties", "rewrite_properties"]

_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_END: Final = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_spans(raw_lines: list[str]) -> list[tuple[int, int, str]]:
    """Each logical line as (first physical line, line after its last, joined text)."""
    spans: list[tuple[int, int, str]] = []
    pending: str | None = None
    start = 0
    for index, raw in enumerate(raw_lines):
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        if pending is None:
            start = index
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1  # an odd count: the last backslash escapes the newline
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            spans.append((start, index + 1, pending))
            pending = None
    if pending is not None:
        spans.append((start, len(raw_lines), pending))
    return spans


def _logical_lines(text: str) -> list[str]:
    return [line for _, _, line in _logical_spans(text.splitlines())]


def parse_properties(text: str) -> dict[str, str]:
    r"""Parse Java properties text (``java.util.Properties.load`` rules).

    ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!`` start comment lines;
    a line ending in an odd number of backslashes continues on the next one; escapes
    (``\\t``, ``\\n``, ``\\uXXXX``, ...) are decoded. Keys and values are trimmed.

    Args:
        text: The file's text.

    Returns:
        Key to value; a repeated key keeps its last value, as in Java.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[key] = value
    return props


def _split(line: str) -> tuple[str, str]:
    match = _KEY_END.search(line)
    if match is None:
        key, rest = line, ""
    else:
        key, rest = line[: match.end() - 1], line[match.end() - 1 :]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:]
    return _unescape(key).strip(), _unescape(rest.strip(" \t\f")).strip()


def _escape(text: str, *, key: bool) -> str:
    out: list[str] = []
    for index, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch == " " and (key or index == 0):
            out.append("\\ ")  # a key's spaces, a value's leading one, would be lost
        elif key and ch in "=:#!":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def format_property(key: str, value: str) -> str:
    """One ``key=value`` line (no newline) that :func:`parse_properties` reads back.

    Args:
        key: The property name.
        value: Its value.

    Returns:
        The line, with the characters Java's reader treats specially escaped.
    """
    return f"{_escape(key, key=True)}={_escape(value, key=False)}"


def format_properties(pairs: Mapping[str, str]) -> str:
    """``key=value`` lines (``MixAll.properties2String``) that read back as they were.

    Unlike Java, the characters :func:`parse_properties` treats specially are escaped.

    Args:
        pairs: Property name to value, in the order to write them.

    Returns:
        The text, one line a pair, each ending with a newline.
    """
    return "".join(format_property(k, v) + "\n" for k, v in pairs.items())


def rewrite_properties(text: str, updates: Mapping[str, str]) -> str:
    """Set keys in a properties file's text, keeping everything else as it is.

    A key already in the file gets its new value where it stands (every occurrence,
    a value continued over several lines becoming one line); a new key is appended.

    Args:
        text: The file's text (may be empty).
        updates: Property name to new value.

    Returns:
        The new text, ending with a newline.
    """
    raw_lines = text.splitlines()
    replaced: dict[int, tuple[int, str]] = {}
    seen: set[str] = set()
    for start, end, line in _logical_spans(raw_lines):
        key, _ = _split(line)
        if key in updates:
            replaced[start] = (end, format_property(key, updates[key]))
            seen.add(key)
    out: list[str] = []
    index = 0
    while index < len(raw_lines):
        if index in replaced:
            end, line = replaced[index]
            out.append(line)
            index = end
        else:
            out.append(raw_lines[index])
            index += 1
    out += [format_property(k, v) for k, v in updates.items() if k not in seen]
    return "".join(line + "\n" for line in out)
