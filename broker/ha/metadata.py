"""A slave's copy of its master's metadata (part of RocketMQ's ``SlaveSynchronize``).

RocketMQ's slave fetches GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
GET_ALL_DELAY_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG from ``masterAddr`` every
10 s. Rocklet syncs the topic table (a slave needs it to serve pulls), replacing its
own when the master's data version differs, and the consumer offsets (the master's
overwrite the slave's, key by key, as RocketMQ's ``putAll`` does); delay offsets and
subscription groups are listed under "Not done yet" in docs/replication.md.
"""

from __future__ import annotations

import ssl

import structlog

from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol import fastjson
from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import BodyError
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import RemotingError

__all__ = ["MetadataSync"]

log = structlog.get_logger(__name__)

_TIMEOUT_S = 3.0


class MetadataSync:
    """Copies the master's topic table to a slave. Event loop only.

    Args:
        topics: The slave's topic table.
        offsets: The slave's consumer offsets.
        credentials: Sign the requests as this account (``accessKey``/``secretKey``:
            a master with ``aclEnable`` refuses unsigned ones).
        tls: Speak TLS to the master's port with this context; ``None``: plain.
    """

    def __init__(
        self,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        *,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._topics = topics
        self._offsets = offsets
        self._credentials = credentials
        self._tls = tls
        #: The master's client address (``masterAddr`` of the register answer).
        self.master_addr: str | None = None

    def set_master(self, addr: str | None) -> None:
        """Note the master's client address from a REGISTER_BROKER answer."""
        if addr:
            self.master_addr = addr

    async def sync_once(self) -> bool:
        """Fetch the master's topic table and consumer offsets and take them.

        Returns:
            Whether the topic table was replaced.
        """
        addr = self.master_addr
        if addr is None:
            return False
        host, _, port = addr.rpartition(":")
        try:
            async with await open_connection(
                host, int(port), connect_timeout_s=_TIMEOUT_S, tls=self._tls
            ) as conn:
                cmd = self._signed(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG))
                resp = await conn.request(cmd, _TIMEOUT_S)
                cmd = self._signed(RemotingCommand(RequestCode.GET_ALL_CONSUMER_OFFSET))
                offsets = await conn.request(cmd, _TIMEOUT_S)
        except (RemotingError, OSError) as exc:
            log.warning("topic sync from the master failed", master=addr, error=str(exc))
            return False
        if resp.code != ResponseCode.SUCCESS:
            log.warning("master refused the topic sync", master=addr, remark=resp.remark)
            return False
        try:
            table = TopicConfigSerializeWrapper.from_json(resp.body)
        except BodyError as exc:
            log.warning("master's topic table does not parse", master=addr, error=str(exc))
            return False
        replaced = self._topics.replace_all(table)
        if offsets.code == ResponseCode.SUCCESS:
            self._take_offsets(offsets.body, addr)
        if replaced:
            log.info("topic table synced from the master", master=addr)
        return replaced

    def _signed(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd if self._credentials is None else sign(cmd, self._credentials)

    def _take_offsets(self, body: bytes, addr: str) -> None:
        try:
            obj = fastjson.loads(body)
            raw = obj.get("offsetTable") or {}
            table = {
                str(key): {int(q): int(o) for q, o in queues.items()} for key, queues in raw.items()
            }
        except (ValueError, AttributeError, TypeError) as exc:
            log.warning("master's consumer offsets do not parse", master=addr, error=str(exc))
            return
        self._offsets.replace_from_master(table)
