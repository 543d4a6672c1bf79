"""A slave's copy of its master's metadata (RocketMQ's ``SlaveSynchronize``).

Every 10 s (and at start) the slave asks ``masterAddr``, on one connection, for
GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG, as RocketMQ 4.9.4 does, and takes:

- topics and subscription groups whole, when the master's data version differs;
- consumer offsets by :meth:`~rocklet.broker.offsets.ConsumerOffsetManager.take_from_master`:
  never backwards unless the master stamped a deliberate move back (RocketMQ: the
  master's overwrite the slave's);
- delay offsets (the delivered queue offset per delay level) into the slave's
  ``config/delayOffset.json``, which a slave restarted as master delivers from, as
  RocketMQ writes the master's string to that file. Rocklet takes a level's offset
  only forward, and never past what the slave's own schedule queue holds (RocketMQ's
  ``correctDelayOffset`` clamps the same way, but only at load): a promoted slave
  delivers every delayed message it holds that the master had not delivered, and
  redelivers at most those the master delivered in its last ~10 s.

A request that fails or does not parse is logged and skipped; the others are still
taken.

Beyond RocketMQ, nothing is taken while the slave's HA client says the master is out of
step (:meth:`rocklet.broker.ha.slave.HASlave.out_of_step`): after the slave diverged from
it, or lost it and has not checked its commitlog again. A master that lost its disk
would otherwise replace the slave's topics and groups with its empty tables, and the
slave's copy is what the operator restores it from (docs/operations.md, "A slave
stopped with haDiverged").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Callable

import structlog

from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.offsets import RESET_STAMPS_KEY, ConsumerOffsetManager
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol import fastjson
from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupWrapper
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import BodyError
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.store.durable_file import replace_file
from rocklet.store.message_store import MessageStore
from rocklet.store.schedule import read_delay_offsets
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import RemotingError

__all__ = ["MetadataSync", "take_delay_offsets"]

log = structlog.get_logger(__name__)

_TIMEOUT_S = 3.0
_REQUESTS = (
    RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.GET_ALL_DELAY_OFFSET,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
)


class MetadataSync:
    """Copies the master's metadata to a slave. Event loop only.

    Args:
        store: The slave's store (its schedule queues and ``config/``).
        topics: The slave's topic table.
        groups: The slave's subscription groups.
        offsets: The slave's consumer offsets.
        credentials: Sign the requests as this account (``accessKey``/``secretKey``:
            a master with ``aclEnable`` refuses unsigned ones).
        tls: Speak TLS to the master's port with this context; ``None``: plain.
        out_of_step: Why the master's tables must not be taken now, or ``None`` when
            they may (:meth:`~rocklet.broker.ha.slave.HASlave.out_of_step`); without
            it they are always taken.
    """

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        *,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
        out_of_step: Callable[[], str | None] | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._credentials = credentials
        self._tls = tls
        self._out_of_step = out_of_step
        #: Why the last sync was skipped (logged once per reason), or ``None``.
        self._paused: str | None = None
        #: Whether the master's tables were taken since the start (logged the first time).
        self._taken = False
        # One sync at a time: the periodic round and a kick may meet.
        self._lock = asyncio.Lock()
        self._kicked: asyncio.Task[bool] | None = None
        #: The master's client address (``masterAddr`` of the register answer).
        self.master_addr: str | None = None

    def set_master(self, addr: str | None) -> None:
        """Note the master's client address from a REGISTER_BROKER answer."""
        if addr:
            self.master_addr = addr

    def kick(self) -> None:
        """Sync now, in the background (the slave's commitlog was just found in step)."""
        if self._kicked is None or self._kicked.done():
            self._kicked = asyncio.get_running_loop().create_task(
                self.sync_once(), name="slave-sync-kick"
            )
            self._kicked.add_done_callback(_log_failure)

    async def stop(self) -> None:
        """Cancel a sync started by :meth:`kick`. Idempotent."""
        task, self._kicked = self._kicked, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def sync_once(self) -> bool:
        """Fetch the master's four tables and take them.

        Returns:
            Whether the topic table was replaced.
        """
        async with self._lock:
            return await self._sync()

    def _paused_now(self, addr: str) -> bool:
        """Whether the master's tables must not be taken now (a new reason is logged)."""
        why = self._out_of_step() if self._out_of_step is not None else None
        if why is not None and why != self._paused:
            log.warning("metadata sync from the master paused", master=addr, why=why)
            self._paused = why
        return why is not None

    async def _sync(self) -> bool:
        addr = self.master_addr
        if addr is None or self._paused_now(addr):
            return False
        host, _, port = addr.rpartition(":")
        answers: list[RemotingCommand] = []
        try:
            async with await open_connection(
                host, int(port), connect_timeout_s=_TIMEOUT_S, tls=self._tls
            ) as conn:
                for code in _REQUESTS:
                    cmd = self._signed(RemotingCommand(code))
                    answers.append(await conn.request(cmd, _TIMEOUT_S))
        except (RemotingError, OSError) as exc:
            log.warning("metadata sync from the master failed", master=addr, error=str(exc))
            return False
        if self._paused_now(addr):
            return False  # the master was lost (or diverged) while it answered
        topics, offsets, delay, groups = answers
        replaced = False
        if self._ok(topics, "topics", addr):
            try:
                replaced = self._topics.replace_all(
                    TopicConfigSerializeWrapper.from_json(topics.body)
                )
            except BodyError as exc:
                log.warning("master's topic table does not parse", master=addr, error=str(exc))
            if replaced:
                log.info("topic table synced from the master", master=addr)
        if self._ok(offsets, "consumer offsets", addr):
            self._take_offsets(offsets.body, addr)
        if self._ok(groups, "subscription groups", addr):
            try:
                if self._groups.replace_all(SubscriptionGroupWrapper.from_json(groups.body)):
                    log.info("subscription groups synced from the master", master=addr)
            except BodyError as exc:
                log.warning("master's groups do not parse", master=addr, error=str(exc))
        if self._ok(delay, "delay offsets", addr):
            try:
                table = _parse_level_table(delay.body)
            except (ValueError, AttributeError, TypeError) as exc:
                log.warning("master's delay offsets do not parse", master=addr, error=str(exc))
            else:
                try:
                    await asyncio.to_thread(take_delay_offsets, self._store, table)
                except OSError as exc:
                    log.error("delayOffset.json not written", error=str(exc))
        # Said the first time the tables are taken and after each pause, so a reader
        # of the log knows the slave has them: not while the master refuses one.
        if not all(_answered(resp) for resp in answers):
            return replaced
        if self._paused is not None:
            log.info("metadata sync from the master resumed", master=addr)
            self._paused = None
        elif not self._taken:
            log.info("metadata synced from the master", master=addr)
        self._taken = True
        return replaced

    @staticmethod
    def _ok(resp: RemotingCommand, what: str, addr: str) -> bool:
        if _answered(resp):
            return True
        log.warning("master refused the sync", what=what, master=addr, remark=resp.remark)
        return False

    def _signed(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd if self._credentials is None else sign(cmd, self._credentials)

    def _take_offsets(self, body: bytes, addr: str) -> None:
        try:
            obj = fastjson.loads(body)
            table = _int_tables(obj.get("offsetTable") or {})
            raw_stamps = obj.get(RESET_STAMPS_KEY)
            stamps = None if raw_stamps is None else _int_tables(raw_stamps)
        except (ValueError, AttributeError, TypeError) as exc:
            log.warning("master's consumer offsets do not parse", master=addr, error=str(exc))
            return
        kept = self._offsets.take_from_master(table, stamps)
        if kept:
            # Not an error: the master lost commits (a restart) or consumers committed
            # here while it was gone. Logged so an operator sees the two disagree.
            log.info("kept consumer offsets ahead of the master's", queues=kept, master=addr)


def _answered(resp: RemotingCommand) -> bool:
    """Whether the master answered a table request with the table."""
    return resp.code == ResponseCode.SUCCESS and bool(resp.body)


def _log_failure(task: asyncio.Task[bool]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("metadata sync from the master failed unexpectedly", exc_info=error)


def take_delay_offsets(store: MessageStore, theirs: dict[int, int]) -> bool:
    """Merge a master's delay offsets into the slave's ``config/delayOffset.json``.

    Per level: forward only, and at most the slave's schedule queue's max offset.
    Blocking (an fsynced file replace): call it from a worker thread.

    Args:
        store: The slave's store.
        theirs: Delay level to the master's delivered offset.

    Returns:
        Whether the file was rewritten.
    """
    path = store.config.store_path / "config" / "delayOffset.json"
    mine = read_delay_offsets(path)
    merged = dict(mine)
    for level, offset in theirs.items():
        if level < 1:
            continue
        held = store.max_offset(SCHEDULE_TOPIC, level - 1)
        offset = min(offset, held)
        if offset > merged.get(level, 0) or (level not in merged and offset >= 0):
            merged[level] = offset
    if merged == mine:
        return False
    body = json.dumps({"offsetTable": {str(k): v for k, v in sorted(merged.items())}})
    replace_file(path, body.encode())
    return True


def _parse_level_table(body: bytes) -> dict[int, int]:
    raw = fastjson.loads(body).get("offsetTable") or {}
    return {int(level): int(offset) for level, offset in raw.items()}


def _int_tables(raw: dict[str, dict[str, object]]) -> dict[str, dict[int, int]]:
    return {
        str(key): {int(q): int(str(o)) for q, o in queues.items()} for key, queues in raw.items()
    }
