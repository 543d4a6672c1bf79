"""Reading single option values, with errors that name the option as the user spells it.

Spark hands a data source a case-insensitive ``str -> str`` mapping; a plain dict
(direct use, tests) is not case-insensitive, so :class:`OptionMap` folds the names once
and is read by the canonical spelling (``"maxOffsetsPerTrigger"``), which is also what
every error message shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Final

from rocklet.protocol.names import check_group_name
from rocklet.spark.offsets import QueueRef, parse_queue_ref

__all__ = ["OptionMap", "RockletOptionError", "check_group", "check_topic", "queue_ref"]

#: Options Spark itself may put in the mapping (``load(path)``, ``writeStream``).
SPARK_OPTIONS: Final = frozenset({"path", "paths", "checkpointlocation", "queryname"})
#: RocketMQ's topic name rule (``TopicValidator``): letters, digits, ``%|-_``.
_TOPIC_RE: Final = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")


class RockletOptionError(ValueError):
    """An option is missing, unknown, malformed or not allowed in this mode."""


def check_topic(topic: str, option: str) -> str:
    """Return ``topic`` if it is a valid RocketMQ topic name.

    Raises:
        RockletOptionError: It is not.
    """
    if not _TOPIC_RE.match(topic):
        raise RockletOptionError(
            f"{option}: {topic!r} is not a valid topic name (1-127 characters of "
            "letters, digits, '%', '|', '-', '_')"
        )
    return topic


def check_group(group: str, option: str) -> str:
    """Return ``group`` if it is a valid RocketMQ group name.

    Raises:
        RockletOptionError: It is not (RocketMQ's reason, named by the option).
    """
    problem = check_group_name(group)
    if problem is not None:
        raise RockletOptionError(f"{option}: {problem}")
    return group


def queue_ref(text: str, option: str) -> QueueRef:
    """Parse ``"<queueId>"`` or ``"<brokerName>:<queueId>"`` for ``option``.

    Raises:
        RockletOptionError: Neither form.
    """
    try:
        return parse_queue_ref(text)
    except ValueError as exc:
        raise RockletOptionError(f"{option}: {exc}") from None


class OptionMap:
    """The user's options, read by canonical name.

    Args:
        options: What Spark passed (any key case).
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self._values = {str(k).lower(): str(v) for k, v in options.items() if v is not None}

    def has(self, name: str) -> bool:
        """Whether ``name`` was given."""
        return name.lower() in self._values

    def text(self, name: str, default: str = "") -> str:
        """The value, stripped, or ``default``."""
        return self._values.get(name.lower(), default).strip()

    def reject_unknown(self, known: Iterable[str], what: str) -> None:
        """Fail on any option not in ``known`` (nor one Spark adds itself).

        Raises:
            RockletOptionError: Listing the unknown names and the known ones.
        """
        names = sorted(known)
        allowed = {n.lower() for n in names} | SPARK_OPTIONS
        unknown = sorted(k for k in self._values if k not in allowed)
        if unknown:
            raise RockletOptionError(
                f"unknown option(s) {', '.join(unknown)} for {what}; "
                f"known options: {', '.join(names)}"
            )

    def required(self, name: str, example: str) -> str:
        """The value of a mandatory option.

        Raises:
            RockletOptionError: Missing or empty.
        """
        value = self.text(name)
        if not value:
            raise RockletOptionError(f"option {name} is required (e.g. {example})")
        return value

    def flag(self, name: str, default: bool) -> bool:
        """A ``true``/``false`` option.

        Raises:
            RockletOptionError: Anything else.
        """
        if not self.has(name):
            return default
        text = self.text(name).lower()
        if text in ("true", "false"):
            return text == "true"
        raise RockletOptionError(f"{name} must be true or false, got {self.text(name)!r}")

    def integer(self, name: str) -> int | None:
        """An integer option, or None when absent.

        Raises:
            RockletOptionError: Not an integer.
        """
        if not self.has(name):
            return None
        try:
            return int(self.text(name))
        except ValueError:
            raise RockletOptionError(
                f"{name} must be an integer, got {self.text(name)!r}"
            ) from None

    def positive(self, name: str) -> int | None:
        """A positive integer option, or None when absent.

        Raises:
            RockletOptionError: Not a positive integer.
        """
        value = self.integer(name)
        if value is not None and value <= 0:
            raise RockletOptionError(f"{name} must be positive, got {value}")
        return value

    def bounded(self, name: str, default: int, low: int, high: int) -> int:
        """An integer option within ``[low, high]``, or ``default``.

        Raises:
            RockletOptionError: Not an integer, or out of range.
        """
        value = self.integer(name)
        if value is None:
            return default
        if not low <= value <= high:
            raise RockletOptionError(f"{name} must be in [{low}, {high}], got {value}")
        return value

    def topics(self, name: str) -> tuple[str, ...]:
        """A comma-separated topic list, sorted and deduplicated.

        Raises:
            RockletOptionError: Empty, or an invalid topic name.
        """
        topics = {t.strip() for t in self.text(name).split(",") if t.strip()}
        if not topics:
            raise RockletOptionError(f"{name} names no topic")
        return tuple(sorted(check_topic(t, name) for t in topics))

    def json_object(self, name: str, example: str) -> dict[str, object]:
        """A non-empty JSON object option.

        Raises:
            RockletOptionError: Not JSON, or not a non-empty object.
        """
        try:
            obj = json.loads(self.text(name))
        except ValueError as exc:
            raise RockletOptionError(f"{name} is not valid JSON ({exc}); e.g. {example}") from None
        if not isinstance(obj, dict) or not obj:
            raise RockletOptionError(f"{name} must be a non-empty JSON object, e.g. {example}")
        return obj
