"""Push consumer settings: one frozen object, validated once when it is made.

:class:`PushConsumerConfig` holds every tuning knob of a
:class:`~rocklet.client.push_consumer.PushConsumer` (RocketMQ's
``DefaultMQPushConsumer`` setters, with its defaults). The consumer builds it from its
keyword arguments (``PushConsumer(group, namesrv, orderly=True, ...)``) and exposes it
as ``consumer.config``; a bad value fails the constructor with ``ValueError`` instead of
surfacing later in a background task.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocklet.client.allocate import STRATEGIES, AllocateStrategy
from rocklet.client.offset_store import DEFAULT_OFFSETS_DIR
from rocklet.client.pull_loop import FlowLimits
from rocklet.client.rebalance import ConsumeFrom
from rocklet.client.trace import check_trace_topic
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.heartbeat import ConsumeFromWhere
from rocklet.protocol.names import check_group_name

__all__ = ["MAX_BATCH", "PushConsumerConfig"]

#: Java's consumeMessageBatchMaxSize / pullBatchSize upper bound.
MAX_BATCH: Final = 1024


@dataclass(frozen=True, slots=True)
class PushConsumerConfig:
    """Push consumer settings, validated once.

    Attributes:
        group: The consumer group.
        namesrv: Name server address(es), ``"host:port"`` (several joined by ``;``).
        orderly: Deliver each queue's messages strictly in order (listeners answer
            SUCCESS or SUSPEND); queues are locked on their broker. Default: False.
        broadcasting: Every member gets every message, offsets kept in a local file;
            failed messages are dropped, not retried (as RocketMQ). Default: False.
        consume_from: Where a group with no committed offset starts: ``"last"``,
            ``"first"`` or a store timestamp in epoch ms. Default: ``"last"``.
        consume_batch_size: Most messages per listener call (1..1024). Default: 1.
        pull_batch_size: Most messages per pull (1..1024; the broker also caps it).
            Default: 32.
        allocate: ``"averagely"``, ``"round_robin"``, ``"consistent_hash"`` or a
            strategy function. Default: ``"averagely"``.
        max_reconsume_times: Redeliveries of a failing message (through
            ``%RETRY%<group>``) before it goes to the dead-letter queue
            ``%DLQ%<group>``: with 2, a message that always fails is delivered 3 times
            (``reconsume_times`` 0, 1, 2), as in RocketMQ. Default: 16.
        consume_concurrency: Batches in listeners at once (and threads for plain
            listeners). Default: 20.
        flow_limits: Per-queue cache limits that pause pulling. Default: 1000
            messages, 100 MiB, span 2000.
        pull_suspend_ms: Long-poll hold asked of the broker. Default: 15000.
        suspend_ms: Orderly: pause after SUSPEND before retrying. Default: 1000.
        consume_timeout_min: Concurrent: a batch in the listener longer than this is
            sent back for another delivery. Default: 15.
        persist_interval_s: Offset commit period. Default: 5.0.
        rebalance_interval_s: Rebalance period (besides broker notifications).
            Default: 20.0.
        lock_interval_s: Orderly: broker lock renewal period. Default: 20.0.
        offsets_dir: Broadcasting: where the offset file lives, a path or a string.
            Default: ``~/.rocklet/offsets/<instance_name>``.
        instance_name: Client instance name; consumers of the same group in one
            process need different names. Default: ``"DEFAULT"``.
        tls: TLS to name servers and brokers: ``True`` (verified against the
            system's CAs) or an :class:`ssl.SSLContext`
            (:func:`rocklet.client.tls_context`). Default: plain TCP.
        credentials: Sign requests with this ACL account
            (:class:`~rocklet.protocol.acl.Credentials`). Default: unsigned.
        trace: Message trace (Java's ``enableMsgTrace``): send ``SubBefore`` and
            ``SubAfter`` trace records of each batch the listener gets to the trace
            topic, in the background, for ``queryMsgTraceById``. Default: off.
        trace_topic: Where traces go (Java's ``customizedTraceTopic``). Default:
            ``RMQ_SYS_TRACE_TOPIC``, which a broker with ``traceTopicEnable=true``
            creates.

    Raises:
        ValueError: A setting is out of range.
        TypeError: ``offsets_dir`` is neither a string nor a path.
    """

    group: str
    namesrv: str = "127.0.0.1:9876"
    orderly: bool = False
    broadcasting: bool = False
    consume_from: ConsumeFrom = "last"
    consume_batch_size: int = 1
    pull_batch_size: int = 32
    allocate: str | AllocateStrategy = "averagely"
    max_reconsume_times: int = 16
    consume_concurrency: int = 20
    flow_limits: FlowLimits = field(default_factory=FlowLimits)
    pull_suspend_ms: int = 15000
    suspend_ms: int = 1000
    consume_timeout_min: float = 15
    persist_interval_s: float = 5.0
    rebalance_interval_s: float = 20.0
    lock_interval_s: float = 20.0
    offsets_dir: str | os.PathLike[str] | None = None
    instance_name: str = "DEFAULT"
    tls: ssl.SSLContext | bool | None = None
    credentials: Credentials | None = None
    trace: bool = False
    trace_topic: str | None = None

    def __post_init__(self) -> None:
        if (reason := check_group_name(self.group)) is not None:
            raise ValueError(f"consumer group: {reason}")
        check_trace_topic(self.trace_topic)
        offsets_dir = self.offsets_dir
        if offsets_dir is not None and not (
            isinstance(offsets_dir, str | os.PathLike) and isinstance(os.fspath(offsets_dir), str)
        ):
            # Caught here, not at the first offset write in the background.
            raise TypeError(f"offsets_dir must be a str or os.PathLike, not {offsets_dir!r}")
        if not (
            1 <= self.consume_batch_size <= MAX_BATCH and 1 <= self.pull_batch_size <= MAX_BATCH
        ):
            raise ValueError(f"batch sizes must be within 1..{MAX_BATCH}")
        consume_from = self.consume_from
        if consume_from not in ("last", "first") and (
            isinstance(consume_from, bool) or not isinstance(consume_from, int)
        ):
            raise ValueError(f"consume_from must be 'last', 'first' or ms, not {consume_from!r}")
        if isinstance(self.allocate, str) and self.allocate not in STRATEGIES:
            raise ValueError(
                f"unknown allocation strategy {self.allocate!r}; one of {sorted(STRATEGIES)}"
            )
        if self.consume_concurrency < 1:
            raise ValueError("consume_concurrency must be at least 1")
        if self.pull_suspend_ms < 0 or self.suspend_ms < 0:
            raise ValueError("pull_suspend_ms and suspend_ms must not be negative")
        intervals = (
            self.consume_timeout_min,
            self.persist_interval_s,
            self.rebalance_interval_s,
            self.lock_interval_s,
        )
        if min(intervals) <= 0:
            raise ValueError("timeouts and intervals must be positive")

    @property
    def strategy(self) -> AllocateStrategy:
        """The allocation strategy function."""
        return STRATEGIES[self.allocate] if isinstance(self.allocate, str) else self.allocate

    @property
    def consume_timeout_ms(self) -> int:
        """``consume_timeout_min`` in milliseconds."""
        return int(self.consume_timeout_min * 60_000)

    @property
    def offsets_path(self) -> Path:
        """Where a broadcasting consumer keeps its offset file (always a :class:`Path`)."""
        if self.offsets_dir is None:
            return DEFAULT_OFFSETS_DIR / self.instance_name
        return Path(self.offsets_dir)

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        """``consume_from`` as the heartbeat's ``consumeFromWhere``."""
        if self.consume_from == "last":
            return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        if self.consume_from == "first":
            return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
