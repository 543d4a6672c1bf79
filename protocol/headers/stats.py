"""Headers of the broker statistics requests (VIEW_BROKER_STATS_DATA, GET_BROKER_CONSUME_STATS)."""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.protocol.headers.base import Header, wire

__all__ = ["GetConsumeStatsInBrokerHeader", "ViewBrokerStatsDataRequestHeader"]


@dataclass(frozen=True, slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): one statistic (``TOPIC_PUT_NUMS``...) of one key."""

    stats_name: str = wire("statsName")
    stats_key: str = wire("statsKey")


@dataclass(frozen=True, slots=True)
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317): every group's progress, optionally ordered topics only."""

    is_order: bool = wire("isOrder", False)
