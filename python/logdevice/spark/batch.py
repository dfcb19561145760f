"""The batch reader of the ``logdevice`` data source: plans log x LSN slices, reads them
as Arrow.

Spark pickles the reader to its Python workers, so it holds only the parsed options;
clients are opened inside the calls that need them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from logdevice.spark.extents import log_extents
from logdevice.spark.options import ReadOptions
from logdevice.spark.plan import LogPartition, plan_extents
from logdevice.spark.read import read_slices

__all__ = ["LogDeviceBatchReader", "SlicePartition"]


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
        parts = plan_extents(extents, o.records_per_partition, o.bytes_per_partition,
                             o.min_partitions)
        # Spark wants at least one partition; an empty one reads nothing.
        return [SlicePartition(p) for p in parts] or [SlicePartition(LogPartition(()))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        o = self.opts
        return read_slices(o.config, partition.value.slices,  # type: ignore[attr-defined]
                           fail_on_data_loss=o.fail_on_data_loss,
                           batch_records=o.batch_records, read_timeout=o.read_timeout,
                           credentials=o.credentials)
