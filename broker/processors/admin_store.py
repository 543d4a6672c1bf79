"""Rocklet's own admin request about the store: ROCKLET_STORE_CHECK (40001).

The broker checks its own store files (:func:`rocklet.store.check.check_store`) and
answers with the report as JSON, the same report ``rocklet store check`` prints for a
stopped store. The write positions are taken under the store lock, then the files are
read below them in a worker thread without the lock: puts and pulls go on. One check
runs at a time; another request meanwhile is answered SYSTEM_BUSY.
"""

from __future__ import annotations

import asyncio
import json

import structlog

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.store.check import check_store, live_limits
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = ["StoreAdmin", "register"]

log = structlog.get_logger(__name__)


class StoreAdmin:
    """Serves ROCKLET_STORE_CHECK. Event loop only.

    Args:
        store: The broker's store.
    """

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._running = False

    async def store_check(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """ROCKLET_STORE_CHECK: the store check report as JSON."""
        if self._running:
            return cmd.make_response(
                ResponseCode.SYSTEM_BUSY,
                remark="a store check is already running on this broker; ask again when it "
                "has answered",
            )
        self._running = True
        try:
            # The store lock may be held by a put: take it in a worker thread too.
            limits = await asyncio.to_thread(live_limits, self._store)
            report = await asyncio.to_thread(check_store, self._store.config, live=limits)
        finally:
            self._running = False
        data = report.to_json()
        log.info("store checked", problems=data["problems"], warnings=data["warnings"])
        body = json.dumps(data, ensure_ascii=False).encode()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)


def register(registry: ProcessorRegistry, admin: StoreAdmin) -> None:
    """Register the store admin code."""
    registry.register(RequestCode.ROCKLET_STORE_CHECK, admin.store_check)
