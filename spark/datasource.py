"""The ``rocklet`` data source: one entry point for the source, the sink and the store reader.

Spark builds a :class:`RockletDataSource` with the user's options in several processes
(planner, streaming runner, executors, the sink's commit runner), so construction only
keeps the options; each method parses and checks what it needs and raises
:class:`~rocklet.spark.options.RockletOptionError` with a message naming the option.
The readers and writers (and with them the SDK) are imported only by the method that
builds one: every Spark Python worker that merely looks the format up stays quick.

Which part answers:

- ``spark.read`` with ``nameServer``: :class:`~rocklet.spark.batch_source.RockletBatchReader`;
- ``spark.read`` with ``load(path)`` (or ``storePath``): the offline store reader;
- ``spark.readStream``: :class:`~rocklet.spark.stream_source.RockletStreamReader`;
- ``df.write`` / ``df.writeStream``: the sink (append only).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rocklet.spark.options import (
    RockletOptionError,
    SinkOptions,
    is_offline,
    parse_offline_options,
    parse_sink_options,
    parse_source_options,
)
from rocklet.spark.schema import SOURCE_SCHEMA, check_sink_schema, check_source_schema

__all__ = ["FORMAT", "RockletDataSource"]

#: The format name: ``spark.read.format("rocklet")``.
FORMAT = "rocklet"


class RockletDataSource(DataSource):
    """Spark data source for Rocklet and RocketMQ 4.x clusters and stores."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``rocklet``."""
        return FORMAT

    def schema(self) -> StructType:
        """The fixed source schema (see :mod:`rocklet.spark.schema`).

        ``load()`` asks for it before anything runs, so the options are checked here
        too: a mistake fails at ``load()`` rather than at the first action.
        """
        if is_offline(self.options):
            parse_offline_options(self.options)
        else:
            parse_source_options(self.options, streaming=None)
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader: the broker source, or the offline reader for a store path."""
        check_source_schema(schema)
        if is_offline(self.options):
            from rocklet.spark.offline import OfflineStoreReader

            return OfflineStoreReader(parse_offline_options(self.options))
        from rocklet.spark.batch_source import FilteringBatchReader, RockletBatchReader
        from rocklet.spark.pushdown import planning_with_filters

        # Spark fails every read whose reader defines pushFilters while
        # spark.sql.python.filterPushdown.enabled is off (its default), so only its
        # filter-pushdown planner gets the reader that does (pushdown.py says how).
        reader = FilteringBatchReader if planning_with_filters() else RockletBatchReader
        return reader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch reader over the subscribed queues."""
        check_source_schema(schema)
        if is_offline(self.options):
            raise RockletOptionError(
                "the offline store reader (load(path)) is batch only: use spark.read"
            )
        from rocklet.spark.stream_source import RockletStreamReader

        return RockletStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch sink (``mode("append")``)."""
        opts = _sink_options(self.options, schema, overwrite)
        from rocklet.spark.sink import RockletWriter

        return RockletWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming sink (output mode append or update)."""
        opts = _sink_options(self.options, schema, overwrite)
        from rocklet.spark.sink import RockletStreamWriter

        return RockletStreamWriter(opts)


def _sink_options(options: Mapping[str, str], schema: StructType, overwrite: bool) -> SinkOptions:
    if overwrite:
        raise RockletOptionError(
            "the rocklet sink only appends (a topic cannot be truncated): use mode('append')"
        )
    opts = parse_sink_options(options)
    check_sink_schema(schema, topic_option=opts.topic)
    return opts
