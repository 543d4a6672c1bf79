"""The broker process: store, managers, remoting server, services, registration.

``Broker.start`` first claims the store directory (its ``lock`` file, then a write probe
of the store root and of ``config/``; :mod:`rocklet.store.directory`), so a second broker
on the same directory, or a directory it could not save to, stops it before anything is
touched. It then opens (and recovers) the store in a worker thread, loads the config
files, listens, registers the request processors and the name-server registration, and
starts the periodic services RocketMQ's ``BrokerController`` runs: consumer offset
persistence (5 s; topics and groups are written before the requests that change them
are answered, :mod:`rocklet.broker.config_writer`), client expiry (10 s), delayed
delivery (100 ms), retention (``cleanResourceInterval``, 10 s), the disk space check
(1 s; :mod:`rocklet.store.disk_space`) and re-registration (30 s, and at once when the
topic table changes). ``stop`` undoes it in reverse and leaves a clean store (flushed,
checkpointed, no abort marker). With ``metricsPort`` set, a Prometheus endpoint is
served too (:mod:`rocklet.broker.prometheus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, cast

import structlog

from rocklet.broker.clients import ClientManager
from rocklet.broker.config import BrokerConfig, BrokerRole, ConfigError
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.context import BrokerContext
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.ha.service import Replication, ha_client_tls, start_replication
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.locks import RebalanceLockManager
from rocklet.broker.long_polling import PullHoldService
from rocklet.broker.metrics import NULL_METRICS
from rocklet.broker.notify import notify_consumer_ids_changed
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.registration import NamesrvRegistrar, parse_namesrv_addrs
from rocklet.broker.stats import BrokerStats
from rocklet.broker.stats_sink import (
    SAMPLE_INTERVAL_S,
    MeteredMessageStore,
    StatsSampler,
    StatsSink,
)
from rocklet.broker.stats_store import StoreStats
from rocklet.broker.tls_config import TlsSettings, tls_settings
from rocklet.broker.topics import TopicConfigManager
from rocklet.broker.wiring import register_processors, transaction_check_service
from rocklet.protocol.headers.namesrv import RegisterBrokerRequestHeader
from rocklet.protocol.message import pack_host
from rocklet.store.directory import StoreLock, check_writable
from rocklet.store.retention import RetentionService
from rocklet.store.schedule import DelayDeliveryService
from rocklet.transport import ProcessorRegistry, RemotingServer
from rocklet.transport.clock import Clock, SystemClock
from rocklet.transport.server import probe_port
from rocklet.transport.tasks import BackgroundTasks

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rocklet.broker.acl.accounts import Account
    from rocklet.broker.acl.files import AclFiles
    from rocklet.broker.prometheus import BrokerMetrics, MetricsServer

__all__ = ["Broker", "claim_store_directory"]

log = structlog.get_logger(__name__)

_CLIENT_SCAN_MS = 10_000
_DELAY_TICK_MS = 100
#: A slave copies its master's topic table this often (``SlaveSynchronize``: 10 s).
_SLAVE_SYNC_S = 10.0


def _prometheus() -> ModuleType:
    """Import the Prometheus endpoint, which only brokers with ``metricsPort`` need.

    Raises:
        ConfigError: ``prometheus-client`` (the ``metrics`` extra) is not installed.
    """
    # Imported on demand: prometheus-client is an optional dependency, and a broker
    # with metrics off should neither need it nor pay for importing it.
    try:
        from rocklet.broker import prometheus
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client":
            raise
        raise ConfigError(
            "metricsPort is set but prometheus-client is not installed: "
            "pip install 'rocklet[metrics]' (from a checkout: pip install '.[metrics]')"
        ) from None
    return prometheus


def _accounts(files: AclFiles) -> Mapping[str, Account]:
    """The ACL accounts in force (the HA guard reads them per connection)."""
    return files.table.accounts


def _acl() -> ModuleType:
    # Imported only when aclEnable is on: the YAML library stays out of other brokers.
    from rocklet.broker.acl import service

    return service


def _claim(root: Path, program: str, commitlog: Path | None) -> StoreLock:
    lock = StoreLock.acquire(root, program)
    try:
        check_writable(root, "the store")
        # Topics, groups and offsets are saved under config/ as they change; a broker
        # that cannot write there would refuse every request that creates one.
        check_writable(root / "config", "where topics, subscription groups and offsets are saved")
        if commitlog is not None:  # after the probes: a refused start creates nothing
            lock.lock_commitlog(commitlog)
    except BaseException:
        lock.release()
        raise
    return lock


async def claim_store_directory(
    root: Path, program: str, commitlog: Path | None = None
) -> StoreLock:
    """Lock a store root and its commitlog, then prove the root and ``config`` writable.

    Args:
        root: ``storePathRootDir``.
        program: What holds it, for the message another process will show.
        commitlog: The commitlog directory (:attr:`BrokerConfig.commit_log_dir`),
            which ``storePathCommitLog`` may put outside the root.

    Returns:
        The held lock (hand it to :meth:`Broker.start`).

    Raises:
        StoreInUseError: Another process has the root or the commitlog directory.
        StoreDirectoryError: The root or ``config`` cannot be written.
    """
    return await asyncio.to_thread(_claim, root, program, commitlog)


class _ArrivalBridge:
    """Store listener that wakes parked pulls on the event loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, holds: PullHoldService) -> None:
        self._loop = loop
        self._thread = threading.get_ident()
        self._holds = holds
        self._parked = holds.parked_queues

    def arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int
    ) -> None:
        if threading.get_ident() == self._thread:
            if (topic, queue_id) in self._parked:  # else nobody waits on this queue
                self._holds.notify(topic, queue_id, max_offset, tags_code)
        else:  # a put from a worker thread (delayed delivery, transactions)
            self._loop.call_soon_threadsafe(
                self._holds.notify, topic, queue_id, max_offset, tags_code
            )

    def arrived(
        self, topic: str, queue_id: int, first_offset: int, tags_codes: Sequence[int],
        store_timestamp: int,
    ) -> None:  # fmt: skip
        if threading.get_ident() == self._thread:
            if (topic, queue_id) in self._parked:
                self._holds.notify_run(topic, queue_id, first_offset, tags_codes)
        else:
            self._loop.call_soon_threadsafe(
                self._holds.notify_run, topic, queue_id, first_offset, tuple(tags_codes)
            )


