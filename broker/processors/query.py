"""Queries: QUERY_MESSAGE (12) by key and VIEW_MESSAGE_BY_ID (33) by commit-log offset.

Follows RocketMQ 4.9's ``QueryMessageProcessor`` (docs/protocol.md). Both answer
with stored records exactly as they sit in the commitlog: the views of the mapped
segments are written after the response header without a copy (RocketMQ's
``QueryMessageTransfer`` / ``OneMessageTransfer``). The C++ client never sends either
code; Java admin tools and the Java client's ``queryMessage`` / ``viewMessage`` do.
"""

from __future__ import annotations

from typing import Final

from rocklet.broker.processors.refusal import refuse_bad_topic
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.query import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from rocklet.protocol.message import decode_message
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.connection import Reply

__all__ = ["MAX_MSGS_NUM_BATCH", "QueryProcessor", "register"]

#: ``MessageStoreConfig.maxMsgsNumBatch``: the store never returns more per query.
MAX_MSGS_NUM_BATCH: Final = 64


class QueryProcessor:
    """Serves QUERY_MESSAGE and VIEW_MESSAGE_BY_ID. Event loop only.

    Args:
        store: The message store (index and commitlog).
        default_query_max_num: ``defaultQueryMaxNum``, the limit of a query by
            unique key.
    """

    def __init__(self, store: MessageStore, default_query_max_num: int) -> None:
        self._store = store
        self._default_max = default_query_max_num

    async def query_message(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand | Reply:
        """Answer the records of a topic indexed under a key within a store-time range.

        A query flagged ``_UNIQUE_KEY_QUERY=true`` (a lookup by UNIQ_KEY, i.e. by the
        client's msgId) uses the broker's ``defaultQueryMaxNum`` instead of ``maxNum``.
        """
        h = QueryMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, h.topic)
        if refusal is not None:
            return refusal
        max_num = self._default_max if h.unique_key_query else h.max_num
        max_num = min(max_num, MAX_MSGS_NUM_BATCH)
        views = []
        if max_num > 0:
            views = self._store.query_by_key(
                h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp
            )
        header = self._index_progress()
        if not views:
            return cmd.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                remark="can not find message, maybe time range not correct",
                ext_fields=header,
            )
        return Reply(cmd.make_response(ResponseCode.SUCCESS, ext_fields=header), views)

    def _index_progress(self) -> dict[str, str]:
        # How far the index has got, so a client can tell "not found" from "not indexed
        # yet" (``QueryOffsetResult``); read under the store lock, as retention may be
        # dropping index files on its thread.
        with self._store.lock:
            index = self._store.index
            return QueryMessageResponseHeader(
                index_last_update_timestamp=index.last_timestamp,
                index_last_update_phyoffset=index.end_phy_offset(),
            ).to_ext_fields()

    async def view_message(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand | Reply:
        """Answer the one record stored at a commit-log offset (from an offset msgId).

        RocketMQ sends whatever bytes the offset lands on; here the record is checked
        first, so an offset pointing into the middle of a record is "not found" rather
        than garbage the client cannot parse.
        """
        h = ViewMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        view = self._store.read_record(h.offset)
        if view is None or not _is_record_at(view, h.offset):
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"can not find message by the offset, {h.offset}",
            )
        return Reply(cmd.make_response(ResponseCode.SUCCESS), [view])


def _is_record_at(view: memoryview, offset: int) -> bool:
    try:
        return decode_message(view).physical_offset == offset
    except MessageFormatError:
        return False


def register(registry: ProcessorRegistry, processor: QueryProcessor) -> None:
    """Register QUERY_MESSAGE and VIEW_MESSAGE_BY_ID."""
    registry.register(RequestCode.QUERY_MESSAGE, processor.query_message)
    registry.register(RequestCode.VIEW_MESSAGE_BY_ID, processor.view_message)
