"""Prometheus metrics of a broker, served over HTTP on ``metricsPort`` (``metrics`` extra).

Counters are fed by three small hooks, and everything else is read when Prometheus
scrapes, so an idle broker pays nothing:

- puts: :class:`rocklet.broker.stats_sink.MeteredMessageStore` reports every successful
  store write per topic (messages and stored bytes), on whatever thread wrote, like
  RocketMQ's ``StoreStatsService`` (``putMessageTopicTimesTotal`` / ``SizeTotal``);
- gets: the pull processor reports the messages it answers per group and topic
  (``BrokerStatsManager`` ``GROUP_GET_NUMS`` / ``GROUP_GET_SIZE``);
- requests: :func:`rocklet.transport.dispatch.dispatch` reports each request's code,
  answer code and duration through :attr:`ProcessorRegistry.observer`.

Consumer lag per group and queue, disk use and the full-disk state, the commitlog
offsets, the parked long-poll pulls and what the last start's recovery found (damaged
bytes skipped, bytes truncated, consume-queue entries dropped or blanked, stray files)
are computed by :class:`BrokerStateCollector` at scrape time. The HTTP endpoint
(:class:`MetricsServer`) runs on the broker's event loop, so the collector reads the
offset table, the client table and the hold service on the loop that owns them.

The endpoint stays bounded however many topics and groups come and go: deleting a topic
or a group removes its labelled series (:meth:`BrokerMetrics.on_topic_deleted`,
:meth:`BrokerMetrics.on_group_deleted`, whatever ``autoDeleteUnusedStats`` says), and
lag is exported only for the groups :class:`_LagGroups` finds active.

The broker's own statistics (:mod:`rocklet.broker.stats_sink`) receive every report
first and pass it on to :class:`BrokerMetrics`. TPS is not exported as a gauge:
``rate(rocklet_messages_put_total[1m])`` gives it over any window, which is what
RocketMQ's 10 s / 1 min / 10 min figures approximate (GET_BROKER_RUNTIME_INFO has those).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from typing import Final

import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from rocklet.broker.clients import ClientManager
from rocklet.broker.long_polling import PullHoldService
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.store.message_store import MessageStore
from rocklet.transport.clock import Clock

__all__ = ["LAG_WINDOW_MS", "BrokerMetrics", "BrokerStateCollector", "MetricsServer"]

log = structlog.get_logger(__name__)

#: Request durations: sub-millisecond sends up to 30 s long-poll holds (the C++
#: client asks for 20 s, Java for 15 s).
_DURATION_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    30.0,
)
#: How long a scraper may take to send its request line and headers.
_READ_TIMEOUT_S: Final = 10.0
#: How long a group without live consumers keeps its lag series after it was last seen
#: active (online, or its committed offsets moved). Ten minutes outlasts what briefly
#: takes a group's consumers away (a restart, a deploy, a network cut: the broker drops
#: a silent channel after 120 s) and several scrape intervals, so the series of a group
#: that comes back has no gap; it is RocketMQ's medium statistics window too. A group
#: gone for good stops being exported after it, so the series count follows the groups
#: of the last ten minutes, not every group that ever committed.
LAG_WINDOW_MS: Final = 600_000


def _code_name(code: int, enum: type[RequestCode] | type[ResponseCode]) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)  # a code we have no name for still gets its own series


class BrokerMetrics:
    """The Prometheus counters and histograms of one broker, in their own registry.

    Counters are thread-safe (prometheus-client locks each value), so puts from the
    delayed-delivery and transaction worker threads may report directly. Gets and
    deletions are reported on the event loop only.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # The groups with get series, per topic: a deletion finds the (topic, group)
        # children here instead of in prometheus-client's private tables. Event loop only.
        self._get_groups: dict[str, set[str]] = {}
        self._put_msgs = Counter(
            "rocklet_messages_put",
            "Messages written to the store, by the topic they were sent to.",
            ["topic"],
            registry=self.registry,
        )
        self._put_bytes = Counter(
            "rocklet_bytes_put",
            "Stored record bytes written to the commitlog, by topic.",
            ["topic"],
            registry=self.registry,
        )
        self._get_msgs = Counter(
            "rocklet_messages_get",
            "Messages returned by pulls, by topic and consumer group.",
            ["topic", "group"],
            registry=self.registry,
        )
        self._get_bytes = Counter(
            "rocklet_bytes_get",
            "Stored record bytes returned by pulls, by topic and consumer group.",
            ["topic", "group"],
            registry=self.registry,
        )
        self._durations = Histogram(
            "rocklet_request_duration_seconds",
            "Time from a request's arrival to its answer (pulls include long-poll holds).",
            ["code"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self._responses = Counter(
            "rocklet_responses",
            "Answers sent, by request code and response code.",
            ["request_code", "response_code"],
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)

    def on_put(self, topic: str, count: int, nbytes: int) -> None:
        """Count messages written to the store.

        Args:
            topic: The topic given to the store.
            count: Messages written.
            nbytes: Stored bytes appended.
        """
        self._put_msgs.labels(topic).inc(count)
        self._put_bytes.labels(topic).inc(nbytes)

    def on_get(
        self, group: str, topic: str, queue_id: int, count: int, nbytes: int, read_ms: int
    ) -> None:
        """Count messages returned by a pull.

        Args:
            group: The pulling consumer group.
            topic: The topic pulled.
            queue_id: The queue pulled (not a label here: too many series).
            count: Messages returned.
            nbytes: Stored bytes returned.
            read_ms: The store read's time (not exported here).
        """
        groups = self._get_groups.get(topic)
        if groups is None:
            groups = self._get_groups[topic] = set()
        groups.add(group)
        self._get_msgs.labels(topic, group).inc(count)
        self._get_bytes.labels(topic, group).inc(nbytes)

    def on_get_miss(self) -> None:
        """Nothing to count: pull outcomes are in the per-code request series."""

    def on_topic_deleted(self, topic: str) -> None:
        """Remove a deleted topic's series: its puts, and the gets of every group on it.

        Always, unlike the broker statistics (``autoDeleteUnusedStats``): a deleted
        topic's series would be exported forever. If the topic comes back, its counters
        start again from zero, which Prometheus' ``rate`` reads as a counter reset.

        Args:
            topic: The deleted topic.
        """
        for counter in (self._put_msgs, self._put_bytes):
            _remove(counter, topic)
        for group in self._get_groups.pop(topic, ()):
            for counter in (self._get_msgs, self._get_bytes):
                _remove(counter, topic, group)

    def on_group_deleted(self, group: str) -> None:
        """Remove a deleted group's get series, on every topic (always, as for topics).

        Args:
            group: The deleted consumer group.
        """
        for topic, groups in list(self._get_groups.items()):
            if group not in groups:
                continue
            groups.discard(group)
            if not groups:
                del self._get_groups[topic]
            for counter in (self._get_msgs, self._get_bytes):
                _remove(counter, topic, group)

    def on_request(self, request_code: int, response_code: int | None, duration_s: float) -> None:
        """Record one processed request.

        Args:
            request_code: The request's code.
            response_code: The answer's code; ``None`` when nothing was sent (oneway).
            duration_s: Processing time in seconds.
        """
        name = _code_name(request_code, RequestCode)
        self._durations.labels(name).observe(duration_s)
        if response_code is not None:
            self._responses.labels(name, _code_name(response_code, ResponseCode)).inc()

    def expose(self) -> bytes:
        """Every metric of the registry in Prometheus' text format (collectors run now)."""
        return generate_latest(self.registry)


def _remove(counter: Counter, *labels: str) -> None:
    # Older prometheus-client versions raise KeyError for a child they do not have (a
    # topic nobody sent to, say); newer ones ignore it.
    with contextlib.suppress(KeyError):
        counter.remove(*labels)


class _LagGroups:
    """Which groups' lag is exported: those active in the last ``window_ms``. Event loop only.

    A group is active while it has consumers online (in the :class:`ClientManager`) and
    when its committed offsets moved; it stays exported ``window_ms`` after it was last
    seen so. The offset table is compared with the copy taken at the previous scrape,
    and only when it changed since (its writer's generation), so an idle broker's scrape
    reads nothing but the online groups. What the offset table held when the broker
    started does not count as a move: a group that was gone before a restart stays gone.

    Args:
        offsets: Committed consumer offsets.
        clients: The online consumer groups.
        clock: Time source (monotonic).
        window_ms: How long an inactive group stays exported.
    """

    def __init__(
        self, offsets: ConsumerOffsetManager, clients: ClientManager, clock: Clock, window_ms: int
    ) -> None:
        self._offsets = offsets
        self._clients = clients
        self._clock = clock
        self._window_ms = window_ms
        self._generation = offsets.writer.generation
        self._table = self._read()
        #: Group -> monotonic ms it was last seen active; holds only the window's groups.
        self._active: dict[str, int] = {}

    def _read(self) -> dict[str, dict[str, dict[int, int]]]:
        """The offset table by group, then topic (copies)."""
        table: dict[str, dict[str, dict[int, int]]] = {}
        for topic, group, queues in self._offsets.entries():
            table.setdefault(group, {})[topic] = queues
        return table

    def exported(self) -> Iterator[tuple[str, str, dict[int, int]]]:
        """Yield ``(group, topic, {queue: committed offset})`` of every active group."""
        now = self._clock.monotonic_ms()
        active = self._active
        generation = self._offsets.writer.generation
        if generation != self._generation:
            self._generation = generation
            previous, self._table = self._table, self._read()
            for group, topics in self._table.items():
                if previous.get(group) != topics:
                    active[group] = now
        for info in self._clients.consumer_groups():
            active[info.group] = now  # the client table forgets a group with no channels
        cutoff = now - self._window_ms
        for group in [g for g, seen in active.items() if seen < cutoff]:
            del active[group]
        for group in active:
            for topic, queues in self._table.get(group, {}).items():
                yield group, topic, queues


class BrokerStateCollector:
    """Gauges read from the broker's state when Prometheus scrapes. Event loop only.

    Args:
        store: The message store (queue max offsets, commitlog range, data path).
        offsets: Committed consumer offsets.
        holds: Parked long-poll pulls.
        info: Labels of the ``rocklet_broker`` info metric (cluster, name, address...).
        clients: The consumer groups online (their lag is always exported).
        clock: The broker's clock (how long ago a group was active).
        lag_window_ms: How long a group without consumers online keeps its lag series
            after it was last active (:data:`LAG_WINDOW_MS`).
    """

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        holds: PullHoldService,
        info: dict[str, str],
        clients: ClientManager,
        clock: Clock,
        *,
        lag_window_ms: int = LAG_WINDOW_MS,
    ) -> None:
        self._store = store
        self._holds = holds
        self._info = info
        self._lag_groups = _LagGroups(offsets, clients, clock, lag_window_ms)

    def collect(self) -> Iterable[Metric]:
        """Build the gauges from the current state."""
        info = InfoMetricFamily("rocklet_broker", "The broker this endpoint belongs to.")
        info.add_metric([], self._info)
        yield info
        yield self._lag()
        store = self._store
        # The broker's disk-check task measures every second; scrapes read its result.
        disk = store.disk.state
        yield _gauge(
            "rocklet_store_disk_used_ratio",
            "Used fraction of the fuller of the commitlog's and the store root's disk "
            "partitions, as RocketMQ computes it (-1 when unknown).",
            disk.ratio,
        )
        yield _gauge(
            "rocklet_store_disk_full",
            "1 while sends are refused because the disk is full "
            "(above diskSpaceWarningLevelRatio, or a store file found no room).",
            1 if disk.full else 0,
        )
        yield _gauge(
            "rocklet_store_disk_level",
            "Highest disk threshold passed: 0 none, 1 diskMaxUsedSpaceRatio, "
            "2 diskSpaceCleanForciblyRatio, 3 diskSpaceWarningLevelRatio.",
            int(disk.level),
        )
        yield _gauge(
            "rocklet_commitlog_max_offset_bytes",
            "The commitlog's max physical offset (bytes ever written).",
            store.commitlog_max_offset(),
        )
        yield _gauge(
            "rocklet_commitlog_min_offset_bytes",
            "The commitlog's min physical offset (bytes deleted by retention).",
            store.commitlog_min_offset(),
        )
        yield _gauge(
            "rocklet_long_poll_held", "Pull requests parked waiting for messages.", self._holds.held
        )
        yield from _recovery_metrics(store)

    def _lag(self) -> GaugeMetricFamily:
        lag = GaugeMetricFamily(
            "rocklet_consumer_lag_messages",
            "Messages behind the queue's max offset, per group and queue (committed offsets; "
            "groups online or recently active).",
            labels=["group", "topic", "queue"],
        )
        for group, topic, queues in self._lag_groups.exported():
            for queue_id, committed in sorted(queues.items()):
                behind = max(0, self._store.max_offset(topic, queue_id) - committed)
                lag.add_metric([group, topic, str(queue_id)], behind)
        return lag


def _recovery_metrics(store: MessageStore) -> Iterable[Metric]:
    """What the last start's recovery found, and damaged records reads skipped since."""
    rep = store.recovery_report
    yield _gauge(
        "rocklet_store_recovery_damaged_bytes",
        "Commitlog bytes the last start found damaged and skipped (kept, never served).",
        rep.damaged_bytes,
    )
    yield _gauge(
        "rocklet_store_recovery_damaged_ranges",
        "Damaged commitlog ranges the last start skipped.",
        len(rep.damaged),
    )
    yield _gauge(
        "rocklet_store_recovery_truncated_bytes",
        "Bytes the last start cut off the commitlog's tail (a torn last write).",
        rep.truncated_bytes,
    )
    entries = GaugeMetricFamily(
        "rocklet_store_recovery_consume_queue_entries",
        "Consume-queue entries the last start dropped (to rebuild) or blanked (damaged).",
        labels=["action"],
    )
    entries.add_metric(["dropped"], rep.consume_queue_entries_dropped)
    entries.add_metric(["blanked"], rep.consume_queue_entries_blanked)
    yield entries
    yield _gauge(
        "rocklet_store_recovery_ignored_files",
        "Files in the store's directories the last start ignored (not store files).",
        len(rep.ignored_files),
    )
    reads = CounterMetricFamily(
        "rocklet_store_damaged_reads",
        "Records reads skipped because they were not the record their entry names.",
    )
    reads.add_metric([], store.commitlog.damaged_reads)
    yield reads


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class MetricsServer:
    """A minimal HTTP/1.1 endpoint answering ``GET /metrics`` on the event loop.

    Each scrape is one connection (answered with ``Connection: close``). Serving on
    the loop, instead of prometheus-client's thread, lets the collectors read the
    broker's loop-owned tables without locks.

    Args:
        metrics: What to expose.
        host: Address to bind.
        port: Port to bind; 0 picks a free one (see :attr:`port`).
    """

    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self._metrics = metrics
        self._host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[object]] = set()
        self.port = 0

    async def start(self) -> None:
        """Bind and serve; returns once listening.

        Raises:
            OSError: The address cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._serve, self._host, self._requested_port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("metrics listening", host=self._host, port=self.port)

    async def stop(self) -> None:
        """Stop listening and end the scrapes in progress. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # asyncio creates the handler task; we track it so stop() can end it.
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            status, body, send_body = await asyncio.wait_for(self._answer(reader), _READ_TIMEOUT_S)
            content_type = CONTENT_TYPE_LATEST if status == 200 else "text/plain; charset=utf-8"
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("ascii") + (body if send_body else b""))
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # a scraper that hung up or sent nonsense gets nothing more
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
        request_line = await reader.readline()
        while (await reader.readline()).strip():
            pass  # headers: nothing in them changes the answer
        parts = request_line.decode("latin-1").split()
        if len(parts) != 3:
            return 400, b"bad request\n", True
        method, target, _version = parts
        if method not in ("GET", "HEAD"):
            return 405, b"only GET is served\n", True
        if target.split("?", 1)[0] not in ("/metrics", "/"):
            return 404, b"metrics are at /metrics\n", True
        body = self._metrics.expose()
        return 200, body, method == "GET"  # HEAD: the same headers, no body


_REASONS: Final = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
