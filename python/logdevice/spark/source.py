"""The ``logdevice`` data source: the class Spark instantiates and its batch reader.

``LogDeviceDataSource`` hands Spark a batch reader (this module), a stream reader
(``stream``) and batch and stream writers (``sink``).  Spark pickles these objects to
its Python workers, so they hold only the parsed options; clients are opened inside the
calls that need them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from logdevice.errors import InvalidParamError
from logdevice.spark.arrow import SPARK_SCHEMA
from logdevice.spark.extents import log_extents
from logdevice.spark.options import ReadOptions
from logdevice.spark.plan import LogPartition, plan_extents
from logdevice.spark.read import read_slices

__all__ = ["LogDeviceDataSource", "LogDeviceBatchReader", "SlicePartition"]


class SlicePartition(InputPartition):
    """One Spark task's share: a ``plan.LogPartition`` (plain, picklable data)."""

    def __init__(self, value: LogPartition) -> None:
        super().__init__(value)


class LogDeviceBatchReader(DataSourceReader):
    """``spark.read.format("logdevice")``: plans log x LSN slices, reads them as Arrow."""

    def __init__(self, options: ReadOptions) -> None:
        self.opts = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        extents = log_extents(o.config, o.logs, o)
        parts = plan_extents(extents, o.records_per_partition, o.bytes_per_partition)
        # Spark wants at least one partition; an empty one reads nothing.
        return [SlicePartition(p) for p in parts] or [SlicePartition(LogPartition(()))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        o = self.opts
        return read_slices(o.config, partition.value.slices,  # type: ignore[attr-defined]
                           fail_on_data_loss=o.fail_on_data_loss,
                           batch_records=o.batch_records, read_timeout=o.read_timeout)


class LogDeviceDataSource(DataSource):
    """Spark data source ``logdevice``: batch and streaming reads, batch and streaming
    writes.  Options (strings): see ``logdevice.spark``."""

    @classmethod
    def name(cls) -> str:
        return "logdevice"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        opts = ReadOptions.parse(self.options)
        if opts.filter_pushdown:
            from logdevice.spark.pushdown import LogDeviceFilteringReader

            return LogDeviceFilteringReader(opts)
        return LogDeviceBatchReader(opts)

    def streamReader(self, schema: Any) -> Any:
        from logdevice.spark.stream import LogDeviceStreamReader, StreamOptions

        return LogDeviceStreamReader(StreamOptions.parse(self.options))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from logdevice.spark.sink import LogDeviceWriter, WriteOptions

        _append_only(overwrite)
        return LogDeviceWriter(WriteOptions.parse(self.options, schema))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from logdevice.spark.sink import LogDeviceStreamWriter, WriteOptions

        _append_only(overwrite)
        return LogDeviceStreamWriter(WriteOptions.parse(self.options, schema))


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise InvalidParamError(message="logs are append-only: write with mode "
                                        "'append', not 'overwrite'")
