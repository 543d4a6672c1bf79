"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33) headers (docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.protocol.headers.base import NON_NEGATIVE_INT32, NON_NEGATIVE_INT64, Header, wire

__all__ = [
    "UNIQUE_KEY_QUERY",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "ViewMessageRequestHeader",
]

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: extFields key marking a query by UNIQ_KEY.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(Header):
    """``QueryMessageRequestHeader``: messages of ``topic`` indexed under ``key``.

    ``unique_key_query`` is the extra ``_UNIQUE_KEY_QUERY`` ext field the Java client
    adds; when true the broker answers with its ``defaultQueryMaxNum`` instead of
    ``maxNum`` (``QueryMessageProcessor.queryMessage``).
    """

    topic: str = wire("topic")
    key: str = wire("key")
    #: 0 finds nothing (QUERY_NOT_FOUND) and a unique-key query ignores it, as in
    #: RocketMQ; the broker caps it at ``maxMsgsNumBatch``.
    max_num: int = wire("maxNum", bounds=NON_NEGATIVE_INT32)
    begin_timestamp: int = wire("beginTimestamp", bounds=NON_NEGATIVE_INT64)
    end_timestamp: int = wire("endTimestamp", bounds=NON_NEGATIVE_INT64)
    unique_key_query: bool = wire(UNIQUE_KEY_QUERY, False)


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader(Header):
    """``QueryMessageResponseHeader``: how current the index that answered is."""

    index_last_update_timestamp: int = wire("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = wire("indexLastUpdatePhyoffset")


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(Header):
    """``ViewMessageRequestHeader``: one stored message by commit-log offset."""

    offset: int = wire("offset", bounds=NON_NEGATIVE_INT64)
