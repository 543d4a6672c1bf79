"""What a usable config file under ``<store>/config/`` holds, for broker and check alike.

A file that is valid JSON is not necessarily a table: ``[]``, a table under another
key, or a topic whose ``readQueueNums`` is ``"x"`` would load as nothing and be
overwritten at the next change, forgetting every topic. RocketMQ's ``ConfigManager``
refuses to start on a file its decoder rejects; Rocklet reads the ``.bak`` then, and
refuses only when neither is a table (:func:`decode_table`, :func:`decode_offsets`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.protocol.errors import BodyError

__all__ = ["TABLE_FILES", "decode_offsets", "decode_table", "shape_error"]

C = TypeVar("C")

#: The files of named configs: their table's key and how one entry is read.
TABLE_FILES: Final[dict[str, tuple[str, Callable[[object], object]]]] = {
    "topics.json": ("topicConfigTable", TopicConfig.from_dict),
    "subscriptionGroup.json": ("subscriptionGroupTable", SubscriptionGroupConfig.from_dict),
}
#: Files of ``{"offsetTable": {"topic@group": {queueId: offset}}}``.
OFFSET_FILES: Final = frozenset({"consumerOffset.json"})


def decode_table(obj: Any, key: str, parse: Callable[[object], C]) -> dict[str, C]:
    """Every entry of a config table file, or why the file is not one.

    Args:
        obj: The decoded JSON.
        key: The table's key (``topicConfigTable``...); a file without it is empty.
        parse: Reads one entry (raises ``BodyError`` when it is malformed).

    Returns:
        The entries by name.

    Raises:
        ValueError: The file is not such a table, or an entry does not read (named).
    """
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object but {type(obj).__name__}")
    table = obj.get(key, {})
    if not isinstance(table, dict):
        raise ValueError(f'"{key}" is not an object')
    out: dict[str, C] = {}
    for name, raw in table.items():
        try:
            out[name] = parse(raw)
        except BodyError as exc:
            raise ValueError(f"entry {name!r}: {exc}") from None
    return out


def decode_offsets(obj: Any, key: str = "offsetTable") -> dict[str, dict[int, int]]:
    """The ``topic@group`` -> queue id -> offset table of an offsets file.

    Raises:
        ValueError: The file is not such a table (the first bad entry is named).
    """
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object but {type(obj).__name__}")
    table = obj.get(key, {})
    if not isinstance(table, dict):
        raise ValueError(f'"{key}" is not an object')
    out: dict[str, dict[int, int]] = {}
    for name, queues in table.items():
        if not isinstance(queues, dict):
            raise ValueError(f"entry {name!r} is not an object")
        try:
            out[name] = {int(q): int(o) for q, o in queues.items()}
        except (TypeError, ValueError):
            raise ValueError(
                f"entry {name!r} has a queue id or offset that is not an integer"
            ) from None
    return out


def shape_error(file_name: str, obj: Any) -> str | None:
    """Why a known config file's JSON is not what the broker reads, or None.

    Files this module does not know (``delayOffset.json``, ...) only need to parse.
    """
    try:
        if file_name in TABLE_FILES:
            decode_table(obj, *TABLE_FILES[file_name])
        elif file_name in OFFSET_FILES:
            decode_offsets(obj)
    except ValueError as exc:
        return str(exc)
    return None
