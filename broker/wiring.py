"""Build every request processor from the broker's collaborators and register it.

The one place that reads :class:`~rocklet.broker.context.BrokerContext` for processors:
each gets only what it uses, so its constructor says what it depends on and a test can
build one without a broker.
"""

from __future__ import annotations

from rocklet.broker.config import BrokerRole
from rocklet.broker.context import BrokerContext
from rocklet.broker.processors import (
    admin,
    admin_clients,
    admin_config,
    admin_maintenance,
    admin_stats,
    admin_store,
    client_manage,
    consumer_manage,
    pull,
    query,
    reply,
    send,
    sendback,
    transaction,
)
from rocklet.broker.processors.admin_clients import ClientAdmin
from rocklet.broker.processors.admin_config import ConfigAdmin
from rocklet.broker.processors.admin_groups import GroupAdmin
from rocklet.broker.processors.admin_maintenance import MaintenanceAdmin
from rocklet.broker.processors.admin_runtime import RuntimeAdmin
from rocklet.broker.processors.admin_stats import StatsAdmin
from rocklet.broker.processors.admin_store import StoreAdmin
from rocklet.broker.processors.admin_topics import TopicAdmin
from rocklet.broker.processors.client_manage import ClientManageProcessor
from rocklet.broker.processors.consumer_manage import ConsumerManageProcessor
from rocklet.broker.processors.property_filter import PropertyFilters
from rocklet.broker.processors.pull import PullProcessor, SlaveReads, total_physical_memory
from rocklet.broker.processors.query import QueryProcessor
from rocklet.broker.processors.reply import ReplyProcessor
from rocklet.broker.processors.send import SendProcessor
from rocklet.broker.processors.sendback import SendBackProcessor
from rocklet.broker.processors.transaction import EndTransactionProcessor
from rocklet.broker.put_wait import PutWait
from rocklet.broker.stats_sink import stats_of
from rocklet.broker.transaction_check import TransactionCheckService
from rocklet.store.config import FlushDiskType
from rocklet.transport import ProcessorRegistry

__all__ = ["register_processors", "transaction_check_service"]


