"""Admin requests about the running broker and its clients (``AdminBrokerProcessor``).

- GET_BROKER_RUNTIME_INFO (28): a ``KVTable`` with the keys ``mqadmin brokerStatus`` and
  ``clusterList`` read (``prepareRuntimeInfo`` + ``DefaultMessageStore.getRuntimeInfo``).
  Not measured here, so reported as zeros: TPS figures, get counts and thread-pool
  queues. ``msgPutTotalTodayNow`` counts consume-queue entries added since boot on
  client topics (RocketMQ counts sends); both "morning" values stay 0 as in a
  RocketMQ broker that has not yet passed midnight. The disk keys are measured at the
  request; ``diskFull``, ``diskSpaceLevel`` and ``diskFullReason`` are Rocklet's
  (whether sends are refused for a full disk, and why).
  Rocklet also adds ``storeRecovery*`` keys: what the last start's recovery found and did
  (damaged commitlog ranges skipped, bytes truncated, consume-queue entries dropped or
  blanked, index files rebuilt, stray files ignored), and ``storeDamagedReads``.
- GET_BROKER_CONFIG (26): the configuration as ``key=value`` lines (RocketMQ property
  names), with a data version header.
- UPDATE_BROKER_CONFIG (25): the configuration is read-only at runtime: a body that
  only repeats current values is accepted, anything else is refused with the keys it
  would change (RocketMQ updates and persists them).
- GET_ALL_DELAY_OFFSET (45): the delayed-delivery progress, ``{"offsetTable":{1:n,...}}``.
- GET_CONSUMER_CONNECTION_LIST (203) / GET_PRODUCER_CONNECTION_LIST (204): a group's
  channels.
- GET_CONSUMER_RUNNING_INFO (307): relayed to the consumer named by ``clientId`` and
  its answer returned (``callConsumer``: 10 s, CONSUME_MSG_TIMEOUT when it times out).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import struct
from collections.abc import Callable
from typing import Final

from rocklet.broker.clients import ClientChannel, ClientManager
from rocklet.broker.config import BrokerConfig, parse_properties, property_name
from rocklet.broker.tls_keys import without_secrets
from rocklet.broker.transaction_check import CHECK_MAX_TIME_TOPIC
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.bodies.running import ConsumerConnection, ProducerConnection, RemoteConnection
from rocklet.protocol.bodies.topic import DataVersion
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import OUR_VERSION, RemotingCommand
from rocklet.protocol.headers.admin import (
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from rocklet.protocol.headers.consumer import GetConsumerRunningInfoRequestHeader
from rocklet.protocol.message import STORE_TIMESTAMP_POS
from rocklet.protocol.names import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocklet.store.message_store import MessageStore
from rocklet.store.schedule import read_delay_offsets
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock
from rocklet.transport.errors import RemotingError, RequestTimeoutError

__all__ = ["RuntimeAdmin", "config_properties", "human_bytes", "register"]

#: ``MQVersion.getVersionDesc`` of :data:`~rocklet.protocol.command.OUR_VERSION` (401).
_VERSION_DESC: Final = "V4_9_4"
#: ``MQVersion.Version.V3_1_8_SNAPSHOT``: older consumers cannot report running info.
_MIN_RUNNING_INFO_VERSION: Final = 62
#: ``Broker2Client.callClient``'s timeout.
_RELAY_TIMEOUT_S: Final = 10.0
#: Queues the broker fills itself; their entries are not client sends.
_INTERNAL_TOPICS: Final = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, CHECK_MAX_TIME_TOPIC}
)
#: Figures RocketMQ samples and Rocklet does not: TPS windows (10 s, 1 min, 10 min),
#: executor queues, page-cache lock time. Dispatch runs inline, so nothing is behind.
_NOT_MEASURED: Final = {
    **dict.fromkeys(
        ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"),
        "0.0 0.0 0.0",
    ),
    **{f"{pool}ThreadPoolQueueSize": "0" for pool in ("send", "pull", "query")},
    **{f"{pool}ThreadPoolQueueHeadWaitTimeMills": "0" for pool in ("send", "pull", "query")},
    "dispatchBehindBytes": "0",
    "pageCacheLockTimeMills": "0",
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


def config_properties(config: BrokerConfig) -> dict[str, str]:
    """The configuration as RocketMQ property names and text values.

    Args:
        config: The broker's configuration.

    Returns:
        Property name to value; unset optional values are left out, unknown keys kept.
        Secrets (fields hidden from ``repr``, such as ``secretKey``) are never shown.
    """
    out: dict[str, str] = {}
    for spec in dataclasses.fields(config):
        value = getattr(config, spec.name)
        if spec.name == "extra" or value is None or not spec.repr:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, enum.Enum):
            text = str(value.value)
        else:
            text = str(value)
        out[property_name(spec.name)] = text
    out.update(without_secrets(config.extra))  # a key password never leaves the broker
    return dict(sorted(out.items()))


def _record_store_time(store: MessageStore, offset: int) -> int:
    view = store.read_record(offset)
    if view is None or len(view) < STORE_TIMESTAMP_POS + 8:
        return -1
    return int(_I64.unpack_from(view, STORE_TIMESTAMP_POS)[0])


def _delay_offsets(store: MessageStore) -> dict[int, int]:
    # The delay service replaces the file in two renames; between them only .bak exists.
    path = store.config.store_path / "config" / "delayOffset.json"
    return read_delay_offsets(path) or read_delay_offsets(path.with_suffix(".json.bak"))


def _client_puts(store: MessageStore) -> int:
    with store.lock:
        keys = [key for key in store.queues if key[0] not in _INTERNAL_TOPICS]
    return sum(store.max_offset(topic, queue_id) for topic, queue_id in keys)


def _connection(channel: ClientChannel) -> RemoteConnection:
    return RemoteConnection(
        client_id=channel.client_id,
        client_addr=channel.connection.peer_address or "",
        language=channel.language,
        version=channel.version,
    )


def _store_facts(store: MessageStore) -> dict[str, str]:
    """Commitlog range, flush backlog and delayed-delivery progress."""
    low, high = store.commitlog_min_offset(), store.commitlog_max_offset()
    facts = {
        "commitLogMinOffset": str(low),
        "commitLogMaxOffset": str(high),
        "earliestMessageTimeStamp": str(_record_store_time(store, low)),
        "remainHowManyDataToFlush": human_bytes(max(0, high - store.flush_service.flushed_offset)),
    }
    delivered = _delay_offsets(store)
    for level in range(1, len(store.config.delay_levels_ms) + 1):
        queued = store.max_offset(SCHEDULE_TOPIC, level - 1)
        facts[f"scheduleMessageOffset_{level}"] = f"{delivered.get(level, 0)},{queued}"
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
        config: The broker's configuration (reported whole by GET_BROKER_CONFIG).
        store: The message store (runtime facts).
        clients: Client channels (connection lists, relayed running info).
        clock: Time source (boot time and uptime).
        ha_status: Replication's keys (docs/replication.md), or ``None``.
    """

    def __init__(
        self,
        *,
        config: BrokerConfig,
        store: MessageStore,
        clients: ClientManager,
        clock: Clock,
        ha_status: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self._ha_status = ha_status
        self._config = config
        self._store = store
        self._clients = clients
        self._clock = clock
        self._boot_ms = clock.now_ms()
        self._puts_at_boot = _client_puts(store)

    async def runtime_info(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: runtime facts as a KVTable."""
        table = await asyncio.to_thread(self._runtime_table, self._clock.now_ms())
        return cmd.make_response(ResponseCode.SUCCESS, body=KVTable(table).to_json())

    def _runtime_table(self, now_ms: int) -> dict[str, str]:
        """Build the table (worker thread: reads files and takes the store lock)."""
        store = self._store
        uptime_s = max(0, now_ms - self._boot_ms) // 1000
        days, rest = divmod(uptime_s, 86_400)
        info = {
            "brokerVersionDesc": _VERSION_DESC,
            "brokerVersion": str(OUR_VERSION),
            "bootTimestamp": str(self._boot_ms),
            "runtime": f"[ {days} days, {rest // 3600} hours, {rest % 3600 // 60} minutes, "
            f"{rest % 60} seconds ]",
            "msgPutTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": str(_client_puts(store) - self._puts_at_boot),
            "msgGetTotalYesterdayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": "0",
            **_NOT_MEASURED,
            **_store_facts(store),
            **_recovery_facts(store),
            **_disk_facts(store),
            **(self._ha_status() if self._ha_status is not None else {}),
        }
        return dict(sorted(info.items()))

    async def broker_config(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONFIG: ``key=value`` lines of the configuration."""
        text = "".join(f"{k}={v}\n" for k, v in config_properties(self._config).items())
        version = DataVersion(0, self._boot_ms).to_json().decode()
        header = GetBrokerConfigResponseHeader(version=version)
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=header.to_ext_fields(), body=text.encode()
        )

    async def update_config(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: accepted only when it changes nothing."""
        wanted = parse_properties(cmd.body.decode("utf-8", "replace"))
        current = config_properties(self._config)
        changed = sorted(k for k, v in wanted.items() if current.get(k) != v.strip())
        if changed:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark="the broker configuration is read-only at runtime; change broker.conf "
                f"and restart the broker to set: {', '.join(changed)}",
            )
        return cmd.make_response(ResponseCode.SUCCESS)

    async def delay_offsets(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET: delivered offset per delay level, as delayOffset.json."""
        table = await asyncio.to_thread(_delay_offsets, self._store)
        body = fastjson.dumps({"offsetTable": dict(sorted(table.items()))}, unquoted_int_keys=True)
        return cmd.make_response(ResponseCode.SUCCESS, body=body.encode())

    async def consumer_connections(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: a consumer group's channels and subscriptions."""
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        info = self._clients.consumer_group(header.consumer_group)
        if info is None:
            return cmd.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                remark=f"the consumer group[{header.consumer_group}] not online",
            )
        body = ConsumerConnection(
            connection_set=tuple(_connection(c) for c in info.channels.values()),
            subscription_table=dict(info.subscriptions),
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        ).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def producer_connections(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: a producer group's channels."""
        header = GetProducerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        channels = self._clients.producer_channels(header.producer_group)
        if not channels:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"the producer group[{header.producer_group}] not exist",
            )
        body = ProducerConnection(tuple(_connection(c) for c in channels)).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def running_info(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: ask the consumer itself and pass its answer on."""
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        group, client_id = header.consumer_group, header.client_id
        info = self._clients.consumer_group(group)
        channel = None
        if info is not None:
            channel = next((c for c in info.channels.values() if c.client_id == client_id), None)
        if channel is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, remark=f"The Consumer <{group}> <{client_id}> not online"
            )
        if channel.version < _MIN_RUNNING_INFO_VERSION:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer <{client_id}> Version <{channel.version}> too low to "
                "finish, please upgrade it to V3_1_8_SNAPSHOT",
            )
        relayed = RemotingCommand(
            RequestCode.GET_CONSUMER_RUNNING_INFO, ext_fields=cmd.ext_fields, body=cmd.body
        )
        try:
            answer = await channel.connection.request(relayed, _RELAY_TIMEOUT_S)
        except RequestTimeoutError as exc:
            return cmd.make_response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                remark=f"consumer <{group}> <{client_id}> Timeout: {exc}",
            )
        except RemotingError as exc:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
            )
        return cmd.make_response(
            answer.code, remark=answer.remark, ext_fields=answer.ext_fields, body=answer.body
        )


def register(registry: ProcessorRegistry, admin: RuntimeAdmin) -> None:
    """Register the runtime admin codes."""
    registry.register_all(
        {
            RequestCode.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
            RequestCode.GET_BROKER_CONFIG: admin.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: admin.update_config,
            RequestCode.GET_ALL_DELAY_OFFSET: admin.delay_offsets,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: admin.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: admin.producer_connections,
            RequestCode.GET_CONSUMER_RUNNING_INFO: admin.running_info,
        }
    )
