"""Connector options: parsed once, checked with errors that name the option.

Spark hands a data source a case-insensitive ``str -> str`` mapping. Everything here is
pure: parsing never connects anywhere, so it can run in every Spark process that builds
a reader or writer (the planner, the streaming runner, executors) at no cost.

Names follow Spark's Kafka source (``subscribe`` / ``subscribePattern`` / ``assign``,
``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``minPartitions``) and
the old ``rocketmq-spark`` connector (``nameServer``, ``topic``, ``subExpression``,
``pullBatchSize``, ``pullTimeoutMs``), as docs/spark.md recommends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from rocklet.protocol.acl import Credentials
from rocklet.protocol.sql92 import SQL92, TAG, SelectorError, compile_selector
from rocklet.spark.offsets import EARLIEST, LATEST, QueueRef
from rocklet.spark.option_values import (
    OptionMap,
    RockletOptionError,
    check_group,
    check_topic,
    queue_ref,
)
from rocklet.spark.tls_options import NO_TLS, TLS_OPTION_NAMES, TlsOptions, parse_tls_options

__all__ = [
    "OfflineOptions",
    "OffsetKind",
    "OffsetSpec",
    "RockletOptionError",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "is_offline",
    "parse_offline_options",
    "parse_sink_options",
    "parse_source_options",
]


_SOURCE_NAMES: Final = (
    "nameServer",
    "subscribe",
    "subscribePattern",
    "assign",
    "topic",
    "subExpression",
    "expressionType",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "maxOffsetsPerTrigger",
    "failOnDataLoss",
    "minPartitions",
    "pullBatchSize",
    "pullTimeoutMs",
    "consumerGroup",
    "commitOffsets",
    *TLS_OPTION_NAMES,
    "accessKey",
    "secretKey",
)
_OFFLINE_NAMES: Final = (
    "storePath",
    "subscribe",
    "subscribePattern",
    "topic",
    "subExpression",
    "brokerName",
    "verifyCrc",
    "failOnCorruption",
    "maxPartitionBytes",
)
_SINK_NAMES: Final = (
    "nameServer",
    "topic",
    "producerGroup",
    "sendTimeoutMs",
    "writeId",
    "deliveryGuarantee",
    *TLS_OPTION_NAMES,
    "accessKey",
    "secretKey",
)

#: RocketMQ's pull batch cap (``maxTransferCountOnMessageInMemory`` is 32 by default,
#: the broker cuts larger requests); anything above 1024 is surely a mistake.
MAX_PULL_BATCH: Final = 1024
DEFAULT_PULL_BATCH: Final = 32
DEFAULT_PULL_TIMEOUT_MS: Final = 3000
DEFAULT_PRODUCER_GROUP: Final = "rocklet-spark-sink"
#: The consumer group named in the source's pulls. A broker needs one (and, with
#: ``autoCreateSubscriptionGroup=false``, needs it created). The checkpoint is the
#: truth, as with Kafka: offsets are written under a group only with ``commitOffsets``,
#: and never under this shared default (:func:`_commit_offsets`).
DEFAULT_CONSUMER_GROUP: Final = "rocklet-spark-source"


class OffsetKind(Enum):
    """How a starting or ending position is given."""

    EARLIEST = "earliest"
    LATEST = "latest"
    SPECIFIC = "specific"  #: per-queue JSON
    TIMESTAMP = "timestamp"  #: first message stored at or after a time


@dataclass(frozen=True)
class OffsetSpec:
    """A starting or ending position.

    Attributes:
        kind: Which form.
        per_topic: For SPECIFIC: topic -> {queue reference -> offset or -2/-1}.
        timestamp_ms: For TIMESTAMP: epoch milliseconds.
    """

    kind: OffsetKind
    per_topic: Mapping[str, Mapping[QueueRef, int]] | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Subscription:
    """Which queues to read: exactly one of the three forms is set.

    Attributes:
        topics: ``subscribe`` (or ``topic``): every readable queue of these topics.
        pattern: ``subscribePattern``: every topic whose whole name matches.
        assign: ``assign``: only these queues.
    """

    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    assign: Mapping[str, tuple[QueueRef, ...]] | None = None

    def describe(self) -> str:
        """A short human description, for logs and errors."""
        if self.pattern is not None:
            return f"subscribePattern={self.pattern.pattern!r}"
        if self.assign is not None:
            return f"assign={sorted(self.assign)}"
        return f"subscribe={','.join(self.topics)}"


@dataclass(frozen=True)
class SourceOptions:
    """Options of the broker source (batch or streaming).

    Attributes:
        name_server: Name server address(es).
        subscription: Which queues to read.
        sub_expression: Tag filter, or with ``expression_type`` SQL92 a selector.
        expression_type: ``"TAG"`` or ``"SQL92"`` (``expressionType``).
        starting: Where a batch read, or a new streaming checkpoint, starts.
        ending: Where a batch read ends.
        max_offsets_per_trigger: Cap on rows per micro-batch.
        fail_on_data_loss: Fail (else warn and skip) when offsets to read are gone.
        min_partitions: Split queue ranges to reach this many partitions.
        pull_batch_size: Messages asked per pull.
        pull_timeout_ms: Timeout of each request.
        consumer_group: The consumer group the pulls name (``consumerGroup``).
        commit_offsets: Streams only: write each completed micro-batch's end offsets
            to ``consumer_group`` (``commitOffsets``), for lag dashboards.
        tls: TLS of the connections (``tls``, ``tlsCaFile``...).
        credentials: ACL account requests are signed with (``accessKey`` and
            ``secretKey``); ``None``: unsigned.
    """

    name_server: str
    subscription: Subscription
    sub_expression: str = "*"
    expression_type: str = TAG
    starting: OffsetSpec = OffsetSpec(OffsetKind.LATEST)
    ending: OffsetSpec = OffsetSpec(OffsetKind.LATEST)
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH
    pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS
    consumer_group: str = DEFAULT_CONSUMER_GROUP
    commit_offsets: bool = False
    tls: TlsOptions = NO_TLS
    credentials: Credentials | None = None


#: The offline reader's ``maxPartitionBytes``: Spark's ``spark.sql.files.maxPartitionBytes``
#: default. The floor is one page, so tests can split tiny segments.
DEFAULT_MAX_PARTITION_BYTES: Final = 128 << 20
MIN_PARTITION_BYTES: Final = 4096
MAX_PARTITION_BYTES: Final = 16 << 30


@dataclass(frozen=True)
class OfflineOptions:
    """Options of the offline store reader.

    Attributes:
        commitlog_dir: The directory holding the commitlog segments.
        topics: Keep only these topics (empty: all, unless ``pattern``).
        pattern: Keep only topics whose whole name matches.
        sub_expression: Tag filter.
        broker_name: Value of the ``brokerName`` column (the store does not record it).
        verify_crc: Check each record's body CRC.
        fail_on_corruption: Fail on a record that does not decode (else end that
            segment there with a warning, as RocketMQ's recovery truncates).
        max_partition_bytes: Split a segment into byte ranges of at most this many
            bytes, one Spark partition each.
    """

    commitlog_dir: Path
    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    sub_expression: str = "*"
    broker_name: str | None = None
    verify_crc: bool = True
    fail_on_corruption: bool = True
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES


@dataclass(frozen=True)
class SinkOptions:
    """Options of the sink (batch or streaming).

    Attributes:
        name_server: Name server address(es).
        topic: Destination for every row (overrides a ``topic`` column).
        producer_group: Producer group the connector's producers use.
        send_timeout_ms: Timeout of each send.
        write_id: Add the ``rockletWriteId`` property to every message.
        exactly_once: ``deliveryGuarantee=exactly-once``: send half messages and
            commit them per batch (:mod:`rocklet.spark.sink_txn`).
        tls: TLS of the connections (``tls``, ``tlsCaFile``...).
        credentials: ACL account sends are signed with; ``None``: unsigned.
    """

    name_server: str
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    send_timeout_ms: int = 3000
    write_id: bool = True
    exactly_once: bool = False
    tls: TlsOptions = NO_TLS
    credentials: Credentials | None = None


# -- entry points -------------------------------------------------------------------------


def is_offline(options: Mapping[str, str]) -> bool:
    """Whether the options ask for the offline store reader (a path, no name server)."""
    opts = OptionMap(options)
    return bool(opts.text("path") or opts.text("storePath"))


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Parse and check the broker source's options.

    Args:
        options: What the user passed to ``.option(...)``.
        streaming: ``readStream`` (True) or ``read`` (False): they differ in defaults
            and in which options are allowed. ``None`` when the mode is not known yet
            (``load()`` asks for the schema before either): the rules common to both.

    Returns:
        The parsed options.

    Raises:
        RockletOptionError: A clear message naming the offending option.
    """
    opts = OptionMap(options)
    opts.reject_unknown(_SOURCE_NAMES, "the rocklet source")
    name_server = opts.required("nameServer", "127.0.0.1:9876")
    subscription = _subscription(opts, allow_assign=True, required=True)
    starting = _starting(opts, streaming=streaming)
    ending = OffsetSpec(OffsetKind.LATEST)
    if streaming:
        if opts.has("endingOffsets"):
            raise RockletOptionError(
                "endingOffsets is for batch queries only (spark.read); a stream has no end: "
                "use trigger(availableNow=True) to stop at the current end"
            )
    else:
        if streaming is False and opts.has("maxOffsetsPerTrigger"):
            raise RockletOptionError(
                "maxOffsetsPerTrigger is for streaming queries only (spark.readStream)"
            )
        ending = _offsets_option(opts, "endingOffsets", default=OffsetKind.LATEST)
        if ending.kind is OffsetKind.EARLIEST or _has_value(ending, EARLIEST):
            raise RockletOptionError("endingOffsets cannot be earliest (-2): nothing would be read")
    return SourceOptions(
        name_server=name_server,
        subscription=subscription,
        sub_expression=_sub_expression(opts, _expression_type(opts)),
        expression_type=_expression_type(opts),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=opts.positive("maxOffsetsPerTrigger"),
        fail_on_data_loss=opts.flag("failOnDataLoss", True),
        min_partitions=opts.positive("minPartitions"),
        pull_batch_size=opts.bounded("pullBatchSize", DEFAULT_PULL_BATCH, 1, MAX_PULL_BATCH),
        pull_timeout_ms=opts.bounded("pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, 100, 10 * 60 * 1000),
        consumer_group=check_group(
            opts.text("consumerGroup") or DEFAULT_CONSUMER_GROUP, "consumerGroup"
        ),
        commit_offsets=_commit_offsets(opts, streaming=streaming),
        tls=parse_tls_options(opts),
        credentials=_credentials(opts),
    )


def parse_offline_options(options: Mapping[str, str]) -> OfflineOptions:
    """Parse and check the offline store reader's options.

    Args:
        options: The user's options; the store is ``load(path)`` or ``storePath``.

    Returns:
        The parsed options.

    Raises:
        RockletOptionError: Unknown option, or the path holds no commitlog.
    """
    opts = OptionMap(options)
    opts.reject_unknown(_OFFLINE_NAMES, "the offline store reader (load(path))")
    if opts.has("nameServer"):
        raise RockletOptionError("give either nameServer (a broker) or a store path, not both")
    if opts.text("path") and opts.text("storePath"):
        raise RockletOptionError("give the store path once: load(path) or storePath")
    root = Path(opts.text("path") or opts.text("storePath"))
    subscription = _subscription(opts, allow_assign=False, required=False)
    return OfflineOptions(
        commitlog_dir=_commitlog_dir(root),
        topics=subscription.topics,
        pattern=subscription.pattern,
        sub_expression=_sub_expression(opts),
        broker_name=opts.text("brokerName") or None,
        verify_crc=opts.flag("verifyCrc", True),
        fail_on_corruption=opts.flag("failOnCorruption", True),
        max_partition_bytes=opts.bounded(
            "maxPartitionBytes",
            DEFAULT_MAX_PARTITION_BYTES,
            MIN_PARTITION_BYTES,
            MAX_PARTITION_BYTES,
        ),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Parse and check the sink's options.

    Args:
        options: What the user passed to ``.option(...)`` on ``write``/``writeStream``.

    Returns:
        The parsed options.

    Raises:
        RockletOptionError: A clear message naming the offending option.
    """
    opts = OptionMap(options)
    opts.reject_unknown(_SINK_NAMES, "the rocklet sink")
    topic = opts.text("topic") or None
    return SinkOptions(
        name_server=opts.required("nameServer", "127.0.0.1:9876"),
        topic=None if topic is None else check_topic(topic, "topic"),
        producer_group=check_group(
            opts.text("producerGroup") or DEFAULT_PRODUCER_GROUP, "producerGroup"
        ),
        send_timeout_ms=opts.bounded("sendTimeoutMs", 3000, 100, 10 * 60 * 1000),
        write_id=opts.flag("writeId", True),
        exactly_once=_delivery_guarantee(opts),
        tls=parse_tls_options(opts),
        credentials=_credentials(opts),
    )


# -- pieces ---------------------------------------------------------------------------------


#: ``deliveryGuarantee`` values -> exactly-once or not.
_GUARANTEES: Final = {"at-least-once": False, "exactly-once": True}


def _delivery_guarantee(opts: OptionMap) -> bool:
    value = opts.text("deliveryGuarantee", "at-least-once").strip().lower()
    if value not in _GUARANTEES:
        raise RockletOptionError(
            f"deliveryGuarantee must be one of {', '.join(_GUARANTEES)}; got {value!r}"
        )
    return _GUARANTEES[value]


def _commit_offsets(opts: OptionMap, *, streaming: bool | None) -> bool:
    """``commitOffsets``: streams only, and only under a group of the query's own."""
    if not opts.flag("commitOffsets", False):
        return False
    if streaming is False:
        raise RockletOptionError(
            "commitOffsets is for streaming queries only (spark.readStream): a batch read "
            "has no checkpoint whose progress a consumer group could show"
        )
    if (opts.text("consumerGroup") or DEFAULT_CONSUMER_GROUP) == DEFAULT_CONSUMER_GROUP:
        raise RockletOptionError(
            f"commitOffsets=true needs a consumerGroup of this query's own: the default "
            f"{DEFAULT_CONSUMER_GROUP!r} is shared by every query that names none, and "
            "their commits would overwrite each other's offsets"
        )
    return True


def _credentials(opts: OptionMap) -> Credentials | None:
    """``accessKey`` + ``secretKey``: both or neither.

    Spark redacts options whose names match ``secret`` in plans and the UI, so the
    secret never shows there.
    """
    access_key, secret_key = opts.text("accessKey"), opts.text("secretKey")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise RockletOptionError("options accessKey and secretKey must be given together")
    return Credentials(access_key, secret_key)


def _subscription(opts: OptionMap, *, allow_assign: bool, required: bool) -> Subscription:
    forms = ["subscribe", "topic", "subscribePattern"] + (["assign"] if allow_assign else [])
    given = [name for name in forms if opts.has(name)]
    if len(given) > 1:
        raise RockletOptionError(
            "give exactly one of subscribe (or its alias topic), subscribePattern, assign; "
            f"got {', '.join(given)}"
        )
    if not given:
        if required:
            raise RockletOptionError(
                "say what to read: subscribe (topics, comma-separated; alias topic), "
                'subscribePattern (a regex) or assign (JSON {"topic": [0, 1]})'
            )
        return Subscription()
    name = given[0]
    if name in ("subscribe", "topic"):
        return Subscription(topics=opts.topics(name))
    if name == "subscribePattern":
        try:
            return Subscription(pattern=re.compile(opts.text(name)))
        except re.error as exc:
            raise RockletOptionError(f"subscribePattern is not a valid regex: {exc}") from None
    return Subscription(assign=_assign(opts))


def _assign(opts: OptionMap) -> dict[str, tuple[QueueRef, ...]]:
    obj = opts.json_object("assign", '{"orders": [0, 1], "audit": ["broker-a:0"]}')
    out: dict[str, tuple[QueueRef, ...]] = {}
    for topic, queues in sorted(obj.items()):
        check_topic(topic, "assign")
        if not isinstance(queues, list) or not queues:
            raise RockletOptionError(f"assign: topic {topic!r} needs a non-empty list of queues")
        refs = []
        for q in queues:
            if isinstance(q, bool) or not isinstance(q, int | str):
                raise RockletOptionError(f"assign: {q!r} is not a queue id or 'broker:queueId'")
            refs.append(queue_ref(str(q), "assign"))
        out[topic] = tuple(sorted(set(refs), key=lambda r: (r[0] or "", r[1])))
    return out


def _starting(opts: OptionMap, *, streaming: bool | None) -> OffsetSpec:
    if opts.has("startingTimestamp"):
        if opts.has("startingOffsets"):
            raise RockletOptionError("give startingOffsets or startingTimestamp, not both")
        ts = opts.bounded("startingTimestamp", 0, 0, 1 << 62)
        return OffsetSpec(OffsetKind.TIMESTAMP, timestamp_ms=ts)
    default = OffsetKind.LATEST if streaming else OffsetKind.EARLIEST
    spec = _offsets_option(opts, "startingOffsets", default=default)
    if streaming is False and (spec.kind is OffsetKind.LATEST or _has_value(spec, LATEST)):
        raise RockletOptionError(
            "startingOffsets cannot be latest (-1) in a batch query: nothing would be read"
        )
    return spec


def _offsets_option(opts: OptionMap, name: str, *, default: OffsetKind) -> OffsetSpec:
    text = opts.text(name)
    if not text:
        return OffsetSpec(default)
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(OffsetKind(text.lower()))
    obj = opts.json_object(name, '"earliest", "latest" or {"orders": {"0": 42, "1": -2}}')
    per_topic: dict[str, dict[QueueRef, int]] = {}
    for topic, queues in sorted(obj.items()):
        check_topic(topic, name)
        if not isinstance(queues, dict) or not queues:
            raise RockletOptionError(
                f'{name}: topic {topic!r} needs an object of queue -> offset, e.g. {{"0": 42}}'
            )
        table: dict[QueueRef, int] = {}
        for key, value in queues.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
                raise RockletOptionError(
                    f"{name}: {topic}/{key}: {value!r} is not an offset (>= 0, -2 = earliest,"
                    " -1 = latest)"
                )
            table[queue_ref(key, name)] = value
        per_topic[topic] = table
    return OffsetSpec(OffsetKind.SPECIFIC, per_topic=per_topic)


def _has_value(spec: OffsetSpec, value: int) -> bool:
    return spec.per_topic is not None and any(
        v == value for table in spec.per_topic.values() for v in table.values()
    )


def _expression_type(opts: OptionMap) -> str:
    """``expressionType``: TAG (default) or SQL92, as RocketMQ spells them."""
    value = (opts.text("expressionType", TAG) or TAG).upper()
    if value not in (TAG, SQL92):
        raise RockletOptionError(f"expressionType must be TAG or SQL92, not {value!r}")
    return value


def _sub_expression(opts: OptionMap, expression_type: str = TAG) -> str:
    expr = opts.text("subExpression", "*") or "*"
    if expression_type == SQL92:
        if expr == "*":
            raise RockletOptionError(
                "expressionType=SQL92 needs a subExpression selector, e.g. \"region = 'eu'\""
            )
        try:
            compile_selector(expr)
        except SelectorError as exc:
            problem = f"subExpression is not a valid SQL92 selector: {exc}"
            raise RockletOptionError(problem) from None
        return expr
    if expr != "*" and not all(tag.strip() for tag in expr.split("||")):
        raise RockletOptionError(f"subExpression {expr!r} has an empty tag: use 'TagA || TagB'")
    return expr


def _commitlog_dir(root: Path) -> Path:
    for candidate in (root / "commitlog", root):
        if candidate.is_dir() and any(_is_segment(p) for p in candidate.iterdir()):
            return candidate
    raise RockletOptionError(
        f"no commitlog segments in {root} or {root / 'commitlog'} (files named by their "
        "20-digit start offset, as a RocketMQ or Rocklet store writes them)"
    )


def _is_segment(path: Path) -> bool:
    return path.is_file() and len(path.name) == 20 and path.name.isdigit()
