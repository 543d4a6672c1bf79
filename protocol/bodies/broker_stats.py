"""Broker statistics bodies: ``BrokerStatsData`` and ``ConsumeStatsList``.

* VIEW_BROKER_STATS_DATA (315) answer (``body/BrokerStatsData.java``)::

      {"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},
       "statsHour":{"avgpt":1.0,"sum":12,"tps":0.02},
       "statsMinute":{"avgpt":1.0,"sum":3,"tps":0.05}}

* GET_BROKER_CONSUME_STATS (317) answer (``body/ConsumeStatsList.java``)::

      {"brokerAddr":"10.0.0.1:10911",
       "consumeStatsList":[{"G1":[{"consumeTps":0.0,"offsetTable":{...}}]}],
       "totalDiff":5}

  one single-member object per subscription group, holding one ``ConsumeStats`` per
  topic the group has offsets on (see :mod:`rocklet.protocol.bodies.stats`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocklet.protocol.bodies._fields import (
    ScalarSpec,
    as_object,
    encode,
    get_int,
    get_list,
    get_str,
    parse_object,
    read_scalars,
    write_scalars,
)
from rocklet.protocol.bodies.queue import decode_mq_map, encode_mq_map
from rocklet.protocol.bodies.stats import ConsumeStats, OffsetWrapper
from rocklet.protocol.errors import BodyError

__all__ = ["BrokerStatsData", "BrokerStatsItem", "ConsumeStatsList"]

_ITEM: Final[tuple[ScalarSpec, ...]] = (
    ("sum", "sum", int),
    ("tps", "tps", float),
    ("avgpt", "avgpt", float),
)


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window of a statistic (``BrokerStatsItem``)."""

    sum: int = 0  #: value added over the window
    tps: float = 0.0  #: ``sum`` per second
    avgpt: float = 0.0  #: ``sum`` per report

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return write_scalars(self, _ITEM)

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members are 0.

        Raises:
            BodyError: Not an object or a member is not a number.
        """
        return cls(**read_scalars(obj, "BrokerStatsItem", _ITEM))


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """A statistic's last minute, hour and day."""

    stats_minute: BrokerStatsItem = BrokerStatsItem()
    stats_hour: BrokerStatsItem = BrokerStatsItem()
    stats_day: BrokerStatsItem = BrokerStatsItem()

    def to_json(self) -> bytes:
        """Serialize as fastjson does."""
        return encode(
            {
                "statsDay": self.stats_day.to_dict(),
                "statsHour": self.stats_hour.to_dict(),
                "statsMinute": self.stats_minute.to_dict(),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid BrokerStatsData.
        """
        obj = parse_object(data, cls.__name__)
        return cls(
            **{
                attr: BrokerStatsItem.from_dict(obj.get(member) or {})
                for attr, member in (
                    ("stats_minute", "statsMinute"),
                    ("stats_hour", "statsHour"),
                    ("stats_day", "statsDay"),
                )
            }
        )


def _consume_stats_dict(stats: ConsumeStats) -> dict[Any, Any]:
    return {
        "consumeTps": float(stats.consume_tps),
        "offsetTable": encode_mq_map(stats.offset_table, OffsetWrapper.to_dict),
    }


def _consume_stats_from(obj: object) -> ConsumeStats:
    what = "ConsumeStats"
    members = as_object(obj, what)
    tps = members.get("consumeTps", 0.0)
    if not isinstance(tps, int | float) or isinstance(tps, bool):
        raise BodyError(f"{what} member 'consumeTps' must be a number, got {tps!r}")
    return ConsumeStats(
        offset_table=decode_mq_map(members, "offsetTable", what, OffsetWrapper.from_dict),
        consume_tps=float(tps),
    )


@dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """Every subscription group's progress on one broker, and the total backlog."""

    broker_addr: str = ""
    total_diff: int = 0
    #: One ``{group: [ConsumeStats per topic]}`` per group, in the broker's order.
    consume_stats_list: Sequence[Mapping[str, Sequence[ConsumeStats]]] = field(
        default_factory=tuple
    )

    def to_json(self) -> bytes:
        """Serialize as fastjson does (MessageQueue keys unquoted)."""
        return encode(
            {
                "brokerAddr": self.broker_addr,
                "consumeStatsList": [
                    {
                        group: [_consume_stats_dict(s) for s in stats]
                        for group, stats in entry.items()
                    }
                    for entry in self.consume_stats_list
                ],
                "totalDiff": self.total_diff,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid ConsumeStatsList.
        """
        what = cls.__name__
        obj = parse_object(data, what, object_keys=True)
        entries: list[dict[str, tuple[ConsumeStats, ...]]] = []
        for entry in get_list(obj, "consumeStatsList", what):
            groups = as_object(entry, what)
            parsed: dict[str, tuple[ConsumeStats, ...]] = {}
            for group, stats in groups.items():
                if not isinstance(stats, list):
                    raise BodyError(f"{what} group {group!r} must hold an array")
                parsed[group] = tuple(_consume_stats_from(s) for s in stats)
            entries.append(parsed)
        return cls(
            broker_addr=get_str(obj, "brokerAddr", what, ""),
            total_diff=get_int(obj, "totalDiff", what, 0),
            consume_stats_list=tuple(entries),
        )
