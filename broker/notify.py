"""Broker-to-client notifications (NOTIFY_CONSUMER_IDS_CHANGED, docs/protocol.md)."""

from __future__ import annotations

import structlog

from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import NotifyConsumerIdsChangedRequestHeader
from rocklet.transport.connection import Connection
from rocklet.transport.errors import RemotingError
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["notify_consumer_ids_changed"]

log = structlog.get_logger(__name__)


def notify_consumer_ids_changed(
    tasks: BackgroundTasks, group: str, conns: list[Connection]
) -> None:
    """Tell every member of a group to rebalance now (oneway, in owned tasks)."""
    header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext_fields()
    for conn in conns:
        if conn.is_open:
            cmd = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext_fields=header)
            tasks.spawn(_send(conn, cmd), f"notify-{group}")


async def _send(conn: Connection, cmd: RemotingCommand) -> None:
    try:
        await conn.send_oneway(cmd)
    except RemotingError as exc:
        log.info("notify failed", peer=conn.peer_address, error=str(exc))
