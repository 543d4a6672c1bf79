"""Admin requests about the running broker and its clients (``AdminBrokerProcessor``).

- GET_BROKER_RUNTIME_INFO (28): a ``KVTable`` with the keys ``mqadmin brokerStatus`` and
  ``clusterList`` read (``prepareRuntimeInfo`` + ``DefaultMessageStore.getRuntimeInfo``).
  The put/get figures (``putTps``... as ``"10s 1min 10min"``, ``putMessage*``,
  ``putLatency99``/``999``, ``msgPutTotal*`` and ``msgGetTotal*`` with their midnight
  "morning" values) come from :class:`~rocklet.broker.stats_store.StoreStats`. Keys for
  parts Rocklet does not have (executor queues, the transient store pool) show what an
  idle RocketMQ broker shows (see ``_NOT_MEASURED``). ``scheduleMessageOffset_<level>``
  is listed for the levels delayed delivery has an offset for. The disk keys are measured at the
  request; ``diskFull``, ``diskSpaceLevel`` and ``diskFullReason`` are Rocklet's
  (whether sends are refused for a full disk, and why). ``totalMemKBytes`` (the
  machine's physical memory, read by ``mqadmin exportMetrics``) is Rocklet's too: a
  4.9.4 broker does not send it. Rocklet also adds ``storeRecovery*`` keys: what the
  last start's recovery found and did (damaged commitlog ranges skipped, bytes
  truncated, consume-queue entries dropped or blanked, index files rebuilt, stray
  files ignored), and ``storeDamagedReads``.
- GET_ALL_DELAY_OFFSET (45): the delayed-delivery progress, ``{"offsetTable":{1:n,...}}``.

The client connection and relay codes (203, 204, 307, 309, 328) are in
:mod:`rocklet.broker.processors.admin_clients`.
"""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Callable
from typing import Final

from rocklet.broker.clients import ClientManager
from rocklet.broker.config import BrokerConfig
from rocklet.broker.stats_store import StoreStats
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import OUR_VERSION, RemotingCommand
from rocklet.protocol.message import STORE_TIMESTAMP_POS
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.protocol.version import version_desc
from rocklet.store.message_store import MessageStore
from rocklet.store.schedule import read_delay_offsets
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock

__all__ = ["RuntimeAdmin", "human_bytes", "register"]

#: Figures of parts Rocklet does not have, as an idle RocketMQ broker shows them.
#: Requests run on the event loop, not in executor queues: the queues are empty and
#: their capacities are RocketMQ's defaults. Dispatch runs inline, so nothing is
#: behind. Without a transient store pool RocketMQ shows ``Integer.MAX_VALUE`` buffers
#: left. RocketMQ never sets ``dispatchMaxBuffer``. The page-cache lock is not measured.
_NOT_MEASURED: Final = {
    **{f"{pool}ThreadPoolQueueSize": "0" for pool in ("send", "pull", "query")},
    **{f"{pool}ThreadPoolQueueHeadWaitTimeMills": "0" for pool in ("send", "pull", "query")},
    "sendThreadPoolQueueCapacity": "10000",
    "pullThreadPoolQueueCapacity": "100000",
    "queryThreadPoolQueueCapacity": "20000",
    "EndTransactionQueueSize": "0",
    "EndTransactionThreadPoolQueueCapacity": "100000",
    "dispatchBehindBytes": "0",
    "dispatchMaxBuffer": "0",
    "pageCacheLockTimeMills": "0",
    "remainTransientStoreBufferNumbs": str(2**31 - 1),
    "startAcceptSendRequestTimeStamp": "0",
}
_I64: Final = struct.Struct(">q")