class Broker:
    """A running broker; build it with :meth:`start`. Event loop only."""

    def __init__(
        self,
        ctx: BrokerContext,
        server: RemotingServer,
        registrar: NamesrvRegistrar,
        delay: DelayDeliveryService,
        retention: RetentionService,
    ) -> None:
        self.ctx = ctx
        self._server = server
        self._registrar = registrar
        self._delay = delay
        self._retention = retention
        self._metrics_server: MetricsServer | None = None
        self._fast_server: RemotingServer | None = None
        self._register_now = asyncio.Event()
        self._stopped = False
        #: The ACL files in force (``aclEnable``), or ``None``.
        self.acl: AclFiles | None = None
        #: This broker's side of master-slave replication.
        self.replication: Replication | None = None
        #: Takes the statistics' snapshots (a test with a manual clock calls ``sample``).
        self.stats_sampler: StatsSampler | None = None

    @classmethod
    async def start(
        cls,
        config: BrokerConfig,
        *,
        host: str | None = None,
        clock: Clock | None = None,
        store_lock: StoreLock | None = None,
        tls: TlsSettings | None = None,
    ) -> Broker:
        """Claim the store directory, open the store, listen and start every service.

        Args:
            config: Broker settings (``listen_port`` 0 binds a free port).
            host: Interface to listen on. Default: ``config.listen_host``.
            clock: Time source (default: the system clock).
            store_lock: The store root, already claimed with
                :func:`claim_store_directory` (the standalone command claims it before
                its name server starts); the broker owns it from here on. ``None``:
                claimed here, before anything else.
            tls: TLS of the port and of the connections to name servers. ``None``:
                from the ``tls.*`` keys of ``config`` (and ``tls.config.file``).

        Returns:
            The running broker; it has registered with its name servers once.

        Raises:
            ConfigError: The TLS settings are invalid or their files do not load.
            StoreInUseError: Another process has the store directory.
            StoreDirectoryError: The store root or its ``config`` directory is not
                writable.
        """
        clock = clock or SystemClock()
        host = config.listen_host if host is None else host
        # Configuration errors first, before anything on disk is touched.
        tls = tls_settings(config.extra, {}) if tls is None else tls
        server_tls, namesrv_tls = tls.server_tls(), tls.client_context()
        ha_tls = ha_client_tls(config, tls, namesrv_tls)
        metrics: BrokerMetrics | None = None
        if config.metrics_port is not None:
            metrics = _prometheus().BrokerMetrics()
        acl_files = _acl().open_acl_files(config.acl_path) if config.acl_enable else None
        if store_lock is None:
            store_lock = await claim_store_directory(
                config.store_path_root_dir, "rocklet broker", config.commit_log_dir
            )
        try:
            probe_port(host, config.listen_port)  # before a recovery that may take minutes
        except BaseException:
            store_lock.release()
            raise
        conf_dir = config.store_path_root_dir / "config"
        topics = TopicConfigManager(
            conf_dir / "topics.json",
            clock,
            cluster_name=config.broker_cluster_name,
            broker_name=config.broker_name,
            auto_create=config.auto_create_topic_enable,
            default_queue_nums=config.default_topic_queue_nums,
            cluster_topic_enable=config.cluster_topic_enable,
            broker_topic_enable=config.broker_topic_enable,
            trace_topic=config.msg_trace_topic_name if config.trace_topic_enable else None,
        )
        groups = SubscriptionGroupManager(
            conf_dir / "subscriptionGroup.json",
            clock,
            auto_create=config.auto_create_subscription_group,
        )
        offsets = ConsumerOffsetManager(conf_dir / "consumerOffset.json", clock)
        try:
            # Before the store opens: a config file no broker can read stops the start
            # without a recovery, and leaves the store as a clean stop left it.
            for manager in (topics, groups, offsets):
                manager.load()
        except BaseException:
            store_lock.release()
            raise
        holds = PullHoldService()
        bridge = _ArrivalBridge(asyncio.get_running_loop(), holds)
        store = await asyncio.to_thread(
            MeteredMessageStore.open,
            config.store_config(),
            listener=bridge,
            clock=clock,
            dir_lock=store_lock,
        )
        # Statistics are always kept (mqadmin reads them); Prometheus gets the same reports.
        stats = StatsSink(
            BrokerStats(config.broker_cluster_name, drop_unused=config.auto_delete_unused_stats),
            StoreStats(clock.now_ms()),
            NULL_METRICS if metrics is None else metrics,
        )
        cast("MeteredMessageStore", store).sink = stats
        if config.broker_role is BrokerRole.SLAVE:
            # Replicated records reach the store through dispatch, not put_messages.
            store.reput.dispatchers.append(lambda req: stats.store.put_replicated(req.size))
        log.info("store opened", report=store.recovery_report)
        tasks = BackgroundTasks("broker")
        clients = ClientManager(
            partial(notify_consumer_ids_changed, tasks)
            if config.notify_consumer_ids_changed_enable
            else None
        )
        registry = ProcessorRegistry()
        if metrics is not None:
            registry.observer = stats.on_request

        def remoting_server(port: int, name: str) -> RemotingServer:
            return RemotingServer(
                host,
                port,
                registry,
                name=name,
                high_water=config.write_buffer_high_water_mark or None,
                limits=config.flow_limits(),
                socket_rcvbuf=config.server_socket_rcv_buf_size,
                socket_sndbuf=config.server_socket_snd_buf_size,
                tls=server_tls,
                idle_s=config.server_channel_max_idle_time_seconds,
            )

        server = remoting_server(config.listen_port, "broker")
        fast: RemotingServer | None = None
        try:
            await server.start()
            fast = await _start_fast_port(config, remoting_server)
            ha = await start_replication(
                config,
                store,
                topics,
                groups,
                offsets,
                host,
                server_tls=server_tls,
                client_tls=namesrv_tls,
                ha_tls=ha_tls,
                accounts=None if acl_files is None else partial(_accounts, acl_files),
            )
        except BaseException:
            await server.stop()
            if fast is not None:
                await fast.stop()
            await asyncio.to_thread(store.close)
            raise
        ip = config.broker_ip1 or "127.0.0.1"
        addr = f"{ip}:{server.port}"
        ctx = BrokerContext(
            config=config,
            store=store,
            topics=topics,
            groups=groups,
            offsets=offsets,
            clients=clients,
            locks=RebalanceLockManager(clock),
            holds=holds,
            clock=clock,
            identity=BrokerIdentity.of(config, addr, pack_host(ip, server.port)),
            tasks=tasks,
            metrics=stats,
            replicas=ha.master,
            ha_status=ha.status,
        )
        register_processors(registry, ctx)
        if acl_files is not None:
            _acl().enable_acl(
                registry,
                acl_files,
                tasks,
                name=config.broker_name,
                addr=addr,
                cluster=config.broker_cluster_name,
            )
        registrar = NamesrvRegistrar(
            parse_namesrv_addrs(config.namesrv_addr),
            RegisterBrokerRequestHeader(
                broker_name=config.broker_name,
                broker_addr=addr,
                cluster_name=config.broker_cluster_name,
                ha_server_addr=f"{config.broker_ip2 or ip}:{ha.port}",
                broker_id=config.broker_id,
            ),
            # Read at each round: UPDATE_BROKER_CONFIG may change the permission.
            lambda: topics.for_registration(ctx.identity.permission),
            timeout_s=config.register_broker_timeout_ms / 1000,
            compressed=config.compressed_register,
            tls=namesrv_tls,
            credentials=config.namesrv_credentials,
            on_master=ha.learn_master,
        )
        delay = DelayDeliveryService(store, sync_timeout_s=config.sync_flush_timeout_ms / 1000)
        broker = cls(ctx, server, registrar, delay, RetentionService(store))
        broker._fast_server = fast
        broker.replication = ha
        broker.acl = acl_files
        topics.on_change = broker._register_now.set
        await broker._register()
        if ha.metadata is not None:
            await ha.metadata.sync_once()
            tasks.every(_SLAVE_SYNC_S, ha.metadata.sync_once, "slave-sync")
        broker._start_services()
        sampler = broker.stats_sampler = StatsSampler(stats, clock)
        tasks.every(SAMPLE_INTERVAL_S, sampler.tick, "stats-sampling")
        if metrics is not None:
            await broker._start_metrics(metrics, host)
        log.info(
            "broker started",
            addr=addr,
            cluster=config.broker_cluster_name,
            tls=server.tls_mode,
            namesrv_tls=namesrv_tls is not None,
        )
        if not parse_namesrv_addrs(config.namesrv_addr):
            # RocketMQ starts so too; clients then never find this broker.
            log.warning(
                "no name server to register with: clients will not find this broker; set "
                "namesrvAddr in the broker's configuration, --namesrv or NAMESRV_ADDR",
                namesrv_addr=config.namesrv_addr,
            )
        return broker

    async def _start_metrics(self, metrics: BrokerMetrics, host: str) -> None:
        ctx, config = self.ctx, self.ctx.config
        info = {
            "cluster": config.broker_cluster_name,
            "broker_name": config.broker_name,
            "broker_id": str(config.broker_id),
            "addr": ctx.identity.addr,
        }
        prometheus = _prometheus()
        collector = prometheus.BrokerStateCollector(
            ctx.store, ctx.offsets, ctx.holds, info, ctx.clients, ctx.clock
        )
        metrics.registry.register(collector)
        if self.replication is not None:
            from rocklet.broker.ha.metrics import ReplicationCollector  # prometheus-client

            metrics.registry.register(ReplicationCollector(self.replication.lag))
        server = prometheus.MetricsServer(metrics, host, config.metrics_port or 0)
        try:
            await server.start()
        except BaseException:
            await self.stop()
            raise
        self._metrics_server = server

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.port

    @property
    def registry(self) -> ProcessorRegistry:
        """The request processors (its ``gate`` sees every request first)."""
        return self._server.registry

    @property
    def fast_port(self) -> int | None:
        """The VIP port's bound port, or ``None`` when there is none."""
        return None if self._fast_server is None else self._fast_server.port

    @property
    def metrics_port(self) -> int | None:
        """The Prometheus endpoint's bound port, or ``None`` when metrics are off."""
        return None if self._metrics_server is None else self._metrics_server.port

    @property
    def addr(self) -> str:
        """The advertised ``ip:port``."""
        return self.ctx.identity.addr

    def _start_services(self) -> None:
        cfg, tasks = self.ctx.config, self.ctx.tasks
        tasks.every(cfg.flush_consumer_offset_interval_ms / 1000, self._persist, "persist")
        tasks.every(_CLIENT_SCAN_MS / 1000, self._scan_clients, "client-scan")
        slave = self.replication is not None and self.replication.slave is not None
        if not slave:
            # A slave's commitlog is the master's, byte for byte: the master delivers
            # delayed messages and checks transactions, and the slave receives the
            # results (RocketMQ starts neither service on a slave).
            tasks.every(_DELAY_TICK_MS / 1000, self._deliver_delayed, "delay")
        tasks.every(cfg.clean_resource_interval_ms / 1000, self._retain, "retention")
        # Disk usage, so a full disk is noticed (and sends resume) without a send.
        check_s = self.ctx.store.config.disk_check_interval_ms / 1000
        tasks.every(check_s, self._check_disk, "disk-check")
        period_s = cfg.register_name_server_period_ms / 1000
        tasks.when_asked(self._register_now, period_s, self._register, "registration")
        # Transaction check-back (broker/transaction_check.py); public so tests can run
        # a round directly with check_once(now_ms).
        self.transaction_check = transaction_check_service(self.ctx)
        check = self.transaction_check
        if not slave:
            tasks.every(check.interval_s, check.check_round, "transaction-check")

    async def _register(self) -> None:
        # The registrar reads the table before its first await, so this is its version.
        counter = self.ctx.topics.data_version.counter
        await self._registrar.register_all()
        await self.ctx.registration.mark(counter)

    async def next_registration(self) -> None:
        """Wait until the next registration round with the name servers has finished."""
        await self.ctx.registration.wait_next()

    async def _persist(self) -> None:
        # Topic and group changes are written as they happen (their requests wait for
        # it); this writes the offsets nobody waited for, and retries a failed write.
        for manager in (self.ctx.topics, self.ctx.groups, self.ctx.offsets):
            # A failure is logged by the writer; the next round tries again.
            with contextlib.suppress(ConfigWriteError):
                await manager.writer.flush()

    async def _scan_clients(self) -> None:
        self.ctx.clients.scan_once(self.ctx.clock.now_ms())

    async def _deliver_delayed(self) -> None:
        if self._delay.has_work():  # usually not: then no worker thread is woken
            await asyncio.to_thread(self._delay.run_once, self.ctx.clock.now_ms())

    async def _retain(self) -> None:
        await asyncio.to_thread(self._retention.run_once)

    async def _check_disk(self) -> None:
        await asyncio.to_thread(self.ctx.store.disk.check)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop serving, persist everything and close the store cleanly. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        ctx = self.ctx
        if self._metrics_server is not None:
            await self._metrics_server.stop()
        ctx.holds.close()
        if self._fast_server is not None:
            await self._fast_server.stop(grace_s)
        await self._server.stop(grace_s)
        await ctx.tasks.cancel_all()
        if self.replication is not None:
            await self.replication.stop()
        await self._registrar.unregister_all()
        await self._registrar.close()
        await self._persist()
        try:
            # A slave's delayOffset.json is the master's (broker/ha/metadata.py); its
            # idle delay service would write back what the file held at start.
            if self.replication is None or self.replication.slave is None:
                await asyncio.to_thread(self._delay.persist)
        except OSError as exc:  # e.g. a full disk: the store must still close cleanly
            log.error("saving delayOffset.json failed", error=str(exc))
        await asyncio.to_thread(ctx.store.close)
        log.info("broker stopped", addr=ctx.identity.addr)

    async def __aenter__(self) -> Broker:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


async def _start_fast_port(
    config: BrokerConfig, make: Callable[[int, str], RemotingServer]
) -> RemotingServer | None:
    """Open RocketMQ's "VIP" port (listenPort - 2): the same requests, another socket.

    RocketMQ's slaves fetch the master's topics, offsets, delay offsets and groups
    there, and clients with ``vipChannelEnabled`` send there; without it a RocketMQ
    slave of a Rocklet master could follow the commitlog but never the metadata.
    """
    port = config.fast_listen_port
    if port is None:
        port = config.listen_port - 2 if config.listen_port > 2 else -1
    if port == -1:
        return None
    fast = make(port, "broker-vip")
    try:
        await fast.start()
    except OSError as exc:
        if config.fast_listen_port is not None:
            raise
        # Only a default, and only RocketMQ slaves and VIP clients use it: a port held
        # by someone else is logged, not a reason to refuse to start.
        log.error("the VIP port (listenPort - 2) is taken; no VIP port", port=port, error=str(exc))
        return None
    log.info("VIP port listening", vip_port=fast.port)
    return fast