def register_processors(registry: ProcessorRegistry, ctx: BrokerContext) -> None:
    """Build each request family's processor and register its codes.

    Args:
        registry: Where request codes are mapped to handlers.
        ctx: The broker's collaborators.
    """
    cfg, identity = ctx.config, ctx.identity
    put_wait = PutWait(
        sync_flush_timeout_ms=cfg.sync_flush_timeout_ms,
        replicas=ctx.replicas,
        sync_master=cfg.broker_role is BrokerRole.SYNC_MASTER,
        slave_timeout_ms=cfg.slave_timeout_ms,
        flush_service=ctx.store.flush_service,
    )
    store, topics, groups, clients = ctx.store, ctx.topics, ctx.groups, ctx.clients
    stats = stats_of(ctx.metrics, identity.cluster_name, ctx.clock)
    send.register(
        registry,
        SendProcessor(
            store=store,
            topics=topics,
            groups=groups,
            identity=identity,
            sync_flush=cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            reject_transactions=cfg.reject_transaction_message,
            max_message_size=cfg.max_message_size,
            replicas=ctx.replicas,
            sync_master=cfg.broker_role is BrokerRole.SYNC_MASTER,
            put_wait=put_wait,
            registration=ctx.registration,
            register_timeout_ms=cfg.register_broker_timeout_ms,
        ),
    )
    filters = PropertyFilters(enabled=cfg.enable_property_filter)
    # Both are changed in place by UPDATE_BROKER_CONFIG (ConfigAdmin).
    slave_reads = SlaveReads(
        slave_read_enable=cfg.slave_read_enable,
        memory_lag_bytes=total_physical_memory() * cfg.access_message_in_memory_max_ratio // 100,
        offset_check_in_slave=cfg.offset_check_in_slave,
    )
    pull.register(
        registry,
        PullProcessor(
            store=store,
            topics=topics,
            groups=groups,
            offsets=ctx.offsets,
            clients=clients,
            holds=ctx.holds,
            metrics=ctx.metrics,
            identity=identity,
            long_polling=cfg.long_polling_enable,
            short_polling_time_ms=cfg.short_polling_time_ms,
            max_transfer_count=cfg.max_transfer_count_on_message_in_memory,
            slave_reads=slave_reads,
            filters=filters,
        ),
    )
    query.register(registry, QueryProcessor(store, cfg.default_query_max_num))
    client_manage.register(
        registry, ClientManageProcessor(clients, groups, topics, ctx.clock, filters)
    )
    consumer_manage.register(
        registry, ConsumerManageProcessor(store, ctx.offsets, ctx.locks, topics)
    )
    sendback.register(
        registry,
        SendBackProcessor(
            store=store,
            topics=topics,
            groups=groups,
            identity=identity,
            put_wait=put_wait,
        ),
    )
    transaction.register(
        registry,
        EndTransactionProcessor(
            store=store,
            topics=topics,
            clock=ctx.clock,
            identity=identity,
            put_wait=put_wait,
        ),
    )
    reply.register(
        registry,
        ReplyProcessor(
            store=store,
            topics=topics,
            clients=clients,
            clock=ctx.clock,
            identity=identity,
            store_replies=cfg.store_reply_message_enable,
            put_wait=put_wait,
        ),
    )
    admin.register(
        registry,
        TopicAdmin(
            store=store,
            topics=topics,
            offsets=ctx.offsets,
            clients=clients,
            registration=ctx.registration,
            identity=identity,
            register_timeout_ms=cfg.register_broker_timeout_ms,
            stats=stats,
        ),
        GroupAdmin(
            store=store,
            topics=topics,
            groups=groups,
            offsets=ctx.offsets,
            clients=clients,
            identity=identity,
            stats=stats,
        ),
        RuntimeAdmin(
            config=cfg,
            store=store,
            clients=clients,
            clock=ctx.clock,
            ha_status=ctx.ha_status,
            store_stats=stats.store,
        ),
    )
    admin_store.register(registry, StoreAdmin(store))
    admin_config.register(
        registry,
        ConfigAdmin(
            config=cfg,
            identity=identity,
            topics=topics,
            registration=ctx.registration,
            register_timeout_ms=cfg.register_broker_timeout_ms,
            slave_reads=slave_reads,
            filters=filters,
            clock=ctx.clock,
            replicas=ctx.replicas,
            stats=stats.broker,
        ),
    )
    admin_clients.register(registry, ClientAdmin(clients=clients, store=store, identity=identity))
    admin_maintenance.register(
        registry,
        MaintenanceAdmin(
            store=store, topics=topics, clients=clients, identity=identity, stats=stats
        ),
    )
    admin_stats.register(
        registry,
        StatsAdmin(
            stats=stats.broker,
            store=store,
            topics=topics,
            groups=groups,
            offsets=ctx.offsets,
            clients=clients,
            identity=identity,
        ),
    )


def transaction_check_service(ctx: BrokerContext) -> TransactionCheckService:
    """Build the transaction check-back from the broker's collaborators and settings.

    Args:
        ctx: The broker's collaborators.

    Returns:
        The service (not yet scheduled).
    """
    cfg = ctx.config
    return TransactionCheckService(
        store=ctx.store,
        topics=ctx.topics,
        offsets=ctx.offsets,
        clients=ctx.clients,
        clock=ctx.clock,
        store_host=ctx.identity.store_host,
        timeout_ms=cfg.transaction_timeout_ms,
        check_max=cfg.transaction_check_max,
        interval_ms=cfg.transaction_check_interval_ms,
        reserved_ms=cfg.file_reserved_time_hours * 3_600_000,
        sync_flush_timeout_ms=cfg.sync_flush_timeout_ms,
    )