def human_bytes(count: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``: ``"512 B"``, ``"1.5 MiB"``."""
    if count < 1024:
        return f"{count} B"
    exp, value = 0, float(count)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


def _record_store_time(store: MessageStore, offset: int) -> int:
    view = store.read_record(offset)
    if view is None or len(view) < STORE_TIMESTAMP_POS + 8:
        return -1
    return int(_I64.unpack_from(view, STORE_TIMESTAMP_POS)[0])


def _delay_offsets(store: MessageStore) -> dict[int, int]:
    # The delay service replaces the file in two renames; between them only .bak exists.
    path = store.config.store_path / "config" / "delayOffset.json"
    return read_delay_offsets(path) or read_delay_offsets(path.with_suffix(".json.bak"))


def _store_facts(store: MessageStore) -> dict[str, str]:
    """Commitlog range, flush backlog and delayed-delivery progress."""
    low, high = store.commitlog_min_offset(), store.commitlog_max_offset()
    facts = {
        "commitLogMinOffset": str(low),
        "commitLogMaxOffset": str(high),
        "earliestMessageTimeStamp": str(_record_store_time(store, low)),
        "remainHowManyDataToFlush": human_bytes(max(0, high - store.flush_service.flushed_offset)),
    }
    # Only the levels delayed delivery has an offset for, as RocketMQ lists them.
    for level, delivered in sorted(_delay_offsets(store).items()):
        queued = store.max_offset(SCHEDULE_TOPIC, level - 1)
        facts[f"scheduleMessageOffset_{level}"] = f"{delivered},{queued}"
    return facts


#: Damaged ranges listed in ``storeRecoveryDamage`` (all are in the log and the count).
_DAMAGE_LISTED: Final = 10


def _recovery_facts(store: MessageStore) -> dict[str, str]:
    """What recovery found and did at this start, and damaged records reads skipped."""
    rep = store.recovery_report
    listed = "; ".join(f"{r.offset}+{r.length} ({r.reason})" for r in rep.damaged[:_DAMAGE_LISTED])
    if len(rep.damaged) > _DAMAGE_LISTED:
        listed += f"; and {len(rep.damaged) - _DAMAGE_LISTED} more (see the log)"
    return {
        "storeRecoveryClean": str(rep.clean).lower(),
        "storeRecoveryDamagedRanges": str(len(rep.damaged)),
        "storeRecoveryDamagedBytes": str(rep.damaged_bytes),
        "storeRecoveryDamage": listed,
        "storeRecoveryTruncatedBytes": str(rep.truncated_bytes),
        "storeRecoveryConsumeQueueEntriesDropped": str(rep.consume_queue_entries_dropped),
        "storeRecoveryConsumeQueueEntriesBlanked": str(rep.consume_queue_entries_blanked),
        "storeRecoveryIndexFilesRebuilt": str(rep.index_files_dropped),
        "storeRecoveryRedispatched": str(rep.redispatched),
        "storeRecoveryIgnoredFiles": ", ".join(rep.ignored_files),
        "storeRecoveryElapsedMs": str(rep.elapsed_ms),
        "storeDamagedReads": str(store.commitlog.damaged_reads),
    }


def _memory_facts() -> dict[str, str]:
    """``totalMemKBytes``: the machine's physical memory in KiB, asked of the OS now.

    ``mqadmin exportMetrics`` reads this key, but no RocketMQ 4.9.4 broker sends it (its
    files then have no ``totalMemKBytes``); Rocklet sends the real figure. Where the OS
    has no ``sysconf`` the key is left out, as RocketMQ leaves it out.
    """
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return {}
    if pages <= 0 or page_size <= 0:
        return {}
    return {"totalMemKBytes": str(pages * page_size // 1024)}


def _disk_facts(store: MessageStore) -> dict[str, str]:
    """Disk use of the store's partitions, as ``DefaultMessageStore.getRuntimeInfo``.

    Measured now (a worker thread). ``diskFull``, ``diskSpaceLevel`` and
    ``diskFullReason`` are Rocklet's: whether sends are refused, the highest threshold
    passed (:class:`~rocklet.store.disk_space.DiskLevel`) and why.
    """
    state = store.disk.check()
    commitlog = state.commitlog
    ratio = str(commitlog.ratio)
    facts = {
        "commitLogDiskRatio": ratio,
        f"commitLogDiskRatio_{store.config.commitlog_dir}": ratio,
        "consumeQueueDiskRatio": str(state.logics.ratio),
        "diskFull": "true" if state.full else "false",
        "diskSpaceLevel": state.level.name,
    }
    if commitlog.total > 0:
        total, free = human_bytes(commitlog.total), human_bytes(commitlog.available)
        facts["commitLogDirCapacity"] = f"Total : {total}, Free : {free}."
    if state.full:
        facts["diskFullReason"] = store.disk.reason()
    return facts


class RuntimeAdmin:
    """Serves the runtime admin codes. Event loop only.

    Args:
        config: The broker's configuration.
        store: The message store (runtime facts).
        clients: Client channels.
        clock: Time source (boot time and uptime).
        ha_status: Replication's keys (docs/replication.md), or ``None``.
        store_stats: Put/get totals and TPS windows (``None``: fresh, all zero).
    """

    def __init__(
        self,
        *,
        config: BrokerConfig,
        store: MessageStore,
        clients: ClientManager,
        clock: Clock,
        ha_status: Callable[[], dict[str, str]] | None = None,
        store_stats: StoreStats | None = None,
    ) -> None:
        self._ha_status = ha_status
        self._config = config
        self._store = store
        self._clients = clients
        self._clock = clock
        self._boot_ms = clock.now_ms()
        self._stats = StoreStats(self._boot_ms) if store_stats is None else store_stats

    async def runtime_info(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: runtime facts as a KVTable."""
        table = await asyncio.to_thread(self._runtime_table, self._clock.now_ms())
        return cmd.make_response(ResponseCode.SUCCESS, body=KVTable(table).to_json())

    def _runtime_table(self, now_ms: int) -> dict[str, str]:
        """Build the table (worker thread: reads files and takes the store lock)."""
        store, stats = self._store, self._stats
        uptime_s = max(0, now_ms - self._boot_ms) // 1000
        days, rest = divmod(uptime_s, 86_400)
        info = {
            "brokerVersionDesc": version_desc(OUR_VERSION),
            "brokerVersion": str(OUR_VERSION),
            "bootTimestamp": str(self._boot_ms),
            "runtime": f"[ {days} days, {rest // 3600} hours, {rest % 3600 // 60} minutes, "
            f"{rest % 60} seconds ]",
            "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.put_today_morning),
            "msgPutTotalTodayNow": str(stats.put_times),
            "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.get_today_morning),
            "msgGetTotalTodayNow": str(stats.get_transferred),
            **_NOT_MEASURED,
            **stats.runtime_info(),
            **_store_facts(store),
            **_recovery_facts(store),
            **_disk_facts(store),
            **_memory_facts(),
            **(self._ha_status() if self._ha_status is not None else {}),
        }
        return dict(sorted(info.items()))

    async def delay_offsets(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET: delivered offset per delay level, as delayOffset.json."""
        table = await asyncio.to_thread(_delay_offsets, self._store)
        body = fastjson.dumps({"offsetTable": dict(sorted(table.items()))}, unquoted_int_keys=True)
        return cmd.make_response(ResponseCode.SUCCESS, body=body.encode())


def register(registry: ProcessorRegistry, admin: RuntimeAdmin) -> None:
    """Register the runtime admin codes."""
    registry.register_all(
        {
            RequestCode.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
            RequestCode.GET_ALL_DELAY_OFFSET: admin.delay_offsets,
        }
    )
