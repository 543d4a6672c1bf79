"""The source's fixed schema, rows as Arrow record batches, and the sink's columns.

Both sources (broker and offline store) produce the same columns, named as the old
rocketmq-spark connector names them; ``properties`` is a
map instead of a JSON string, and keys and tags have their own columns:

    ===============  =================  ==========================================
    column           type               from
    ===============  =================  ==========================================
    topic            STRING             the record's topic
    queueId          INT                its queue
    queueOffset      BIGINT             its offset in that queue
    msgId            STRING             UNIQ_KEY, else the broker's offset msgId
    keys             STRING             KEYS (space-separated, as stored)
    tags             STRING             TAGS
    body             BINARY             the payload (inflated if sent compressed)
    properties       MAP<STRING,STRING> every other property
    bornTimestamp    TIMESTAMP          producer time
    storeTimestamp   TIMESTAMP          broker time
    brokerName       STRING             broker group (offline: the brokerName option)
    flag             INT                user flag
    reconsumeTimes   INT                redeliveries so far
    commitLogOffset  BIGINT             byte offset in the broker's commitlog
    ===============  =================  ==========================================

Readers yield ``pyarrow.RecordBatch`` built here: that skips Spark's per-value Python
conversion of tuples, and the batch must equal ``to_arrow_schema(schema, "UTC")``
exactly (Spark checks it), which :func:`arrow_schema` guarantees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocklet.protocol.properties import Prop

if TYPE_CHECKING:
    import pyarrow as pa

    from rocklet.client.message import MessageExt

__all__ = [
    "SINK_COLUMNS",
    "SOURCE_SCHEMA",
    "RowBuffer",
    "arrow_schema",
    "check_sink_schema",
    "check_source_schema",
]

SOURCE_SCHEMA: Final = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("queueId", IntegerType(), False),
        StructField("queueOffset", LongType(), False),
        StructField("msgId", StringType(), True),
        StructField("keys", StringType(), True),
        StructField("tags", StringType(), True),
        StructField("body", BinaryType(), True),
        StructField("properties", MapType(StringType(), StringType(), True), True),
        StructField("bornTimestamp", TimestampType(), True),
        StructField("storeTimestamp", TimestampType(), True),
        StructField("brokerName", StringType(), True),
        StructField("flag", IntegerType(), True),
        StructField("reconsumeTimes", IntegerType(), True),
        StructField("commitLogOffset", LongType(), True),
    ]
)


class SchemaError(ValueError):
    """A user-given schema or the sink's input columns do not fit the connector."""


def check_source_schema(schema: StructType | None) -> StructType:
    """Accept only the fixed schema (nullability aside) for the sources.

    A schema passed with ``.schema(...)`` replaces the source's own; the rows would
    then not match it, so a different one is refused here with a clear message.

    Args:
        schema: What Spark passed to ``reader``/``streamReader``.

    Returns:
        The schema to use.

    Raises:
        SchemaError: The user gave a different schema.
    """
    if schema is None:
        return SOURCE_SCHEMA
    given = [(f.name, f.dataType) for f in schema.fields]
    ours = [(f.name, f.dataType) for f in SOURCE_SCHEMA.fields]
    if given != ours:
        raise SchemaError(
            "the rocklet source has a fixed schema; drop .schema(...) or pass exactly: "
            f"{SOURCE_SCHEMA.simpleString()}"
        )
    return schema


@cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema Spark expects for :data:`SOURCE_SCHEMA` (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


class RowBuffer:
    """Collects messages column by column and turns them into one RecordBatch.

    The reference path: the broker source builds its batches in bulk from the raw
    records (:class:`~rocklet.spark.columns.RecordColumns`) and comes here only for
    records that path leaves to the SDK's decoder; the offline reader uses it.

    Args:
        broker_name: Overrides each message's broker name (the offline reader's
            ``brokerName`` option); ``None`` keeps the message's.
    """

    __slots__ = ("_cols", "_keys", "_offsets", "_override", "_values")

    def __init__(self, broker_name: str | None = None) -> None:
        self._override = broker_name
        self._cols: list[list[Any]] = [[] for _ in SOURCE_SCHEMA.fields]
        # The properties column as flat names and values plus each row's end: built
        # with MapArray.from_arrays, many times faster than pa.array over (k, v) tuples.
        self._keys: list[str] = []
        self._values: list[str] = []
        self._offsets: list[int] = [0]

    def __len__(self) -> int:
        return len(self._cols[0])

    def add(self, msg: MessageExt) -> None:
        """Append one message as a row.

        Args:
            msg: A received (or offline-decoded) message.
        """
        props = dict(msg.properties)  # one pass over a lazily parsed mapping
        uniq = props.pop(Prop.UNIQ_KEY, None)
        c = self._cols
        c[0].append(msg.topic)
        c[1].append(msg.queue_id)
        c[2].append(msg.queue_offset)
        c[3].append(uniq or msg.offset_msg_id)
        c[4].append(props.pop(Prop.KEYS, None))
        c[5].append(props.pop(Prop.TAGS, None))
        c[6].append(bytes(msg.body))
        self._keys.extend(props)
        self._values.extend(props.values())
        self._offsets.append(len(self._keys))
        c[8].append(msg.born_timestamp * 1000)
        c[9].append(msg.store_timestamp * 1000)
        c[10].append(self._override if self._override is not None else msg.broker_name or None)
        c[11].append(msg.flag)
        c[12].append(msg.reconsume_times)
        c[13].append(msg.commit_log_offset)

    def flush(self) -> pa.RecordBatch:
        """Return the collected rows as a batch and start empty again."""
        import pyarrow as pa

        schema = arrow_schema()
        arrays = [
            pa.array(col, type=field.type) if i != 7 else None
            for i, (col, field) in enumerate(zip(self._cols, schema, strict=True))
        ]
        arrays[7] = pa.MapArray.from_arrays(
            pa.array(self._offsets, pa.int32()),
            pa.array(self._keys, pa.string()),
            pa.array(self._values, pa.string()),
            type=schema.field(7).type,
        )
        self._cols = [[] for _ in SOURCE_SCHEMA.fields]
        self._keys, self._values, self._offsets = [], [], [0]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


# -- sink -------------------------------------------------------------------------------------

#: Sink input columns the connector reads, with the types it accepts. Other columns
#: are ignored (as Spark's Kafka sink does), so a source DataFrame can be written as is.
SINK_COLUMNS: Final[Mapping[str, tuple[type[DataType], ...]]] = {
    "body": (BinaryType, StringType),
    "topic": (StringType,),
    "tags": (StringType,),
    "keys": (StringType, ArrayType),
    "properties": (MapType,),
}


def check_sink_schema(schema: StructType, *, topic_option: str | None) -> Sequence[str]:
    """Check the sink's input columns before any task runs.

    Args:
        schema: The DataFrame's schema.
        topic_option: The ``topic`` option, if given.

    Returns:
        The names of the columns the sink will read, in schema order.

    Raises:
        SchemaError: ``body`` is missing, a known column has the wrong type, or no
            topic is given at all.
    """
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise SchemaError(
            f"the rocklet sink needs a 'body' column (binary or string); got {sorted(fields)}"
        )
    for name, accepted in SINK_COLUMNS.items():
        dtype = fields.get(name)
        if dtype is not None and not isinstance(dtype, accepted):
            wanted = " or ".join(t.typeName() for t in accepted)
            raise SchemaError(f"sink column {name!r} must be {wanted}, not {dtype.simpleString()}")
    keys = fields.get("keys")
    if isinstance(keys, ArrayType) and not isinstance(keys.elementType, StringType):
        raise SchemaError("sink column 'keys' must be a string or an array of strings")
    props = fields.get("properties")
    if isinstance(props, MapType) and not (
        isinstance(props.keyType, StringType) and isinstance(props.valueType, StringType)
    ):
        raise SchemaError("sink column 'properties' must be map<string,string>")
    if topic_option is None and "topic" not in fields:
        raise SchemaError("the rocklet sink needs a topic: the 'topic' option or a 'topic' column")
    return [f.name for f in schema.fields if f.name in SINK_COLUMNS]
